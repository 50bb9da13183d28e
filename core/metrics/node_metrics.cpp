#include "core/metrics/node_metrics.h"

#include <cmath>
#include <cstdlib>

#include "core/failure/requeue_policy.h"
#include "core/failure/timeline.h"

namespace autopar {
namespace {

// Every counter: its name, help, and the label it splits by with the values it always shows
// (a series at 0 exists before the first event, as Prometheus' guidelines ask). The class lists
// are filled from requeue_policy.h's failure classes.
struct CounterDef {
  const char* name;
  const char* help;
  const char* label;  // "" for none
  std::vector<std::string> values;
};

std::vector<std::string> ClassValues() {
  std::vector<std::string> v;
  for (FailureClass c : kFailureClasses) v.push_back(FailureClassName(c));
  return v;
}

const std::vector<CounterDef>& Counters() {
  static const std::vector<CounterDef> defs = {
      {"autopard_checkpoint_commits_total", "Rank checkpoints committed on this node.", "", {}},
      {"autopard_checkpoint_uploads_total", "Rank checkpoints uploaded to storage by this node.", "", {}},
      {"autopard_checkpoint_steps_completed_total",
       "Checkpoint steps this node found COMPLETE (every rank in) or completed locally.", "", {}},
      {"autopard_checkpoint_restores_total", "Rank restores served by this node.", "", {}},
      {"autopard_checkpoint_failures_total",
       "Checkpoint failures by kind: upload (ckpt_failed), restore (a step skipped), retention.",
       "kind", {"upload", "restore", "retention"}},
      {"autopard_upload_retries_total", "Timer retries of uploads that failed on storage.", "", {}},
      {"autopard_failures_total", "Job failures this node handled, by failure class.", "class", ClassValues()},
      {"autopard_restarts_in_place_total",
       "In-place restarts this node decided, by the class of the failure that caused them.", "class",
       ClassValues()},
      {"autopard_requeues_total", "Requeues this node made, by the class of the failure that caused them.",
       "class", ClassValues()},
      {"autopard_heartbeats_missed_total", "Hangs: a job's ranks without progress past --heartbeat-timeout.",
       "", {}},
      {"autopard_bad_losses_total", "NaN/Inf or spiking losses of rank 0, by what was done (--on-bad-loss).",
       "action", {"warn", "rollback", "stop"}},
      {"autopard_stragglers_total", "Ranks flagged as stragglers (once per rank per run).", "", {}},
      {"autopard_idle_total", "Job shares of this node flagged idle (--idle-timeout).", "", {}},
  };
  return defs;
}

// Per-job gauges from a progress window's fields.
struct JobGauge {
  const char* field;
  const char* name;
  const char* help;
};
constexpr JobGauge kJobGauges[] = {
    {"step_s", "autopard_job_step_seconds", "Measured seconds per training step (last progress window)."},
    {"planned_step_s", "autopard_job_planned_step_seconds", "Seconds per step the job's plan predicted."},
    {"samples_per_s", "autopard_job_samples_per_second", "Measured samples per second (last window)."},
    {"tokens_per_s", "autopard_job_tokens_per_second", "Measured tokens per second (last window)."},
    {"mfu", "autopard_job_mfu_ratio", "Measured model FLOPs utilization, 0..1 (last window)."},
    {"planned_mfu", "autopard_job_planned_mfu_ratio", "Model FLOPs utilization the plan predicted, 0..1."},
    {"loss", "autopard_job_loss", "Rank 0's mean reported loss over the last window."},
};

std::string Field(const EventFields& fields, const std::string& key) {
  for (const auto& [k, v] : fields) {
    if (k == key) return v;
  }
  return "";
}

bool ParseNumber(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

// A label value from a fixed list, "other" for anything else.
std::string Bounded(const std::string& v, const std::vector<std::string>& allowed) {
  for (const auto& a : allowed) {
    if (a == v) return v;
  }
  return "other";
}

}  // namespace

NodeMetrics::NodeMetrics(std::string version, double start_time)
    : version_(std::move(version)),
      start_time_(start_time),
      upload_seconds_({0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}) {}

void NodeMetrics::Observe(const JournalEvent& e) {
  static const std::map<std::string, std::pair<std::string, std::string>> kPlain = {
      {event_kind::kCkptCommitted, {"autopard_checkpoint_commits_total", ""}},
      {event_kind::kCkptUploaded, {"autopard_checkpoint_uploads_total", ""}},
      {event_kind::kCkptComplete, {"autopard_checkpoint_steps_completed_total", ""}},
      {event_kind::kCkptRestored, {"autopard_checkpoint_restores_total", ""}},
      {event_kind::kCkptFailed, {"autopard_checkpoint_failures_total", "upload"}},
      {event_kind::kCkptRestoreSkipped, {"autopard_checkpoint_failures_total", "restore"}},
      {event_kind::kCkptRetentionFailed, {"autopard_checkpoint_failures_total", "retention"}},
      {event_kind::kCkptUploadRetry, {"autopard_upload_retries_total", ""}},
      {event_kind::kHeartbeatMissed, {"autopard_heartbeats_missed_total", ""}},
      {event_kind::kIdle, {"autopard_idle_total", ""}},
  };
  std::lock_guard<std::mutex> l(mu_);
  if (auto it = kPlain.find(e.kind); it != kPlain.end()) {
    ++counters_[it->second];
    return;
  }
  const EventFields f = ParseEventFields(e.detail);
  static const std::vector<std::string> classes = ClassValues();
  if (e.kind == event_kind::kFailure) {
    const std::string cls = Bounded(Field(f, "class"), classes);
    last_class_[e.job_id] = {cls, e.time};
    ++counters_[{"autopard_failures_total", cls}];
  } else if (e.kind == event_kind::kRecovery) {
    if (Field(f, "action") == "restart-in-place") {
      auto it = last_class_.find(e.job_id);
      ++counters_[{"autopard_restarts_in_place_total", it == last_class_.end() ? "other" : it->second.first}];
    }
  } else if (e.kind == event_kind::kRequeue) {
    auto it = last_class_.find(e.job_id);
    ++counters_[{"autopard_requeues_total", it == last_class_.end() ? "other" : it->second.first}];
  } else if (e.kind == event_kind::kBadLoss) {
    ++counters_[{"autopard_bad_losses_total", Bounded(Field(f, "action"), {"warn", "rollback", "stop"})}];
  } else if (e.kind == event_kind::kStraggler) {
    ++counters_[{"autopard_stragglers_total", ""}];
    double ratio = 0;
    if (e.rank >= 0 && ParseNumber(Field(f, "ratio"), &ratio)) {  // the event's rank is the straggler
      JobSeries& j = jobs_[e.job_id];
      j.updated = e.time;
      j.stragglers[{e.rank, Field(f, "node")}] = ratio;
    }
  } else if (e.kind == event_kind::kProgress) {
    JobSeries& j = jobs_[e.job_id];
    j.updated = e.time;
    j.step = e.step;
    j.gauges.clear();
    for (const auto& g : kJobGauges) {
      double v = 0;
      if (ParseNumber(Field(f, g.field), &v)) j.gauges[g.field] = v;
    }
  }
}

void NodeMetrics::ObserveUpload(uint64_t bytes, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  upload_seconds_.Observe(seconds);
  if (seconds > 0) last_upload_bps_ = static_cast<double>(bytes) / seconds;
}

std::string NodeMetrics::Render(const UploaderSnapshot& uploads, double now) {
  std::vector<MetricFamily> out;
  auto gauge = [&](const char* name, const char* help, double v) {
    out.push_back({name, MetricType::kGauge, help, {{"", {}, v}}});
  };
  out.push_back({"autopard_build_info", MetricType::kGauge, "autopard's version (the value is 1).",
                 {{"", {{"version", version_}}, 1}}});
  gauge("autopard_start_time_seconds", "When autopard started, seconds since the epoch.", start_time_);
  out.push_back({"autopard_heartbeats_total", MetricType::kCounter, "Heartbeats received from ranks.",
                 {{"", {}, static_cast<double>(heartbeats_.load(std::memory_order_relaxed))}}});
  gauge("autopard_upload_queue_depth", "Rank checkpoints queued or being uploaded.",
        static_cast<double>(uploads.queued + uploads.running));
  gauge("autopard_uploads_running", "Rank checkpoints being hashed or uploaded now.",
        static_cast<double>(uploads.running));
  gauge("autopard_uploads_waiting_retry", "Failed uploads waiting for their timer retry.",
        static_cast<double>(uploads.waiting_retry));
  gauge("autopard_ckpt_steps_watched",
        "Checkpoint steps whose ranks on this node are uploaded, waiting for another node to "
        "complete them.",
        static_cast<double>(uploads.steps_watched));
  out.push_back({"autopard_upload_bytes_total", MetricType::kCounter,
                 "Bytes sent to checkpoint storage (parts and single PUTs).",
                 {{"", {}, static_cast<double>(uploads.bytes_sent)}}});

  std::lock_guard<std::mutex> l(mu_);
  MetricFamily h{"autopard_upload_duration_seconds", MetricType::kHistogram,
                 "Wall time of each finished rank upload to storage.", {}};
  upload_seconds_.AppendTo(h);
  out.push_back(std::move(h));
  gauge("autopard_upload_throughput_bytes_per_second",
        "Throughput of the last finished rank upload (bytes / its wall time; 0 before the first).",
        last_upload_bps_);
  for (const auto& def : Counters()) {
    MetricFamily f{def.name, MetricType::kCounter, def.help, {}};
    if (*def.label == '\0') {
      auto it = counters_.find({def.name, ""});
      f.samples.push_back({"", {}, it == counters_.end() ? 0.0 : static_cast<double>(it->second)});
    } else {
      std::map<std::string, uint64_t> values;
      for (const auto& v : def.values) values[v] = 0;
      for (auto it = counters_.lower_bound({def.name, ""}); it != counters_.end() && it->first.first == def.name; ++it) {
        values[it->first.second] = it->second;
      }
      for (const auto& [v, n] : values) f.samples.push_back({"", {{def.label, v}}, static_cast<double>(n)});
    }
    out.push_back(std::move(f));
  }

  for (auto it = jobs_.begin(); it != jobs_.end();) {
    it = now - it->second.updated > kJobTtlS ? jobs_.erase(it) : std::next(it);
  }
  for (auto it = last_class_.begin(); it != last_class_.end();) {
    it = now - it->second.second > kJobTtlS ? last_class_.erase(it) : std::next(it);
  }
  MetricFamily step{"autopard_job_step", MetricType::kGauge, "The last step of the job's last progress window.", {}};
  for (const auto& [job, j] : jobs_) {
    if (j.step >= 0) step.samples.push_back({"", {{"job", job}}, static_cast<double>(j.step)});
  }
  out.push_back(std::move(step));
  for (const auto& g : kJobGauges) {
    MetricFamily f{g.name, MetricType::kGauge, g.help, {}};
    for (const auto& [job, j] : jobs_) {
      if (auto v = j.gauges.find(g.field); v != j.gauges.end()) f.samples.push_back({"", {{"job", job}}, v->second});
    }
    out.push_back(std::move(f));
  }
  MetricFamily s{"autopard_job_straggler_ratio", MetricType::kGauge,
                 "A straggler rank's compute time over the job's median (flagged ranks only).", {}};
  for (const auto& [job, j] : jobs_) {
    for (const auto& [who, ratio] : j.stragglers) {
      s.samples.push_back({"", {{"job", job}, {"rank", std::to_string(who.first)}, {"node", who.second}}, ratio});
    }
  }
  out.push_back(std::move(s));
  return RenderExposition(out);
}

}  // namespace autopar
