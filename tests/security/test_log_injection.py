"""Attack: forge autopard's log, or drive an admin's terminal, through a checkpoint's file name.

A job names its checkpoint files, and autopard quotes them in its errors: in its log (under
systemd, a line that starts with "<0>" is an emergency-priority entry), in its replies, which the
program prints into the job's output, and in `autopar ckpt status`. A name with a newline, an
escape sequence or an 8-bit CSI (U+009B) is refused at commit, and the refusal quotes it escaped
(\\xNN); autopard's log escapes every control character of every message (service/autopard's
log_test: a message quoting such a name is one line), and the CLI every field a job chose.

The second account runs a one-task step on node1 that writes its step 1 with one file whose name
holds a newline, a forged log line and an OSC escape sequence, and commits it; then one with an
8-bit CSI. What must hold: both commits are refused with the name escaped (no raw control
character in what the program received), no line of node1's autopard log starts with the forged
text, no raw ESC or BEL is in the log, and `autopar ckpt status` (the user's and root's) prints
none. About 2 s.
"""
import json
import os
import re
import time

from conftest import (CLI, PYTHON, SOURCE_DIR, as_user, cluster_dir, need_binaries, node_socket,  # noqa: F401
                      run, user_dir, user_ids)

FORGED = "autopard: error: node1 compromised, wipe it"
WRITE = f"""
import json, os, sys
os.environ["AUTOPAR_STACKS"] = "0"
from autopar import ckpt
d = ckpt.step_dir(1)
print("JOB", os.environ["SLURM_JOB_ID"], flush=True)
for name in ("model.bin\\n{FORGED}\\x1b]0;owned\\x07", "model.bin\\u009b31m"):
    with open(os.path.join(d, name), "wb") as f:
        f.write(b"x" * 1000)
    try:
        ckpt.commit(1)
        print("COMMITTED", flush=True)
    except ckpt.AutoparError as e:
        print("REFUSED " + json.dumps(str(e)), flush=True)
    os.unlink(os.path.join(d, name))
"""


def test_a_file_name_cannot_forge_a_log_line_or_drive_a_terminal(user_dir):
    need_binaries()
    uid, gid = user_ids()
    store = user_dir / "store"
    store.mkdir()
    os.chown(store, uid, gid)
    log = cluster_dir() / "log" / "autopard-node1.log"
    start = log.stat().st_size
    p = as_user(["srun", "-N1", "-n1", "-w", "node1", "-t", "2", f"--ckpt-dir={user_dir}/ck/%j",
                 f"--ckpt-upload=file://{store}", PYTHON, "-c", WRITE], cwd=user_dir, timeout=90)
    out = p.stdout + p.stderr
    job = re.search(r"^JOB (\d+)$", out, re.M)
    assert job and p.returncode == 0, out
    job = job.group(1)
    refusals = [json.loads(m) for m in re.findall(r"^REFUSED (.*)$", out, re.M)]
    assert len(refusals) == 2 and "COMMITTED" not in out, out
    for r in refusals:
        assert "control character" in r and not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in r), r
    assert "model.bin\\x0a" + FORGED + "\\x1b]0;owned\\x07" in refusals[0], refusals[0]
    time.sleep(1)
    with open(log, "rb") as f:
        f.seek(start)
        written = f.read()
    assert not any(line.startswith(FORGED.encode()) or line.startswith(b"<0>")
                   for line in written.split(b"\n")), written[-2000:]
    assert b"\x1b" not in written and b"\x07" not in written and b"\xc2\x9b" not in written, written[-2000:]
    for status in (as_user([CLI, "ckpt", "status", "--job", job, "--socket", node_socket("node1")]),
                   run([str(CLI), "ckpt", "status", "--job", job, "--socket", str(node_socket("node1"))])):
        text = status.stdout + status.stderr
        assert "\x1b" not in text and "\x07" not in text and f"\n{FORGED}" not in text, text
