#include "core/health/report.h"

#include <json/json.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "core/failure/timeline.h"
#include "core/text.h"

namespace autopar {
namespace {

std::map<std::string, std::string> Fields(const JournalEvent& e) {
  std::map<std::string, std::string> out;
  for (auto& [k, v] : ParseEventFields(e.detail)) out[k] = v;
  return out;
}

std::optional<double> Number(const std::map<std::string, std::string>& f, const char* key) {
  auto it = f.find(key);
  if (it == f.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

std::optional<double> Median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Percent(double v) { return FormatFixed(v * 100, 1) + "%"; }

// 1234567.8 -> "1,234,568"
std::string Thousands(double v) {
  std::string digits = std::to_string(static_cast<long long>(v + 0.5));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

}  // namespace

JobReport BuildReport(const std::string& job_id, const std::vector<JournalEvent>& events) {
  JobReport r;
  r.job_id = job_id;
  std::vector<double> step_s, mfu, tokens, samples;
  size_t open = 0;  // 1 + the index of the recovery whose first step is awaited; 0: none
  for (const JournalEvent& e : events) {
    if (r.first_time == 0 || e.time < r.first_time) r.first_time = e.time;
    r.last_time = std::max(r.last_time, e.time);
    const auto f = Fields(e);
    if (e.kind == event_kind::kSubmitted && r.model.empty() && f.count("model")) {
      r.model = f.at("model");
      std::string layout;
      for (const char* k : {"tp", "cp", "pp", "dp", "micro_batch", "grad_accum", "recompute"}) {
        if (f.count(k)) layout += (layout.empty() ? "" : " ") + std::string(k) + "=" + f.at(k);
      }
      r.layout = layout;
      r.planned_step_s = Number(f, "step_s");
      r.planned_mfu = Number(f, "mfu");
    } else if (e.kind == "progress") {
      JobReport::Window w;
      w.time = e.time;
      w.step = e.step;
      w.step_s = Number(f, "step_s").value_or(0);
      w.samples_per_s = Number(f, "samples_per_s");
      w.tokens_per_s = Number(f, "tokens_per_s");
      w.mfu = Number(f, "mfu");
      w.loss = Number(f, "loss");
      if (!r.planned_step_s) r.planned_step_s = Number(f, "planned_step_s");
      if (!r.planned_mfu) r.planned_mfu = Number(f, "planned_mfu");
      if (w.step_s > 0) step_s.push_back(w.step_s);
      if (w.mfu) mfu.push_back(*w.mfu);
      if (w.tokens_per_s) tokens.push_back(*w.tokens_per_s);
      if (w.samples_per_s) samples.push_back(*w.samples_per_s);
      r.progress.push_back(w);
    } else if (e.kind == event_kind::kFailure) {
      JobReport::Recovery rec;
      rec.time = e.time;
      rec.failure_class = f.count("class") ? f.at("class") : "unknown";
      r.recoveries.push_back(rec);
      open = r.recoveries.size();
    } else if (open && (e.kind == event_kind::kRecovery || e.kind == event_kind::kRequeue ||
                        e.kind == event_kind::kStopped)) {
      auto& rec = r.recoveries[open - 1];
      if (rec.action.empty()) {
        rec.action = e.kind == event_kind::kRecovery && f.count("action") ? f.at("action")
                     : e.kind == event_kind::kRequeue                    ? "requeue"
                                                                         : "stop";
      }
    } else if (open && (e.kind == event_kind::kFirstStep ||
                        (e.kind == event_kind::kResumed &&
                         r.recoveries[open - 1].action != "restart-in-place"))) {
      // In place, the restarted program restores (resumed) before its first step; a requeued
      // job's next run has no first_step event, so its resume ends the recovery.
      auto& rec = r.recoveries[open - 1];
      auto since = Number(f, "since_failure_s");
      rec.lost_s = since && e.kind == event_kind::kFirstStep ? *since : e.time - rec.time;
      r.lost_s += *rec.lost_s;
      open = 0;
    } else if (e.kind == event_kind::kUsage) {
      const std::string node = f.count("node") ? f.at("node") : e.node;
      auto it = std::find_if(r.utilisation.begin(), r.utilisation.end(),
                             [&](const JobReport::NodeUse& u) { return u.node == node; });
      if (it == r.utilisation.end()) {
        JobReport::NodeUse use;
        use.node = node;
        r.utilisation.push_back(use);
        it = r.utilisation.end() - 1;
      }
      it->ranks = std::max(it->ranks, static_cast<int>(Number(f, "ranks").value_or(0)));
      it->cpu_cores += Number(f, "cpu_cores").value_or(0);  // a sum here, a mean below
      it->rss_gib = std::max(it->rss_gib, Number(f, "rss_gib").value_or(0));
      if (auto g = Number(f, "gpu_util")) it->gpu_util = it->gpu_util.value_or(0) + *g;
      if (auto g = Number(f, "gpu_mem_gib")) it->gpu_mem_gib = std::max(it->gpu_mem_gib.value_or(0), *g);
      ++it->summaries;
    } else if (e.kind == event_kind::kIdle) {
      r.idle.push_back({e.time, f.count("node") ? f.at("node") : e.node,
                        Number(f, "idle_s").value_or(0)});
    } else if (e.kind == event_kind::kFinished) {
      r.end = "finished exit=" + (f.count("exit") ? f.at("exit") : std::string("?"));
    } else if (e.kind == event_kind::kStopped) {
      r.end = "stopped: " + (f.count("reason") ? f.at("reason") : e.detail);
    }
  }
  for (auto& u : r.utilisation) {
    u.cpu_cores /= u.summaries;
    if (u.gpu_util) *u.gpu_util /= u.summaries;
  }
  std::sort(r.utilisation.begin(), r.utilisation.end(),
            [](const JobReport::NodeUse& a, const JobReport::NodeUse& b) { return a.node < b.node; });
  r.step_s = Median(step_s);
  r.mfu = Median(mfu);
  r.tokens_per_s = Median(tokens);
  r.samples_per_s = Median(samples);
  return r;
}

RecoveryCounts CountRecoveries(const JobReport& r) {
  RecoveryCounts c;
  for (const auto& rec : r.recoveries) {
    c.in_place += rec.action == "restart-in-place";
    c.requeued += rec.action == "requeue" || rec.action == "requeue-path";
  }
  return c;
}

std::string ReportToText(const JobReport& r) {
  std::ostringstream os;
  os << "job " << r.job_id;
  if (!r.model.empty()) os << ": " << r.model << " (" << r.layout << ")";
  os << "\n";
  os << "planned:     ";
  if (r.planned_step_s) {
    os << FormatFixed(*r.planned_step_s, 3) << " s/step";
    if (r.planned_mfu) os << ", MFU " << Percent(*r.planned_mfu);
  } else {
    os << "no plan (submit with --auto-parallel)";
  }
  os << "\nmeasured:    ";
  if (r.step_s) {
    os << FormatFixed(*r.step_s, 3) << " s/step (median of " << r.progress.size() << " windows)";
    if (r.mfu) os << ", MFU " << Percent(*r.mfu);
    if (r.tokens_per_s) os << ", " << Thousands(*r.tokens_per_s) << " tokens/s";
    if (r.samples_per_s) os << ", " << FormatFixed(*r.samples_per_s, 2) << " samples/s";
    if (r.planned_step_s) os << "; " << FormatFixed(*r.step_s / *r.planned_step_s, 2) << "x the plan's step time";
  } else {
    os << "no progress reported (heartbeats from rank 0: autopar.ckpt.heartbeat(step, tokens=...))";
  }
  os << "\n";
  if (!r.progress.empty()) {
    os << "over time:\n";
    for (const auto& w : r.progress) {
      os << "  " << FormatEventTime(w.time, false) << "  step " << w.step << "  "
         << FormatFixed(w.step_s, 3) << " s/step";
      if (w.tokens_per_s) os << "  " << Thousands(*w.tokens_per_s) << " tokens/s";
      if (w.samples_per_s) os << "  " << FormatFixed(*w.samples_per_s, 2) << " samples/s";
      if (w.mfu) os << "  MFU " << Percent(*w.mfu);
      if (w.loss) os << "  loss " << FormatFixed(*w.loss, 6);
      os << "\n";
    }
  }
  const RecoveryCounts counts = CountRecoveries(r);
  os << "recoveries:  " << r.recoveries.size() << " (" << counts.in_place << " in place, "
     << counts.requeued << " requeued), " << FormatFixed(r.lost_s, 1) << " s lost\n";
  for (const auto& rec : r.recoveries) {
    os << "  " << FormatEventTime(rec.time, false) << "  " << rec.failure_class << "  "
       << (rec.action.empty() ? "-" : rec.action) << "  "
       << (rec.lost_s ? FormatFixed(*rec.lost_s, 1) + " s to the next step" : std::string("not resumed"))
       << "\n";
  }
  if (!r.utilisation.empty()) {
    os << "utilisation:\n";
    for (const auto& u : r.utilisation) {
      os << "  " << u.node << "  " << u.ranks << (u.ranks == 1 ? " rank  " : " ranks  ")
         << FormatFixed(u.cpu_cores, 2) << " CPU cores  " << FormatFixed(u.rss_gib, 2) << " GiB";
      if (u.gpu_util) os << "  GPU " << FormatFixed(*u.gpu_util, 1) << "%, " << FormatFixed(*u.gpu_mem_gib, 1) << " GiB";
      os << "\n";
    }
  }
  for (const auto& i : r.idle) {
    os << "idle:        " << i.node << " at " << FormatEventTime(i.time, false) << ", no progress or use for "
       << FormatFixed(i.idle_s, 0) << " s\n";
  }
  os << "end:         " << (r.end.empty() ? "running (or not told)" : r.end) << " after "
     << FormatFixed(r.last_time - r.first_time, 1) << " s\n";
  // Details come from the job's programs: nothing in them may act on the reader's terminal.
  return EscapeControl(os.str(), true);
}

std::string ReportToJson(const JobReport& r) {
  Json::Value v(Json::objectValue);
  v["job_id"] = r.job_id;
  v["model"] = r.model;
  v["layout"] = r.layout;
  auto opt = [](const std::optional<double>& x) { return x ? Json::Value(*x) : Json::Value(); };
  v["planned"]["step_s"] = opt(r.planned_step_s);
  v["planned"]["mfu"] = opt(r.planned_mfu);
  v["measured"]["step_s"] = opt(r.step_s);
  v["measured"]["mfu"] = opt(r.mfu);
  v["measured"]["tokens_per_s"] = opt(r.tokens_per_s);
  v["measured"]["samples_per_s"] = opt(r.samples_per_s);
  Json::Value windows(Json::arrayValue);
  for (const auto& w : r.progress) {
    Json::Value x(Json::objectValue);
    x["time"] = w.time;
    x["step"] = Json::Int64(w.step);
    x["step_s"] = w.step_s;
    x["tokens_per_s"] = opt(w.tokens_per_s);
    x["samples_per_s"] = opt(w.samples_per_s);
    x["mfu"] = opt(w.mfu);
    x["loss"] = opt(w.loss);
    windows.append(x);
  }
  v["progress"] = windows;
  Json::Value recs(Json::arrayValue);
  for (const auto& rec : r.recoveries) {
    Json::Value x(Json::objectValue);
    x["time"] = rec.time;
    x["class"] = rec.failure_class;
    x["action"] = rec.action;
    x["lost_s"] = opt(rec.lost_s);
    recs.append(x);
  }
  v["recoveries"] = recs;
  Json::Value use(Json::arrayValue);
  for (const auto& u : r.utilisation) {
    Json::Value x(Json::objectValue);
    x["node"] = u.node;
    x["ranks"] = u.ranks;
    x["cpu_cores"] = u.cpu_cores;
    x["rss_gib"] = u.rss_gib;
    x["gpu_util"] = opt(u.gpu_util);
    x["gpu_mem_gib"] = opt(u.gpu_mem_gib);
    use.append(x);
  }
  v["utilisation"] = use;
  Json::Value idle(Json::arrayValue);
  for (const auto& i : r.idle) {
    Json::Value x(Json::objectValue);
    x["time"] = i.time;
    x["node"] = i.node;
    x["idle_s"] = i.idle_s;
    idle.append(x);
  }
  v["idle"] = idle;
  v["lost_s"] = r.lost_s;
  v["duration_s"] = r.last_time - r.first_time;
  v["end"] = r.end;
  Json::StreamWriterBuilder w;
  w["indentation"] = "  ";
  return Json::writeString(w, v) + "\n";
}

}  // namespace autopar
