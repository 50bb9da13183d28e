"""The planner learns from a finished job (docs/planner.md "Calibration"), on the local
cluster: the toy training of test_health.py under a GPT-3 1.3B plan (slower than its plan, so its
measured MFU is a real number below the plan's) is calibrated into a site calibration file with
`autopar calibrate`; a second job submitted with `calibration=FILE` in the plugin's arguments gets
the calibrated plan (every time / the factor, the same layout), which names the source job.

The cluster keeps its own plugstack.conf: the second job is submitted with a copy of slurm.conf
and plugstack.conf (this build's plugin, calibration= added), and its batch script points srun at
that copy too, since slurmd sets SLURM_CONF in a batch job to the node's own. srun plans the step;
the nodes run it with their own configuration. Needs the cluster as test_requeue_faults.py does.
About 1 min.
"""
import json
import re
from pathlib import Path
import pytest

from conftest import BUILD_DIR, SOURCE_DIR, cluster_dir, run, sbatch, wait_job
from test_requeue_faults import CLI, LAUNCH, TRAIN, events, kinds, sockets, submit, train_cmd  # noqa: F401

PLAN_OPTS = ("--auto-parallel --model=gpt3-1.3b --gpu-type=a100-80gb --global-batch=64 "
             "--seq-len=128")
PLAN_ARGS = ["--model", "gpt3-1.3b", "--gpus", "4", "--gpus-per-node", "2", "--gpu-type",
             "a100-80gb", "--global-batch", "64", "--seq-len", "128"]


def calibrate(job: str, cal: Path, *extra: str):
    return run([str(CLI), "calibrate", job, "--file", str(cal), "--socket", str(sockets()[0]),
                *extra])


def plan_json(*extra: str) -> dict:
    return json.loads(run([str(CLI), "plan", *PLAN_ARGS, "--json", *extra], check=True).stdout)


def site_conf_with(tmp: Path, *args: str) -> Path:
    """A copy of the cluster's slurm.conf and plugstack.conf: this build's plugin with the
    cluster's arguments and `args`."""
    etc = cluster_dir() / "etc"
    conf = tmp / "slurm.conf"
    conf.write_text(re.sub(r"^PlugStackConfig=.*$", f"PlugStackConfig={tmp / 'plugstack.conf'}",
                           (etc / "slurm.conf").read_text(), flags=re.M))
    line = next(x for x in (etc / "plugstack.conf").read_text().splitlines()
                if x.startswith(("required", "optional")))
    kind, _plugin, *cluster_args = line.split()
    (tmp / "plugstack.conf").write_text(
        " ".join([kind, str(BUILD_DIR / "spank" / "autopar.so"), *cluster_args, *args]) + "\n")
    tmp.chmod(0o755)
    return conf


def test_a_job_calibrates_the_plans_of_later_jobs(tmp_path):
    # 1. The source job: the toy training (0.3 s per step) under a plan of ~0.12 s per step.
    work = tmp_path / "source"
    job = submit(work, opts=PLAN_OPTS, program=train_cmd(work))
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    evs = events(job, "finished", "progress")
    windows = [e for e in kinds(evs, "progress") if "mfu" in e["fields"]]
    report = json.loads(run([str(CLI), "report", job, "--json", "--socket", str(sockets()[0])],
                            check=True).stdout)
    planned, measured = report["planned"]["mfu"], report["measured"]["mfu"]
    assert len(windows) >= 5 and 0 < measured < planned, report

    # 2. Into a calibration file that has another GPU type already (kept). --gpu-type: the job's
    # (its submitted event does not name it).
    cal = tmp_path / "calibration.json"
    other = {"factor": 0.8, "job": "7", "model": "llama-2-7b", "windows": 9}
    cal.write_text(json.dumps({"gpus": {"h100-80gb": other}}))
    p = calibrate(job, cal, "--gpu-type", "a100")
    assert p.returncode == 0, p.stderr
    entry = json.loads(cal.read_text())["gpus"]["a100-80gb"]
    factor = entry["factor"]
    assert abs(factor / (measured / planned) - 1) < 1e-5 and 0 < factor < 1, (entry, report)
    assert entry["job"] == job and entry["model"] == "gpt3-1.3b", entry
    assert entry["layout"] == report["layout"] and entry["windows"] == len(windows), entry
    # The same numbers: the file has 6 significant digits, the report's JSON the rounded double.
    assert entry["planned_mfu"] == pytest.approx(planned, rel=1e-6), entry
    assert entry["measured_mfu"] == pytest.approx(measured, rel=1e-6), entry
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry["date"]), entry
    assert json.loads(cal.read_text())["gpus"]["h100-80gb"] == other
    assert p.stdout.startswith(f"a100-80gb: calibrated x{factor:.3g} from job {job} "), p.stdout
    assert not Path(f"{cal}.tmp").exists()

    # A refusal leaves the file as it was.
    before = cal.read_text()
    p = calibrate("999999", cal, "--gpu-type", "a100-80gb")
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "job 999999: " in p.stderr, p.stderr
    assert cal.read_text() == before

    # 3. `autopar plan --calibration`: every time / the factor, the same layout, named.
    raw, calibrated = plan_json(), plan_json("--calibration", str(cal))
    assert calibrated["calibration"] == {"factor": factor, "job": job}, calibrated
    assert "calibration" not in raw
    assert abs(calibrated["step_time_s"] * factor / raw["step_time_s"] - 1) < 1e-9
    assert abs(calibrated["mfu"] / factor / raw["mfu"] - 1) < 1e-9
    assert [raw[k] for k in ("tp", "pp", "dp", "micro_batch")] == \
        [calibrated[k] for k in ("tp", "pp", "dp", "micro_batch")]
    text = run([str(CLI), "plan", *PLAN_ARGS, "--calibration", str(cal)], check=True).stdout
    assert f"calibration: calibrated x{factor:.3g} from job {job} " in text, text

    # 4. A job submitted with calibration=FILE in the plugin's arguments is planned with it.
    conf = site_conf_with(tmp_path, f"calibration={cal}")
    work2 = tmp_path / "calibrated"
    work2.mkdir(mode=0o1777)
    work2.chmod(0o1777)
    script = f"""#!/bin/bash
#SBATCH -N2 --ntasks-per-node=2 -o {work2}/out.txt -e {work2}/out.txt
#SBATCH {PLAN_OPTS}
export PYTHONPATH={SOURCE_DIR}/python
export SLURM_CONF={conf}
srun --mpi=pmix {LAUNCH} -- /bin/sh -c 'printf "%s\\n" "$AUTOPAR_PLAN_JSON" > {work2}/plan-$RANK.json; exec {train_cmd(work2, steps=10)}'
"""
    job2 = sbatch(script, work2, env={"SLURM_CONF": str(conf)})
    assert wait_job(job2, timeout=300) == "COMPLETED", (work2 / "out.txt").read_text()[-3000:]
    out = (work2 / "out.txt").read_text()
    # srun's plan line names the calibration and its source job.
    assert re.search(rf"autopar: plan for gpt3-1\.3b on 4 GPUs: .* s/step "
                     rf"\(calibrated x{re.escape(f'{factor:.3g}')} from job {job}\)", out), out
    # The plan every task got is the calibrated one, and says so.
    # (a file per task: the lines of four tasks' shared output interleave once they are long)
    task_plans = [json.loads((work2 / f"plan-{r}.json").read_text()) for r in range(4)]
    for t in task_plans:
        assert t["step_time_s"] == calibrated["step_time_s"] and t["mfu"] == calibrated["mfu"], t
        assert t["calibration"] == {"factor": factor, "job": job}, t
    # The submitted event (rank 0's launcher, from that plan) has its step time and MFU.
    submitted = kinds(events(job2, "submitted"), "submitted")[0]["fields"]
    assert submitted["step_s"] == f"{calibrated['step_time_s']:.3f}", (submitted, calibrated)
    assert submitted["mfu"] == f"{calibrated['mfu']:.4f}", (submitted, calibrated)
    assert submitted["step_s"] != f"{raw['step_time_s']:.3f}", (submitted, raw)
