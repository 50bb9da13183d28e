// The pure half of prewarm.h: which commands a warm interpreter can stand in for, its command
// line (with the bootstrap program, python/autopar/_warm.py, embedded at build time) and the
// request that activates it.
#include <regex>

#include "launcher/prewarm.h"
#include "launcher/warm_bootstrap.h"

namespace autopar {
namespace {

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
             {"-c", kWarmBootstrap, std::to_string(fd), cmd.module ? "module" : "script", cmd.target});
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
