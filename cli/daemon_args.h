// The options of the commands that talk to the node's autopard (ckpt, heartbeat, events, report),
// parsed by one parser so that they read the same everywhere:
//   --socket PATH (default AUTOPAR_SOCKET, then /run/autopard/autopard.sock), --job, --step,
//   --rank, --samples, --tokens, --loss, --json, --all, --html FILE
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/proto/proto_client.h"

namespace autopar::cli {

struct DaemonArgs {
  std::vector<std::string> positional;
  std::string socket;
  std::string job;
  int64_t step = -1;
  int rank = -1;
  StepProgress progress;  // heartbeat: --samples, --tokens, --loss
  bool json = false;
  bool all = false;  // events: every per-rank row
  std::optional<std::string> html;  // report: the page's file, "-" for stdout
  bool help = false;
};

// Errors name the option ("--step: invalid value 'x' (expected an integer >= 0)").
Result<DaemonArgs> ParseDaemonArgs(int argc, char** argv);

// Prints "autopar CMD: MESSAGE" on stderr; returns `code`.
int Fail(const char* cmd, const std::string& message, int code);

// The job's environment as these commands read it, with AUTOPAR_SOCKET replaced by `socket`.
GetEnv EnvWithSocket(const std::string& socket);

// "1.5 MiB".
std::string HumanBytes(double b);

}  // namespace autopar::cli
