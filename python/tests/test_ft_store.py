"""The fault-tolerant group's store and heals admit only the job's own ranks (store.py, state.py;
docs/security.md). A stranger on the node can reach the store's port: it must stall nobody, read
nothing and write nothing the members would use; a state a peer sends is checked before it is
read, and never unpickled beyond plain data."""
import datetime
import os
import socket
import struct
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from autopar.ft import state  # noqa: E402
from autopar.ft.store import MAX_PENDING, AuthStore, StoreError, StoreServer  # noqa: E402

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
T = datetime.timedelta(seconds=5)


def endpoint(server):
    return f"127.0.0.1:{server.port}"


def test_members_set_and_get_sealed_values():
    server = StoreServer(KEY, "127.0.0.1")
    a, b = AuthStore(KEY, endpoint(server), "epoch-1", T), AuthStore(KEY, endpoint(server), "epoch-1", T)
    got = []
    reader = threading.Thread(target=lambda: got.append(b.get("rank-1")))  # waits for the key
    reader.start()
    time.sleep(0.1)
    a.set("rank-1", b"address")
    reader.join(5)
    assert got == [b"address"]
    assert a.add("counter", 2) == 2 and b.add("counter", 3) == 5
    assert a.check(["rank-1"]) and not a.check(["nobody"])
    a.wait(["rank-1"])
    with pytest.raises(StoreError):
        a.wait(["nobody"], datetime.timedelta(milliseconds=100))
    # Another epoch's namespace does not meet this one's keys.
    assert not AuthStore(KEY, endpoint(server), "epoch-2", T).check(["rank-1"])


def test_a_stranger_without_the_key_is_refused():
    server = StoreServer(KEY, "127.0.0.1")
    with pytest.raises((StoreError, ConnectionError, OSError)):
        AuthStore(OTHER, endpoint(server), "epoch-1", T).set("rank-1", b"forged")
    member = AuthStore(KEY, endpoint(server), "epoch-1", T)
    assert not member.check(["rank-1"])
    assert server.refused >= 1


def test_a_silent_or_half_sent_stranger_stalls_nobody():
    """torch 1.13's TCPStore server stops serving everyone on one byte of a request."""
    server = StoreServer(KEY, "127.0.0.1")
    strangers = []
    for payload in (b"", b"\x00", b"\x01" * 7, b"\x00" * 40):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(payload)
        strangers.append(s)
    start = time.monotonic()
    member = AuthStore(KEY, endpoint(server), "epoch-1", T)
    member.set("k", b"v")
    assert member.get("k") == b"v"
    assert time.monotonic() - start < 1.0
    for s in strangers:
        s.close()


def test_a_flood_of_strangers_makes_room_for_a_member():
    server = StoreServer(KEY, "127.0.0.1")
    strangers = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3 * MAX_PENDING)]
    start = time.monotonic()
    member = AuthStore(KEY, endpoint(server), "epoch-1", T)
    member.set("k", b"v")
    assert member.get("k") == b"v" and time.monotonic() - start < 2.0
    for s in strangers:
        s.close()


def test_a_value_no_member_sealed_is_refused():
    server = StoreServer(KEY, "127.0.0.1")
    member = AuthStore(KEY, endpoint(server), "epoch-1", T)
    # A value sealed with another key, where a member reads (what a store that is not the
    # job's would hand out).
    forged = AuthStore.__new__(AuthStore)
    forged.__dict__.update(member.__dict__)
    forged._seal_key = b"not the job's"
    forged.set("rank-1", b"attacker's address")
    with pytest.raises(StoreError, match="no member of this job wrote"):
        member.get("rank-1")


def heal_bytes(model, epoch=3, sender=0, key=KEY):
    data = state.dump({"model": model}, 7)
    header = state.seal(key, data, epoch, sender)
    return bytearray(data), header


def test_a_sealed_state_round_trips():
    src, dst = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
    data, header = heal_bytes(src)
    assert state.load({"model": dst}, state.unseal(KEY, data, header, 3, 0)) == 7
    assert torch.equal(src.weight, dst.weight)


@pytest.mark.parametrize("change", ["byte", "epoch", "sender", "key"])
def test_a_state_not_sealed_by_the_job_for_this_heal_is_refused(change):
    data, header = heal_bytes(torch.nn.Linear(8, 8), key=OTHER if change == "key" else KEY)
    epoch, sender = 3, 0
    if change == "byte":
        data[len(data) // 2] ^= 1
    elif change == "epoch":
        epoch = 4
    elif change == "sender":
        sender = 1
    with pytest.raises(state.HealRefused, match="bad MAC"):
        state.unseal(KEY, data, header, epoch, sender)


class _Payload:
    def __reduce__(self):
        return (os.system, (f"touch {MARK}",))


MARK = f"/tmp/autopar-ft-pickle-ran-{os.getpid()}"


def test_a_peer_s_pickle_never_runs(tmp_path):
    """Even from a member (the MAC holds): a heal is a skeleton and raw bytes, never a pickle."""
    import io
    buf = io.BytesIO()
    torch.save({"step": 1, "state": {"model": _Payload()}}, buf)
    data = bytearray(buf.getvalue())
    header = state.seal(KEY, data, 3, 0)
    with pytest.raises(state.HealRefused, match="not a heal's"):
        state.load({"model": torch.nn.Linear(2, 2)}, state.unseal(KEY, data, header, 3, 0))
    assert not os.path.exists(MARK)


def test_a_size_beyond_reason_is_refused_before_allocating():
    header = struct.pack("!q", 1 << 50) + bytes(state.HEADER - 8)

    class OneHeader:
        def recv(self, tensor, *args):
            tensor.copy_(torch.frombuffer(bytearray(header), dtype=torch.uint8))

    with pytest.raises(state.HealRefused, match="bytes announced"):
        state.recv(OneHeader(), 1, 1, None)


def test_an_optimizer_state_round_trips_bit_for_bit():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.8, 0.9))
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 6)).sum().backward()
        opt.step()
    model2 = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 1))
    opt2 = torch.optim.Adam(model2.parameters(), lr=1.0)
    data = bytearray(state.dump({"model": model, "optimizer": opt}, 3))
    assert state.load({"model": model2, "optimizer": opt2}, data) == 3
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters()))
    s1, s2 = opt.state_dict(), opt2.state_dict()
    assert s1["param_groups"] == s2["param_groups"]  # betas a tuple again, keys ints again
    for k in s1["state"]:
        assert all(torch.equal(s1["state"][k][n], s2["state"][k][n]) for n in s1["state"][k])


def test_a_state_that_is_not_plain_data_is_refused_at_the_sender():
    class Odd:
        def state_dict(self):
            return {"f": len}

        def load_state_dict(self, _):
            pass

    with pytest.raises(TypeError, match="builtin_function_or_method"):
        state.dump({"odd": Odd()}, 1)
