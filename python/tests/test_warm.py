"""The warm interpreter's bootstrap (autopar/_warm.py), run as autopar-launch runs it: `python -c
<its text> FD KIND TARGET`, "R" on FD once it has imported what the program imports, then the
program's environment as NUL-ended NAME=VALUE entries until the launcher closes its side
(launcher/prewarm.h; the launcher's own tests: launcher/prewarm_test.cpp)."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import autopar

WARM = Path(autopar.__file__).with_name("_warm.py").read_text()


def run_warm(program: Path, env: dict) -> str:
    """Starts a warm interpreter for `program`, waits until it is ready, activates it with `env`
    and returns the program's output."""
    ours, theirs = socket.socketpair()
    p = subprocess.Popen([sys.executable, "-c", WARM, str(theirs.fileno()), "script", str(program)],
                         pass_fds=[theirs.fileno()], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, cwd=program.parent)
    theirs.close()
    try:
        ours.settimeout(120)
        assert ours.recv(1) == b"R", "the warm interpreter never said it was ready"
        ours.sendall(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
        ours.close()
        out, _ = p.communicate(timeout=120)
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 0, out
    return out


def test_a_program_importing_torch_starts_with_torch_dynamo_imported(tmp_path):
    """torch 2.x imports torch._dynamo at a program's first optimizer (or DDP): a warm start has
    done it already, so that the restarted program does not spend that time after a failure."""
    program = tmp_path / "train.py"
    program.write_text("import sys\nimport os\nimport torch\n"
                       "print('dynamo', 'torch._dynamo' in sys.modules, os.environ['MARK'])\n"
                       "torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n")
    out = run_warm(program, {"MARK": "activated", "PATH": os.environ.get("PATH", "")})
    assert "dynamo True activated" in out, out


def test_a_program_without_torch_gets_no_torch(tmp_path):
    program = tmp_path / "plain.py"
    program.write_text("import sys\nimport json\n"
                       "print('torch', 'torch' in sys.modules, 'json' in sys.modules)\n")
    out = run_warm(program, {"PATH": os.environ.get("PATH", "")})
    assert "torch False True" in out, out
