"""autopar.ft's end of the fault-tolerant group's messages against the shared test vectors
(core/ft/messages_vectors.json), which the launcher's end (core/ft/messages_test.cpp) checks too:
the program's join is the vectors' text, and the quorum and the give-up it receives decode to the
vectors' values; another version is refused, naming it."""
import json
import os

import pytest

from autopar.ft.channel import Member, join_line, parse_line, quorum_of, check_version

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "ft",
                       "messages_vectors.json")


@pytest.fixture(scope="module")
def vectors():
    with open(VECTORS) as f:
        return json.load(f)


def test_the_programs_join_is_the_vectors_text(vectors):
    assert vectors["program_join"]
    for v in vectors["program_join"]:
        assert join_line(v["epoch"], v["step"], v["store"]) == v["line"] + "\n"


def test_a_quorum_decodes_to_the_vectors_values(vectors):
    assert vectors["quorum"]
    for v in vectors["quorum"]:
        kind, fields = parse_line(v["line"])
        q = quorum_of(fields)
        assert kind == "quorum"
        assert (q.epoch, q.step, q.store) == (v["epoch"], v["step"], v["store"])
        assert q.members == [Member(*m) for m in v["members"]]
        assert q.heals == [tuple(h) for h in v["heals"]]


def test_a_give_up_decodes_to_the_vectors_epoch(vectors):
    for v in vectors["abandon"]:
        kind, fields = parse_line(v["line"])
        check_version(kind, fields)
        assert (kind, int(fields["epoch"])) == ("abandon", v["epoch"])


def test_another_version_is_refused_naming_it(vectors):
    for v in vectors["refused"]:
        kind, fields = parse_line(v["line"])
        if kind != "quorum":
            continue  # a join is the launcher's to refuse (messages_test.cpp)
        with pytest.raises(ValueError, match=v["why"]):
            quorum_of(fields)
