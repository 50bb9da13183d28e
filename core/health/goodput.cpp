#include "core/health/goodput.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include "core/failure/timeline.h"
#include "core/text.h"

namespace autopar {
namespace {

std::optional<double> Field(const JournalEvent& e, std::string_view key) {
  for (const auto& [k, v] : ParseEventFields(e.detail)) {
    if (k == key) return ParseDouble(v);
  }
  return std::nullopt;
}

std::optional<std::string> TextField(const JournalEvent& e, std::string_view key) {
  for (const auto& [k, v] : ParseEventFields(e.detail)) {
    if (k == key) return v;
  }
  return std::nullopt;
}

// A step the training reached, and when (the events that carry a training step).
bool IsStepEvidence(const JournalEvent& e) {
  return e.step >= 0 &&
         (e.kind == event_kind::kProgress || e.kind == event_kind::kCkptCommitted ||
          e.kind == event_kind::kTerminationCheckpoint || e.kind == event_kind::kTimeLimitCheckpoint);
}

// A claim on a stretch of time; the highest priority wins where claims overlap.
struct Claim {
  double t0, t1;
  GoodputUse use;
};
int Priority(GoodputUse use) {
  switch (use) {
    case GoodputUse::kCkptStall: return 5;
    case GoodputUse::kRecovery: return 4;
    case GoodputUse::kStepsRedone: return 3;
    case GoodputUse::kStepsKept: return 2;
    case GoodputUse::kPreempted: return 1;
    case GoodputUse::kNoProgress: return 0;
  }
  return 0;
}

// [from, to) cut into segments by the claims inside it (a sweep over their ends).
std::vector<GoodputSegment> Paint(double from, double to, const std::vector<Claim>& claims) {
  std::vector<std::tuple<double, int, GoodputUse>> edges;  // time, +1/-1, use
  for (const Claim& c : claims) {
    const double a = std::max(c.t0, from), b = std::min(c.t1, to);
    if (b <= a) continue;
    edges.emplace_back(a, +1, c.use);
    edges.emplace_back(b, -1, c.use);
  }
  std::sort(edges.begin(), edges.end(),
            [](const auto& x, const auto& y) { return std::get<0>(x) < std::get<0>(y); });
  std::array<int, kGoodputUses> active{};
  auto current = [&] {
    GoodputUse best = GoodputUse::kNoProgress;
    for (int u = 0; u < kGoodputUses; ++u) {
      auto use = static_cast<GoodputUse>(u);
      if (active[u] > 0 && Priority(use) > Priority(best)) best = use;
    }
    return best;
  };
  std::vector<GoodputSegment> out;
  auto add = [&](double a, double b, GoodputUse use) {
    if (b <= a) return;
    if (!out.empty() && out.back().use == use && out.back().t1 == a) {
      out.back().t1 = b;
    } else {
      out.push_back({a, b, use});
    }
  };
  double t = from;
  for (size_t i = 0; i < edges.size();) {
    const double at = std::get<0>(edges[i]);
    add(t, at, current());
    for (; i < edges.size() && std::get<0>(edges[i]) == at; ++i) {
      active[static_cast<int>(std::get<2>(edges[i]))] += std::get<1>(edges[i]);
    }
    t = at;
  }
  add(t, to, current());
  return out;
}

std::optional<double> Median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The time STEP was reached in a generation that started at points[0] (points in time order).
double TimeOfStep(const std::vector<std::pair<double, int64_t>>& points, int64_t step) {
  if (points.empty()) return 0;
  if (step <= points.front().second) return points.front().first;
  for (size_t i = 1; i < points.size(); ++i) {
    const auto& [ta, sa] = points[i - 1];
    const auto& [tb, sb] = points[i];
    if (step <= sb && sb > sa) {
      return ta + (tb - ta) * static_cast<double>(step - sa) / static_cast<double>(sb - sa);
    }
  }
  return points.back().first;
}

int GpusOfTres(const std::string& tres) {
  int untyped = -1, typed = 0;
  for (const std::string& item : Split(tres, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = item.substr(0, eq);
    auto n = ParseInt(item.substr(eq + 1), 0, 1 << 30);
    if (!n) continue;
    if (key == "gres/gpu") untyped = static_cast<int>(*n);
    if (StartsWith(key, "gres/gpu:")) typed += static_cast<int>(*n);
  }
  return untyped >= 0 ? untyped : typed;
}

}  // namespace

const char* GoodputUseName(GoodputUse use) {
  switch (use) {
    case GoodputUse::kStepsKept: return "steps_kept";
    case GoodputUse::kStepsRedone: return "steps_redone";
    case GoodputUse::kRecovery: return "recovery";
    case GoodputUse::kCkptStall: return "ckpt_stall";
    case GoodputUse::kPreempted: return "preempted";
    case GoodputUse::kNoProgress: return "no_progress";
  }
  return "?";
}

double Total(const GoodputSplit& split) {
  double t = 0;
  for (double v : split) t += v;
  return t;
}

const char* SacctFormat() { return "JobIDRaw,User,Partition,Start,End,State,NNodes,NCPUS,AllocTRES"; }

Result<std::vector<SlurmRun>> ParseSacctRuns(std::string_view text) {
  std::vector<SlurmRun> runs;
  for (const std::string& raw : Split(text, '\n')) {
    const std::string line = Trim(raw);
    if (line.empty()) continue;
    const std::vector<std::string> f = Split(line, '|');
    if (f.size() != 9) {
      return Status::Error("sacct: expected 9 fields (" + std::string(SacctFormat()) + "), got " +
                           std::to_string(f.size()) + " in '" + EscapeControl(line) + "'");
    }
    if (f[0].find('.') != std::string::npos) continue;  // a job step
    auto start = ParseInt(f[3], 0, std::numeric_limits<int64_t>::max());
    if (!start || *start == 0) continue;  // never started ("Unknown", "None")
    SlurmRun r;
    r.job_id = f[0];
    r.user = f[1].substr(0, f[1].find('('));  // sacct -c writes "alice(1001)"
    r.partition = f[2];
    r.start = static_cast<double>(*start);
    auto end = ParseInt(f[4], 0, std::numeric_limits<int64_t>::max());
    r.end = end ? static_cast<double>(*end) : 0;  // "Unknown": still running
    r.state = f[5];
    r.nodes = static_cast<int>(ParseInt(f[6], 0, 1 << 30).value_or(0));
    r.cpus = static_cast<int>(ParseInt(f[7], 0, 1 << 30).value_or(0));
    r.gpus = GpusOfTres(f[8]);
    runs.push_back(std::move(r));
  }
  return runs;
}

JobGoodput SplitJob(const std::vector<SlurmRun>& runs_in, const std::vector<JournalEvent>& events,
                    double now) {
  std::vector<SlurmRun> runs = runs_in;
  std::sort(runs.begin(), runs.end(),
            [](const SlurmRun& a, const SlurmRun& b) { return a.start < b.start; });
  JobGoodput job;
  if (runs.empty()) return job;
  job.job_id = runs.front().job_id;
  job.user = runs.back().user;
  job.partition = runs.back().partition;

  std::vector<double> all_step_s;
  for (const auto& e : events) {
    if (e.kind == event_kind::kProgress) {
      if (auto s = Field(e, "step_s"); s && *s > 0) all_step_s.push_back(*s);
    }
  }
  const double job_step_s = Median(all_step_s).value_or(0);

  // Steps run again: a generation's steps past the step the next one resumed from. One pass
  // over the whole timeline, as a restart may cross runs (requeue) or not (in place).
  std::vector<Claim> claims;
  std::vector<std::pair<double, int64_t>> gen;  // the current generation's (time, step)
  // When its program stopped stepping, if it was seen: its end at a crash or a SIGTERM, or the
  // preemption notice. The steps from its last report to then were run and lost, unreported.
  double stopped = -1;
  int64_t first_step = -1;
  auto close_generation = [&](int64_t resumed) {
    if (gen.empty()) return;
    const auto last = std::max_element(gen.begin(), gen.end(), [](const auto& a, const auto& b) {
      return a.second < b.second;
    });
    const bool lost_unreported = stopped > gen.back().first && last->second >= resumed;
    if (last->second > resumed || (lost_unreported && last->second == resumed && resumed > 0)) {
      job.steps_redone += last->second - std::max<int64_t>(resumed, gen.front().second);
      claims.push_back({TimeOfStep(gen, resumed), std::max(gen.back().first, stopped),
                        GoodputUse::kStepsRedone});
    }
  };
  for (const auto& e : events) {
    if (e.kind == event_kind::kResumed || e.kind == event_kind::kFreshStart) {
      const int64_t from = e.kind == event_kind::kResumed ? std::max<int64_t>(e.step, 0) : 0;
      close_generation(from);
      gen.assign(1, {e.time, from});
      stopped = -1;
      if (first_step < 0) first_step = from;
    } else if (IsStepEvidence(e)) {
      gen.emplace_back(e.time, e.step);
      if (first_step < 0) first_step = e.step;
    } else if (e.kind == event_kind::kFtDiscarded && e.step >= 0) {
      job.steps_redone += 1;
      claims.push_back({e.time - job_step_s, e.time, GoodputUse::kStepsRedone});
    } else if (stopped < 0 && !gen.empty() &&
               (e.kind == event_kind::kTerminated || e.kind == event_kind::kPreempted ||
                (e.kind == event_kind::kFailure && TextField(e, "class").value_or("") != "hang"))) {
      stopped = e.time;
      if (e.kind == event_kind::kPreempted) {
        if (auto text = TextField(e, "preempt_time")) stopped = ParseEventTime(*text).value_or(e.time);
      }
    }
    if (e.kind == event_kind::kCkptCommitted) {
      if (auto s = Field(e, "save_s"); s && *s > 0) {
        claims.push_back({e.time - *s, e.time, GoodputUse::kCkptStall});
      }
    }
  }
  if (!gen.empty()) {
    int64_t last = gen.front().second;
    for (const auto& p : gen) last = std::max(last, p.second);
    job.steps_kept = std::max<int64_t>(0, last - std::max<int64_t>(first_step, 0));
  }

  for (size_t i = 0; i < runs.size(); ++i) {
    RunGoodput rg;
    rg.run = runs[i];
    const double start = runs[i].start;
    rg.end = runs[i].end > 0 ? runs[i].end : std::max(now, start);
    const double owns_to = i + 1 < runs.size() ? runs[i + 1].start
                                               : std::numeric_limits<double>::infinity();
    const double owns_from = i == 0 ? -std::numeric_limits<double>::infinity() : start;
    std::vector<Claim> mine;
    std::optional<double> launched, preempt;
    std::vector<double> step_s;
    std::vector<std::pair<double, int64_t>> evidence;
    std::optional<int64_t> resumed;
    double failure = -1;  // an open failure's time
    int ranks = 0;
    for (const auto& e : events) {
      if (e.time < owns_from || e.time >= owns_to) continue;
      if (e.kind == event_kind::kStepStarted && !launched) {
        launched = e.time;
        ranks = static_cast<int>(Field(e, "ranks").value_or(0));
      } else if (e.kind == event_kind::kResumed && !resumed) {
        resumed = std::max<int64_t>(e.step, 0);
      } else if (e.kind == event_kind::kFreshStart && !resumed) {
        resumed = 0;
      } else if (e.kind == event_kind::kProgress) {
        if (auto s = Field(e, "step_s"); s && *s > 0) step_s.push_back(*s);
      } else if (e.kind == event_kind::kPreempted && !preempt) {
        auto text = TextField(e, "preempt_time");
        preempt = text ? ParseEventTime(*text).value_or(e.time) : e.time;
        ++job.preemptions;
      } else if (e.kind == event_kind::kFailure) {
        if (failure >= 0) mine.push_back({failure, e.time, GoodputUse::kRecovery});
        failure = e.time;
      } else if (e.kind == event_kind::kFirstStep && failure >= 0) {
        mine.push_back({failure, e.time, GoodputUse::kRecovery});  // restarted in place
        failure = -1;
      }
      if (IsStepEvidence(e)) evidence.emplace_back(e.time, e.step);
    }
    if (failure >= 0) mine.push_back({failure, rg.end, GoodputUse::kRecovery});  // to the requeue
    if (preempt) mine.push_back({*preempt, rg.end, GoodputUse::kPreempted});
    // The first step's start: the run's first step at its step time (the progress windows'
    // median, else the rate between its first and last steps seen) before the first step seen.
    double first = rg.end;
    if (!evidence.empty()) {
      const auto& [t_a, s_a] = evidence.front();
      const auto& [t_b, s_b] = evidence.back();
      double per = Median(step_s).value_or(0);
      if (per <= 0 && s_b > s_a) per = (t_b - t_a) / static_cast<double>(s_b - s_a);
      if (per <= 0) per = job_step_s;
      const int64_t from = resumed.value_or(s_a);
      first = t_a - static_cast<double>(std::max<int64_t>(0, s_a - from)) * per;
      first = std::max({first, start, launched.value_or(start)});
      mine.push_back({first, t_b, GoodputUse::kStepsKept});
    }
    // A restart's start-up, to its first step (or to the notice, when it never got there).
    if (i > 0) mine.push_back({start, std::min(first, preempt.value_or(rg.end)), GoodputUse::kRecovery});
    for (const Claim& c : claims) mine.push_back(c);
    rg.gpus = runs[i].gpus > 0 ? runs[i].gpus : ranks > 0 ? ranks : runs[i].cpus;
    rg.gpus_from = runs[i].gpus > 0 ? "gres/gpu" : ranks > 0 ? "ranks" : "cpus";
    rg.segments = Paint(start, rg.end, mine);
    for (const auto& s : rg.segments) rg.gpu_s[static_cast<int>(s.use)] += (s.t1 - s.t0) * rg.gpus;
    for (int u = 0; u < kGoodputUses; ++u) job.gpu_s[u] += rg.gpu_s[u];
    job.allocated_gpu_s += (rg.end - start) * rg.gpus;
    job.runs.push_back(std::move(rg));
  }
  return job;
}

JobGoodput ClipJob(const JobGoodput& job, double from, double to) {
  JobGoodput out = job;
  out.runs.clear();
  out.gpu_s = {};
  out.allocated_gpu_s = 0;
  for (const RunGoodput& r : job.runs) {
    RunGoodput c = r;
    c.segments.clear();
    c.gpu_s = {};
    for (GoodputSegment s : r.segments) {
      s.t0 = std::max(s.t0, from);
      s.t1 = std::min(s.t1, to);
      if (s.t1 <= s.t0) continue;
      c.segments.push_back(s);
      c.gpu_s[static_cast<int>(s.use)] += (s.t1 - s.t0) * c.gpus;
    }
    if (c.segments.empty()) continue;
    for (int u = 0; u < kGoodputUses; ++u) out.gpu_s[u] += c.gpu_s[u];
    out.allocated_gpu_s += Total(c.gpu_s);
    out.runs.push_back(std::move(c));
  }
  return out;
}

namespace {
std::string DayOf(double t) {
  auto secs = static_cast<time_t>(std::floor(t));
  struct tm tm {};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
  return buf;
}
}  // namespace

std::vector<GoodputRow> SumGoodput(const std::vector<JobGoodput>& jobs, GoodputKey by) {
  std::map<std::tuple<std::string, std::string, std::string>, GoodputRow> rows;
  std::map<std::tuple<std::string, std::string, std::string>, std::set<std::string>> job_ids;
  for (const JobGoodput& j : jobs) {
    for (const RunGoodput& r : j.runs) {
      for (const GoodputSegment& s : r.segments) {
        for (double t = s.t0; t < s.t1;) {
          // Cut at the next UTC midnight when summing by day.
          double until = s.t1;
          if (by.day) until = std::min(until, (std::floor(t / 86400.0) + 1) * 86400.0);
          auto key = std::make_tuple(by.user ? r.run.user : "", by.partition ? r.run.partition : "",
                                     by.day ? DayOf(t) : "");
          GoodputRow& row = rows[key];
          std::tie(row.user, row.partition, row.day) = key;
          row.gpu_s[static_cast<int>(s.use)] += (until - t) * r.gpus;
          job_ids[key].insert(j.job_id);
          t = until;
        }
      }
    }
  }
  std::vector<GoodputRow> out;
  for (auto& [key, row] : rows) {
    row.jobs = static_cast<int>(job_ids[key].size());
    out.push_back(row);
  }
  return out;
}

}  // namespace autopar
