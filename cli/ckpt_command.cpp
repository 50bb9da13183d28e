// `autopar ckpt commit|ls|status`: a rank's checkpoint commit, a job's or a store's steps, the
// uploads in flight.
//   autopar ckpt commit --step N [--rank R] [--socket PATH]
//   autopar ckpt ls URI|JOBID [--json] [--socket PATH]
//   autopar ckpt status [--job JOBID] [--json] [--socket PATH]
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "daemon_args.h"
#include "core/proto/proto_client.h"
#include "core/text.h"

namespace autopar::cli {
namespace {

int Commit(const DaemonArgs& a) {
  if (a.step < 0) return Fail("ckpt commit", "--step: required", 2);
  auto job = JobCkptEnvFrom(EnvWithSocket(a.socket));
  if (!job) return Fail("ckpt commit", job.message(), 2);
  if (a.rank >= 0) job->rank = a.rank;
  if (!a.socket.empty()) job->socket = a.socket;
  auto reply = CommitStep(*job, a.step);
  if (!reply) return Fail("ckpt commit", reply.message(), 1);
  std::printf("autopar ckpt: step %lld rank %d committed (%d files, %s)%s%s\n",
              static_cast<long long>(a.step), job->rank, reply->files,
              HumanBytes(static_cast<double>(reply->bytes)).c_str(),
              reply->duplicate ? "; it was committed before" : "",
              job->upload.empty() ? "" : ("; uploading to " + job->upload + " in the background").c_str());
  return 0;
}

bool LooksLikeUri(const std::string& s) { return s.find("://") != std::string::npos; }

int List(const DaemonArgs& a) {
  if (a.positional.size() != 1) return Fail("ckpt ls", "usage: autopar ckpt ls URI|JOBID [--json]", 2);
  Request r;
  r.op = Op::kLs;
  if (LooksLikeUri(a.positional[0])) {
    r.upload = a.positional[0];
  } else {
    r.job_id = a.positional[0];
  }
  auto reply = CallDaemonOk(a.socket, r, 120000);
  if (!reply) return Fail("ckpt ls", reply.message(), 1);
  if (a.json) {
    std::vector<std::string> items;
    for (const auto& s : reply->steps) items.push_back(StepInfoJson(s));
    std::printf("[%s]\n", Join(items, ",").c_str());
    return 0;
  }
  std::printf("%-10s %-12s %-15s %12s %7s  %s\n", "STEP", "JOB", "STATE", "SIZE", "RANKS", "WHERE");
  for (const auto& s : reply->steps) {
    std::string ranks = std::to_string(s.ranks) + (s.world_size ? "/" + std::to_string(s.world_size) : "");
    std::printf("%-10lld %-12s %-15s %12s %7s  %s\n", static_cast<long long>(s.step),
                EscapeControl(s.job_id).c_str(), EscapeControl(s.state).c_str(),
                HumanBytes(static_cast<double>(s.bytes)).c_str(), ranks.c_str(), EscapeControl(s.uri).c_str());
  }
  if (reply->steps.empty()) std::printf("(no checkpoints)\n");
  return 0;
}

int UploadStatus(const DaemonArgs& a) {
  Request r;
  r.op = Op::kStatus;
  r.job_id = a.job;
  auto reply = CallDaemonOk(a.socket, r);
  if (!reply) return Fail("ckpt status", reply.message(), 1);
  if (a.json) {
    std::vector<std::string> items;
    for (const auto& u : reply->uploads) items.push_back(UploadInfoJson(u));
    std::printf("[%s]\n", Join(items, ",").c_str());
    return 0;
  }
  std::printf("%-12s %-8s %-5s %-10s %23s %12s %8s\n", "JOB", "STEP", "RANK", "STATE", "DONE/TOTAL",
              "THROUGHPUT", "ETA");
  for (const auto& u : reply->uploads) {
    std::string done = HumanBytes(static_cast<double>(u.bytes_done)) + "/" +
                       HumanBytes(static_cast<double>(u.bytes_total));
    std::string tput = u.throughput_bps > 0 ? HumanBytes(u.throughput_bps) + "/s" : "-";
    char eta[32] = "-";
    if (u.eta_s >= 0) std::snprintf(eta, sizeof(eta), "%.0fs", u.eta_s);
    // A failed upload autopard retries on its own: "retry-in-120s" instead of "failed".
    std::string state = u.state;
    if (u.next_retry_s >= 0) state = "retry-in-" + std::to_string(static_cast<long long>(u.next_retry_s + 0.5)) + "s";
    // The error may quote a file name the job chose: escaped, as `autopar events` does.
    std::printf("%-12s %-8lld %-5d %-10s %23s %12s %8s%s%s\n", EscapeControl(u.job_id).c_str(),
                static_cast<long long>(u.step), u.rank, EscapeControl(state).c_str(), done.c_str(),
                tput.c_str(), eta, u.error.empty() ? "" : "  ", EscapeControl(u.error).c_str());
  }
  if (reply->uploads.empty()) std::printf("(no uploads in flight)\n");
  return 0;
}

constexpr char kCkptUsage[] =
    "usage: autopar ckpt commit --step N [--rank R]      commit this rank's files of step N\n"
    "       autopar ckpt ls URI|JOBID [--json]           steps, sizes and states\n"
    "       autopar ckpt status [--job JOBID] [--json]   uploads in flight\n"
    "options: --socket PATH (default $AUTOPAR_SOCKET, else /run/autopard/autopard.sock)\n"
    "Rank R writes its files of step N under $AUTOPAR_CKPT_DIR/step-N/rank-R/ before committing.\n";

}  // namespace

int RunCkptCommand(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kCkptUsage, stderr);
    return 2;
  }
  std::string sub = argv[1];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kCkptUsage, stdout);
    return 0;
  }
  auto args = ParseDaemonArgs(argc - 1, argv + 1);
  if (!args) return Fail(("ckpt " + sub).c_str(), args.message(), 2);
  if (args->help) {
    std::fputs(kCkptUsage, stdout);
    return 0;
  }
  if (sub == "commit") return Commit(*args);
  if (sub == "ls") return List(*args);
  if (sub == "status") return UploadStatus(*args);
  return Fail("ckpt", "unknown subcommand '" + sub + "' (commit, ls, status)", 2);
}

}  // namespace autopar::cli
