"""Attack: run code as another user through the working directory of their job's warm interpreter.

With in-place restarts, autopar-launch prepares the next run of a Python program ahead of time: a
"warm" interpreter (`python -c BOOTSTRAP`) that imports what the program imports, then waits.
`python -c` puts its working directory first on sys.path, and the bootstrap imported socket, ast
and importlib's parts before it set the program's own path: a job started in a directory other
users can write (a shared, sticky scratch directory) ran the modules they planted there, as the
job's owner. The bootstrap now removes that entry before it imports anything and puts the
program's own directory first, as `python SCRIPT` does.

The second account plants socket.py, ast.py, runpy.py and importlib/ (each writes a marker) in a
sticky shared directory; a job of root's starts its program (a script elsewhere) there with
--restarts-in-place and --prewarm-after=1, so the warm interpreter is prepared while it runs.
What must hold: the program ends well, the warm interpreter was prepared, and no planted module
ran. About 10 s.
"""
import secrets
from pathlib import Path

from conftest import LAUNCH, PYTHON, SOURCE_DIR, as_user, need_binaries, run  # noqa: F401

PLANTED = ("socket", "ast", "runpy", "tokenize", "linecache")


def test_modules_planted_in_the_working_directory_never_run(tmp_path):
    need_binaries()
    shared = Path(f"/tmp/autopar-sec-cwd-{secrets.token_hex(4)}")
    as_user(["mkdir", "-m", "1777", shared], check=True)
    marker = shared / "ran"
    try:
        for name in PLANTED:
            as_user(["bash", "-c", f"printf '%s\\n' \"open('{marker}', 'a').write('{name} ')\" > {shared}/{name}.py"],
                    check=True)
        as_user(["mkdir", "-p", f"{shared}/importlib"], check=True)
        as_user(["bash", "-c", f"printf '%s\\n' \"open('{marker}', 'a').write('importlib ')\" > "
                              f"{shared}/importlib/__init__.py"], check=True)
        program = tmp_path / "train.py"
        program.write_text("import time, json\ntime.sleep(4)\nprint('TRAINED', flush=True)\n")
        tmp_path.chmod(0o755)
        p = run(["srun", "-N1", "-n1", "-w", "node1", "-t", "2", "--restarts-in-place=1",
                 f"--chdir={shared}", "--mpi=pmix", str(LAUNCH), "--prewarm-after=1", "--", PYTHON,
                 str(program)], timeout=90)
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "TRAINED" in out, out
        assert not marker.exists(), f"planted modules ran as root: {marker.read_text()}"
    finally:
        run(["rm", "-rf", str(shared)])
