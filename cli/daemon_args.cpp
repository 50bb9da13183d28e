#include "daemon_args.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/text.h"
#include "job_events.h"

namespace autopar::cli {
namespace {

Result<int64_t> ParseNonNegative(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < 0) {
    return Status::Error(opt + ": invalid value '" + v + "' (expected an integer >= 0)");
  }
  return static_cast<int64_t>(x);
}

}  // namespace

Result<DaemonArgs> ParseDaemonArgs(int argc, char** argv) {
  DaemonArgs a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    std::string value;
    bool has_value = false;
    if (s.rfind("--", 0) == 0 && s.find('=') != std::string::npos) {
      value = s.substr(s.find('=') + 1);
      s = s.substr(0, s.find('='));
      has_value = true;
    }
    auto take = [&]() -> Result<std::string> {
      if (has_value) return value;
      if (i + 1 >= argc) return Status::Error(s + ": needs a value");
      return std::string(argv[++i]);
    };
    if (s == "--help" || s == "-h") {
      a.help = true;
    } else if (s == "--json") {
      a.json = true;
    } else if (s == "--all") {
      a.all = true;
    } else if (s == "--loss") {
      auto v = take();
      if (!v) return v.status();
      char* end = nullptr;
      const double loss = std::strtod(v->c_str(), &end);
      if (v->empty() || *end != '\0') {
        return Status::Error("--loss: invalid value '" + *v + "' (expected a number, nan or inf)");
      }
      a.progress.loss = loss;
    } else if (s == "--samples" || s == "--tokens") {
      auto v = take();
      if (!v) return v.status();
      auto n = ParseNonNegative(s, *v);
      if (!n) return n.status();
      (s == "--samples" ? a.progress.samples : a.progress.tokens) = *n;
    } else if (s == "--html") {
      auto v = take();
      if (!v) return v.status();
      if (v->empty()) return Status::Error("--html: needs a file name (or - for standard output)");
      a.html = *v;
    } else if (s == "--socket" || s == "--job" || s == "--step" || s == "--rank") {
      auto v = take();
      if (!v) return v.status();
      if (s == "--socket") {
        a.socket = *v;
      } else if (s == "--job") {
        a.job = *v;
      } else {
        auto n = ParseNonNegative(s, *v);
        if (!n) return n.status();
        if (s == "--step") a.step = *n;
        else a.rank = static_cast<int>(*n);
      }
    } else if (s.rfind("--", 0) == 0) {
      return Status::Error(s + ": unknown option");
    } else {
      a.positional.push_back(s);
    }
  }
  if (a.socket.empty()) a.socket = DefaultSocket();
  return a;
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

int Fail(const char* cmd, const std::string& message, int code) {
  // An error may quote what a job named (a file, a URI): never raw on the terminal.
  std::fprintf(stderr, "autopar %s: %s\n", cmd, EscapeControl(message).c_str());
  return code;
}

// The job's environment as these commands read it: the socket is --socket's (which defaults to
// AUTOPAR_SOCKET, then the built-in path), so that a job whose options do not need autopard (the
// plugin sets nothing in it) can still name the node's socket.
GetEnv EnvWithSocket(const std::string& socket) {
  return [socket](const char* k) -> const char* {
    if (std::strcmp(k, "AUTOPAR_SOCKET") == 0) return socket.c_str();
    return std::getenv(k);
  };
}

}  // namespace autopar::cli
