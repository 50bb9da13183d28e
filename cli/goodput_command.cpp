// `autopar goodput`: where allocated GPU-hours went (core/health/goodput.h, docs/goodput.md),
// for jobs named, or for every autopar job in a time window summed by user, partition and day.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "core/failure/timeline.h"
#include "core/health/goodput.h"
#include "core/text.h"
#include "daemon_args.h"
#include "job_events.h"
#include "replacing_file.h"
#include "sacct_runs.h"

namespace autopar::cli {
namespace {

constexpr const char* kUsage =
    "usage: autopar goodput JOBID... [--json | --prometheus] [--output FILE] [--socket PATH]\n"
    "       autopar goodput --start TIME [--end TIME] [--by user,partition,day] [--user U,...]\n"
    "                       [--partition P,...] [--json | --prometheus] [--output FILE]\n"
    "                       [--socket PATH]\n"
    "  where each job's allocated GPU-hours went: steps kept, steps redone, recovery and\n"
    "  restart, checkpoint stall, preempted, no step progress. Slurm's record of every run\n"
    "  (sacct, or sacct --completion without slurmdbd) with the job's timeline (autopard).\n"
    "  With --start: every autopar job that held an allocation in [TIME, --end TIME (now)),\n"
    "  cut to it and summed by --by (default user,partition,day; UTC). TIME: YYYY-MM-DD,\n"
    "  YYYY-MM-DDTHH:MM[:SS] (UTC), today, yesterday (midnight UTC) or now. --prometheus: the\n"
    "  sums as gauges autopar_goodput_gpu_seconds{...,use=} for a textfile collector\n"
    "  (autopar-goodput.timer, docs/goodput.md). --output FILE: written whole (FILE.tmp\n"
    "  renamed over it) or not at all.\n";

struct GoodputArgs {
  std::vector<std::string> jobs;
  std::string start, end, users, partitions, output;
  GoodputKey by{true, true, true};
  bool json = false, prometheus = false, help = false;
  std::string socket;
};

// YYYY-MM-DD[THH:MM[:SS]] (UTC), "today" or "yesterday" (their midnight, UTC) or "now" ->
// seconds since the epoch.
Result<double> ParseTime(const std::string& opt, const std::string& v) {
  const auto now = std::time(nullptr);
  if (v == "now") return static_cast<double>(now);
  if (v == "today" || v == "yesterday") {
    const auto midnight = now - now % 86400;  // POSIX time has no leap seconds
    return static_cast<double>(v == "today" ? midnight : midnight - 86400);
  }
  if (auto t = ParseEventTime(v); t && v.find('.') == std::string::npos) return *t;
  return Status::Error(opt + ": invalid time '" + v +
                       "' (expected YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] in UTC, today, yesterday or now)");
}

std::string SacctTime(double t) {
  auto secs = static_cast<time_t>(t);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

Result<GoodputArgs> Parse(int argc, char** argv) {
  GoodputArgs a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i], value;
    bool has_value = false;
    if (StartsWith(s, "--") && s.find('=') != std::string::npos) {
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
    } else if (s == "--prometheus") {
      a.prometheus = true;
    } else if (s == "--start" || s == "--end" || s == "--user" || s == "--partition" ||
               s == "--socket" || s == "--by" || s == "--output" || s == "-o") {
      auto v = take();
      if (!v) return v.status();
      if (v->empty()) return Status::Error(s + ": needs a value");
      if (s == "--start") a.start = *v;
      if (s == "--end") a.end = *v;
      if (s == "--user") a.users = *v;
      if (s == "--partition") a.partitions = *v;
      if (s == "--socket") a.socket = *v;
      if (s == "--output" || s == "-o") a.output = *v;
      if (s == "--by") {
        a.by = {};
        for (const std::string& k : Split(*v, ',')) {
          if (k == "user") a.by.user = true;
          else if (k == "partition") a.by.partition = true;
          else if (k == "day") a.by.day = true;
          else return Status::Error("--by: unknown key '" + k + "' (expected user, partition, day)");
        }
      }
    } else if (StartsWith(s, "-")) {
      return Status::Error(s + ": unknown option");
    } else if (s.find_first_not_of("0123456789_") != std::string::npos) {
      return Status::Error("'" + s + "': not a job id");
    } else {
      a.jobs.push_back(s);
    }
  }
  if (a.json && a.prometheus) return Status::Error("--prometheus: cannot be combined with --json");
  if (!a.jobs.empty() && !a.start.empty()) {
    return Status::Error("--start: give job ids or a window, not both");
  }
  if (a.jobs.empty() && a.start.empty() && !a.help) {
    return Status::Error("give job ids, or --start for every job in a window");
  }
  if (a.jobs.empty() && (!a.users.empty() || !a.partitions.empty()) && a.start.empty()) {
    return Status::Error("--user/--partition: select jobs in a window (--start)");
  }
  if (a.socket.empty()) a.socket = DefaultSocket();
  return a;
}

}  // namespace

int RunGoodputCommand(int argc, char** argv) {
  auto args = Parse(argc, argv);
  if (!args) return Fail("goodput", args.message(), 2);
  if (args->help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::optional<ReplacingFile> file;  // opened first: an unwritable FILE fails before sacct runs
  if (!args->output.empty()) {
    auto opened = ReplacingFile::Open(args->output);
    if (!opened) return Fail("goodput", "--output: " + opened.message(), 1);
    file.emplace(std::move(*opened));
  }
  const double now = static_cast<double>(std::time(nullptr));
  double from = 0, to = now;
  SacctQuery q;
  q.job_ids = args->jobs;
  if (!args->start.empty()) {
    auto s = ParseTime("--start", args->start);
    if (!s) return Fail("goodput", s.message(), 2);
    from = *s;
    if (!args->end.empty()) {
      auto e = ParseTime("--end", args->end);
      if (!e) return Fail("goodput", e.message(), 2);
      to = *e;
    }
    if (to <= from) return Fail("goodput", "--end: must be after --start", 2);
    q.start = SacctTime(from);
    q.end = SacctTime(to);
    q.users = args->users;
    q.partitions = args->partitions;
    // Every user's jobs for root (whose view the site's is); sacct shows others their own.
    q.all_users = args->users.empty() && geteuid() == 0;
  }
  auto runs = QuerySacctRuns(q);
  if (!runs) return Fail("goodput", runs.message(), 1);
  // Runs by job, in the window (sacct --completion does not select by time or partition).
  std::map<std::string, std::vector<SlurmRun>> by_job;
  std::set<std::string> partitions, wanted_users;
  for (const std::string& p : Split(args->partitions, ',')) {
    if (!p.empty()) partitions.insert(p);
  }
  for (const std::string& u : Split(args->users, ',')) {
    if (!u.empty()) wanted_users.insert(u);
  }
  for (const SlurmRun& r : *runs) {
    if (!args->start.empty()) {
      if (r.start >= to || (r.end > 0 && r.end <= from)) continue;
      if (!wanted_users.empty() && !wanted_users.count(r.user)) continue;
      if (!partitions.empty() && !partitions.count(r.partition)) continue;
    }
    by_job[r.job_id].push_back(r);
  }
  for (const std::string& id : args->jobs) {
    if (!by_job.count(id)) return Fail("goodput", "job " + id + ": no run in Slurm's records", 1);
  }
  std::vector<JobGoodput> jobs;
  int without_timeline = 0;
  for (const auto& [id, job_runs] : by_job) {
    auto events = FetchJobEvents("goodput", id, args->socket);
    if (!events) {
      if (!args->jobs.empty()) return Fail("goodput", "job " + id + ": " + events.message(), 1);
      std::fprintf(stderr, "autopar goodput: job %s: %s\n", id.c_str(), events.message().c_str());
      continue;
    }
    if (events->empty()) {  // not an autopar job (or its journal is gone)
      ++without_timeline;
      if (!args->jobs.empty()) return Fail("goodput", "job " + id + ": no timeline of autopar", 1);
      continue;
    }
    JobGoodput j = SplitJob(job_runs, *events, now);
    jobs.push_back(args->start.empty() ? j : ClipJob(j, from, to));
  }
  const std::vector<GoodputRow> rows = SumGoodput(jobs, args->by);
  std::string out;
  if (args->prometheus) {
    out = GoodputToPrometheus(rows);
  } else if (args->json) {
    out = GoodputToJson(jobs, rows);
  } else if (args->start.empty()) {
    out = GoodputJobsToText(jobs);
  } else {
    out = GoodputRowsToText(rows, args->by);
    if (without_timeline > 0) {
      out += "(" + std::to_string(without_timeline) + " job" + (without_timeline == 1 ? "" : "s") +
             " in the window left out: autopard has no timeline of them)\n";
    }
  }
  if (!file) {
    std::fputs(out.c_str(), stdout);
    return 0;
  }
  if (Status st = file->Commit(out); !st) return Fail("goodput", "--output: " + st.message(), 1);
  return 0;
}

}  // namespace autopar::cli
