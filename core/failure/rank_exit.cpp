#include "autopar/rank_exit.h"

#include <cstdio>

#include "autopar/timeline.h"

namespace autopar {

std::optional<Request> RankExitRequest(const GetEnv& getenv, int rank, const std::string& node,
                                       int exit_status, double run_s) {
  const char* socket = getenv("AUTOPAR_SOCKET");
  const char* job = getenv("SLURM_JOB_ID");
  if (!socket || !*socket || !job || !*job) return std::nullopt;
  Request r;
  r.op = Op::kEvent;
  r.job_id = job;
  r.kind = event_kind::kRankExit;
  r.rank = rank;
  r.node = node;
  EventFields f = {{"exit", std::to_string(exit_status)}};
  if (exit_status > 128 && exit_status < 128 + 65) {
    f.emplace_back("signal", std::to_string(exit_status - 128));
  }
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", run_s);
  f.emplace_back("run_s", secs);
  r.detail = FormatEventFields(f);
  return r;
}

Status ReportRankExit(const GetEnv& getenv, int rank, const std::string& node, int exit_status,
                      double run_s, int timeout_ms) {
  auto r = RankExitRequest(getenv, rank, node, exit_status, run_s);
  if (!r) return Status::Ok();
  auto reply = CallDaemonOk(getenv("AUTOPAR_SOCKET"), *r, timeout_ms);
  if (!reply.ok()) return Status::Error("reporting the exit to " + reply.message());
  return Status::Ok();
}

}  // namespace autopar
