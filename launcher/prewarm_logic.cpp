// The pure half of prewarm.h: which commands a warm interpreter can stand in for, its command
// line (with the bootstrap program) and the request that activates it.
#include <regex>

#include "launcher/prewarm.h"

namespace autopar {
namespace {

// The bootstrap a warm interpreter runs (`python -c`). argv: FD KIND TARGET ARGS...
//  0. its name (/proc/PID/comm, what ps and pgrep show) is "autopar-warm" until it is activated,
//     so that it is never taken for the program;
//  1. -c's first sys.path entry (the working directory, which may be a directory others can
//     write) is removed before anything is imported;
//  1. sys.path[0] is the program's (its script's directory, or the working directory for -m), as
//     the interpreter would set it;
//  2. the modules the program's source names in import statements (anywhere in it: ast.walk) are
//     imported, except those found beside the program (sys.path[0], relative imports too) and
//     autopar's own, which may read the run's environment when imported: those are not imported
//     but their sources are read the same way, so that what they import is. An import that fails
//     is left for the program to meet (and report) itself;
//  3. "R" is sent on FD (ready) and the request read until the launcher closes its side; no
//     request (the launcher discarded it) ends the process quietly;
//  4. os.environ becomes the request's environment, NAME=VALUE entries each ended by a NUL byte
//     as in /proc/PID/environ (putenv: C code sees it too), and the program
//     runs as `python SCRIPT ARGS` or `python -m MODULE ARGS` would run it (runpy).
constexpr const char* kBootstrap = R"PY(import sys
_autopar_cwd_first = bool(sys.path) and sys.path[0] == ""
if _autopar_cwd_first:
    del sys.path[0]  # -c's working directory: nothing the bootstrap imports is looked up there
import os
def _autopar_prewarm():
    import ast, importlib, importlib.machinery, socket
    def comm(name=None):
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
    def beside(parts, where):
        # The source files that importing `parts` from the directories `where` runs.
        found = []
        for part in parts:
            spec = finder.find_spec(part, where) if where else None
            if spec is None:
                break
            if spec.has_location and spec.origin.endswith(".py"):
                found.append(spec.origin)
            where = spec.submodule_search_locations
        return found
    todo = [os.path.abspath(target)] if kind == "script" else beside(target.split("."), sys.path)
    seen, names = set(), []
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
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        request += chunk
    sock.close()
    if not request:
        os._exit(0)
    if own:
        comm(own)
    os.environb.clear()
    for entry in request.split(b"\0"):
        if entry:
            key, _, value = entry.partition(b"=")
            os.environb[key] = value
    return kind, target, args
_autopar_kind, _autopar_target, _autopar_args = _autopar_prewarm()
del _autopar_prewarm
import runpy
sys.argv = [_autopar_target] + _autopar_args
if _autopar_kind == "module":
    runpy.run_module(_autopar_target, run_name="__main__", alter_sys=True)
else:
    runpy.run_path(_autopar_target, run_name="__main__")
)PY";

bool IsFlagOption(const std::string& a) {
  // -b -B -d -E -I -O -q -s -S -u -v, alone or combined (-uB, -OO).
  if (a.size() < 2 || a[0] != '-' || a[1] == '-') return false;
  return a.find_first_not_of("bBdEIOqsSuv", 1) == std::string::npos;
}

}  // namespace

std::optional<PythonCommand> ParsePythonCommand(const std::vector<std::string>& argv) {
  if (argv.empty()) return std::nullopt;
  const std::string& exe = argv[0];
  const std::string name = exe.substr(exe.rfind('/') == std::string::npos ? 0 : exe.rfind('/') + 1);
  static const std::regex kPython("python(3(\\.[0-9]+)?)?");
  if (!std::regex_match(name, kPython)) return std::nullopt;
  PythonCommand cmd;
  cmd.interpreter.push_back(exe);
  size_t i = 1;
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (IsFlagOption(a)) {
      cmd.interpreter.push_back(a);
    } else if (a == "-X" || a == "-W") {
      if (i + 1 >= argv.size()) return std::nullopt;
      cmd.interpreter.push_back(a);
      cmd.interpreter.push_back(argv[++i]);
    } else if (a.size() > 2 && (a.rfind("-X", 0) == 0 || a.rfind("-W", 0) == 0)) {
      cmd.interpreter.push_back(a);
    } else {
      break;
    }
  }
  if (i >= argv.size()) return std::nullopt;  // the interactive interpreter
  if (argv[i] == "-m") {
    if (i + 1 >= argv.size() || argv[i + 1].empty() || argv[i + 1][0] == '-') return std::nullopt;
    cmd.module = true;
    cmd.target = argv[i + 1];
    i += 2;
  } else if (argv[i].empty() || argv[i][0] == '-') {
    return std::nullopt;  // -c, -i, "-" (stdin), --version, an option it cannot pass on
  } else {
    cmd.target = argv[i++];
  }
  cmd.args.assign(argv.begin() + static_cast<std::ptrdiff_t>(i), argv.end());
  return cmd;
}

std::vector<std::string> WarmInterpreterArgv(const PythonCommand& cmd, int fd) {
  std::vector<std::string> out = cmd.interpreter;
  out.insert(out.end(),
             {"-c", kBootstrap, std::to_string(fd), cmd.module ? "module" : "script", cmd.target});
  out.insert(out.end(), cmd.args.begin(), cmd.args.end());
  return out;
}

std::string WarmRequest(const EnvMap& env) {
  std::string out;
  for (const auto& [k, v] : env) {
    out += k;
    out += '=';
    out += v;
    out += '\0';
  }
  return out;
}

}  // namespace autopar
