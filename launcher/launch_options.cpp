#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "launcher/launch.h"

namespace autopar {

std::string LaunchUsage() {
  return "usage: autopar-launch [OPTIONS] [--] PROGRAM [ARGS...]\n"
         "  Runs PROGRAM as one rank of the Slurm step: srun --mpi=pmix autopar-launch -- python train.py\n"
         "  --no-bind            do not bind the rank to a GPU and a share of the CPUs\n"
         "  --nccl-check         all-reduce preflight over every GPU of the step before PROGRAM\n"
         "  --nccl-min-ratio=R   fail the preflight when a node's bus bandwidth is below R x median"
         " (default 0.5)\n"
         "  --prewarm-after=S    with in-place restarts of a Python program, prepare the next\n"
         "                       generation's interpreter (its imports done) once the program has\n"
         "                       run S seconds (default 5; in a fault-tolerant group: once the\n"
         "                       program asks to join)\n"
         "  --no-prewarm         restart the program with a fresh interpreter\n"
         "  --usage-interval=S   send the program's CPU, memory and GPU use to autopard every S\n"
         "                       seconds (default 10; 0: never)\n"
         "  --verbose            print each rank's identity and binding\n"
         "  --help, --version\n";
}

Result<LaunchOptions> ParseLaunchArgs(const std::vector<std::string>& args) {
  LaunchOptions opts;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;
    if (a == "--no-bind") {
      opts.bind = false;
    } else if (a == "--nccl-check") {
      opts.nccl_check = true;
    } else if (a.rfind("--nccl-min-ratio=", 0) == 0) {
      std::string v = a.substr(17);
      char* end = nullptr;
      errno = 0;
      double r = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || errno != 0 || !std::isfinite(r) || r <= 0 || r > 1) {
        return Status::Error("--nccl-min-ratio: invalid value '" + v +
                             "' (expected a number in (0, 1])");
      }
      opts.nccl_min_ratio = r;
    } else if (a == "--no-prewarm") {
      opts.prewarm = false;
    } else if (a.rfind("--prewarm-after=", 0) == 0) {
      std::string v = a.substr(16);
      char* end = nullptr;
      errno = 0;
      long s = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || s < 0 || s > 86400) {
        return Status::Error("--prewarm-after: invalid value '" + v +
                             "' (expected whole seconds in [0, 86400])");
      }
      opts.prewarm_after_s = static_cast<int>(s);
    } else if (a.rfind("--usage-interval=", 0) == 0) {
      std::string v = a.substr(17);
      char* end = nullptr;
      errno = 0;
      long s = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || s < 0 || s > 3600) {
        return Status::Error("--usage-interval: invalid value '" + v +
                             "' (expected whole seconds in [0, 3600])");
      }
      opts.usage_interval_s = static_cast<int>(s);
    } else if (a == "--verbose" || a == "-v") {
      opts.verbose = true;
    } else if (a == "--help" || a == "-h") {
      opts.help = true;
    } else if (a == "--version") {
      opts.version = true;
    } else {
      return Status::Error("unknown option '" + a + "' (see autopar-launch --help)");
    }
  }
  opts.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (opts.program.empty() && !opts.help && !opts.version) {
    return Status::Error(
        "no program given (usage: autopar-launch [OPTIONS] -- PROGRAM [ARGS...])");
  }
  if (!opts.program.empty() && opts.program[0].empty()) {
    return Status::Error("the program name is empty");
  }
  return opts;
}

}  // namespace autopar
