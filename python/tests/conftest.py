"""The module under test is the repository's (python/autopar), not an installed one."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
