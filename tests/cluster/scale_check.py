#!/usr/bin/env python3
"""The checks of scale_test.sh on what a job left: its merged timeline (`autopar events --json`),
its checkpoints in storage (`autopar ckpt ls --json`) and its output. Prints one line per check,
"ok   ..." or "FAIL ...", then "times k=v ..." (seconds) for scale_test.sh to report; exits 1 when a
check failed.

  scale_check.py reference EVENTS LS OUT T0 --nodes N --world W --steps S --every K
      the uninterrupted run: every node's journal merged, every checkpoint step COMPLETE with all
      W ranks in storage and in the timeline; times: launch, first step, checkpoint completion
  scale_check.py recovered EVENTS LS OUT FAULT --nodes N --world W --steps S --every K
      the run with one rank stopped (a hang): seen by every node, exactly one recovery (in place),
      every rank restored and trained to the end; times: the restart's phases
  scale_check.py same-model A B
      two final models (torch.save of a state_dict) are bit for bit the same
"""
import argparse
import json
import re
import sys
from collections import defaultdict

failures = 0


def check(ok, what):
    global failures
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    failures += not ok


def kinds(evs, kind):
    return [e for e in evs if e["kind"] == kind]


def step_lines(out_text):
    """{(generation, rank): [(step, time)]} from requeue_train.py's lines and rank.py's SCALE lines
    (a rank's generation is the in-place restart count its program was started with)."""
    steps = defaultdict(list)
    for m in re.finditer(r"^train: rank (\d+) step (\d+) time ([\d.]+) run (\d+)", out_text, re.M):
        steps[(int(m.group(4)), int(m.group(1)))].append((int(m.group(2)), float(m.group(3))))
    return steps


def checkpoints(evs, ls, world, steps, every):
    """Every step checkpointed is COMPLETE in the timeline and in storage, with every rank; returns
    the seconds from a step's last commit to its COMPLETE (the largest over steps)."""
    want = set(range(every - 1, steps, every))
    complete = {}
    for e in kinds(evs, "ckpt_complete"):
        complete.setdefault(e["step"], e["time"])
    check(set(complete) == want, f"ckpt_complete for steps {sorted(want)} (got {sorted(complete)})")
    stored = {s["step"]: s for s in ls}
    check(set(stored) == want and all(s["state"] == "COMPLETE" and s["ranks"] == world and
                                       s["world_size"] == world for s in stored.values()),
          f"in storage: steps {sorted(want)} COMPLETE with {world} ranks each "
          f"(got {[(s['step'], s['state'], s['ranks']) for s in ls]})")
    commits = defaultdict(list)
    for e in kinds(evs, "ckpt_committed"):
        commits[e["step"]].append(e["time"])
    # A step restarted in place is committed again by the restarted ranks: count the first commit
    # of each rank once.
    spans = [complete[s] - max(commits[s]) for s in want & set(complete) if commits[s]]
    return max(spans) if spans else -1.0


def reference(a):
    evs = json.load(open(a.events))["events"]
    ls = json.load(open(a.ls))
    out = open(a.out).read()
    nodes = {e["node"] for e in evs}
    check(len(nodes) == a.nodes, f"autopar events merges the journals of all {a.nodes} nodes "
          f"({len(nodes)} nodes, {len(evs)} events)")
    ckpt_s = checkpoints(evs, ls, a.world, a.steps, a.every)
    committed = {(e["step"], e["rank"]) for e in kinds(evs, "ckpt_committed")}
    check(len(committed) == a.world * (a.steps // a.every),
          f"every rank committed every checkpoint ({len(committed)} commits)")
    check(not kinds(evs, "failure") and not kinds(evs, "recovery"), "no failure, no recovery")
    started = {int(m.group(1)): float(m.group(2))
               for m in re.finditer(r"^SCALE rank=(\d+) .* started=([\d.]+)", out, re.M)}
    steps = step_lines(out)
    first = {r: min(t for _, t in v) for (g, r), v in steps.items() if g == 0}
    last = {r: max(t for _, t in v) for (g, r), v in steps.items() if g == 0}
    check(sorted(started) == list(range(a.world)) and sorted(first) == list(range(a.world)),
          f"every rank 0..{a.world - 1} started once and trained")
    check(all(len(v) == a.steps for v in steps.values()), f"every rank trained {a.steps} steps")
    t0 = a.time
    print(f"times launch={max(started.values()) - t0:.1f} first_step={max(first.values()) - t0:.1f} "
          f"train={max(last.values()) - max(first.values()):.1f} ckpt_complete={ckpt_s:.2f}", flush=True)


def recovered(a):
    evs = json.load(open(a.events))["events"]
    ls = json.load(open(a.ls))
    out = open(a.out).read()
    # The fault: one rank's program stopped. The other ranks wait for it in their next collective,
    # so every node's autopard sees its ranks make no progress and detects the hang.
    seen = {e["node"] for e in kinds(evs, "heartbeat_missed") if e["time"] >= a.time}
    check(len(seen) == a.nodes, f"the hang is seen on every node: heartbeat_missed from {len(seen)} of {a.nodes} nodes")
    decisions = kinds(evs, "recovery")
    check([e["fields"].get("action") for e in decisions] == ["restart-in-place"],
          f"exactly one recovery, in place (got {[e['fields'].get('action') for e in decisions]})")
    restarted = kinds(evs, "restarted")
    check([e["fields"].get("generation") for e in restarted] == ["1"],
          f"exactly one restart, generation 1 (got {[e['fields'].get('generation') for e in restarted]})")
    check(not kinds(evs, "requeue"), "no requeue")
    restored = {e["rank"] for e in kinds(evs, "restored") if e["fields"].get("generation") == "1"}
    check(restored == set(range(a.world)), f"every rank restored the checkpoint ({len(restored)} ranks)")
    steps = step_lines(out)
    gen1 = {r: v for (g, r), v in steps.items() if g == 1}
    check(sorted(gen1) == list(range(a.world)) and all(max(s for s, _ in v) == a.steps - 1 for v in gen1.values()),
          f"every rank of the restarted program trained to step {a.steps - 1}")
    # The final model cannot tell a resume from a restart at step 0 (a step's data depends only on
    # the step): the programs' own lines say what each loaded and where it went on.
    loaded = {int(m.group(1)): int(m.group(2)) for m in
              re.finditer(r"^train: rank (\d+) resumed from step (\d+) run 1$", out, re.M)}
    steps_restored = {e["step"] for e in kinds(evs, "restored") if e["fields"].get("generation") == "1"}
    first = {r: min(s for s, _ in v) for r, v in gen1.items()}
    check(sorted(loaded) == list(range(a.world)) and len(steps_restored) == 1 and
          set(loaded.values()) == steps_restored and all(first.get(r) == k + 1 for r, k in loaded.items()),
          f"every restarted program loaded the restored step {sorted(steps_restored)} itself and went on "
          f"from the next (loaded {sorted(set(loaded.values()))} by {len(loaded)} ranks)")
    checkpoints(evs, ls, a.world, a.steps, a.every)
    first = kinds(evs, "first_step")
    r = restarted[0]["fields"] if restarted else {}
    phases = " ".join(f"{k}={float(r[k]):.1f}" for k in ("stop_s", "decide_s", "rendezvous_s") if k in r)
    since = float(first[0]["fields"]["since_failure_s"]) if first else -1.0
    resumed_first = min((t for v in gen1.values() for _, t in v), default=a.time)
    print(f"times restart={since:.1f} {phases} fault_to_step={resumed_first - a.time:.1f}", flush=True)


def same_model(a):
    import torch
    x, y = torch.load(a.a), torch.load(a.b)
    check(x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x),
          "the final model is bit for bit the uninterrupted run's")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    for name in ("reference", "recovered"):
        p = sub.add_parser(name)
        for arg in ("events", "ls", "out"):
            p.add_argument(arg)
        p.add_argument("time", type=float)
        for opt in ("--nodes", "--world", "--steps", "--every"):
            p.add_argument(opt, type=int, required=True)
    p = sub.add_parser("same-model")
    p.add_argument("a")
    p.add_argument("b")
    a = ap.parse_args()
    {"reference": reference, "recovered": recovered, "same-model": same_model}[a.what](a)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
