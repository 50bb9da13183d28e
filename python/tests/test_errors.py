"""autopar.errors: an uncaught exception of a program in a job goes to TORCHELASTIC_ERROR_FILE in
torchrun's format (what autopar-launch reads to tell an out-of-memory failure), the program's own
error still reaches stderr, an existing file (torchrun's @record) is kept, and nothing is written
outside a job."""
import json
import os
import subprocess
import sys
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]

PROGRAM = """
import autopar
raise MemoryError("tried to allocate 8 GiB")
"""


def run_program(**env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "AUTOPAR_", "TORCHELASTIC_"))}
    full.update({"PYTHONPATH": str(PYTHON_DIR), "AUTOPAR_STACKS": "0"})
    full.update(env)
    return subprocess.run([sys.executable, "-c", PROGRAM], env=full, capture_output=True, text=True,
                          timeout=60)


def test_an_uncaught_error_is_written_for_the_launcher(tmp_path):
    f = tmp_path / "error.json"
    p = run_program(SLURM_JOB_ID="7", TORCHELASTIC_ERROR_FILE=str(f))
    assert p.returncode == 1 and "MemoryError: tried to allocate 8 GiB" in p.stderr, p.stderr
    data = json.loads(f.read_text())
    assert data["message"]["message"] == "MemoryError: tried to allocate 8 GiB", data
    assert "line 3, in <module>" in data["message"]["extraInfo"]["py_callstack"], data
    assert list(tmp_path.iterdir()) == [f]  # written through a temporary file, renamed


def test_a_file_written_by_record_is_kept(tmp_path):
    f = tmp_path / "error.json"
    f.write_text('{"message": {"message": "written by @record"}}')
    run_program(SLURM_JOB_ID="7", TORCHELASTIC_ERROR_FILE=str(f))
    assert json.loads(f.read_text())["message"]["message"] == "written by @record"


def test_nothing_outside_a_job(tmp_path):
    f = tmp_path / "error.json"
    p = run_program(TORCHELASTIC_ERROR_FILE=str(f))
    assert p.returncode == 1 and "MemoryError" in p.stderr
    assert not f.exists()
