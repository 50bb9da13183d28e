"""Attack: make autopard hold every event a job's programs send (root's state, root's memory).

The second account (autopar-test2) runs a one-task step on node1 (programs/flood_events.py)
that sends its node's autopard events for its own job in a tight loop, all over one connection
(the protocol carries several requests per connection), until one is refused:
- many small events: the count cap (`max_events_per_job`);
- few big ones (60000 bytes of detail each, under the 65536-byte limit of one event): the byte
  cap (`max_event_bytes_per_job`).
tests/cluster/start.sh lowers the caps for the local cluster (3000 events, 8 MiB; the defaults
are 100000 and 64 MiB) so that a few thousand requests prove them; the test reads the values
from the node's autopard.conf.

What must hold:
- the job's events are accepted up to the cap exactly (not refused before it) and then refused
  (not never), with an error naming the key; the same event over a fresh connection is refused
  as well (the cap is the job's, not the connection's);
- root's state holds no more than the cap of the job's events and bytes (the journal table of
  autopard's state database, read-only), and root's `autopar events JOB` still answers, with no
  more than the cap of the job's events;
- autopard (the same pid, its peak RSS not grown by hundreds of MiB) still serves root's status
  and accepts another job's event afterwards.
- usage samples (kept in root's memory and summarised in events autopard writes itself) are
  charged to the job too: a rank of the job at most one a second (a flood is refused at its
  second sample), a rank the job does not have (99999999, within the protocol's range: once a
  map entry and a field of every usage event) never; neither takes from the job's event budget.
About 2 s.
"""
import json
import re
import sqlite3

from conftest import (CLI, PROGRAMS, PYTHON, as_user, autopard_guard, cluster_dir,  # noqa: F401
                      need_binaries, node_socket, root_events, run)

NODE = "node1"
PROGRAM = PROGRAMS / "flood_events.py"
BIG = 60000  # bytes of detail of one big event (one event may carry 65536)


def caps(node: str = NODE):
    """(max_events_per_job, max_event_bytes_per_job) of the node's autopard.conf, or autopard's
    defaults for a key it does not set."""
    text = (cluster_dir() / "etc" / f"autopard-{node}.conf").read_text()
    events = re.search(r"^\s*max_events_per_job\s*=\s*(\d+)\s*$", text, re.M)
    size = re.search(r"^\s*max_event_bytes_per_job\s*=\s*(\d+)([KMG]?)\s*$", text, re.M)
    nbytes = 64 << 20
    if size:
        nbytes = int(size.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[size.group(2)]
    return (int(events.group(1)) if events else 100000), nbytes


def flood(kind: str, detail_bytes: int, limit: int, rank: int = 0):
    """The user's step sending events until refused: (job, its RESULT)."""
    p = as_user(["srun", "-N1", "-n1", "-w", NODE, "-t", "2", PYTHON, PROGRAM, kind,
                 str(detail_bytes), str(limit), str(rank)],
                env={"AUTOPAR_SOCKET": node_socket(NODE)}, timeout=120)
    out = p.stdout + p.stderr
    job = re.search(r"^JOB (\d+)$", out, re.M)
    result = re.search(r"^RESULT (.*)$", out, re.M)
    assert p.returncode == 0 and job and result, f"the user's step failed ({p.returncode}):\n{out}"
    return job.group(1), json.loads(result.group(1))


def assert_refused_at_the_cap(job: str, r: dict, key: str, cap: int, fit: int):
    """The flood's RESULT R: its job's events were accepted up to the cap exactly (FIT of them:
    KEY = CAP) and then refused with an error naming KEY, and so was the same event over a fresh
    connection."""
    assert r["error"] is not None, (f"job {job} sent {r['sent']} events and none was refused "
                                    f"({key} = {cap})")
    assert key in r["error"], r
    assert r["accepted"] == fit, (f"job {job}'s events were refused after {r['accepted']}, not at "
                                  f"the cap {key} = {cap} ({fit} events): {r}")
    assert r["again"] and key in r["again"], f"a fresh connection of job {job} was not refused: {r}"


def journalled(job: str, node: str = NODE):
    """(events, bytes of detail) root's state database holds for the job on `node`."""
    db = cluster_dir() / "autopard" / node / "autopard.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as c:
        n, size = c.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(detail)), 0) FROM journal "
                            "WHERE job_id=?", (job,)).fetchone()
    return n, size


def assert_still_serves(guard, job: str, kind: str, max_events: int):
    """Root's requests are served and another job's event is accepted, after the flood."""
    guard.assert_serving()
    guard.assert_no_big_allocation()
    p = run([str(CLI), "events", job, "--json", "--socket", str(node_socket(NODE))], timeout=30)
    assert p.returncode == 0, f"root's `autopar events {job}` failed: {p.stderr}"
    shown = [e for e in json.loads(p.stdout)["events"] if e["kind"] == kind]
    assert 0 < len(shown) <= max_events, f"root's `autopar events {job}` shows {len(shown)} events"
    other = as_user(["srun", "-N1", "-n1", "-w", NODE, "-t", "1", PYTHON, "-c",
                     "import os; from autopar import ckpt; ckpt.event('note', 'after the flood'); "
                     "print('JOB', os.environ['SLURM_JOB_ID'])"],
                    env={"AUTOPAR_SOCKET": node_socket(NODE), "AUTOPAR_STACKS": "0"}, timeout=60)
    assert other.returncode == 0, f"another job's event was refused:\n{other.stdout}{other.stderr}"
    other_job = re.search(r"^JOB (\d+)$", other.stdout, re.M).group(1)
    assert other_job != job
    notes = [e["detail"] for e in root_events(other_job, NODE) if e["kind"] == "note"]
    assert notes == ["after the flood"], notes


def test_events_past_the_count_cap_are_refused(autopard_guard):
    need_binaries()
    max_events, _ = caps()
    guard = autopard_guard(NODE)
    job, r = flood("flood", 16, max_events + 100)
    assert_refused_at_the_cap(job, r, "max_events_per_job", max_events, max_events)
    assert journalled(job) == (max_events, 16 * max_events), journalled(job)
    assert_still_serves(guard, job, "flood", max_events)


def test_event_details_past_the_byte_cap_are_refused(autopard_guard):
    need_binaries()
    max_events, max_bytes = caps()
    fit = max_bytes // BIG
    assert fit < max_events, "the byte cap must bind before the count cap"
    guard = autopard_guard(NODE)
    job, r = flood("big", BIG, fit + 20)
    assert_refused_at_the_cap(job, r, "max_event_bytes_per_job", max_bytes, fit)
    n, size = journalled(job)
    assert n == fit and size == fit * BIG <= max_bytes, (n, size)
    assert_still_serves(guard, job, "big", fit)


def test_usage_samples_are_the_jobs_ranks_at_most_one_a_second(autopard_guard):
    need_binaries()
    autopard_guard(NODE)
    job, r = flood("usage_sample", 100, 1000)
    assert r["accepted"] == 1 and "faster than one a second" in (r["error"] or ""), r
    job, r = flood("usage_sample", 100, 10, rank=99_999_999)
    assert r["accepted"] == 0 and "is not a rank of job" in (r["error"] or ""), r
    # The event budget is untouched: the job's own events still go in.
    job, r = flood("progress_note", 10, 5)
    assert r["accepted"] == 5 and r["error"] is None, r
