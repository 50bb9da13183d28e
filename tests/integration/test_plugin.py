"""The SPANK plugin end to end on the local 4-node cluster: options from #SBATCH lines, sbatch,
salloc and srun; --help; every bad input refused at submit time with nothing queued; the site's
plugstack.conf arguments; the torchrun environment in every task; plain `srun python` DDP."""
import re
from pathlib import Path

import pytest

from conftest import (PYTHON, SOURCE_DIR, env_lines, job_ids, restart_node, run, sbatch, slurm_conf,
                      wait_job)

OPTIONS = ["--auto-parallel", "--model", "--gpu-type", "--global-batch", "--seq-len", "--ckpt-dir",
           "--ckpt-upload", "--ckpt-keep", "--requeue-on-failure", "--heartbeat-timeout",
           "--restarts-in-place", "--spare-nodes"]

PRINT_ENV = ("echo ENV node=$SLURMD_NODENAME rank=$RANK local_rank=$LOCAL_RANK world=$WORLD_SIZE "
             "local_world=$LOCAL_WORLD_SIZE group_rank=$GROUP_RANK master=$MASTER_ADDR:$MASTER_PORT "
             "model=${AUTOPAR_MODEL:-} ckpt_dir=${AUTOPAR_CKPT_DIR:-} keep=${AUTOPAR_CKPT_KEEP:-} "
             "upload=${AUTOPAR_CKPT_UPLOAD:-} requeue=${AUTOPAR_REQUEUE_ON_FAILURE:-} "
             "hb=${AUTOPAR_HEARTBEAT_TIMEOUT:-} ap=${AUTOPAR_AUTO_PARALLEL:-} "
             "inplace=${AUTOPAR_RESTARTS_IN_PLACE:-} "
             "gpu=${AUTOPAR_GPU_TYPE:-} gb=${AUTOPAR_GLOBAL_BATCH:-} seq=${AUTOPAR_SEQ_LEN:-} "
             "sock=${AUTOPAR_SOCKET:-} nccl_if=${NCCL_SOCKET_IFNAME:-} procid=$SLURM_PROCID "
             "localid=$SLURM_LOCALID nodeid=$SLURM_NODEID")


def check_torchrun_env(rows, nodes, per_node):
    """Every task of a step sees a consistent, correct torchrun environment."""
    world = nodes * per_node
    assert len(rows) == world, rows
    assert sorted(int(r["rank"]) for r in rows) == list(range(world))
    assert {r["master"] for r in rows} == {rows[0]["master"]}, "one MASTER_ADDR:PORT"
    master_host, master_port = rows[0]["master"].split(":")
    # The step's first node (rank 0's): node1 unless another test's job holds it (ctest -j2).
    first_node = next(r["node"] for r in rows if r["rank"] == "0")
    assert master_host == first_node and 1024 <= int(master_port) < 65536, (master_host, rows)
    by_node = {}
    for r in rows:
        assert r["rank"] == r["procid"] and r["local_rank"] == r["localid"]
        assert r["world"] == str(world) and r["local_world"] == str(per_node)
        assert r["group_rank"] == r["nodeid"]
        by_node.setdefault(r["node"], []).append(r)
    assert len(by_node) == nodes
    for node, tasks in by_node.items():
        assert sorted(int(t["local_rank"]) for t in tasks) == list(range(per_node)), node
        assert len({t["group_rank"] for t in tasks}) == 1
        assert all(t["sock"].endswith(f"autopard-{node}.sock") for t in tasks), tasks
    assert sorted(int(t[0]["group_rank"]) for t in by_node.values()) == list(range(nodes))


@pytest.mark.parametrize("tool", ["sbatch", "salloc", "srun"])
def test_help_lists_every_option(tool):
    p = run([tool, "--help"], check=True)
    for opt in OPTIONS:
        assert opt in p.stdout, f"{opt} missing from {tool} --help"


def test_sbatch_lines_reach_every_step_and_task(tmp_path):
    script = f"""#!/bin/bash
#SBATCH -N 4 --ntasks-per-node=2
#SBATCH --model=llama-2-7b
#SBATCH --gpu-type=a100-80gb
#SBATCH --global-batch=256 --seq-len=2048
#SBATCH --ckpt-dir=/tmp/autopar-it/%u/%j/%n
#SBATCH --ckpt-upload=file:///tmp/autopar-it-store
#SBATCH --ckpt-keep=3
#SBATCH --requeue-on-failure
#SBATCH --heartbeat-timeout=120
#SBATCH --auto-parallel=tp=2,pp=2
#SBATCH -o out.txt
srun bash -c '{PRINT_ENV}'
srun -N2 -n4 --ckpt-keep=5 bash -c '[ $RANK = 0 ] && echo ENV2 keep=$AUTOPAR_CKPT_KEEP model=$AUTOPAR_MODEL dp=$AUTOPAR_DP; true'
"""
    jid = sbatch(script, tmp_path)
    assert wait_job(jid) == "COMPLETED"
    out = (tmp_path / "out.txt").read_text()
    rows = env_lines(out)
    check_torchrun_env(rows, nodes=4, per_node=2)
    for r in rows:
        assert r["model"] == "llama-2-7b" and r["gpu"] == "a100-80gb"
        assert r["gb"] == "256" and r["seq"] == "2048" and r["ap"] == "tp=2,pp=2"
        assert r["ckpt_dir"] == f"/tmp/autopar-it/root/{jid}/{r['node']}"
        assert r["upload"] == "file:///tmp/autopar-it-store" and r["keep"] == "3"
        assert r["requeue"] == "3"  # a bare --requeue-on-failure: the site's default count
        assert r["inplace"] == "3"  # ... which restarts in place first (restarts_in_place_default)
        assert r["hb"] == "120"
    # A later step of the same job gets the job's options, and its own srun option wins.
    assert env_lines(out, "ENV2") == [{"keep": "5", "model": "llama-2-7b", "dp": "1"}]


def test_salloc_options_reach_its_steps():
    p = run(["salloc", "-N2", "--ntasks-per-node=1", "--model=7B", "--requeue-on-failure=2",
             "srun", "bash", "-c", PRINT_ENV], check=True)
    rows = env_lines(p.stdout)
    check_torchrun_env(rows, nodes=2, per_node=1)
    assert {(r["model"], r["requeue"]) for r in rows} == {("7B", "2")}


def test_srun_flags_four_nodes_two_tasks_each():
    p = run(["srun", "-N4", "--ntasks-per-node=2", "--ckpt-upload=s3://autopar-test/run1",
             "--ckpt-keep=2", "--heartbeat-timeout=30", "bash", "-c", PRINT_ENV], check=True)
    rows = env_lines(p.stdout)
    check_torchrun_env(rows, nodes=4, per_node=2)
    for r in rows:
        assert r["upload"] == "s3://autopar-test/run1" and r["keep"] == "2" and r["hb"] == "30"
        # --ckpt-upload without --ckpt-dir: the site's built-in node-local directory
        assert r["ckpt_dir"].startswith("/tmp/autopar/root/")


def test_the_users_own_torchrun_values_win_and_autopars_own_are_replaced(tmp_path):
    # Values the user exported (in the submitting shell, in the batch script) are kept; those the
    # plugin set in the batch step are replaced in the job's srun steps with each task's own.
    p = run(["srun", "-N2", "--ntasks-per-node=1", "--model=7B", "bash", "-c", PRINT_ENV],
            env={"MASTER_PORT": "23456"}, check=True)
    rows = env_lines(p.stdout)
    assert {r["master"].split(":")[1] for r in rows} == {"23456"}, rows
    assert sorted(r["rank"] for r in rows) == ["0", "1"] and {r["world"] for r in rows} == {"2"}
    script = f"""#!/bin/bash
#SBATCH -N2 --ntasks-per-node=2 --model=7B -o out.txt
echo BATCH rank=$RANK world=$WORLD_SIZE
export MASTER_ADDR=my-own-host
srun bash -c '{PRINT_ENV}'
"""
    jid = sbatch(script, tmp_path)
    assert wait_job(jid) == "COMPLETED"
    out = (tmp_path / "out.txt").read_text()
    assert [r["rank"] for r in env_lines(out, "BATCH")] == ["0"]
    rows = env_lines(out)
    assert {r["master"].split(":")[0] for r in rows} == {"my-own-host"}, rows
    assert sorted(int(r["rank"]) for r in rows) == [0, 1, 2, 3] and {r["world"] for r in rows} == {"4"}


def test_concurrent_steps_of_one_job_get_distinct_ports(tmp_path):
    script = f"""#!/bin/bash
#SBATCH -N2 --ntasks-per-node=1 --model=7B -o out.txt
for s in 1 2 3; do
  srun -N1 -n1 --exact bash -c 'echo PORT port=$MASTER_PORT step=$SLURM_STEP_ID' &
done
wait
"""
    jid = sbatch(script, tmp_path)
    assert wait_job(jid) == "COMPLETED"
    rows = env_lines((tmp_path / "out.txt").read_text(), "PORT")
    assert len(rows) == 3 and len({r["step"] for r in rows}) == 3, rows
    assert len({r["port"] for r in rows}) == 3, rows


VOLATILE = {"SLURM_JOBID", "SLURM_JOB_ID", "SLURM_SRUN_COMM_PORT", "SLURM_STEP_LAUNCHER_PORT",
            "SLURM_TASK_PID", "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME", "SLURM_STEP_ID",
            "SLURM_STEPID", "SLURM_SUBMIT_DIR", "PWD", "OLDPWD", "SHLVL", "_"}


def task_envs(work: Path, jid: str, tag: str) -> dict:
    """The `env` each task of job `jid` wrote to WORK/JID-TAG-PROCID.env, less what differs from
    one job to the next: {procid: {name: value}}."""
    out = {}
    for f in sorted(work.glob(f"{jid}-{tag}-*.env")):
        env = dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line)
        out[f.stem.rsplit("-", 1)[1]] = {k: v for k, v in env.items() if k not in VOLATILE}
    return out


def env_differences(a: dict, a_job: str, b: dict, b_job: str) -> dict:
    """The variables of two jobs' tasks whose values differ, both as they are and with each job's
    id as JOB (a number of its own: "27" of a job, not of 127.0.0.1). A value that differs only by
    the job id is the same; one that equals the job id by chance (PIP_DEFAULT_TIMEOUT=180 in job
    180, SLURM_WORKING_CLUSTER's ':109' in job 109) is not made different."""
    def as_job(value, job):
        return None if value is None else re.sub(rf"(?<![0-9]){job}(?![0-9])", "JOB", value)
    return {k: (a.get(k), b.get(k)) for k in a.keys() | b.keys()
            if a.get(k) != b.get(k) and as_job(a.get(k), a_job) != as_job(b.get(k), b_job)}


def test_a_job_without_autopars_options_sees_no_change_from_the_plugin(cluster_plugstack, tmp_path):
    """Every variable of a plain job's tasks (a batch script and an srun step of 2 nodes x 2 tasks)
    is the same with the plugin in the cluster's plugstack.conf as without it (the default
    torchrun_env=autopar); with torchrun_env=all the tasks get torchrun's variables, and a plain
    srun python DDP run trains like one process."""
    write, _ = cluster_plugstack
    dump = f"bash -c 'env > {tmp_path}/$SLURM_JOB_ID-$0-$SLURM_PROCID.env'"
    script = f"""#!/bin/bash
#SBATCH -N2 -w node[1-2] --ntasks-per-node=2 -o /dev/null
{dump} batch
srun {dump} step
"""

    jobs = []

    def one_job():
        jid = sbatch(script, tmp_path)
        jobs.append(jid)
        assert wait_job(jid) == "COMPLETED"
        return task_envs(tmp_path, jid, "batch"), task_envs(tmp_path, jid, "step")

    with_plugin = one_job()
    write(None, {})  # no autopar line at all
    without = one_job()
    assert len(with_plugin[1]) == 4
    for kind, a, b in (("batch", with_plugin[0], without[0]), ("step", with_plugin[1], without[1])):
        for task in a.keys() | b.keys():
            differ = env_differences(a.get(task, {}), jobs[0], b.get(task, {}), jobs[1])
            assert not differ, f"{kind} task {task}: (with, without) the plugin: {differ}"
    assert "RANK" not in with_plugin[1]["0"] and "AUTOPAR_SOCKET" not in with_plugin[1]["0"]
    write("required", {}, extra=["torchrun_env=all"])
    _, step = one_job()
    assert {p: (e["RANK"], e["WORLD_SIZE"]) for p, e in step.items()} == \
        {"0": ("0", "4"), "1": ("1", "4"), "2": ("2", "4"), "3": ("3", "4")}
    autopar_vars = lambda env: {k for k in env if k.startswith("AUTOPAR_")}  # noqa: E731
    assert autopar_vars(step["0"]) == autopar_vars(without[1]["0"]) | {"AUTOPAR_TORCHRUN_ENV"}
    train = SOURCE_DIR / "etc" / "examples" / "train_ddp.py"
    p = run(["srun", "-N4", "--ntasks-per-node=2", PYTHON, str(train), "--steps", "20"],
            timeout=240, check=True)
    dist = re.search(r"final loss (\S+)", p.stdout).group(1)
    single = run([PYTHON, str(train), "--steps", "20"], timeout=240, check=True,
                 env={"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                      "MASTER_PORT": "29399"})
    assert re.search(r"final loss (\S+)", single.stdout).group(1) == dist
    assert "train: 8 ranks on 4 nodes, master node1:" in p.stdout


def test_site_nccl_default_and_the_users_own_value_wins():
    p = run(["srun", "-N1", "-n1", "--model=7B", "bash", "-c", PRINT_ENV], check=True)
    assert env_lines(p.stdout)[0]["nccl_if"] == "lo"  # nccl_env=NCCL_SOCKET_IFNAME=lo (test cluster)
    p = run(["srun", "-N1", "-n1", "--model=7B", "bash", "-c", PRINT_ENV],
            env={"NCCL_SOCKET_IFNAME": "mine"}, check=True)
    assert env_lines(p.stdout)[0]["nccl_if"] == "mine"


BAD_INPUTS = [
    (["--ckpt-keep=-2", "--ckpt-dir=/tmp/x"], "--ckpt-keep: must be an integer in [1, 100], got '-2'"),
    (["--ckpt-keep=3"], "--ckpt-keep: needs --ckpt-dir or --ckpt-upload"),
    (["--model=banana"], "--model: unknown model 'banana'"),
    (["--gpu-type=tpu"], "--gpu-type: unknown GPU type 'tpu'"),
    (["--ckpt-upload=http://host/x"], "--ckpt-upload: unsupported scheme 'http'"),
    (["--ckpt-upload=s3://No_Such/x"], "--ckpt-upload: invalid bucket name 'No_Such'"),
    (["--ckpt-upload=s3://bkt/x//y"], "--ckpt-upload: invalid key prefix (empty path segment)"),
    (["--ckpt-dir=relative"], "--ckpt-dir: must be an absolute path"),
    (["--requeue-on-failure=99"], "--requeue-on-failure: must be an integer in [0, 5], got '99'"),
    (["--heartbeat-timeout=0"], "--heartbeat-timeout: must be an integer in"),
    (["--restarts-in-place=21"], "--restarts-in-place: must be an integer in [0, 20], got '21'"),
    (["--restarts-in-place=-1"], "--restarts-in-place: must be an integer in [0, 20], got '-1'"),
    (["--spare-nodes=5", "--requeue-on-failure"], "--spare-nodes: must be an integer in [0, 4], got '5'"),
    (["--spare-nodes=one"], "--spare-nodes: must be an integer in [0, 4], got 'one'"),
    (["--spare-nodes=1"], "--spare-nodes: needs in-place restarts (--restarts-in-place=N or --requeue-on-failure)"),
    (["--spare-nodes=1", "--restarts-in-place=0"], "--spare-nodes: needs in-place restarts"),
    (["--global-batch=many"], "--global-batch: must be an integer"),
    (["--seq-len=0"], "--seq-len: must be an integer"),
    (["--auto-parallel=tp=3,zz=1", "--model=7B"], "--auto-parallel: unknown key 'zz'"),
    (["--auto-parallel"], "--auto-parallel: needs --model"),
    # Per-step fault tolerance heals and averages only a state every rank holds whole (docs/ft.md).
    (["--fault-tolerance=step", "--requeue-on-failure=2", "--auto-parallel=tp=2", "--model=7B",
      "--gpu-type=a100-80gb", "--global-batch=8"],
     "--fault-tolerance: step heals only a state every rank holds whole, and --auto-parallel=tp=2 "
     "shards it"),
]


@pytest.mark.parametrize("tool", ["sbatch", "salloc", "srun"])
@pytest.mark.parametrize("args,message", BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_refused_at_submit_time(tool, args, message):
    before = job_ids()
    cmd = {"sbatch": ["sbatch", *args, "--wrap", "true"],
           "salloc": ["salloc", "-N1", *args, "true"],
           "srun": ["srun", "-N1", *args, "true"]}[tool]
    p = run(cmd, timeout=60)
    assert p.returncode != 0
    ours = [l for l in p.stderr.splitlines() if "autopar:" in l]
    assert len(ours) == 1, p.stderr  # one line of ours, naming the option and the reason
    assert message in ours[0], p.stderr
    assert not job_ids() - before, "a refused submission must not create a job"


def test_a_step_needs_more_nodes_than_its_spares():
    """srun knows the step's nodes: all of them held in reserve leaves none to run on."""
    p = run(["srun", "-N1", "--spare-nodes=1", "--requeue-on-failure", "true"], timeout=60)
    assert p.returncode != 0
    ours = [l for l in p.stderr.splitlines() if "autopar:" in l]
    assert len(ours) == 1 and "--spare-nodes=1: the step has 1 node(s); it needs at least 2" in ours[0], \
        p.stderr


@pytest.mark.parametrize("option", ["--spare-nodes=1", "--min-nodes=1"])
def test_spare_nodes_or_a_floor_ask_slurm_to_keep_the_job_when_a_node_fails(tmp_path, option):
    """--spare-nodes or --min-nodes (elastic) from the command line or an #SBATCH line makes the job
    --no-kill (sbatch reads SBATCH_NO_KILL, which the plugin sets before sbatch reads its
    environment) and its steps too (SLURM_NO_KILL in the batch script). test_recover_in_place.py
    and test_elastic.py kill a node to prove it."""
    script = tmp_path / "spare.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH {option} --requeue-on-failure\n"
                      f"#SBATCH -N2 -o {tmp_path}/line.txt\n"
                      "echo sbatch=${SBATCH_NO_KILL:-} srun=${SLURM_NO_KILL:-}\n")
    tmp_path.chmod(0o1777)
    jobs = [sbatch(script.read_text(), tmp_path),
            sbatch(f"#!/bin/bash\n#SBATCH -N2 -o {tmp_path}/cli.txt\n"
                   "echo sbatch=${SBATCH_NO_KILL:-} srun=${SLURM_NO_KILL:-}\n", tmp_path,
                   option, "--requeue-on-failure")]
    for job in jobs:
        assert wait_job(job, timeout=60) == "COMPLETED"
    for name in ("line.txt", "cli.txt"):
        assert (tmp_path / name).read_text().strip() == "sbatch=set srun=set", name


def test_bad_sbatch_line_in_a_script_is_refused(tmp_path):
    before = job_ids()
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/bash\n#SBATCH --ckpt-keep=0\n#SBATCH --ckpt-dir=/tmp/x\ntrue\n")
    p = run(["sbatch", str(script)])
    assert p.returncode != 0 and "autopar: --ckpt-keep: must be an integer" in p.stderr
    assert not job_ids() - before


def with_plugstack(tmp_path: Path, args: str) -> dict:
    """An env whose SLURM_CONF is a copy of the cluster's with other plugin arguments."""
    conf = slurm_conf().read_text()
    plugstack = Path(re.search(r"^PlugStackConfig=(\S+)", conf, re.M).group(1))
    line = next(l for l in plugstack.read_text().splitlines() if "autopar" in l and not l.startswith("#"))
    kind, path = line.split()[:2]
    (tmp_path / "plugstack.conf").write_text(f"{kind} {path} {args}\n")
    conf = re.sub(r"^PlugStackConfig=\S+", f"PlugStackConfig={tmp_path}/plugstack.conf", conf,
                  flags=re.M)
    (tmp_path / "slurm.conf").write_text(conf)
    return {"SLURM_CONF": str(tmp_path / "slurm.conf")}


def test_site_limits_and_allowed_destinations(tmp_path):
    env = with_plugstack(tmp_path, "max_requeue=1 max_restarts_in_place=2 ckpt_upload_schemes=s3 "
                                   "ckpt_upload_prefixes=s3://team-a/ default_model=llama-2-13b")
    before = job_ids()
    for args, message in [
        (["--requeue-on-failure=2"], "--requeue-on-failure: must be an integer in [0, 1], got '2'"),
        (["--restarts-in-place=3"], "--restarts-in-place: must be an integer in [0, 2], got '3'"),
        (["--ckpt-upload=s3://team-b/x"], "--ckpt-upload: 's3://team-b/x' is outside what this site allows"),
        (["--ckpt-upload=file:///tmp/x"], "--ckpt-upload: scheme 'file' is not allowed on this site"),
    ]:
        p = run(["sbatch", *args, "--wrap", "true"], env=env)
        assert p.returncode != 0 and message in p.stderr, p.stderr
    assert not job_ids() - before
    # Allowed by the submit host's limits. (The tasks run with the nodes' own plugstack.conf, which
    # here is the cluster's: sites keep the file identical everywhere.)
    p = run(["srun", "-N1", "--ckpt-upload=s3://team-a/run", "bash", "-c", PRINT_ENV], env=env,
            check=True)
    assert env_lines(p.stdout)[0]["upload"] == "s3://team-a/run"


@pytest.mark.parametrize("args,message", [
    ("colour=blue", "autopar: plugstack.conf: colour: unknown argument"),
    ("max_requeue=lots", "autopar: plugstack.conf: max_requeue: must be an integer"),
    ("max_restarts_in_place=-1", "autopar: plugstack.conf: max_restarts_in_place: must be an integer"),
    ("socket=relative", "autopar: plugstack.conf: socket: must be an absolute path"),
    ("default_model=banana", "autopar: plugstack.conf: default_model: --model: unknown model"),
])
def test_bad_plugstack_argument_is_one_clear_error(tmp_path, args, message):
    """A broken line refuses every job that gives one of autopar's options, with one line naming
    the option and the argument, and queues nothing; a job that gives none is submitted (the line
    is told at load all the same)."""
    env = with_plugstack(tmp_path, args)
    before = job_ids()
    p = run(["sbatch", "--ckpt-keep=2", "--wrap", "true"], env=env)
    assert p.returncode != 0
    ours = [l for l in p.stderr.splitlines() if "autopar:" in l and "refused" in l]
    assert len(ours) == 1 and "autopar: --ckpt-keep refused: " + message[len("autopar: "):] in ours[0], \
        p.stderr
    assert not job_ids() - before
    plain = run(["sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true"], env=env)
    assert plain.returncode == 0, plain.stderr
    told = [l for l in plain.stderr.splitlines() if "autopar:" in l]
    assert len(told) == 1 and message in told[0] and "check-plugstack" in told[0], plain.stderr
    assert wait_job(plain.stdout.strip().split(";")[0]) == "COMPLETED"


def test_stale_autopar_values_from_the_submit_shell_are_removed():
    p = run(["srun", "-N1", "-n1", "--model=7B", "bash", "-c",
             "echo STALE upload=${AUTOPAR_CKPT_UPLOAD:-unset} plan=${AUTOPAR_PLAN_JSON:-unset} "
             "model=$AUTOPAR_MODEL"],
            env={"AUTOPAR_CKPT_UPLOAD": "s3://old-job/x", "AUTOPAR_PLAN_JSON": "{}"}, check=True)
    assert env_lines(p.stdout, "STALE") == [{"upload": "unset", "plan": "unset", "model": "7B"}]


@pytest.mark.parametrize("kind", ["required", "optional"])
def test_a_typo_in_the_clusters_line_stops_only_jobs_that_use_autopar(cluster_plugstack, kind):
    """The site misspells one argument of the line every node and submit host reads (the
    issue's case: max_requeue), with `required` and with `optional`: slurmd restarted with it
    comes back, a step and a batch job without autopar's options run and complete, a job that
    gives one is refused at submit with one line naming the option and the argument (nothing
    queued), and the nodes' slurmd log tells the line."""
    write, args = cluster_plugstack
    typo = next(a for a in args if a.startswith("max_requeue="))
    write(kind, {typo: typo.replace("max_requeue=", "max_requeu=")})
    restart_node("node4")  # slurmd starts with the broken line
    step = run(["srun", "-N1", "-w", "node4", "bash", "-c", "echo STEP ok=1"], timeout=60)
    assert step.returncode == 0 and env_lines(step.stdout, "STEP") == [{"ok": "1"}], step.stderr
    told = [l for l in step.stderr.splitlines() if "autopar:" in l]
    assert len(told) == 1 and "max_requeu: unknown argument (did you mean max_requeue?)" in told[0], \
        step.stderr
    batch = run(["sbatch", "--parsable", "-w", "node4", "-o", "/dev/null", "--wrap", "srun true"])
    assert batch.returncode == 0, batch.stderr
    assert wait_job(batch.stdout.strip().split(";")[0]) == "COMPLETED"
    before = job_ids()
    refused = run(["sbatch", "--requeue-on-failure=2", "--wrap", "true"])
    ours = [l for l in refused.stderr.splitlines() if "autopar:" in l]
    assert refused.returncode != 0 and len(ours) == 1, refused.stderr
    assert "--requeue-on-failure refused: plugstack.conf: max_requeu: unknown argument" in ours[0]
    assert not job_ids() - before
    log = (slurm_conf().parent.parent / "log" / "slurmd-node4.log").read_text()
    assert "autopar: plugstack.conf: max_requeu: unknown argument" in log
