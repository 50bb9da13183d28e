"""tests/integration/conftest.py's helpers (run, sbatch, wait_job, rank_pid, ...) for the other
test folders on the cluster (tests/security, tests/ecosystem), loaded once under a name of its own:
each folder has a conftest.py, and none may shadow another's."""
import importlib.util
from pathlib import Path

_path = Path(__file__).resolve().parent / "integration" / "conftest.py"
_spec = importlib.util.spec_from_file_location("autopar_integration_conftest", _path)
integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(integration)
