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

// An event's key=value fields by key (Fields).
using FieldMap = std::map<std::string, std::string>;

// Reads a job's journal, event by event, into its report.
class ReportBuilder {
 public:
  explicit ReportBuilder(const std::string& job_id) { r_.job_id = job_id; }

  void Add(const JournalEvent& e) {
    if (r_.first_time == 0 || e.time < r_.first_time) r_.first_time = e.time;
    r_.last_time = std::max(r_.last_time, e.time);
    const FieldMap f = Fields(e);
    if (e.kind == event_kind::kSubmitted && r_.model.empty() && f.count("model")) {
      AddPlan(f);
    } else if (e.kind == "progress") {
      AddProgress(e, f);
    } else if (e.kind == event_kind::kFailure) {
      OpenRecovery(e, f);
    } else if (IsFaultTolerance(e.kind) || e.kind == event_kind::kRankExit ||
               e.kind == event_kind::kHeartbeatMissed) {
      AddFaultTolerance(e, f);
    } else if (e.kind == event_kind::kRestarted) {
      r_.healthy_restarts += static_cast<int64_t>(
          std::max(0.0, Number(f, "programs").value_or(0) - Number(f, "failed").value_or(0)));
    } else if (DecidesRecovery(e)) {
      SetRecoveryAction(e, f);
    } else if (EndsRecovery(e)) {
      CloseRecovery(e, f);
    } else if (e.kind == event_kind::kUsage) {
      AddUsage(e, f);
    } else if (e.kind == event_kind::kIdle) {
      r_.idle.push_back(
          {e.time, f.count("node") ? f.at("node") : e.node, Number(f, "idle_s").value_or(0)});
    } else if (e.kind == event_kind::kFinished) {
      r_.end = "finished exit=" + (f.count("exit") ? f.at("exit") : std::string("?"));
    } else if (e.kind == event_kind::kStopped) {
      r_.end = "stopped: " + (f.count("reason") ? f.at("reason") : e.detail);
    }
    if (e.kind == event_kind::kResumed && high_step_ > e.step && e.step >= 0) {
      r_.lost_steps += high_step_ - e.step;  // run again from the checkpoint
      high_step_ = e.step;
    } else if (e.kind == "progress" || e.kind == event_kind::kCkptCommitted) {
      high_step_ = std::max(high_step_, e.step);
    }
  }

  // The report once every event is in: per-node means, nodes by name, the windows' medians.
  JobReport Finish() {
    for (auto& u : r_.utilisation) {
      u.cpu_cores /= u.summaries;
      if (u.gpu_util) *u.gpu_util /= u.summaries;
    }
    std::sort(
        r_.utilisation.begin(), r_.utilisation.end(),
        [](const JobReport::NodeUse& a, const JobReport::NodeUse& b) { return a.node < b.node; });
    r_.step_s = Median(step_s_);
    r_.mfu = Median(mfu_);
    r_.tokens_per_s = Median(tokens_);
    r_.samples_per_s = Median(samples_);
    int64_t steps = 0;
    for (const auto& w : r_.progress) steps = std::max(steps, w.step);
    if (r_.step_s && steps > 0 && r_.last_time > r_.first_time) {
      r_.ettr = std::min(1.0, static_cast<double>(steps) * *r_.step_s / (r_.last_time - r_.first_time));
    }
    return r_;
  }

 private:
  // The plan, from the "submitted" event.
  void AddPlan(const FieldMap& f) {
    r_.model = f.at("model");
    std::string layout;
    for (const char* k : {"tp", "cp", "pp", "dp", "micro_batch", "grad_accum", "recompute"}) {
      if (f.count(k)) layout += (layout.empty() ? "" : " ") + std::string(k) + "=" + f.at(k);
    }
    r_.layout = layout;
    r_.planned_step_s = Number(f, "step_s");
    r_.planned_mfu = Number(f, "mfu");
  }

  void AddProgress(const JournalEvent& e, const FieldMap& f) {
    JobReport::Window w;
    w.time = e.time;
    w.step = e.step;
    w.step_s = Number(f, "step_s").value_or(0);
    w.samples_per_s = Number(f, "samples_per_s");
    w.tokens_per_s = Number(f, "tokens_per_s");
    w.mfu = Number(f, "mfu");
    w.loss = Number(f, "loss");
    if (!r_.planned_step_s) r_.planned_step_s = Number(f, "planned_step_s");
    if (!r_.planned_mfu) r_.planned_mfu = Number(f, "planned_mfu");
    if (w.step_s > 0) step_s_.push_back(w.step_s);
    if (w.mfu) mfu_.push_back(*w.mfu);
    if (w.tokens_per_s) tokens_.push_back(*w.tokens_per_s);
    if (w.samples_per_s) samples_.push_back(*w.samples_per_s);
    r_.progress.push_back(w);
  }

  void OpenRecovery(const JournalEvent& e, const FieldMap& f) {
    JobReport::Recovery rec;
    rec.time = e.time;
    rec.failure_class = f.count("class") ? f.at("class") : "unknown";
    r_.recoveries.push_back(rec);
    open_ = r_.recoveries.size();
    ft_fault_.reset();  // the program's exit that came before was this failure's
  }

  // Whether `e` says what is done about the open recovery.
  bool DecidesRecovery(const JournalEvent& e) const {
    return open_ && (e.kind == event_kind::kRecovery || e.kind == event_kind::kRequeue ||
                     e.kind == event_kind::kStopped);
  }

  // The first decision about a recovery is its action.
  void SetRecoveryAction(const JournalEvent& e, const FieldMap& f) {
    auto& rec = r_.recoveries[open_ - 1];
    if (!rec.action.empty()) return;
    rec.action = e.kind == event_kind::kRecovery && f.count("action") ? f.at("action")
                 : e.kind == event_kind::kRequeue                     ? "requeue"
                                                                      : "stop";
  }

  // In place, the restarted program restores (resumed) before its first step; a requeued job's
  // next run has no first_step event, so its resume ends the recovery.
  bool EndsRecovery(const JournalEvent& e) const {
    return open_ && (e.kind == event_kind::kFirstStep ||
                     (e.kind == event_kind::kResumed &&
                      r_.recoveries[open_ - 1].action != "restart-in-place"));
  }

  void CloseRecovery(const JournalEvent& e, const FieldMap& f) {
    auto& rec = r_.recoveries[open_ - 1];
    auto since = Number(f, "since_failure_s");
    rec.lost_s = since && e.kind == event_kind::kFirstStep ? *since : e.time - rec.time;
    r_.lost_s += *rec.lost_s;
    open_ = 0;
  }

  static bool IsFaultTolerance(const std::string& kind) {
    return kind == event_kind::kFtQuorum || kind == event_kind::kFtHealed ||
           kind == event_kind::kFtDiscarded;
  }

  // A fault-tolerant group's recovery: from the first failure of a member (its program's exit,
  // or the hang autopard saw) to the group re-formed and, when a member was replaced, healed.
  void AddFaultTolerance(const JournalEvent& e, const FieldMap& f) {
    if (e.kind == event_kind::kRankExit || e.kind == event_kind::kHeartbeatMissed) {
      const bool failed = e.kind == event_kind::kHeartbeatMissed ||
                          (f.count("exit") && f.at("exit") != "0");
      if (failed && !ft_fault_) ft_fault_ = std::make_pair(e.time, FaultClassOf(e, f));
    } else if (e.kind == event_kind::kFtDiscarded) {
      ++r_.lost_steps;
    } else if (e.kind == event_kind::kFtQuorum && Number(f, "epoch").value_or(0) > 0) {
      ++r_.ft.reforms;
      JobReport::Recovery rec;
      rec.time = ft_fault_ ? ft_fault_->first : e.time;
      rec.failure_class = ft_fault_ ? ft_fault_->second : "member-lost";
      rec.action = "ft-reform";
      const bool heals = f.count("heals") && !f.at("heals").empty();
      if (!heals) rec.lost_s = e.time - rec.time;  // the group went on without a newcomer
      if (rec.lost_s) r_.lost_s += *rec.lost_s;
      r_.recoveries.push_back(rec);
      ft_open_ = heals ? r_.recoveries.size() : 0;
      ft_fault_.reset();
    } else if (e.kind == event_kind::kFtHealed) {
      ++r_.ft.heals;
      r_.ft.healed_bytes += static_cast<int64_t>(Number(f, "bytes").value_or(0));
      if (ft_open_) {
        auto& rec = r_.recoveries[ft_open_ - 1];
        rec.lost_s = e.time - rec.time;
        r_.lost_s += *rec.lost_s;
        ft_open_ = 0;
      }
    }
  }

  static std::string FaultClassOf(const JournalEvent& e, const FieldMap& f) {
    if (e.kind == event_kind::kHeartbeatMissed) return "hang";
    return f.count("class") ? f.at("class") : "rank-crash";
  }

  // One "usage" summary of a node, added to its totals (Finish turns sums into means).
  void AddUsage(const JournalEvent& e, const FieldMap& f) {
    const std::string node = f.count("node") ? f.at("node") : e.node;
    auto it = std::find_if(r_.utilisation.begin(), r_.utilisation.end(),
                           [&](const JobReport::NodeUse& u) { return u.node == node; });
    if (it == r_.utilisation.end()) {
      JobReport::NodeUse use;
      use.node = node;
      r_.utilisation.push_back(use);
      it = r_.utilisation.end() - 1;
    }
    it->ranks = std::max(it->ranks, static_cast<int>(Number(f, "ranks").value_or(0)));
    it->cpu_cores += Number(f, "cpu_cores").value_or(0);  // a sum here, a mean in Finish
    it->rss_gib = std::max(it->rss_gib, Number(f, "rss_gib").value_or(0));
    if (auto g = Number(f, "gpu_util")) it->gpu_util = it->gpu_util.value_or(0) + *g;
    if (auto g = Number(f, "gpu_mem_gib")) {
      it->gpu_mem_gib = std::max(it->gpu_mem_gib.value_or(0), *g);
    }
    ++it->summaries;
  }

  JobReport r_;
  std::vector<double> step_s_, mfu_, tokens_, samples_;  // the windows', for the medians
  size_t open_ = 0;  // 1 + the index of the recovery whose first step is awaited; 0: none
  int64_t high_step_ = -1;  // the highest step reported since the last resume
  std::optional<std::pair<double, std::string>> ft_fault_;  // a member's failure, not re-formed yet
  size_t ft_open_ = 0;  // 1 + the index of the fault-tolerant recovery awaiting its heal; 0: none
};

Json::Value OptionalNumber(const std::optional<double>& x) {
  return x ? Json::Value(*x) : Json::Value();
}

Json::Value WindowToValue(const JobReport::Window& w) {
  Json::Value x(Json::objectValue);
  x["time"] = w.time;
  x["step"] = Json::Int64(w.step);
  x["step_s"] = w.step_s;
  x["tokens_per_s"] = OptionalNumber(w.tokens_per_s);
  x["samples_per_s"] = OptionalNumber(w.samples_per_s);
  x["mfu"] = OptionalNumber(w.mfu);
  x["loss"] = OptionalNumber(w.loss);
  return x;
}

Json::Value RecoveryToValue(const JobReport::Recovery& rec) {
  Json::Value x(Json::objectValue);
  x["time"] = rec.time;
  x["class"] = rec.failure_class;
  x["action"] = rec.action;
  x["lost_s"] = OptionalNumber(rec.lost_s);
  return x;
}

Json::Value NodeUseToValue(const JobReport::NodeUse& u) {
  Json::Value x(Json::objectValue);
  x["node"] = u.node;
  x["ranks"] = u.ranks;
  x["cpu_cores"] = u.cpu_cores;
  x["rss_gib"] = u.rss_gib;
  x["gpu_util"] = OptionalNumber(u.gpu_util);
  x["gpu_mem_gib"] = OptionalNumber(u.gpu_mem_gib);
  return x;
}

Json::Value IdleToValue(const JobReport::Idle& i) {
  Json::Value x(Json::objectValue);
  x["time"] = i.time;
  x["node"] = i.node;
  x["idle_s"] = i.idle_s;
  return x;
}

// `items` as a JSON array, each element made by `to_value`.
template <typename T>
Json::Value ArrayOf(const std::vector<T>& items, Json::Value (*to_value)(const T&)) {
  Json::Value a(Json::arrayValue);
  for (const T& x : items) a.append(to_value(x));
  return a;
}

}  // namespace

JobReport BuildReport(const std::string& job_id, const std::vector<JournalEvent>& events) {
  ReportBuilder b(job_id);
  for (const JournalEvent& e : events) b.Add(e);
  return b.Finish();
}

RecoveryCounts CountRecoveries(const JobReport& r) {
  RecoveryCounts c;
  for (const auto& rec : r.recoveries) {
    c.in_place += rec.action == "restart-in-place";
    c.requeued += rec.action == "requeue" || rec.action == "requeue-path";
    c.ft += rec.action == "ft-reform";
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
  os << "recoveries:  " << r.recoveries.size() << " (";
  if (counts.ft) os << counts.ft << " by the fault-tolerant group, ";
  os << counts.in_place << " in place, " << counts.requeued << " requeued), "
     << FormatFixed(r.lost_s, 1) << " s lost, " << r.lost_steps
     << (r.lost_steps == 1 ? " step" : " steps") << " run again, " << r.healthy_restarts
     << " healthy " << (r.healthy_restarts == 1 ? "program" : "programs") << " restarted\n";
  if (r.ft.reforms || r.ft.heals) {
    os << "fault tolerance: " << r.ft.reforms << " re-forms of the group, " << r.ft.heals
       << " members healed from a live peer (" << Thousands(static_cast<double>(r.ft.healed_bytes))
       << " bytes)\n";
  }
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
      if (u.gpu_util) {
        os << "  GPU " << FormatFixed(*u.gpu_util, 1) << "%";
        // A node may report utilisation without memory (no NVML memory query): say nothing of it.
        if (u.gpu_mem_gib) os << ", " << FormatFixed(*u.gpu_mem_gib, 1) << " GiB";
      }
      os << "\n";
    }
  }
  for (const auto& i : r.idle) {
    os << "idle:        " << i.node << " at " << FormatEventTime(i.time, false) << ", no progress or use for "
       << FormatFixed(i.idle_s, 0) << " s\n";
  }
  os << "end:         " << (r.end.empty() ? "running (or not told)" : r.end) << " after "
     << FormatFixed(r.last_time - r.first_time, 1) << " s";
  if (r.ettr) os << "; effective training time ratio " << Percent(*r.ettr);
  os << "\n";
  if (r.goodput) {
    os << "allocation:  " << GoodputJobsToText({*r.goodput}).substr(4 + r.job_id.size() + 1);
  } else if (!r.goodput_note.empty()) {
    os << "allocation:  " << r.goodput_note << "\n";
  }
  // Details come from the job's programs: nothing in them may act on the reader's terminal.
  return EscapeControl(os.str(), true);
}

std::string ReportToJson(const JobReport& r) {
  Json::Value v(Json::objectValue);
  v["job_id"] = r.job_id;
  v["model"] = r.model;
  v["layout"] = r.layout;
  v["planned"]["step_s"] = OptionalNumber(r.planned_step_s);
  v["planned"]["mfu"] = OptionalNumber(r.planned_mfu);
  v["measured"]["step_s"] = OptionalNumber(r.step_s);
  v["measured"]["mfu"] = OptionalNumber(r.mfu);
  v["measured"]["tokens_per_s"] = OptionalNumber(r.tokens_per_s);
  v["measured"]["samples_per_s"] = OptionalNumber(r.samples_per_s);
  v["progress"] = ArrayOf(r.progress, WindowToValue);
  v["recoveries"] = ArrayOf(r.recoveries, RecoveryToValue);
  v["utilisation"] = ArrayOf(r.utilisation, NodeUseToValue);
  v["idle"] = ArrayOf(r.idle, IdleToValue);
  v["lost_s"] = r.lost_s;
  v["lost_steps"] = Json::Int64(r.lost_steps);
  v["healthy_restarts"] = Json::Int64(r.healthy_restarts);
  v["ft"]["reforms"] = r.ft.reforms;
  v["ft"]["heals"] = r.ft.heals;
  v["ft"]["healed_bytes"] = Json::Int64(r.ft.healed_bytes);
  v["ettr"] = OptionalNumber(r.ettr);
  v["duration_s"] = r.last_time - r.first_time;
  v["end"] = r.end;
  Json::Value goodput;
  if (r.goodput && Json::Reader().parse(GoodputToJson({*r.goodput}, {}), goodput)) {
    v["goodput"] = goodput["jobs"][0];
  } else {
    v["goodput"] = Json::Value();
    v["goodput_note"] = r.goodput_note;
  }
  Json::StreamWriterBuilder w;
  w["indentation"] = "  ";
  return Json::writeString(w, v) + "\n";
}

}  // namespace autopar
