"""`python3 -m autopar run-function DIR`: what a function job (autopar.jobs.submit(fn, ...)) runs on
each task under autopar-launch (autopar.functions)."""
from __future__ import annotations

import sys
from typing import List


def main(argv: List[str]) -> int:
    if len(argv) == 2 and argv[0] == "run-function":
        from . import functions
        return functions.run(argv[1])
    sys.stderr.write("usage: python3 -m autopar run-function DIR\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
