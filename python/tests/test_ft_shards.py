"""The fault-tolerant group's pure parts: who trains on which samples, and the ledger's check."""
import pytest

from autopar.ft import shards
from autopar.ft.channel import format_line, parse_line, quorum_of


@pytest.mark.parametrize("batch,world", [(64, 8), (64, 6), (7, 3), (3, 8)])
def test_members_tile_the_batch_in_rank_order(batch, world):
    ids = [list(shards.sample_ids(5, batch, world, p)) for p in range(world)]
    assert sum(ids, []) == list(range(5 * batch, 6 * batch))
    assert max(map(len, ids)) - min(map(len, ids)) <= 1


def test_the_same_place_takes_the_same_samples():
    assert shards.sample_ids(3, 64, 8, 5) == range(232, 240)  # a replacement of rank 5 too
    assert shards.chunk(64, 6, 0) == (0, 10) and shards.chunk(64, 6, 5) == (53, 11)
    with pytest.raises(ValueError):
        shards.chunk(64, 4, 4)


def test_a_clean_ledger_and_each_fault_it_finds():
    lines = [shards.ledger_line(s, 0, 8, [0, 1, 2, 3]) for s in range(3)]
    lines += [shards.ledger_line(2, 0, 8, [0, 1, 2, 3])]  # another member's record of step 2
    assert shards.check_ledger(lines, 3) == []
    shrunk = lines[:2] + [shards.ledger_line(2, 1, 8, [0, 1, 3])]
    assert shards.check_ledger(shrunk, 3) == []
    assert shards.check_ledger(lines[:2], 3) == ["step 2: never committed"]
    assert shards.check_ledger(lines + [shards.ledger_line(2, 1, 8, [0, 1, 3])], 3) == \
        ["step 2: committed with two layouts"]
    gap = '{"step":0,"epoch":0,"batch":8,"ids":[[0,0,4],[1,5,3]]}\n'
    assert shards.check_ledger([gap], 1) == ["step 0: ids 4..4 skipped"]
    twice = '{"step":0,"epoch":0,"batch":8,"ids":[[0,0,5],[1,4,4]]}\n'
    assert shards.check_ledger([twice], 1) == ["step 0: id 4 taken twice"]
    assert shards.check_ledger(lines, 2) == ["step 2: committed beyond the run's 2 steps"]


def test_the_launchers_quorum_line():
    kind, fields = parse_line("quorum v=1 epoch=3 step=120 store=10.0.0.1:41000 "
                              "members=0@0@10.0.0.1:41000@120,1@1@10.0.0.2:41001@-1 heals=1<0")
    q = quorum_of(fields)
    assert kind == "quorum" and (q.epoch, q.step, q.store) == (3, 120, "10.0.0.1:41000")
    assert q.ranks == [0, 1] and q.members[1].step == -1 and q.heals == [(1, 0)]
    assert q.position(1) == 1
    assert format_line("join", epoch=-1, step=0, store="a:1") == "join epoch=-1 step=0 store=a:1\n"
    with pytest.raises(ValueError):
        format_line("join", store="a b")
