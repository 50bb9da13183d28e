#!/usr/bin/env python3
"""Heartbeat cost (target: under 100 us at p99 with the progress fields): the wall time of one heartbeat call as the training program sees it,

  plain  ckpt.heartbeat(step)                                   C: autopar_ckpt_heartbeat
  full   ckpt.heartbeat(step, samples=, tokens=, loss=)         C: autopar_ckpt_heartbeat_progress
         (both hand the heartbeat to the library's background thread and return: the program's
         cost; the thread sends it while the program's next step runs)
  sync   the full heartbeat with wait=True                      C: autopar_ckpt_heartbeat_sync
         (the synchronous round trip, as every heartbeat was before 2026-12-02: for comparison;
         the background sends are flushed first, untimed, so that it measures its own trip)
  floor  one request line that autopard rejects right after decoding it (connect, accept, a line
         each way; no authorization, state database or failure handling): the round trip alone
  noop   a call that does nothing (Python: an empty function; C: nothing between the two clock
         readings): the machine's own noise for a call at that point of the loop

from Python (autopar.ckpt, as users call it) and from C (libautopar.so, bench/health/heartbeat_c.c),
interleaved in rounds whose order rotates (plain full sync floor noop, full sync floor noop plain, ...) so
that the machine's noise falls on all of them alike. Before each call the program sleeps
--step-us (default 1000 us, untimed): a training step, during which the background thread sends
the previous heartbeat; --step-us 0 calls back to back (a program calling faster than a round trip:
the latest heartbeat wins, and the caller shares the cores, and in Python the GIL, with that
thread). Prints p50 / p99 / p99.9 in microseconds, full/plain, and whether full's p99 is under
100 us.

Modes:
  srun     (default when the local cluster answers) the program is a Slurm task (srun -N1 -n1 with
           --heartbeat-timeout, --loss-spike and a plan, --auto-parallel): the node's autopard runs
           the whole heartbeat path, FailureHandler::OnHeartbeat included (hang detector, progress
           windows against the plan, the loss check); checked afterwards from the job's journal
           (its `progress` events).
  private  (fallback) a private autopard (build tree, state on this machine's disk, tracing on:
           AUTOPARD_TRACE_REQUESTS) and the program as its child with a task's environment. Without
           a Slurm configuration autopard has no failure handling: the heartbeat is authorized,
           recorded and answered, but OnHeartbeat does not run; with --slurm-conf PATH (libslurm
           must find a slurmctld) it runs as for a task. Also prints autopard's own time per
           request from its trace, and how many of the heartbeats reached it.

    bench/health/heartbeat_bench.py [--rounds 5000] [--warmup 200] [--step-us 1000]
                                    [--mode auto|srun|private] [--slurm-conf PATH] [--no-c]
                                    [--json FILE]

Environment: AUTOPAR_BUILD_DIR (default <repo>/build; read only: autopard, libautopar.so, the CLI),
AUTOPAR_CLUSTER_DIR (default /tmp/autopar-cluster: its etc/slurm.conf and run/autopard-*.sock).
The C program is compiled with `cc` into the bench's temporary directory. About 1 min on 2 cores
(10 s with --step-us 0).
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("AUTOPAR_BUILD_DIR", REPO / "build"))
CLUSTER = Path(os.environ.get("AUTOPAR_CLUSTER_DIR", "/tmp/autopar-cluster"))
VARIANTS = ("plain", "full", "sync", "floor", "noop")
HEARTBEATS = ("plain", "full", "sync")
# The full heartbeat's numbers: a global batch of 64 sequences of 128 tokens, a falling loss.
SAMPLES, TOKENS = 64, 64 * 128
# The srun mode's job options: every per-heartbeat check of OnHeartbeat is on.
JOB_OPTIONS = ["--heartbeat-timeout=600", "--loss-spike=10", "--auto-parallel", "--model=gpt3-1.3b",
               "--gpu-type=a100-80gb", "--global-batch=64", "--seq-len=128"]


def order(rounds, warmup):
    """Every call's variant in calling order, the warm-up's first: round j runs j, j+1, ... mod 5
    (heartbeat_c.c does the same)."""
    n = len(VARIANTS)
    return [VARIANTS[(j + k) % n] for j in range(warmup + rounds) for k in range(n)]


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(math.ceil(p / 100 * len(v))) - 1)]


# ----------------------------------------------------------------------------------------------
# The program's side (runs as the task)


def _noop():
    pass


def worker(args):
    sys.path.insert(0, str(REPO / "python"))
    from autopar import ckpt

    calls = order(args.rounds, args.warmup)
    ns = {v: [] for v in VARIANTS}
    step = 0
    floor_error = None
    clock = time.perf_counter_ns
    pause = args.step_us / 1e6
    for i, v in enumerate(calls):
        if v == "sync":
            ckpt.flush_heartbeats(5.0)  # untimed: the background thread is idle
        if pause:
            time.sleep(pause)
        if v == "plain":
            t0 = clock()
            ckpt.heartbeat(step)
            dt = clock() - t0
            step += 1
        elif v == "full" or v == "sync":
            loss = 2.0 + 1.0 / (step + 1)
            t0 = clock()
            ckpt.heartbeat(step, samples=SAMPLES, tokens=TOKENS, loss=loss, wait=v == "sync")
            dt = clock() - t0
            step += 1
        elif v == "noop":
            t0 = clock()
            _noop()
            dt = clock() - t0
        else:
            # ckpt's own client code (_call: the same socket, JSON and reply handling as a
            # heartbeat) with a request autopard refuses at decoding.
            t0 = clock()
            try:
                ckpt._call({"op": "bench-floor"}, 5.0)
            except ckpt.AutoparError as e:
                floor_error = str(e)
            dt = clock() - t0
        if i >= len(VARIANTS) * args.warmup:
            ns[v].append(dt)
    if not floor_error or "unknown operation" not in floor_error:
        sys.exit(f"heartbeat_bench: the floor request was not refused at decoding: {floor_error!r}")
    if not ckpt.flush_heartbeats(10.0) or ckpt.heartbeat_error():
        sys.exit(f"heartbeat_bench: background heartbeats failed: {ckpt.heartbeat_error()}")
    out = {"job_id": os.environ.get("SLURM_JOB_ID"), "node": os.environ.get("SLURMD_NODENAME"),
           "socket": os.environ["AUTOPAR_SOCKET"], "python": ns, "steps": [0, step],
           "calls": {"python": step}}
    if args.c_bin:
        samples = Path(args.out).with_suffix(".c.txt")
        p = subprocess.run([args.c_bin, str(args.rounds), str(args.warmup), str(step), str(samples),
                            str(args.step_us)], stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit(f"heartbeat_bench: {args.c_bin} failed ({p.returncode})")
        c = {v: [] for v in VARIANTS}
        for line in samples.read_text().splitlines():
            v, t = line.split()
            c[v].append(int(t))
        out["c"] = c
        out["steps"][1] = int(p.stdout.strip())
        out["calls"]["c"] = out["steps"][1] - step
    Path(args.out).write_text(json.dumps(out))


# ----------------------------------------------------------------------------------------------
# The bench's side


def cluster_up():
    """The local cluster's slurm.conf when its slurmctld answers and autopard runs on its nodes."""
    conf = os.environ.get("SLURM_CONF") or str(CLUSTER / "etc" / "slurm.conf")
    if not Path(conf).is_file() or not shutil.which("srun") or not list((CLUSTER / "run").glob("autopard-*.sock")):
        return None
    try:
        p = subprocess.run(["sinfo", "-h", "-o", "%T"], env={**os.environ, "SLURM_CONF": conf},
                           capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return None
    return conf if p.returncode == 0 and re.search(r"idle|mixed|alloc", p.stdout) else None


def build_c(work):
    lib = BUILD / "launcher" / "nccl" / "libautopar.so"
    if not lib.exists() or not shutil.which("cc"):
        print(f"heartbeat_bench: no {lib} or no cc: the C API is not measured", flush=True)
        return None
    out = work / "heartbeat_c"
    subprocess.run(["cc", "-O2", "-std=c11", "-D_GNU_SOURCE", f"-I{REPO / 'include'}",
                    str(REPO / "bench" / "health" / "heartbeat_c.c"), f"-L{lib.parent}", "-lautopar",
                    f"-Wl,-rpath,{lib.parent}", "-o", str(out)], check=True)
    return out


def worker_cmd(args, work, c_bin):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--rounds", str(args.rounds),
           "--warmup", str(args.warmup), "--step-us", str(args.step_us), "--out",
           str(work / "samples.json")]
    return cmd + (["--c-bin", str(c_bin)] if c_bin else [])


def run_srun(args, work, c_bin, conf):
    env = {**os.environ, "SLURM_CONF": conf}
    srun = ["srun", "-N1", "-n1", "-t", "5", "-J", "heartbeat-bench", *JOB_OPTIONS]
    print("heartbeat_bench: " + " ".join(srun) + " <worker>", flush=True)
    subprocess.run(srun + worker_cmd(args, work, c_bin), env=env, check=True, timeout=300)
    res = json.loads((work / "samples.json").read_text())
    # Proof that autopard ran the task's path: its progress windows of this job.
    cli = BUILD / "cli" / "autopar"
    res["progress_events"] = None
    if cli.exists():
        p = subprocess.run([str(cli), "events", res["job_id"], "--json", "--socket", res["socket"]],
                           env=env, capture_output=True, text=True, timeout=60)
        if p.returncode == 0:
            res["progress_events"] = len(re.findall(r'"kind"\s*:\s*"progress"', p.stdout))
    return res


def run_private(args, work, c_bin):
    sock = work / "autopard.sock"
    conf = work / "autopard.conf"
    text = f"socket = {sock}\nstate_dir = {work}/state\nnode = bench\nprogress_interval_s = 2\n"
    if args.slurm_conf:
        text += f"slurm_conf = {args.slurm_conf}\n"
    conf.write_text(text)
    denv = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    denv["AUTOPARD_TRACE_REQUESTS"] = "1"
    log_path = work / "autopard.log"
    with open(log_path, "w") as log:
        daemon = subprocess.Popen([str(BUILD / "service" / "autopard" / "autopard"), "--config", str(conf)],
                                  stdout=log, stderr=subprocess.STDOUT, env=denv)
    try:
        for _ in range(200):
            if sock.exists():
                break
            time.sleep(0.05)
        job = f"heartbeat-bench-{os.getpid()}"
        tenv = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "AUTOPAR"))}
        tenv.update({"AUTOPAR_SOCKET": str(sock), "SLURM_JOB_ID": job, "SLURMD_NODENAME": "bench",
                     "RANK": "0", "WORLD_SIZE": "1", "SLURM_PROCID": "0",
                     "AUTOPAR_HEARTBEAT_TIMEOUT": "600", "AUTOPAR_LOSS_SPIKE": "10"})
        subprocess.run(worker_cmd(args, work, c_bin), env=tenv, check=True, timeout=300)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
    res = json.loads((work / "samples.json").read_text())
    log_text = log_path.read_text()
    res["failure_handling"] = "failure handling (requeue) is off" not in log_text
    # autopard's time per request from its trace: heartbeats (of every variant: the background
    # thread skips some when the program calls faster than a round trip) and the floor.
    split = {op: {"handle": [], "daemon": []} for op in ("heartbeat", "floor")}
    for m in re.finditer(r"autopard: trace (\S+) at=(\d+):(.*)", log_text):
        op = "floor" if m.group(1) == "bad" else m.group(1)
        marks = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(3)))
        if op in split and "encode" in marks and "decode" in marks:
            split[op]["handle"].append(1000 * (marks["encode"] - marks["decode"]))
            split[op]["daemon"].append(1000 * marks.get("sent", marks["encode"]))
    res["autopard"] = split
    return res


def summary(ns):
    us = [t / 1000 for t in ns]
    return {"n": len(us), "p50": pct(us, 50), "p99": pct(us, 99), "p999": pct(us, 99.9), "max": max(us)}


def report(res, mode):
    lines = []
    for lang in ("python", "c"):
        if lang not in res:
            continue
        s = {v: summary(res[lang][v]) for v in VARIANTS}
        for v in VARIANTS:
            x = s[v]
            lines.append(f"{lang:6} {v:5}  n={x['n']:5}  p50 {x['p50']:7.1f}  p99 {x['p99']:7.1f}  "
                         f"p99.9 {x['p999']:8.1f}  max {x['max']:8.1f} us")
        a, b = s["plain"], s["full"]
        lines.append(f"{lang:6} full/plain: p50 {b['p50'] / a['p50']:.2f}x  p99 {b['p99'] / a['p99']:.2f}x  "
                     f"p99.9 {b['p999'] / a['p999']:.2f}x;  full p99 {b['p99']:.1f} us "
                     f"{'<' if b['p99'] < 100 else '>='} 100 us: {'met' if b['p99'] < 100 else 'NOT met'}"
                     f"  (sync p99 {s['sync']['p99']:.1f} us)")
    if "autopard" in res:
        for op, split in res["autopard"].items():
            if not split["handle"]:
                continue
            h, d = summary(split["handle"]), summary(split["daemon"])
            lines.append(f"autopard {op:9}: n={h['n']:5}  Handle p50 {h['p50']:6.1f} p99 {h['p99']:6.1f} "
                         f"p99.9 {h['p999']:7.1f} us; accept..reply sent p50 {d['p50']:6.1f} "
                         f"p99 {d['p99']:6.1f} p99.9 {d['p999']:7.1f} us (trace, us resolution)")
        sent = sum(res.get("calls", {}).values())
        got = len(res["autopard"]["heartbeat"]["handle"])
        lines.append(f"autopard received {got} of the {sent} heartbeats called (the latest wins)")
    if mode == "srun":
        lines.append(f"job {res['job_id']} on {res['node']}: steps {res['steps'][0]}..{res['steps'][1] - 1}; "
                     f"progress windows journalled by autopard: {res.get('progress_events')}")
    else:
        lines.append("private autopard: failure handling (OnHeartbeat) "
                     + ("ON" if res.get("failure_handling") else "OFF: auth + state database + reply only"))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5000, help="timed calls per variant and language")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--step-us", type=int, default=1000,
                    help="untimed sleep before each call (a training step); 0: back to back")
    ap.add_argument("--mode", choices=("auto", "srun", "private"), default="auto")
    ap.add_argument("--slurm-conf", help="private mode: the autopard's slurm_conf (failure handling on)")
    ap.add_argument("--no-c", action="store_true", help="Python only")
    ap.add_argument("--json", help="also write the summary as JSON here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--c-bin", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return

    conf = None if args.mode == "private" else cluster_up()
    if args.mode == "srun" and not conf:
        sys.exit(f"heartbeat_bench: the cluster ({CLUSTER}) does not answer: use --mode private")
    mode = "srun" if conf else "private"
    work = Path(tempfile.mkdtemp(prefix="autopar-heartbeat-bench."))
    work.chmod(0o755)
    try:
        c_bin = None if args.no_c else build_c(work)
        load = os.getloadavg()
        t0 = time.time()
        res = run_srun(args, work, c_bin, conf) if mode == "srun" else run_private(args, work, c_bin)
        print(f"heartbeat_bench: mode {mode}, {args.rounds} rounds of {'/'.join(VARIANTS)} per language "
              f"(+{args.warmup} warm-up), step {args.step_us} us, {time.time() - t0:.1f} s, load average before "
              f"{load[0]:.2f} after {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs", flush=True)
        for line in report(res, mode):
            print(line, flush=True)
        if args.json:
            summ = {lang: {v: summary(res[lang][v]) for v in VARIANTS} for lang in ("python", "c") if lang in res}
            if "autopard" in res:
                summ["autopard"] = {op: {part: summary(ns) for part, ns in split.items()}
                                    for op, split in res["autopard"].items() if split["handle"]}
            meta = {k: v for k, v in res.items() if k not in ("python", "c", "autopard")}
            Path(args.json).write_text(json.dumps({"mode": mode, "step_us": args.step_us, "summary": summ,
                                                   **meta}, indent=1) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
