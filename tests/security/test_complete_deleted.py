"""Attack: make autopard mark a checkpoint step COMPLETE over objects that are no longer there.

A step is COMPLETE when its manifest.json is in the store, written by the autopard that sees the
last rank manifest arrive (core/ckpt/ckpt_store.cpp TryCompleteStep). A `file://` store is the
user's to change at any time, and retention deletes old steps while a late rank may still be
completing one: autopard writes the manifest only if every rank's objects are still listed, with
the sizes their rank manifests give (Completeness::missing_files). It does not upload the missing
objects again (the rank that wrote them has its upload done and may be gone): the step stays
incomplete, and restores fall back to an older COMPLETE step.

The second account (autopar-test2) runs a 2-task step, one task per node (node1: rank 0, node2:
rank 1, so that rank 1's autopard checks objects rank 0's autopard uploaded), with
--ckpt-upload=file://<up>, <up> its own directory (programs/commit_deleted.py):
- step 1: both ranks commit, undisturbed;
- step 2: rank 0 commits and its upload ends; the user deletes rank 0's uploaded objects
  (job-J/step-2/rank-0/*, its rank manifest rank-0.json left in place); then rank 1 commits;
- step 3: the same, with rank 0's model.bin in the store truncated to half instead;
- step 4: both ranks commit, undisturbed.

What must hold:
- steps 2 and 3 are never COMPLETE: no manifest.json in the store (both rank manifests are there,
  so completion was tried), `autopar ckpt ls` (root's, by job; the user's, by URI) does not call
  them COMPLETE, no ckpt_complete event names them, and a restore from the store (probe and full
  restore, steps <= 3) picks step 1;
- steps 1 and 4, committed whole, are COMPLETE (manifest, ls, ckpt_complete), and a restore of
  any step picks step 4.
About 3 s.
"""
import json
import os
import re

from conftest import (CLI, PROGRAMS, PYTHON, as_user, need_binaries, node_socket, root_events,
                      run, user_dir, user_ids)  # noqa: F401

PROGRAM = PROGRAMS / "commit_deleted.py"
WHOLE, CUT = (1, 4), (2, 3)  # steps committed whole; steps with rank 0's objects deleted or cut


def tagged(out: str, tag: str):
    m = re.search(rf"^{tag} (.*)$", out, re.M)
    assert m, f"the user's job printed no {tag}:\n{out}"
    return json.loads(m.group(1))


def states(listing):
    return {s["step"]: s["state"] for s in listing}


def test_a_step_whose_objects_were_deleted_is_never_complete(user_dir):
    need_binaries()
    uid, gid = user_ids()
    up, sync, restore = user_dir / "up", user_dir / "sync", user_dir / "restore"
    for d in (up, sync, restore):
        d.mkdir()
        os.chown(d, uid, gid)
    p = as_user(["srun", "-N2", "-n2", "--ntasks-per-node=1", "-w", "node[1-2]", "-t", "3",
                 f"--ckpt-dir={user_dir}/ck/%n", f"--ckpt-upload=file://{up}",
                 PYTHON, PROGRAM, sync, restore], cwd=user_dir, timeout=150)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"the user's job failed ({p.returncode}):\n{out}"
    job = re.search(r"^JOB (\d+)$", out, re.M).group(1)
    uploads = tagged(out, "UPLOADS")
    assert sorted((u["step"], u["state"]) for u in uploads) == \
        [(s, "uploaded") for s in (1, 2, 3, 4)], f"rank 1's uploads: {uploads}"

    # The store: completion was tried with both rank manifests there; no manifest over the gap.
    steps = up / f"job-{job}"
    for s in CUT:
        assert (steps / f"step-{s}" / "rank-0.json").is_file() and \
            (steps / f"step-{s}" / "rank-1.json").is_file(), sorted(map(str, steps.rglob("*")))
        assert not (steps / f"step-{s}" / "manifest.json").exists(), \
            (f"step {s} was marked COMPLETE over rank 0's {'deleted' if s == 2 else 'truncated'} "
             f"objects: {steps}/step-{s}/manifest.json")
    assert not list((steps / "step-2" / "rank-0").iterdir())
    assert (steps / "step-3" / "rank-0" / "model.bin").stat().st_size == 1 << 19
    for s in WHOLE:
        assert (steps / f"step-{s}" / "manifest.json").is_file(), \
            f"step {s}, committed whole, is not COMPLETE: {sorted(map(str, steps.rglob('*')))}"

    # What autopard tells root (by job) and the user (by URI).
    by_job = run([str(CLI), "ckpt", "ls", job, "--json", "--socket", str(node_socket("node2"))],
                 check=True)
    by_uri = as_user([CLI, "ckpt", "ls", f"file://{up}", "--json", "--socket",
                      node_socket("node1")], check=True)
    for listing in (json.loads(by_job.stdout), json.loads(by_uri.stdout)):
        st = states(s for s in listing if s["job_id"] == job)
        assert {s: st.get(s) == "COMPLETE" for s in (1, 2, 3, 4)} == \
            {1: True, 2: False, 3: False, 4: True}, st
    # Each node's own journal (the other's reaches it within a second); both nodes may see both
    # rank manifests of a whole step and complete it.
    complete = {e["step"] for node in ("node1", "node2") for e in root_events(job, node)
                if e["kind"] == "ckpt_complete"}
    assert complete == set(WHOLE), f"ckpt_complete events of steps {sorted(complete)}"

    # A restore from the store, as a fresh rank 0 would: never step 2 or 3.
    r = tagged(out, "RESTORE")
    assert r["probe_max3"].get("step") == 1 and r["restore_max3"].get("step") == 1, r
    assert r["probe_any"].get("step") == 4, r
    restored = sorted(str(p.relative_to(restore)) for p in restore.rglob("*") if p.is_file())
    assert restored == ["step-1/rank-0/meta.txt", "step-1/rank-0/model.bin"], restored
