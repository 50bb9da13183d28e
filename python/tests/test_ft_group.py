"""autopar.ft with real processes and real gloo on one machine: four members train, one is
SIGKILLed in the middle of a step, and the group goes on without any other member stopping. The
launchers' part is autopar-launch's own FtGroup, run by the build's ft-group-harness
(tests/ft_harness.py)."""
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from autopar.ft import shards  # noqa: E402
from ft_harness import Harness  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
EXAMPLE = os.path.join(os.path.dirname(PYTHON_DIR), "etc", "examples", "ft_train.py")
WORLD, STEPS = 4, 40
KEY = bytes(range(32))  # the job's key ($AUTOPAR_FT_KEY, which autopar-launch derives)


def start(coord, rank, out, ledger, newcomer=False):
    env = {**os.environ, "RANK": str(rank), "AUTOPAR_FT_SOCKET": coord.paths[rank],
           "AUTOPAR_FT_ADDR": "127.0.0.1", "AUTOPAR_FT_KEY": KEY.hex(), "FT_LEDGER": str(ledger),
           "PYTHONPATH": PYTHON_DIR, "OMP_NUM_THREADS": "1"}
    if newcomer:
        env["AUTOPAR_FT_NEWCOMER"] = "1"
    return subprocess.Popen([sys.executable, EXAMPLE, "--steps", str(STEPS), "--global-batch", "32",
                             "--step-sleep", "0.02", "--out", str(out)], env=env)


def run(tmp_path, name, fault=None):
    out, ledger = tmp_path / name, tmp_path / f"{name}-ledger"
    out.mkdir()
    ledger.mkdir()
    coord = Harness(tmp_path, WORLD) if fault != "shrink" else Harness(tmp_path, WORLD, 2)
    procs = {r: start(coord, r, out, ledger) for r in range(WORLD)}
    first_pids = {r: p.pid for r, p in procs.items()}
    if fault:
        victim = 2
        while not (ledger / f"rank-{victim}.jsonl").exists() or \
                len((ledger / f"rank-{victim}.jsonl").read_text().splitlines()) < 10:
            time.sleep(0.01)
        time.sleep(random.uniform(0, 0.05))  # somewhere in a step
        procs[victim].send_signal(signal.SIGKILL)
        procs[victim].wait()
        if fault == "crash":
            coord.replaced(victim)
            procs[victim] = start(coord, victim, out, ledger, newcomer=True)
        else:
            coord.drop(victim)
            del procs[victim]
    for p in procs.values():
        assert p.wait(timeout=120) == 0
    coord.close()
    results = {r: json.loads((out / f"rank-{r}.json").read_text()) for r in procs}
    return results, first_pids, shards.check_ledger(shards.read_ledgers(str(ledger)), STEPS), out


def test_a_killed_member_is_replaced_and_healed_from_a_live_peer_bit_identical(tmp_path):
    clean, _, clean_ledger, _ = run(tmp_path, "clean")
    assert clean_ledger == []
    assert len({r["sha256"] for r in clean.values()}) == 1
    faulted, pids, ledger, _ = run(tmp_path, "faulted", fault="crash")
    assert ledger == []  # every step committed once, every sample of it once
    assert {r["sha256"] for r in faulted.values()} == {clean[0]["sha256"]}  # bit for bit
    for r in (0, 1, 3):
        assert faulted[r]["pid"] == pids[r]  # the healthy members never stopped
    assert faulted[2]["pid"] != pids[2] and faulted[2]["stats"]["healed_bytes"] > 0
    assert faulted[0]["stats"]["discarded"] <= 2  # the interrupted step (and one begun beside it)


def test_without_a_replacement_the_group_shrinks_and_keeps_the_batch(tmp_path):
    clean, _, _, _ = run(tmp_path, "clean")
    shrunk, pids, ledger, _ = run(tmp_path, "shrunk", fault="shrink")
    assert ledger == []
    assert sorted(shrunk) == [0, 1, 3] and all(shrunk[r]["pid"] == pids[r] for r in shrunk)
    assert len({r["sha256"] for r in shrunk.values()}) == 1  # the members agree with each other
    assert shrunk[0]["eval_loss"] == pytest.approx(clean[0]["eval_loss"], rel=1e-5)  # float tolerance


def test_a_construction_given_up_ends_at_once_not_with_the_stores_server(tmp_path):
    """A member that dies before it publishes its address leaves the others waiting for it on
    the group's store. Given up (the launchers re-form), the wait must end at once, while the
    interpreter lives: left to the store's timeout, or to the end of the member that serves the
    store (with the run: the crash bench's and CI's SIGABRT at exit), the thread would come back
    into Python during the interpreter's teardown, which ends the process with SIGABRT."""
    import threading

    from autopar.ft.channel import Abandoned, LauncherChannel, Member, Quorum
    from autopar.ft.group import RENDEZVOUS_TIMEOUT, Group
    from autopar.ft.store import StoreServer

    server = StoreServer(KEY, "127.0.0.1")
    store = f"127.0.0.1:{server.port}"
    path = str(tmp_path / "ft.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    channel = LauncherChannel(path)
    launcher, _ = listener.accept()
    quorum = Quorum(3, 10, store, [Member(0, 0, store, 10), Member(1, 1, store, 10)])  # 1 never comes
    threading.Timer(0.5, lambda: launcher.sendall(b"abandon v=1 epoch=3\n")).start()
    start = time.monotonic()
    with pytest.raises(Abandoned):
        Group(300, KEY).reform(quorum, 0, channel)
    deadline = time.monotonic() + 5
    making = [t for t in threading.enumerate() if t.name == "autopar-ft-make-group"]
    while any(t.is_alive() for t in making) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.is_alive() for t in making), "the given-up construction still waits on the store"
    assert time.monotonic() - start < RENDEZVOUS_TIMEOUT.total_seconds() / 2


def test_a_kept_groups_sockets_are_detached_not_closed():
    """A severed group whose collective gloo never ends is kept (its destructor would wait for it
    holding the GIL): its sockets are closed under it (an epoll set forgets them: no event loop
    spinning on a dead connection) while their descriptor numbers stay taken (gloo closes nothing
    of anyone else's later)."""
    import select as select_

    from autopar.ft import group

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    before = group._sockets()
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    fds = {fd: link for fd, link in group._new_since(before).items() if fd == client.fileno()}
    assert list(fds) == [client.fileno()]
    ep = select_.epoll()
    ep.register(client.fileno(), select_.EPOLLIN)
    group._shut_down(fds)
    assert ep.poll(0.1), "a shut-down socket is always ready: a loop on it spins"
    group._detach(fds)
    assert not ep.poll(0.1)
    assert os.readlink(f"/proc/self/fd/{client.fileno()}") == os.devnull
    assert server.recv(1) == b""  # the peer sees the connection end
    client.close()  # the number, /dev/null now: closes nothing else
    ep.close()


def two_members(tmp_path):
    """Two members of epoch 3 in this process, each with its launcher's end of its channel:
    (groups, channels, launchers, the store's server)."""
    import threading

    from autopar.ft.channel import LauncherChannel, Member, Quorum
    from autopar.ft.group import Group
    from autopar.ft.store import StoreServer

    server = StoreServer(KEY, "127.0.0.1")
    store = f"127.0.0.1:{server.port}"
    channels, launchers = [], []
    for r in range(2):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(tmp_path / f"ft-{r}.sock"))
        listener.listen(1)
        channels.append(LauncherChannel(str(tmp_path / f"ft-{r}.sock")))
        launchers.append(listener.accept()[0])
    quorum = Quorum(3, 10, store, [Member(0, 0, store, 10), Member(1, 1, store, 10)])
    groups = [Group(300, KEY), Group(300, KEY)]
    made = [threading.Thread(target=groups[r].reform, args=(quorum, r, channels[r])) for r in range(2)]
    for t in made:
        t.start()
    for t in made:
        t.join()
    assert all(g.pg is not None for g in groups)
    return groups, channels, launchers, server


@pytest.mark.parametrize("end", ["receiver", "sender", "deadline"])
def test_a_handover_is_given_up_with_its_epoch_not_at_its_deadline(tmp_path, monkeypatch, end):
    """A member lost during a handover (its node powered off: no connection is reset) leaves its
    peer in a transfer that only the deadline would end (30 s and more). The launchers give the
    epoch up when they see the loss; the transfer must end then, at either end of it. A peer
    alive but stuck (no epoch given up) fails the transfer at the deadline."""
    import threading

    from autopar.ft import state
    from autopar.ft.channel import Abandoned

    groups, channels, launchers, _server = two_members(tmp_path)
    # Member 1 is "lost": it neither sends (the receiver's case) nor receives (the sender's).
    if end == "deadline":
        monkeypatch.setattr(state, "HANDOVER_BASE_S", 1.0)
    else:
        threading.Timer(0.5, lambda: launchers[0].sendall(b"abandon v=1 epoch=3\n")).start()
    start = time.monotonic()
    with pytest.raises(RuntimeError if end == "deadline" else Abandoned):
        if end in ("receiver", "deadline"):
            state.recv(groups[0], 1, 1, channels[0])
        else:  # more than sockets buffer
            state.send(groups[0], bytearray(64 << 20), bytes(state.HEADER), 1, 1, channels[0])
    assert time.monotonic() - start < 5
    for g in groups:
        g.sever()


def test_a_handover_holds_the_state_once_at_each_end(tmp_path):
    """The serialized state exists once at each end of a heal: the sender sends torch.save's own
    buffer, the receiver loads from the tensor it received into (torch.load reads it through
    readinto). Python's allocations while a 64 MiB state is sent, received and loaded stay under
    a quarter of it; each copy of it (bytearray, tobytes, BytesIO) was a whole state."""
    import threading
    import tracemalloc

    from autopar.ft import state

    groups, channels, _launchers, _server = two_members(tmp_path)
    torch.manual_seed(0)
    src, dst = torch.nn.Linear(4096, 4096), torch.nn.Linear(4096, 4096)
    data = state.dump({"model": src}, 7)
    assert len(data) > 64 << 20
    tracemalloc.start()
    header = state.seal(KEY, data, 3, 0)
    sender = threading.Thread(target=state.send, args=(groups[0], data, header, 1, 1, channels[0]))
    sender.start()
    received, head = state.recv(groups[1], 0, 1, channels[1])
    step = state.load({"model": dst}, state.unseal(KEY, received, head, 3, 0))
    sender.join()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert step == 7
    assert torch.equal(src.weight, dst.weight) and torch.equal(src.bias, dst.bias)
    assert peak < len(data) / 4, (peak, len(data))
    for g in groups:
        g.sever()
