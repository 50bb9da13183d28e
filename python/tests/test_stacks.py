"""autopar.stacks: the Python stack dump for hang reports is installed by default inside a job
(importing autopar), with an opt-out (AUTOPAR_STACKS=0), and nothing happens outside a job."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]

# Imports autopar the way a training program does, then asks for a dump as autopard would.
PROGRAM = """
import os, signal, time
from autopar import ckpt
def waiting_in_the_collective():
    os.kill(os.getpid(), signal.SIGUSR2)
    time.sleep(0.2)
waiting_in_the_collective()
print("alive")
"""


def run_program(tmp_path, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "AUTOPAR_"))}
    full.update({"PYTHONPATH": str(PYTHON_DIR), "AUTOPAR_STACK_DIR": str(tmp_path / "stacks"),
                 "RANK": "3"})
    full.update(env)
    return subprocess.run([sys.executable, "-c", PROGRAM], env=full, capture_output=True,
                          text=True, timeout=60)


def test_installed_by_default_in_a_job(tmp_path):
    p = run_program(tmp_path, SLURM_JOB_ID="77")
    assert p.returncode == 0 and "alive" in p.stdout, p.stderr
    dump = (tmp_path / "stacks" / "stack-rank3.txt").read_text()
    assert "waiting_in_the_collective" in dump, dump


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_opt_out(tmp_path, value):
    p = run_program(tmp_path, SLURM_JOB_ID="77", AUTOPAR_STACKS=value)
    # Without the handler SIGUSR2 ends the process (its default action): nothing was installed.
    assert p.returncode == -signal.SIGUSR2 and not (tmp_path / "stacks").exists(), (p.returncode, p.stderr)


def test_not_installed_outside_a_job(tmp_path):
    p = run_program(tmp_path)
    assert p.returncode == -signal.SIGUSR2 and not (tmp_path / "stacks").exists(), (p.returncode, p.stderr)


def test_an_unwritable_directory_does_not_stop_the_program(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code = "import autopar; print('alive')"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "AUTOPAR_"))}
    env.update({"PYTHONPATH": str(PYTHON_DIR), "SLURM_JOB_ID": "77",
                "AUTOPAR_STACK_DIR": str(blocker / "sub")})
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "alive" in p.stdout, p.stderr
    assert p.stderr.count("stack dumps for hang reports are off") == 1, p.stderr


def test_never_dumps_through_a_symlink_or_into_another_users_directory(tmp_path):
    # The dump file swapped for a symlink (another user made it first, in the shared /tmp):
    # nothing is written through it, and the program still runs (without stack dumps).
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "stack-rank3.txt").symlink_to(target)
    p = run_program(tmp_path, SLURM_JOB_ID="77")
    assert "stack dumps for hang reports are off" in p.stderr, p.stderr
    assert target.read_text() == ""
    # A job directory that is a symlink is refused as well.
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "linked")
    p = run_program(tmp_path, SLURM_JOB_ID="77", AUTOPAR_STACK_DIR=str(tmp_path / "linked"))
    assert "stack dumps for hang reports are off" in p.stderr, p.stderr
    assert not list((tmp_path / "real").iterdir())
