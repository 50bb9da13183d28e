#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment, offline (--no-index: the in-tree build
# backend needs nothing from an index), then the module is used from there: a local function job
# and `python -m autopar`; the installed version is the project's. Usage:
#   tests/python_venv_install.sh [PYTHON [VERSION]]
set -euo pipefail
repo=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
python=${1:-/opt/autopar-venv/bin/python3}
work=$(mktemp -d /tmp/autopar-venv-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/pip" install --no-index --quiet "$repo/python"
compgen -G "$work/venv/lib/python3*/site-packages/autopar/py.typed" >/dev/null  # typed (PEP 561)
compgen -G "$work/venv/lib/python3*/site-packages/autopar/ft/manager.py" >/dev/null  # with its subpackages
cd "$work"  # not the source tree: the installed module must be the one imported
"$work/venv/bin/python" - "$work/venv" <<'PY'
import sys
import autopar.jobs as jobs
assert jobs.__file__.startswith(sys.argv[1]), jobs.__file__
assert jobs.submit(sum, [1, 2, 3], local=True).result() == 6
try:
    jobs.sbatch_arguments(memory=64)
    raise SystemExit("memory=64 was accepted")
except ValueError as e:
    assert "memory: '64' has no unit" in str(e), e
print("venv install: ok,", jobs.__file__)
PY
if "$work/venv/bin/python" -m autopar 2>"$work/usage"; then exit 1; fi
grep -q "usage: python3 -m autopar run-function DIR" "$work/usage"
version=${2:-}
installed=$("$work/venv/bin/pip" show autopar | sed -n 's/^Version: //p')
[[ -z $version || $installed == "$version" ]] || {
  echo "python/pyproject.toml says version $installed, the project (CMakeLists.txt) $version" >&2
  exit 1
}
