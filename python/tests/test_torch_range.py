"""The torch range autopar supports (autopar/_torch.py): pyproject.toml states the same one, and a
program under a torch outside it, or none, ends with one line naming both, not a traceback."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PYTHON_DIR))
from autopar import _torch  # noqa: E402


def test_pyproject_states_the_range_the_module_checks():
    text = (PYTHON_DIR / "pyproject.toml").read_text()
    assert re.search(r'^torch = \["torch' + re.escape(_torch.RANGE) + r'"\]$', text, re.M), _torch.RANGE


def test_versions_parse():
    assert _torch.parse("2.15.0+cu132") == (2, 15)
    assert _torch.parse("1.13.0a0+gitunknown") == (1, 13)
    with pytest.raises(ValueError):
        _torch.parse("nightly")


def fake_torch(tmp_path, version):
    pkg = tmp_path / "torch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    return tmp_path


@pytest.mark.parametrize("module", ["autopar.ft", "autopar.dcp"])
@pytest.mark.parametrize("version", ["1.13.0a0+gitunknown", "2.5.1", "3.0.0"])
def test_a_torch_outside_the_range_gets_one_line(tmp_path, module, version):
    env = {**os.environ, "PYTHONPATH": f"{fake_torch(tmp_path, version)}{os.pathsep}{PYTHON_DIR}"}
    p = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        f"autopar: {module} supports torch{_torch.RANGE}; this Python ({sys.executable}) has torch "
        f"{version} (pip install 'torch{_torch.RANGE}')"], p.stderr


def test_no_torch_at_all_gets_one_line(tmp_path):
    # A torch that cannot be imported (as in an environment without it): a package that raises.
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('No module named torch')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{PYTHON_DIR}"}
    p = subprocess.run([sys.executable, "-c", "import autopar.ft"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1
    assert len(p.stderr.splitlines()) == 1 and "autopar.ft needs PyTorch (torch>=2.6,<3)" in p.stderr, p.stderr


def test_the_installed_torch_is_in_the_range():
    import torch
    assert _torch.require("autopar.test") is torch
