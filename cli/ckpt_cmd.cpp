// `autopar ckpt commit|ls|status`, `autopar heartbeat`, `autopar events` and `autopar report`:
// the user's view of autopard.
//   autopar ckpt commit --step N [--rank R] [--socket PATH]
//   autopar heartbeat --step N [--rank R] [--samples S] [--tokens T] [--loss L] [--socket PATH]
//   autopar ckpt ls URI|JOBID [--json] [--socket PATH]
//   autopar ckpt status [--job JOBID] [--json] [--socket PATH]
//   autopar events JOBID [--json] [--all] [--socket PATH]
//   autopar report JOBID [--json | --html FILE] [--socket PATH]
// The socket defaults to AUTOPAR_SOCKET (set inside jobs), then /run/autopard/autopard.sock.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/proto/proto_client.h"
#include "core/site_config.h"
#include "core/text.h"
#include "core/failure/timeline.h"
#include "core/health/report.h"
#include "core/health/report_html.h"
#include "commands.h"
#include "job_events.h"
#include "replacing_file.h"

namespace autopar::cli {
namespace {

struct Args {
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

Result<int64_t> ParseNonNegative(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < 0) {
    return Status::Error(opt + ": invalid value '" + v + "' (expected an integer >= 0)");
  }
  return static_cast<int64_t>(x);
}

Result<Args> ParseArgs(int argc, char** argv) {
  Args a;
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
  std::fprintf(stderr, "autopar %s: %s\n", cmd, message.c_str());
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

int Commit(const Args& a) {
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

int List(const Args& a) {
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
    std::printf("%-10lld %-12s %-15s %12s %7s  %s\n", static_cast<long long>(s.step), s.job_id.c_str(),
                s.state.c_str(), HumanBytes(static_cast<double>(s.bytes)).c_str(), ranks.c_str(),
                s.uri.c_str());
  }
  if (reply->steps.empty()) std::printf("(no checkpoints)\n");
  return 0;
}

int UploadStatus(const Args& a) {
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
    std::printf("%-12s %-8lld %-5d %-10s %23s %12s %8s%s%s\n", u.job_id.c_str(),
                static_cast<long long>(u.step), u.rank, state.c_str(), done.c_str(), tput.c_str(),
                eta, u.error.empty() ? "" : "  ", u.error.c_str());
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
  auto args = ParseArgs(argc - 1, argv + 1);
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
  auto args = ParseArgs(argc, argv);
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

std::string DefaultSocket() {
  const char* env = std::getenv("AUTOPAR_SOCKET");
  return env && *env ? env : SiteConfig().socket;
}

Result<std::vector<JournalEvent>> FetchJobEvents(const char* cmd, const std::string& job_id,
                                                 const std::string& socket) {
  Request r;
  r.op = Op::kEvents;
  r.job_id = job_id;
  auto reply = CallDaemonOk(socket, r);
  if (!reply) return reply.status();
  for (const auto& note : reply->notes) std::fprintf(stderr, "autopar: %s: %s\n", cmd, note.c_str());
  return MergeTimelines({reply->events});
}

int RunReportCommand(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  if (!args) return Fail("report", args.message(), 2);
  if (args->help || args->positional.size() != 1) {
    std::fputs("usage: autopar report JOBID [--json | --html FILE] [--socket PATH]\n"
               "  what the job did, from its timeline (every node's journal): the plan's step\n"
               "  time and MFU against the measured ones, throughput over time, and each recovery\n"
               "  with the time it cost (docs/health.md); as text, --json, or --html: one\n"
               "  self-contained page with plots written to FILE (- for standard output)\n",
               args->help ? stdout : stderr);
    return args->help ? 0 : 2;
  }
  if (args->json && args->html) return Fail("report", "--html: cannot be combined with --json", 2);
  // The page's file is opened first: an unwritable one fails before autopard is asked.
  std::optional<ReplacingFile> page;
  if (args->html && *args->html != "-") {
    auto opened = ReplacingFile::Open(*args->html);
    if (!opened) return Fail("report", "--html: " + opened.message(), 1);
    page.emplace(std::move(*opened));
  }
  auto events = FetchJobEvents("report", args->positional[0], args->socket);
  if (!events) return Fail("report", events.message(), 1);
  const JobReport report = BuildReport(args->positional[0], *events);
  if (page) {
    Status written = page->Commit(ReportToHtml(report));
    return written ? 0 : Fail("report", "--html: " + written.message(), 1);
  }
  const std::string out = args->html   ? ReportToHtml(report)
                          : args->json ? ReportToJson(report)
                                       : ReportToText(report);
  std::fputs(out.c_str(), stdout);
  return 0;
}

int RunEventsCommand(int argc, char** argv) {
  auto args = ParseArgs(argc, argv);
  if (!args) return Fail("events", args.message(), 2);
  if (args->help || args->positional.size() != 1) {
    std::fputs("usage: autopar events JOBID [--json] [--all] [--socket PATH]\n"
               "  every node's journal of the job merged in time order (autopard's journal_uri),\n"
               "  as a table or --json; works after the job has ended. The table folds per-rank\n"
               "  checkpoint rows into one per step (--all: every row; --json has them all)\n",
               args->help ? stdout : stderr);
    return args->help ? 0 : 2;
  }
  auto fetched = FetchJobEvents("events", args->positional[0], args->socket);
  if (!fetched) return Fail("events", fetched.message(), 1);
  const std::vector<JournalEvent>& events = *fetched;
  const std::string& job = args->positional[0];
  const std::string out = args->json ? EncodeEventsJson(job, events)
                                     : RenderEventsTable(job, events, !args->all);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace autopar::cli
