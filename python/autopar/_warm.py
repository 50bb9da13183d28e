"""The warm interpreter's bootstrap (docs/recovery.md, "Warm restarts"): autopar-launch starts
`python -c <this file's text> FD KIND TARGET ARGS...` before a Python program is needed again, and
hands it the program's environment when it is (launcher/prewarm.h). The launcher embeds this file
when it is built, so it needs no autopar on the job's Python path; it is a module of the package
so that it is read, typed and tested as Python. Run as a module it does nothing.

  0. its name (/proc/PID/comm, what ps and pgrep show) is "autopar-warm" until it is activated,
     so that it is never taken for the program;
  1. -c's first sys.path entry (the working directory, which may be a directory others can
     write) is removed before anything is imported, and the program's own first entry (its
     script's directory, or the working directory for -m) put back, as the interpreter would;
  2. the modules the program's source names in import statements (anywhere in it: ast.walk) are
     imported, except those found beside the program (sys.path[0], relative imports too) and
     autopar's own, which may read the run's environment when imported: those are not imported
     but their sources are read the same way, so that what they import is. An import that fails
     is left for the program to meet (and report) itself. A program that imports torch gets
     torch._dynamo too, which torch 2.x imports at the first optimizer or DDP it builds;
  3. "R" is sent on FD (ready) and the request read until the launcher closes its side; no
     request (the launcher discarded it) ends the process quietly;
  4. os.environ becomes the request's environment, NAME=VALUE entries each ended by a NUL byte
     as in /proc/PID/environ (putenv: C code sees it too), and the program runs as
     `python SCRIPT ARGS` or `python -m MODULE ARGS` would run it (runpy).
"""
import sys
_autopar_cwd_first = __name__ == "__main__" and bool(sys.path) and sys.path[0] == ""
if _autopar_cwd_first:
    del sys.path[0]  # -c's working directory: nothing the bootstrap imports is looked up there
import os  # noqa: E402


def _autopar_prewarm() -> "tuple[str, str, list[str]]":
    import ast
    import importlib
    import importlib.machinery
    import socket

    def comm(name: "str | None" = None) -> "str | int | None":
        try:
            with open("/proc/self/comm", "r+") as f:
                return f.read().strip() if name is None else f.write(name)
        except OSError:
            return None
    own = comm()
    comm("autopar-warm")
    sock = socket.socket(fileno=int(sys.argv[1]))
    kind, target, args = sys.argv[2], sys.argv[3], sys.argv[4:]
    base = os.getcwd() if kind == "module" else os.path.dirname(os.path.abspath(target))
    if _autopar_cwd_first:  # the program's own first entry, as `python SCRIPT` or -m gives it
        sys.path.insert(0, base)
    finder = importlib.machinery.PathFinder

    def beside(parts: "list[str]", where: "list[str] | None") -> "list[str]":
        # The source files that importing `parts` from the directories `where` runs.
        found: "list[str]" = []
        for part in parts:
            spec = finder.find_spec(part, where) if where else None
            if spec is None:
                break
            if spec.has_location and spec.origin and spec.origin.endswith(".py"):
                found.append(spec.origin)
            where = list(spec.submodule_search_locations or []) or None
        return found
    todo = [os.path.abspath(target)] if kind == "script" else beside(target.split("."), sys.path)
    seen: "set[str]" = set()
    names: "list[str]" = []
    while todo:
        source = todo.pop(0)
        if source in seen:
            continue
        seen.add(source)
        try:
            with open(source, "rb") as f:
                tree = ast.parse(f.read(), source)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported = [(0, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                head = node.module + "." if node.module else ""
                imported = [(node.level, node.module or "")] + \
                    [(node.level, head + a.name) for a in node.names if a.name != "*"]
            else:
                continue
            for level, name in imported:
                parts = [p for p in name.split(".") if p]
                if level:
                    d = os.path.dirname(source)
                    for _ in range(level - 1):
                        d = os.path.dirname(d)
                    todo += beside(parts, [d])
                elif not parts or parts[0] in ("autopar", "__main__", "__future__"):
                    continue
                elif finder.find_spec(parts[0], [base]) is not None:
                    todo += beside(parts, [base])
                elif name not in names:
                    names.append(name)
    # torch 2.x imports torch._dynamo when a program first builds an optimizer or a
    # DistributedDataParallel (torch._disable_dynamo's lazy import), which costs more CPU than
    # `import torch` itself: prepared too when the program imports torch.
    if any(n == "torch" or n.startswith("torch.") for n in names):
        names.append("torch._dynamo")
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except (Exception, SystemExit):
            pass
    try:
        sock.sendall(b"R")
    except OSError:
        pass  # the launcher sent its request and closed its side before asking
    request = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except OSError:
            # The launcher ended without a request (its job is over) and had not read the "R":
            # the kernel resets the connection rather than closing it. Nothing to run.
            request = b""
            break
        if not chunk:
            break
        request += chunk
    sock.close()
    if not request:
        os._exit(0)
    if isinstance(own, str) and own:
        comm(own)
    os.environb.clear()
    for entry in request.split(b"\0"):
        if entry:
            key, _, value = entry.partition(b"=")
            os.environb[key] = value
    return kind, target, args


if __name__ == "__main__":
    _autopar_kind, _autopar_target, _autopar_args = _autopar_prewarm()
    del _autopar_prewarm
    import runpy
    sys.argv = [_autopar_target] + _autopar_args
    if _autopar_kind == "module":
        runpy.run_module(_autopar_target, run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(_autopar_target, run_name="__main__")
