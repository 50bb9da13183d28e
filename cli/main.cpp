// `autopar`: the user/admin CLI. A thin dispatcher over subcommands (commands.h).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "commands.h"
#include "core/proto/protocol.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
  // Seconds a query waits for a restarting autopard when AUTOPAR_DAEMON_RETRY_S does not say
  // (someone waits at a terminal); null: the clients' default (30 s), for the commands that
  // training jobs run.
  const char* retry_s = nullptr;
};

// Add a subcommand: one line here, its file in cli/CMakeLists.txt, its declaration in commands.h.
const Subcommand kSubcommands[] = {
    {"plan", autopar::cli::RunPlanCommand, "choose a parallel layout for a model on given GPUs"},
    {"ckpt", autopar::cli::RunCkptCommand, "commit, list and watch checkpoints (autopard)"},
    {"heartbeat", autopar::cli::RunHeartbeatCommand, "tell autopard this rank reached a step"},
    {"events", autopar::cli::RunEventsCommand, "a job's events from every node, in time order", "5"},
    {"report", autopar::cli::RunReportCommand, "a job's planned and measured progress, recoveries",
     "5"},
    {"goodput", autopar::cli::RunGoodputCommand,
     "where allocated GPU-hours went, per job or by user, partition and day", "5"},
    {"calibrate", autopar::cli::RunCalibrateCommand,
     "learn a GPU type's efficiency from a job, into a site calibration file", "5"},
    {"check-plugstack", autopar::cli::RunCheckPlugstackCommand,
     "check the site's autopar.so line in plugstack.conf before deploying it"},
};

void Usage(std::FILE* out) {
  (void)std::fprintf(out, "usage: autopar <command> [options]\n\ncommands:\n");
  for (const auto& s : kSubcommands) (void)std::fprintf(out, "  %-15s %s\n", s.name, s.summary);
  (void)std::fprintf(out, "\n'autopar <command> --help' describes a command's options; "
                          "'autopar --version' prints the release.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    Usage(stderr);
    return 2;
  }
  const char* name = argv[1];
  if (std::strcmp(name, "--help") == 0 || std::strcmp(name, "-h") == 0 ||
      std::strcmp(name, "help") == 0) {
    Usage(stdout);
    return 0;
  }
  if (std::strcmp(name, "--version") == 0 || std::strcmp(name, "-V") == 0) {
    (void)std::printf("autopar %s (protocol %d)\n", AUTOPAR_VERSION, autopar::kProtocolVersion);
    return 0;
  }
  for (const auto& s : kSubcommands) {
    if (std::strcmp(name, s.name) != 0) continue;
    if (s.retry_s != nullptr && std::getenv("AUTOPAR_DAEMON_RETRY_S") == nullptr) {
      setenv("AUTOPAR_DAEMON_RETRY_S", s.retry_s, 1);
    }
    return s.run(argc - 1, argv + 1);
  }
  (void)std::fprintf(stderr, "autopar: unknown command '%s' (try 'autopar --help')\n", name);
  return 2;
}
