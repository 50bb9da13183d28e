"""The documentation's examples: every ```bash and ```python block of README.md and docs/*.md, and
how the tests hold each to the code.

A block says what it is on the line just above its fence, in an HTML comment (not rendered):

    <!-- example: sbatch -->           a batch script, or #SBATCH lines and their srun: submitted
                                       as written on the local cluster (tests/integration/
                                       test_docs_examples.py); the program it runs, `train.py`,
                                       is tests/docs/train.py unless `train.py=PATH` names another
    <!-- example: python-job -->       a Python program that submits jobs with autopar.jobs: run as
                                       written on the local cluster, train.py beside it
    <!-- example: fragment -->         part of a training program (`...` stands for the rest):
                                       parsed, and what it takes from autopar checked below

Every block of Python, whatever its kind, is parsed, and each name it imports from autopar exists
in the module's source; each call of an autopar function or class passes only keywords its
signature takes (read from python/autopar with `ast`, nothing imported). A bash or python block
with no such comment, or with an unknown kind, is a problem: a new example must say how it runs.
"""
import ast
import functools
import re
from pathlib import Path
from typing import Dict, Iterator, List, NamedTuple, Optional

REPO = Path(__file__).resolve().parents[2]
MODULE = REPO / "python" / "autopar"
KINDS = ("sbatch", "python-job", "fragment")


class Example(NamedTuple):
    path: Path           # the page
    line: int            # the fence's line, 1-based
    lang: str            # bash or python
    kind: Optional[str]  # sbatch, python-job, fragment; None: no comment
    params: Dict[str, str]
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def pages() -> List[Path]:
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))


def examples(page: Path) -> Iterator[Example]:
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"```(\w*)\s*", lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        if m.group(1) in ("bash", "python"):
            kind, params = None, {}
            note = re.fullmatch(r"<!-- example: ([\w-]+)((?: [\w.]+=\S+)*) -->", lines[i - 1].strip()) if i else None
            if note:
                kind = note.group(1)
                params = dict(p.split("=", 1) for p in note.group(2).split())
            yield Example(page, i + 1, m.group(1), kind, params, "\n".join(lines[i + 1:end]) + "\n")
        i = end + 1


def all_examples() -> List[Example]:
    return [e for page in pages() for e in examples(page)]


# ---- what autopar's Python module defines, from its source -------------------------------------

class Signature(NamedTuple):
    params: frozenset
    any_keyword: bool  # **kwargs


def _signature(fn: ast.AST) -> Signature:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    return Signature(frozenset(names), a.kwarg is not None)


def _module_source(dotted: str) -> Optional[Path]:
    rel = dotted.split(".")[1:]
    base = MODULE.joinpath(*rel) if rel else MODULE
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


_reading: set = set()  # the modules being read: an import cycle ends there


@functools.lru_cache(maxsize=None)
def module_names(dotted: str) -> Optional[Dict[str, Optional[Signature]]]:
    """{name: its signature (a class's __init__; None: not callable or unknown)} of what the
    module DOTTED (autopar, autopar.ft, ...) defines or imports at its top level; None when there
    is no such module."""
    src = _module_source(dotted)
    if src is None:
        return None
    tree = ast.parse(src.read_text())
    _reading.add(dotted)
    try:
        return _names(tree, dotted, src)
    finally:
        _reading.discard(dotted)


def _names(tree: ast.Module, dotted: str, src: Path) -> Dict[str, Optional[Signature]]:
    names: Dict[str, Optional[Signature]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # @overload stubs come first: the implementation, defined last, wins
            names[node.name] = _signature(node)
        elif isinstance(node, ast.ClassDef):
            init = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
            if init is not None:
                sig = _signature(init)
                names[node.name] = Signature(sig.params - {"self"}, sig.any_keyword)
            else:
                names[node.name] = None
        elif isinstance(node, ast.ImportFrom) and node.level:
            # from .manager import Manager: the signature where it is defined
            package = dotted if src.name == "__init__.py" else dotted.rsplit(".", 1)[0]
            for _ in range(node.level - 1):
                package = package.rsplit(".", 1)[0]
            origin = f"{package}.{node.module}" if node.module else package
            there = module_names(origin) if origin not in _reading else None
            for a in node.names:
                names.setdefault(a.asname or a.name, (there or {}).get(a.name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names.setdefault((a.asname or a.name).split(".")[0], None)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name):
                    names.setdefault(t.id, None)
    # a package's submodules are its names too (from autopar import jobs)
    if src.name == "__init__.py":
        for sub in src.parent.iterdir():
            if sub.suffix == ".py" or (sub / "__init__.py").is_file():
                names.setdefault(sub.stem, None)
    return names


def check_python(example: Example) -> List[str]:
    """What is wrong with one block of Python: a syntax error, a name imported from autopar that it
    does not define, a keyword one of its functions or classes does not take."""
    try:
        tree = ast.parse(example.text)
    except SyntaxError as e:
        return [f"{example.where}: line {e.lineno} of the block is not Python: {e.msg}"]
    problems = []
    modules: Dict[str, str] = {}       # local name -> autopar module
    callables: Dict[str, Optional[Signature]] = {}  # local name -> signature
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "autopar":
            defined = module_names(node.module)
            if defined is None:
                problems.append(f"{example.where}: there is no module {node.module}")
                continue
            for a in node.names:
                local = a.asname or a.name
                if a.name not in defined:
                    problems.append(f"{example.where}: {node.module} has no {a.name}")
                elif module_names(f"{node.module}.{a.name}") is not None:
                    modules[local] = f"{node.module}.{a.name}"
                else:
                    callables[local] = defined[a.name]
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "autopar":
                    if module_names(a.name) is None:
                        problems.append(f"{example.where}: there is no module {a.name}")
                    elif a.asname:
                        modules[a.asname] = a.name
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f, sig, what = node.func, None, None
        if isinstance(f, ast.Name) and f.id in callables:
            sig, what = callables[f.id], f.id
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
            mod = modules[f.value.id]
            defined = module_names(mod) or {}
            what = f"{mod}.{f.attr}"
            if f.attr not in defined:
                problems.append(f"{example.where}: {mod} has no {f.attr}")
                continue
            sig = defined[f.attr]
        if sig is None or sig.any_keyword:
            continue
        for kw in node.keywords:
            if kw.arg is not None and kw.arg not in sig.params:
                problems.append(f"{example.where}: {what}() takes no keyword {kw.arg}=")
    return problems


def check(example: Example) -> List[str]:
    if example.kind is None:
        return [f"{example.where}: a ```{example.lang} block with no '<!-- example: KIND -->' line above"
                f" it (KIND: {', '.join(KINDS)}; tests/docs/examples.py)"]
    if example.kind not in KINDS:
        return [f"{example.where}: '{example.kind}' is not a kind of example ({', '.join(KINDS)})"]
    if example.kind == "sbatch" and "#SBATCH" not in example.text:
        return [f"{example.where}: an sbatch example with no #SBATCH line"]
    if example.kind == "sbatch" and example.lang != "bash":
        return [f"{example.where}: an sbatch example is a ```bash block"]
    for key, value in example.params.items():
        if key != "train.py" or not (REPO / value).is_file():
            return [f"{example.where}: {key}={value}: only train.py=FILE, a file of the repository"]
    return check_python(example) if example.lang == "python" else []
