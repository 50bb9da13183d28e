// How autopar-launch tells its node's autopard that its program ended with a non-zero status on
// its own (a crashed rank, issue 6): an `event` request of kind "rank_exit" with detail
// "exit=N [signal=S] run_s=SECONDS" (timeline.h fields). The exit status follows the shell's
// convention: 128+S for a program killed by signal S, which is then also given as signal=S.
// autopard's FailureHandler turns it into a requeue decision. Reentrant.
#pragma once

#include <optional>
#include <string>

#include "autopar/proto_client.h"
#include "autopar/protocol.h"
#include "autopar/status.h"

namespace autopar {

// The request, or nullopt when the task has no AUTOPAR_SOCKET or SLURM_JOB_ID (autopar is not in
// use, so there is nobody to tell). `exit_status` as ExitCodeFromWaitStatus gives it.
std::optional<Request> RankExitRequest(const GetEnv& getenv, int rank, const std::string& node,
                                       int exit_status, double run_s);

// Sends it (at most `timeout_ms`); OK when there was nobody to tell. Errors name the socket.
Status ReportRankExit(const GetEnv& getenv, int rank, const std::string& node, int exit_status,
                      double run_s, int timeout_ms = 3000);

}  // namespace autopar
