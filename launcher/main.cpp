// autopar-launch: one launcher per Slurm task (launcher.h says what it does).
//   srun --mpi=pmix autopar-launch [OPTIONS] -- PROGRAM [ARGS...]
#include <cstdio>
#include <string>
#include <vector>

#include "launcher/launch.h"
#include "launcher/launcher.h"

int main(int argc, char** argv) {
  autopar::Launcher launcher;  // first: it blocks the signals it forwards
  auto opts = autopar::ParseLaunchArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!opts) launcher.Fail(opts.message(), 2);
  if (opts->help) {
    std::fputs(autopar::LaunchUsage().c_str(), stdout);
    return 0;
  }
  if (opts->version) {
    std::printf("autopar-launch %s\n", AUTOPAR_VERSION);
    return 0;
  }
  return launcher.Run(*opts);
}
