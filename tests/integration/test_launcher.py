"""autopar-launch on the local 4-node cluster, plus its signal and exit-code
handling run directly (no Slurm needed for those).

Cluster tests: every task's environment is consistent (4 nodes x 2 tasks), simultaneous jobs get
different reserved ports, real PyTorch DDP (gloo) reaches the single-process loss, the
--mpi=none fallback warns once, each bad input gives one line naming rank and host, and a rank
that exits 1 ends the step within seconds.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BUILD_DIR, PYTHON, SOURCE_DIR, run

LAUNCH = str(BUILD_DIR / "launcher" / "autopar-launch")
PROBE = str(BUILD_DIR / "launcher" / "autopar-bootstrap-probe")
DDP_CHECK = str(SOURCE_DIR / "tests" / "integration" / "ddp_check.py")

# Prints one JSON line with what the program sees (python -S: no site import, fast).
ENV_PROBE = (
    "import os,json,socket;"
    "s=open('/proc/self/status').read();"
    "cpus=[l.split(':')[1].strip() for l in s.splitlines() if l.startswith('Cpus_allowed_list')][0];"
    "keys=['RANK','LOCAL_RANK','WORLD_SIZE','LOCAL_WORLD_SIZE','GROUP_RANK','GROUP_WORLD_SIZE',"
    "'ROLE_RANK','MASTER_ADDR','MASTER_PORT','TORCHELASTIC_RESTART_COUNT','NCCL_DEBUG',"
    "'TORCH_NCCL_ASYNC_ERROR_HANDLING','OMP_NUM_THREADS','AUTOPAR_CPUS'];"
    "print('ENV '+json.dumps(dict({k:os.environ.get(k) for k in keys},host=socket.gethostname(),cpus=cpus)),flush=True)"
)


def srun(*args, timeout=60, env=None):
    return run(["srun", *args], timeout=timeout, env=env)


def env_lines(stdout):
    return [json.loads(l[4:]) for l in stdout.splitlines() if l.startswith("ENV ")]


def parse_cpus(text):
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def node_address(name):
    return subprocess.run(["getent", "hosts", name], capture_output=True, text=True,
                          check=True).stdout.split()[0]


def test_environment_4_nodes_x_2_tasks():
    # The user's NCCL_DEBUG wins over the launcher's default (WARN, unit-tested).
    p = srun("-N4", "--ntasks-per-node=2", "--mpi=pmix", LAUNCH, "--", PYTHON, "-S", "-c", ENV_PROBE,
             env={"NCCL_DEBUG": "TRACE"})
    assert p.returncode == 0, p.stderr
    envs = env_lines(p.stdout)
    assert len(envs) == 8, p.stdout + p.stderr
    assert sorted(int(e["RANK"]) for e in envs) == list(range(8))
    assert {e["WORLD_SIZE"] for e in envs} == {"8"}
    assert {e["LOCAL_WORLD_SIZE"] for e in envs} == {"2"}
    assert {e["GROUP_WORLD_SIZE"] for e in envs} == {"4"}
    assert {e["TORCHELASTIC_RESTART_COUNT"] for e in envs} == {"0"}
    assert all(e["ROLE_RANK"] == e["RANK"] for e in envs)
    # One rendezvous endpoint: rank 0's node address and its reserved port.
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}) == 1
    rank0 = next(e for e in envs if e["RANK"] == "0")
    assert rank0["MASTER_ADDR"] == node_address(rank0["host"])
    assert {e["NCCL_DEBUG"] for e in envs} == {"TRACE"}
    assert {e["TORCH_NCCL_ASYNC_ERROR_HANDLING"] for e in envs} == {"1"}
    by_host = {}
    for e in envs:
        by_host.setdefault(e["host"], []).append(e)
    assert len(by_host) == 4
    groups = set()
    for host, tasks in by_host.items():
        assert sorted(int(t["LOCAL_RANK"]) for t in tasks) == [0, 1], host
        assert len({t["GROUP_RANK"] for t in tasks}) == 1, host
        groups.add(tasks[0]["GROUP_RANK"])
        a, b = (parse_cpus(t["cpus"]) for t in tasks)
        assert a and b and not (a & b), f"{host}: CPU sets overlap: {a} {b}"
        for t in tasks:
            assert parse_cpus(t["AUTOPAR_CPUS"]) == parse_cpus(t["cpus"])
            assert t["OMP_NUM_THREADS"] == str(len(parse_cpus(t["cpus"])))
    assert groups == {"0", "1", "2", "3"}


def test_no_bind_leaves_affinity_alone():
    p = srun("-N1", "-n2", "--mpi=pmix", LAUNCH, "--no-bind", "--", PYTHON, "-S", "-c", ENV_PROBE)
    assert p.returncode == 0, p.stderr
    envs = env_lines(p.stdout)
    assert len(envs) == 2
    assert all(e["AUTOPAR_CPUS"] is None for e in envs)
    assert envs[0]["cpus"] == envs[1]["cpus"]


# Rank 0's program checks that the launcher holds MASTER_PORT (a plain bind fails) and that a
# program binding it like PyTorch's TCPStore (SO_REUSEADDR, then listen) gets it.
PORT_PROBE = (
    "import os,socket,time;"
    "port=int(os.environ['MASTER_PORT']);"
    "r=os.environ['RANK'];"
    "plain=socket.socket();\n"
    "try:\n  plain.bind(('0.0.0.0',port)); held='free'\n"
    "except OSError: held='held'\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
    "s.bind(('0.0.0.0',port)); s.listen(); time.sleep(2.5);"
    "print('PORT',r,port,held,flush=True)"
)


def test_simultaneous_jobs_never_share_a_port():
    def one_job(_):
        return srun("-N4", "--ntasks-per-node=1", "--mpi=pmix", LAUNCH, "--", PYTHON, "-S", "-c",
                    "import os\nif os.environ['RANK']=='0':\n exec(os.environ['PORT_PROBE'])",
                    env={"PORT_PROBE": PORT_PROBE}, timeout=90)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one_job, range(4)))
    ports = []
    for p in results:
        assert p.returncode == 0, p.stderr
        m = re.search(r"^PORT 0 (\d+) (\w+)$", p.stdout, re.M)
        assert m, p.stdout + p.stderr
        assert m.group(2) == "held", "MASTER_PORT was not reserved by the launcher"
        ports.append(int(m.group(1)))
    assert len(set(ports)) == 4, ports


def test_ddp_matches_single_process(tmp_path):
    single = tmp_path / "single.json"
    subprocess.run([PYTHON, DDP_CHECK, str(single)], check=True, timeout=120,
                   env={k: v for k, v in os.environ.items()
                        if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")})
    multi = tmp_path / "ddp.json"
    p = srun("-N4", "--ntasks-per-node=2", "--mpi=pmix", LAUNCH, "--", PYTHON, DDP_CHECK,
             str(multi), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    a, b = json.loads(single.read_text()), json.loads(multi.read_text())
    assert b["world"] == 8 and a["world"] == 1
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-6), (a, b)
    assert b["loss"] < 0.5  # it did train


def test_fallback_without_pmix_warns_once():
    p = srun("-N4", "--ntasks-per-node=2", "--mpi=none", LAUNCH, "--", PYTHON, "-S", "-c", ENV_PROBE)
    assert p.returncode == 0, p.stderr
    warnings = [l for l in p.stderr.splitlines() if "no PMIx server" in l]
    assert len(warnings) == 1, p.stderr
    assert warnings[0].startswith("autopar-launch: rank 0 on ")
    envs = env_lines(p.stdout)
    assert sorted(int(e["RANK"]) for e in envs) == list(range(8))
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}) == 1
    by_host = {}
    for e in envs:
        by_host.setdefault(e["host"], []).append(int(e["LOCAL_RANK"]))
    assert all(sorted(v) == [0, 1] for v in by_host.values())


@pytest.mark.parametrize("args,message,code", [
    ([], r"no program given \(usage: autopar-launch \[OPTIONS\] -- PROGRAM \[ARGS\.\.\.\]\)", None),
    (["--frobnicate", "--", "true"], r"unknown option '--frobnicate' \(see autopar-launch --help\)", None),
    (["--", "/nonexistent/train"],
     r"program '/nonexistent/train' cannot be started: No such file or directory", None),
])
def test_bad_input_one_clear_line(args, message, code, tmp_path):
    # Each task's standard error written by its node's slurmstepd (as a batch job's -e file is),
    # not forwarded through srun: srun ends the step when the first task fails, and under load it
    # has dropped that task's last line on the way (CI, 2026-12-07: no line at all).
    tmp_path.chmod(0o1777)
    p = srun("-N2", "--ntasks-per-node=1", "--mpi=pmix", f"--error={tmp_path}/err-%t", LAUNCH, *args,
             timeout=30)
    assert p.returncode != 0
    # One line per rank, that one naming rank and node (srun may end the second rank before it
    # says anything: one line at least).
    stderr = "".join(f.read_text() for f in sorted(tmp_path.glob("err-*")))
    lines = [l for l in stderr.splitlines() if l.startswith("autopar-launch:")]
    said = [re.fullmatch(r"autopar-launch: rank ([01]) on node\d: " + message, l) for l in lines]
    assert lines and all(said), stderr + p.stderr
    ranks = [m.group(1) for m in said]
    assert len(ranks) == len(set(ranks)), stderr


def test_pmix_error_is_one_clear_line():
    # A PMIx server advertised but not there: a PMIx error, never a silent fallback.
    p = srun("-N1", "-n1", "--mpi=none", "env", "PMIX_NAMESPACE=bogus.ns", "PMIX_RANK=0",
             "PMIX_SERVER_URI41=bogus.ns.0;tcp4://127.0.0.1:1", LAUNCH, "--", "true", timeout=60)
    assert p.returncode != 0
    # (-N1 lands on whichever node is free: node1 may still be finishing the previous test.)
    lines = [l for l in p.stderr.splitlines() if l.startswith("autopar-launch:")]
    assert len(lines) == 1, p.stderr
    assert re.match(r"autopar-launch: rank 0 on node\d+: PMIx: PMIx_Init failed: \S", lines[0]), p.stderr


def test_failing_rank_ends_the_step_within_seconds():
    start = time.monotonic()
    p = srun("-N4", "--ntasks-per-node=2", "--mpi=pmix", LAUNCH, "--", "sh", "-c",
             'if [ "$RANK" = 3 ]; then sleep 1; exit 1; fi; sleep 120', timeout=100)
    elapsed = time.monotonic() - start
    assert p.returncode != 0
    assert "rank 3 on node2: program exited with code 1; ending the step" in p.stderr, p.stderr
    assert elapsed < 15, f"the step took {elapsed:.1f}s to end"


def test_slurm_signal_reaches_program_once(tmp_path):
    # scancel --signal=USR1: Slurm signals every process of the step (proctrack/linuxproc), so
    # the launcher must not forward it again.
    prog = ("import signal,time,os\nn=[0]\n"
            "signal.signal(signal.SIGUSR1,lambda *a: n.__setitem__(0,n[0]+1))\n"
            "print('READY',flush=True)\ntime.sleep(6)\n"
            "print('USR1',os.environ['RANK'],n[0],flush=True)")
    name = f"apl-usr1-{os.getpid()}"
    proc = subprocess.Popen(["srun", f"--job-name={name}", "-N2", "--ntasks-per-node=1",
                             "--mpi=pmix", LAUNCH, "--", PYTHON, "-S", "-c", prog],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    ready = 0
    while ready < 2:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        ready += line.startswith("READY")
    run(["scancel", "--signal=USR1", f"--name={name}"], check=True)
    out, err = proc.communicate(timeout=60)
    counts = re.findall(r"^USR1 (\d) (\d+)$", out, re.M)
    assert sorted(counts) == [("0", "1"), ("1", "1")], out + err


def test_c_api_broadcast_under_launcher():
    # libautopar's C API: the program is a second PMIx client of its rank.
    p = srun("-N4", "--ntasks-per-node=2", "--mpi=pmix", LAUNCH, "--", PROBE, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = re.findall(r"^probe (\d) 8 ([01]) ([0-3]) (node\d) bytes-ok$", p.stdout, re.M)
    assert sorted(int(l[0]) for l in lines) == list(range(8)), p.stdout + p.stderr


# --- without Slurm: the launcher run directly -------------------------------------------------

# Writes with os.write: a handler that print()s while the main thread is still inside its own
# print() (the parent may read READY and signal before that call returns) raises "reentrant call
# inside BufferedWriter" and ends the program.
SIG_PROG = ("import os,signal,sys,time\n"
            "signal.signal(signal.SIGUSR1,lambda *a: os.write(1,b'got USR1\\n'))\n"
            "signal.signal(signal.SIGTERM,lambda *a: (os.write(1,b'got TERM\\n'),sys.exit(7)))\n"
            "os.write(1,b'READY\\n')\ntime.sleep(30)")


def local_launch(*args):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PMIX_", "MASTER_"))}
    return subprocess.Popen([LAUNCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_signals_forwarded_and_exit_code():
    p = local_launch("--", PYTHON, "-S", "-c", SIG_PROG)
    assert p.stdout.readline().strip() == "READY"
    p.send_signal(signal.SIGUSR1)
    line = p.stdout.readline().strip()
    if line != "got USR1":  # say how the launcher ended
        p.kill()
        out, err = p.communicate(timeout=10)
        raise AssertionError(f"read {line!r} after SIGUSR1; the launcher ended with "
                             f"{p.returncode}; its stderr: {err!r}; stdout: {out!r}")
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=10)
    assert "got TERM" in out
    assert p.returncode == 7, err


def test_killed_program_exits_128_plus_signal():
    p = local_launch("--", "sh", "-c", "kill -SEGV $$")
    p.communicate(timeout=10)
    assert p.returncode == 128 + signal.SIGSEGV
