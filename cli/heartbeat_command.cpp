// `autopar heartbeat --step N [--rank R] [--samples S] [--tokens T] [--loss L] [--socket PATH]`.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "daemon_args.h"
#include "core/proto/proto_client.h"

namespace autopar::cli {

// A heartbeat from a shell training loop. This process exits right away, so autopard takes the
// rank's Slurm task as its process (protocol.h, short_lived). Prints "checkpoint_requested" when
// autopard asks the program to checkpoint now (the job's time limit is near).
int RunHeartbeatCommand(int argc, char** argv) {
  constexpr char kUsage[] =
      "usage: autopar heartbeat --step N [--rank R] [--samples S] [--tokens T] [--loss L]\n"
      "                         [--socket PATH]\n"
      "  tells the node's autopard that this rank reached training step N (hang detection,\n"
      "  --heartbeat-timeout); prints 'checkpoint_requested' when the job's time limit is near\n"
      "  and the program should checkpoint now. R defaults to $RANK, else $SLURM_PROCID.\n"
      "  S, T: the step's samples and tokens over the whole job, L: its loss (rank 0's give\n"
      "  the job's measured throughput and MFU, docs/health.md).\n";
  auto args = ParseDaemonArgs(argc, argv);
  if (!args) return Fail("heartbeat", args.message(), 2);
  if (args->help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!args->positional.empty()) {
    return Fail("heartbeat", "unexpected argument '" + args->positional[0] + "'", 2);
  }
  if (args->step < 0) return Fail("heartbeat", "--step: required", 2);
  auto job = JobTaskEnvFrom(EnvWithSocket(args->socket));
  if (!job) return Fail("heartbeat", job.message(), 2);
  if (args->rank >= 0) job->rank = args->rank;
  job->socket = args->socket;
  auto requested = SendHeartbeat(*job, args->step, /*short_lived=*/true, 5000, args->progress);
  if (!requested) return Fail("heartbeat", requested.message(), 1);
  if (*requested) std::puts("checkpoint_requested");
  return 0;
}

}  // namespace autopar::cli
