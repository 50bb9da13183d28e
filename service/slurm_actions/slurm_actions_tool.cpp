// autopar-slurm-actions: the SlurmActions edge from the command line, for the integration tests
// and for admins. Not installed.
//
//   autopar-slurm-actions show JOB
//   autopar-slurm-actions requeue JOB --restart-count N [--exclude NODE,...] [--delay SECONDS]
//                                     [--reason TEXT] [--lock FILE]
//   autopar-slurm-actions exclude JOB NODE...
//   autopar-slurm-actions cancel JOB REASON
//
// Output: one JSON object on stdout; errors on stderr as "autopar: ..." with exit status 1
// (2 for usage errors).
#include <json/json.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/json_fields.h"
#include "service/slurm_actions/slurm_actions.h"
#include "core/text.h"

namespace {

using autopar::Status;

int Usage(const std::string& why) {
  std::cerr << "autopar: " << why << "\n"
            << "usage: autopar-slurm-actions show JOB\n"
            << "       autopar-slurm-actions requeue JOB --restart-count N [--exclude NODE,...] "
               "[--delay SECONDS] [--reason TEXT] [--lock FILE]\n"
            << "       autopar-slurm-actions exclude JOB NODE...\n"
            << "       autopar-slurm-actions cancel JOB REASON\n";
  return 2;
}

int Fail(const std::string& message) {
  std::cerr << "autopar: " << message << "\n";
  return 1;
}

void Print(const Json::Value& v) { std::cout << autopar::CompactJson(v) << "\n"; }

Json::Value JobJson(const autopar::SlurmJob& j) {
  Json::Value v(Json::objectValue);
  v["job_id"] = j.job_id;
  v["user_id"] = static_cast<Json::UInt>(j.user_id);
  v["state"] = j.state;
  v["completing"] = j.completing;
  v["requeue_flag"] = j.requeue_flag;
  v["requeue_allowed"] = j.requeue_allowed;
  v["batch"] = j.batch;
  v["restart_count"] = Json::Int64(j.restart_count);
  v["submit_time"] = j.submit_time;
  v["start_time"] = j.start_time;
  v["end_time"] = j.end_time;
  v["eligible_time"] = j.eligible_time;
  v["time_limit_min"] = Json::Int64(j.time_limit_min);
  v["nodes"] = j.nodes;
  v["batch_host"] = j.batch_host;
  v["excluded_nodes"] = j.excluded_nodes;
  v["admin_comment"] = j.admin_comment;
  v["reason"] = j.reason;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2) return Usage("a command and a job id are needed");
  const std::string cmd = args[0], job = args[1];
  auto opened = autopar::OpenLibSlurmActions("");
  if (!opened.ok()) return Fail(opened.message());
  std::unique_ptr<autopar::SlurmActions> slurm = std::move(*opened);

  if (cmd == "show") {
    auto j = slurm->LoadJob(job);
    if (!j.ok()) return Fail(j.message());
    Print(JobJson(*j));
    return 0;
  }
  if (cmd == "requeue") {
    autopar::RequeueDecision d;
    d.action = autopar::RequeueAction::kRequeue;
    d.restart_count = -1;
    d.reason = "requeued by autopar-slurm-actions";
    std::string lock;
    for (size_t i = 2; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (i + 1 >= args.size()) return Usage(a + ": needs a value");
      const std::string& v = args[++i];
      if (a == "--restart-count") {
        auto n = autopar::ParseInt(v, 0, 1 << 16);
        if (!n) return Usage("--restart-count: must be an integer >= 0, got '" + v + "'");
        d.restart_count = *n;
      } else if (a == "--exclude") {
        d.exclude_nodes = autopar::Split(v, ',');
      } else if (a == "--delay") {
        auto n = autopar::ParseInt(v, 0, 86400);
        if (!n) return Usage("--delay: must be seconds in [0, 86400], got '" + v + "'");
        d.delay_s = static_cast<double>(*n);
      } else if (a == "--reason") {
        d.reason = v;
      } else if (a == "--lock") {
        lock = v;
      } else {
        return Usage("unknown option " + a);
      }
    }
    if (d.restart_count < 0) return Usage("requeue: --restart-count is required");
    d.attempt = d.restart_count + 1;
    d.max_restarts = d.attempt;
    d.note = {d.restart_count, "manual", 0};
    double now = std::chrono::duration<double>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    auto r = autopar::GuardedRequeue(*slurm, job, d, now, lock);
    if (!r.ok()) return Fail(r.message());
    Json::Value v(Json::objectValue);
    v["outcome"] = r->outcome == autopar::RequeueOutcome::kRequeued ? "requeued" : "already-done";
    v["restart_count_now"] = Json::Int64(r->restart_count_now);
    v["message"] = r->message;
    Json::Value w(Json::arrayValue);
    for (const auto& s : r->warnings) w.append(s);
    v["warnings"] = w;
    Print(v);
    return 0;
  }
  if (cmd == "exclude") {
    if (args.size() < 3) return Usage("exclude: which nodes?");
    std::vector<std::string> nodes(args.begin() + 2, args.end());
    if (Status s = autopar::AddExcludedNodes(*slurm, job, nodes); !s.ok()) return Fail(s.message());
    auto j = slurm->LoadJob(job);
    if (!j.ok()) return Fail(j.message());
    Print(JobJson(*j));
    return 0;
  }
  if (cmd == "cancel") {
    if (args.size() != 3) return Usage("cancel: one REASON argument");
    if (Status s = autopar::CancelWithReason(*slurm, job, args[2]); !s.ok()) {
      return Fail(s.message());
    }
    Print(Json::Value(Json::objectValue));
    return 0;
  }
  return Usage("unknown command '" + cmd + "'");
}
