#!/usr/bin/env python3
"""What the documentation names exists in the code (docs/manual.md, "Testing"): every `autopar
COMMAND [SUBCOMMAND]` the docs write (README.md, docs/*.md, etc/examples) is a command of the built
CLI (`autopar --help`, `autopar ckpt --help`), and every option on an `#SBATCH` line of their
examples is sbatch's own (`sbatch --help`, with a throwaway slurm.conf) or one of autopar's
(core/options.cpp's table); every argument on a plugstack line they show is the plugin's, and every `key = value` in a
paragraph that names autopard.conf is one of its keys;
docs/manual.md's table of options has a row for each of autopar's (and no other); docs/python.md's
table of arguments has every key of jobs.AUTOPAR_OPTIONS, and its row of them no other; and
every ```bash and ```python example says how it runs, and its Python takes from autopar only names and
keywords the module has (tests/docs/examples.py; tests/integration/test_docs_examples.py runs them).
Prints one line per name that does not exist or is missing; exit 1 on any.

    tests/docs/check_docs.py BUILD_DIR
"""
import ast
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import examples

REPO = Path(__file__).resolve().parents[2]


def doc_files():
    yield REPO / "README.md"
    yield from sorted((REPO / "docs").glob("*.md"))
    yield from sorted((REPO / "etc" / "examples").glob("*.sbatch"))


def help_words(cmd, pattern):
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    return set(re.findall(pattern, p.stdout + p.stderr, re.M))


def main() -> int:
    cli = Path(sys.argv[1]) / "cli" / "autopar"
    commands = help_words([str(cli), "--help"], r"^  ([a-z][a-z-]+)\s")
    ckpt = help_words([str(cli), "ckpt", "--help"], r"autopar ckpt ([a-z][a-z-]+)")
    if not commands or not ckpt:
        print(f"check_docs: {cli} printed no commands")
        return 1
    with tempfile.TemporaryDirectory() as d:
        conf = Path(d) / "slurm.conf"
        conf.write_text("ClusterName=docs\nSlurmctldHost=localhost\n")
        sbatch = help_words(["env", f"SLURM_CONF={conf}", "sbatch", "--help"], r"--([a-z][a-z-]*)")
    if "ntasks-per-node" not in sbatch:
        print("check_docs: sbatch --help printed no options")
        return 1
    ours = set(re.findall(r'\{OptionId::k[A-Za-z]+, "([a-z-]+)"', (REPO / "core" / "options.cpp").read_text()))
    problems = []
    for path in doc_files():
        text = path.read_text()
        where = path.relative_to(REPO)
        for m in re.finditer(r"(?<![\w./-])autopar ([a-z][a-z-]+)(?: ([a-z][a-z-]+))?", text):
            word, sub = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            # prose ("autopar makes ...", "autopar is") is not a command line: only code counts
            start = text.rfind("\n", 0, m.start()) + 1
            context = text[start:m.start()]
            in_code = context.count("`") % 2 == 1 or context.startswith(("    ", "$ ")) or \
                text[:m.start()].count("```") % 2 == 1
            if not in_code or context.endswith(("from ", "-m ", "import ")):  # Python's autopar
                continue
            if word not in commands:
                problems.append(f"{where}:{line}: 'autopar {word}' is not a command of autopar")
            elif word == "ckpt" and sub and sub not in ckpt:
                problems.append(f"{where}:{line}: 'autopar ckpt {sub}' is not a subcommand of autopar ckpt")
        for n, line in enumerate(text.splitlines(), 1):
            if not line.lstrip().startswith("#SBATCH"):
                continue
            for opt in re.findall(r"(?<![\w-])--([a-z][a-z-]*)", line):
                if opt not in sbatch and opt not in ours:
                    problems.append(f"{where}:{n}: #SBATCH --{opt} is neither sbatch's nor autopar's")
    # The manual's table of options has a row for every one (autopar.spank(8) is held to the code
    # by tests/man/check_man_pages.py).
    manual = (REPO / "docs" / "manual.md").read_text()
    rows = set(re.findall(r"^\| `--([a-z][a-z-]*)", manual, re.M))
    for opt in sorted(ours - rows):
        problems.append(f"docs/manual.md: the options table has no row for --{opt}")
    for opt in sorted(rows - ours - sbatch):
        problems.append(f"docs/manual.md: the options table has a row for --{opt}, which is not autopar's")
    # A plugstack line the docs show passes only the plugin's arguments (autopar.spank(8) lists them,
    # held to the code by tests/man/check_man_pages.py).
    lists = subprocess.run([str(Path(sys.argv[1]) / "tests" / "man" / "autopar_man_lists")],
                           capture_output=True, text=True).stdout.split("\n")
    plugstack_keys = {line.split()[1] for line in lists if line.startswith("plugstack-key ")}
    autopard_keys = {line.split()[1] for line in lists if line.startswith("autopard-key ")}
    if not plugstack_keys:
        print("check_docs: autopar_man_lists printed no plugstack keys")
        return 1
    for path in doc_files():
        text = path.read_text()
        for m in re.finditer(r"autopar\.so((?:[ \t]+[a-z_]+=\S+)+)", text):
            line = text.count("\n", 0, m.start()) + 1
            for key in re.findall(r"(?<!\S)([a-z_]+)=", m.group(1)):
                if key not in plugstack_keys:
                    problems.append(f"{path.relative_to(REPO)}:{line}: plugstack argument {key}= is not the plugin's")
        # A `key = value` (autopard.conf's own syntax) in a paragraph that names autopard.conf.
        prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for para in re.finditer(r"(?:[^\n]+\n?)+", prose):
            if "autopard.conf" not in para.group(0):
                continue
            for m in re.finditer(r"`([a-z][a-z0-9_]*) = [^`]*`", para.group(0)):
                if m.group(1) not in autopard_keys:
                    line = text.count("\n", 0, para.start() + m.start()) + 1
                    problems.append(f"{path.relative_to(REPO)}:{line}: autopard.conf has no key {m.group(1)}")
    # docs/python.md's row of autopar's options is autopar.jobs.AUTOPAR_OPTIONS, every key
    # (test_python_jobs.py holds that table to the plugin's options).
    jobs_py = ast.parse((REPO / "python" / "autopar" / "jobs.py").read_text())
    table = next(n.value for n in jobs_py.body if isinstance(n, ast.Assign) and
                 any(isinstance(t, ast.Name) and t.id == "AUTOPAR_OPTIONS" for t in n.targets))
    python_options = {k.value for k in table.keys}
    first_cells = [line.split("|")[1] for line in (REPO / "docs" / "python.md").read_text().splitlines()
                   if line.startswith("| `")]
    documented = {m for cell in first_cells for m in re.findall(r"`([a-z_]+)[`=]", cell)}
    row = next((c for c in first_cells if c.startswith(" `auto_parallel`")), "")
    in_row = set(re.findall(r"(?:^ |, )`([a-z_]+)`", row))
    for name in sorted(python_options - documented):
        problems.append(f"docs/python.md: the table of arguments has no row for `{name}`")
    for name in sorted(in_row - python_options):
        problems.append(f"docs/python.md: the row of autopar's options names `{name}`, not in jobs.AUTOPAR_OPTIONS")
    for example in examples.all_examples():
        problems += examples.check(example)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
