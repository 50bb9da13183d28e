"""A private autopard for the checkpoint benchmarks: started with a config file, ready once its
socket exists."""
import subprocess
import time
from pathlib import Path


def start_autopard(binary: Path, conf: Path, sock: Path, log) -> subprocess.Popen:
    """autopard --config CONF, its output to `log`; returns once it listens on `sock` (10 s)."""
    d = subprocess.Popen([str(binary), "--config", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        if sock.exists():
            return d
        time.sleep(0.05)
    d.terminate()
    d.wait()
    raise RuntimeError(f"autopard ({binary}) did not listen on {sock} within 10 s")
