"""Training health, plan against reality (first part), on the local cluster: the
deterministic DDP training of test_requeue_faults.py sends the step's samples and loss with each
heartbeat; rank 0's node journals "progress" windows (step time, throughput, MFU against the job's
plan; progress_interval_s = 2 on this cluster), and `autopar report` shows the plan against the
measured numbers, the same numbers the timeline has, and the recovery with its cost; its HTML page
(--html), rendered by a headless Chromium, has every plot drawn.

Needs the cluster as test_requeue_faults.py does, and Debian's chromium (scripts/install-deps.sh).
About 1 min.
"""
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

import pytest

from conftest import SOURCE_DIR, run, wait_job
from png_pixels import decode, pixels_near, shape
from test_requeue_faults import (CLI, events, kinds, rank_pid, sockets, submit, train_cmd,  # noqa: F401
                                 wait_step)


def report(job: str, *extra: str):
    return run([str(CLI), "report", job, "--socket", str(sockets()[0]), *extra], check=True).stdout


def series_colors() -> dict:
    """The plots' colours as report_html.h fixes them: {"kThroughput": "#1f77b4", ...}."""
    header = (SOURCE_DIR / "core" / "health" / "report_html.h").read_text()
    return dict(re.findall(r'(k\w+)\[\] = "(#[0-9a-f]{6})"', header))


def screenshot(page: Path, png: Path) -> Path:
    """The page as a 1200x1600 browser window shows it. Chromium's --headless is the new headless
    mode since 112 (the same renderer as a desktop window); --no-sandbox because the tests may run
    as root; a profile of its own so that nothing touches a user's browser."""
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.fail("chromium is not installed (scripts/install-deps.sh)")
    run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--force-device-scale-factor=1", f"--user-data-dir={png.parent / 'chromium-profile'}",
         f"--screenshot={png}", "--window-size=1200,1600", page.as_uri()], timeout=120, check=True)
    return png


def assert_plots_drawn(png: Path):
    """The three plots stacked as the page lays them out, each series in its colour where it
    belongs: a broken page (an unclosed tag, a NaN coordinate, a plot left out) fails here.
    Counts pixels near each exact colour, so anti-aliased edges do not matter."""
    image = decode(png)
    c = series_colors()
    thr, step, planned, loss, rec = (shape(pixels_near(image, c[k])) for k in (
        "kThroughput", "kStepTime", "kPlannedStep", "kLoss", "kRecovery"))
    shapes = dict(throughput=thr, step=step, planned=planned, loss=loss, recovery=rec)
    # Each measured series is a line across the job's windows (every column from its first
    # window to its last), not only the windows' dots.
    for s in (thr, step, loss):
        assert s.x_max - s.x_min >= 300 and s.columns >= 0.9 * (s.x_max - s.x_min + 1), shapes
    assert thr.y_median < step.y_median < loss.y_median, shapes  # throughput, step time, loss
    # The plan's step time: a dashed horizontal line across the step-time plot.
    assert planned.fullest_row[1] >= 300, shapes
    assert thr.y_max < planned.fullest_row[0] < loss.y_min, shapes
    # The recovery: one vertical marker through all three plots, between windows of the job.
    assert rec.fullest_column[1] >= 250 and rec.y_max - rec.y_min >= 500, shapes
    assert thr.x_min < rec.fullest_column[0] < thr.x_max, shapes


def test_report_has_the_plan_the_timelines_progress_and_the_recovery(tmp_path):
    # A small planned model (GPT-3 1.3B at 128 tokens: ~0.1 s per step planned), so that the toy
    # training (0.3 s of sleep per step) is slower than its plan and the measured MFU is a real
    # number rather than "faster than the planned model can run".
    work = tmp_path / "health"
    opts = ("--requeue-on-failure=3 --heartbeat-timeout=20 --auto-parallel --model=gpt3-1.3b "
            "--gpu-type=a100-80gb --global-batch=64 --seq-len=128")
    job = submit(work, opts=opts, program=train_cmd(work))
    wait_step(work, 0, 22)
    os.kill(rank_pid(job, 1), signal.SIGKILL)
    assert wait_job(job, timeout=300) == "COMPLETED", (work / "out.txt").read_text()[-3000:]
    evs = events(job, "finished", "first_step")
    progress = kinds(evs, "progress")
    assert len(progress) >= 4, progress
    submitted = kinds(evs, "submitted")[0]["fields"]
    r = json.loads(report(job, "--json"))
    # The plan, as the job was submitted with it.
    assert r["model"] == "gpt3-1.3b" and r["planned"]["step_s"] == float(submitted["step_s"]), r
    assert r["planned"]["step_s"] > 0.01, r["planned"]
    assert r["planned"]["mfu"] == float(submitted["mfu"]), r
    # Every window is the timeline's, and its numbers are consistent: 64 samples per step, the
    # MFU the plan's scaled by planned / measured step time.
    assert [(w["step"], w["step_s"], w["samples_per_s"], w["mfu"]) for w in r["progress"]] == \
        [(e["step"], float(e["fields"]["step_s"]), float(e["fields"]["samples_per_s"]),
          float(e["fields"]["mfu"])) for e in progress], (r["progress"], progress)
    planned_s, planned_mfu = r["planned"]["step_s"], r["planned"]["mfu"]
    for w in r["progress"]:
        assert abs(w["samples_per_s"] * w["step_s"] / 64 - 1) < 0.02, w
        assert abs(w["mfu"] / (planned_mfu * planned_s / w["step_s"]) - 1) < 0.02, w
        assert w["loss"] is not None and w["loss"] >= 0, w
    assert 0 < r["measured"]["mfu"] < planned_mfu, r["measured"]  # the toy is slower than planned
    # The recovery and what it cost: the first_step's time since the failure.
    first = kinds(evs, "first_step")[0]
    assert len(r["recoveries"]) == 1, r["recoveries"]
    rec = r["recoveries"][0]
    assert rec["class"] == "rank-crash" and rec["action"] == "restart-in-place", rec
    assert rec["lost_s"] == float(first["fields"]["since_failure_s"]), (rec, first)
    assert r["end"] == "finished exit=0", r
    text = report(job)
    assert f"job {job}: gpt3-1.3b (tp=" in text, text
    assert "planned:     " in text and "measured:    " in text and "windows)" in text, text
    assert "recoveries:  1 (1 in place, 0 requeued)" in text, text
    # The same report as one self-contained page: a point per window in each plot, the recovery
    # marked in each, nothing fetched from anywhere; then what a browser makes of it.
    page = tmp_path / "report.html"
    assert report(job, "--html", str(page)) == ""
    html = page.read_text()
    assert f"<h1>job {job}: gpt3-1.3b</h1>" in html, html[:2000]
    # Three plots, and the allocation's split: one bar for the job's one run (docs/goodput.md).
    assert html.count('<figure class="goodput-run">') == 1, html
    assert html.count("<svg") == html.count("</svg>") == 3 + 1, html
    for series in ("throughput", "step-time", "loss"):
        points = re.search(f'<polyline class="{series}"[^>]* points="([^"]*)"', html).group(1)
        assert len(points.split()) == len(r["progress"]), (series, points)
    assert html.count('class="recovery-marker"') == 3 and ">rank-crash</text>" in html, html
    assert re.findall(r"https?://[^\"]*", html) == ["http://www.w3.org/2000/svg"] * 3, html
    assert_plots_drawn(screenshot(page, tmp_path / "report.png"))
    # The same page on standard output, for the same timeline: a node's last events (its final
    # usage report) may still arrive while the two are made, and the page shows the latest time.
    for _ in range(20):
        before = len(events(job))
        assert report(job, "--html", str(page)) == ""
        html, out = page.read_text(), report(job, "--html", "-")
        if len(events(job)) == before:
            break
        time.sleep(0.5)
    assert out == html


def test_bad_progress_values_are_refused_with_one_line():
    env = dict(os.environ, SLURM_JOB_ID="1", RANK="0", AUTOPAR_SOCKET=str(sockets()[0]))
    for args, expected in ((["--loss", "abc"], "autopar heartbeat: --loss: invalid value 'abc'"),
                           (["--tokens", "-3"], "autopar heartbeat: --tokens: invalid value '-3'")):
        p = run([str(CLI), "heartbeat", "--step", "1", *args], env=env)
        assert p.returncode == 2 and p.stderr.startswith(expected) and \
            p.stderr.count("\n") == 1, (args, p.returncode, p.stderr)
