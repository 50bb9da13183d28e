"""Appends one benchmark's results to bench/RESULTS.md as a dated section with a table, the form
every Python bench's --record uses."""
import datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def record(title: str, script: str, intro: str, header: list, rows: list) -> None:
    """Appends "## TITLE (`SCRIPT`) — <today>", INTRO, and a table of HEADER and ROWS (each a list
    of cells, already formatted)."""
    day = datetime.date.today().isoformat()
    lines = [f"\n## {title} (`{script}`) — {day}\n", intro.strip() + "\n",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    with open(RESULTS, "a") as f:
        f.write("\n".join(lines) + "\n")
