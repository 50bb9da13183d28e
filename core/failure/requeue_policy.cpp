#include "core/failure/requeue_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <cstring>

#include "core/text.h"

namespace autopar {
namespace {

constexpr struct {
  FailureClass c;
  const char* name;
} kClassNames[] = {
    {FailureClass::kNodeLoss, "node-loss"},
    {FailureClass::kRankCrash, "rank-crash"},
    {FailureClass::kHang, "hang"},
    {FailureClass::kTimeLimit, "time-limit"},
    {FailureClass::kBadLoss, "bad-loss"},
    {FailureClass::kOom, "oom"},
};

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

bool IsProgramError(FailureClass c) {
  return c == FailureClass::kRankCrash || c == FailureClass::kHang || c == FailureClass::kOom;
}

constexpr const char* kNoteTag = "autopar-failure ";

}  // namespace

const char* FailureClassName(FailureClass c) {
  for (const auto& e : kClassNames) {
    if (e.c == c) return e.name;
  }
  return "unknown";
}

Result<FailureClass> ParseFailureClass(std::string_view name) {
  for (const auto& e : kClassNames) {
    if (name == e.name) return e.c;
  }
  return Status::Error("failure class: unknown '" + std::string(name) +
                       "' (node-loss, rank-crash, hang, time-limit, bad-loss, oom)");
}

std::string Failure::Signature() const {
  std::string s = FailureClassName(kind);
  if (kind == FailureClass::kRankCrash) {
    if (signal > 0) {
      s += " signal=" + std::to_string(signal);
    } else {
      s += " exit=" + std::to_string(exit_code);
    }
  }
  return s;
}

std::string Failure::Describe() const {
  std::string where = node.empty() ? "" : " on " + node;
  std::string who = rank >= 0 ? "rank " + std::to_string(rank) + where : "the job" + where;
  std::string what;
  switch (kind) {
    case FailureClass::kNodeLoss:
      what = "node " + (node.empty() ? std::string("?") : node) + " was lost";
      break;
    case FailureClass::kRankCrash:
      if (signal > 0) {
        what = who + " was killed by " + SignalName(signal);
      } else {
        what = who + " exited with status " + std::to_string(exit_code);
      }
      break;
    case FailureClass::kHang:
      what = who + " made no progress (hang)";
      break;
    case FailureClass::kTimeLimit:
      what = "the job reached its time limit";
      break;
    case FailureClass::kBadLoss:
      what = who + " reported a bad loss" + (note.empty() ? "" : " (" + note + ")");
      break;
    case FailureClass::kOom:
      what = who + " ran out of memory" + (note.empty() ? "" : " (" + note + ")");
      break;
  }
  if (run_seconds >= 0) what += " after " + Seconds(run_seconds);
  return what;
}

Status ValidateRequeueSettings(const RequeueSettings& s) {
  const char* p = "requeue policy: ";
  if (s.max_restarts < 0) return Status::Error(std::string(p) + "max_restarts: must be >= 0");
  if (!(s.backoff_initial_s >= 0)) {
    return Status::Error(std::string(p) + "backoff_initial_s: must be >= 0");
  }
  if (!(s.backoff_multiplier >= 1)) {
    return Status::Error(std::string(p) + "backoff_multiplier: must be >= 1");
  }
  if (!(s.backoff_max_s >= 0)) return Status::Error(std::string(p) + "backoff_max_s: must be >= 0");
  if (!(s.node_loss_delay_s >= 0)) {
    return Status::Error(std::string(p) + "node_loss_delay_s: must be >= 0");
  }
  if (!(s.early_failure_s >= 0)) {
    return Status::Error(std::string(p) + "early_failure_s: must be >= 0");
  }
  if (s.early_repeats_to_stop < 1) {
    return Status::Error(std::string(p) + "early_repeats_to_stop: must be >= 1");
  }
  return Status::Ok();
}

double NodeLossDelayForCluster(double configured_s, const std::string& proctrack_type,
                               double kill_wait_s) {
  if (proctrack_type == "proctrack/cgroup" || proctrack_type == "proctrack/pgid") return configured_s;
  constexpr double kStepAbortS = 2;  // Slurm's STEP_ABORT_TIME: srun's wait beyond KillWait
  constexpr double kMarginS = 3;
  return std::max(configured_s, kill_wait_s + kStepAbortS + kMarginS);
}

const char* RequeueActionName(RequeueAction a) {
  switch (a) {
    case RequeueAction::kRequeue:
      return "requeue";
    case RequeueAction::kStop:
      return "stop";
    case RequeueAction::kAlreadyDecided:
      return "already-decided";
  }
  return "unknown";
}

double RequeueBackoffSeconds(const RequeueSettings& s, int64_t attempt) {
  if (attempt < 1) return 0;
  // pow() of a large exponent is inf; min() with the cap handles it.
  double d = s.backoff_initial_s * std::pow(s.backoff_multiplier, static_cast<double>(attempt - 1));
  return std::min(d, s.backoff_max_s);
}

RequeueDecision DecideRequeue(const RequeueSettings& settings, const Failure& failure,
                              int64_t restart_count, const std::optional<PastFailure>& previous,
                              const std::vector<std::string>& excluded_now, int64_t not_counted) {
  RequeueDecision d;
  const int64_t used = std::max<int64_t>(0, restart_count - std::max<int64_t>(0, not_counted));
  d.restart_count = restart_count;
  d.max_restarts = settings.max_restarts;
  const std::string what = failure.Describe();
  int early_repeats = 0;
  const bool early = IsProgramError(failure.kind) && !failure.made_progress &&
                     failure.run_seconds >= 0 && failure.run_seconds < settings.early_failure_s;

  if (used >= settings.max_restarts) {
    d.action = RequeueAction::kStop;
    d.reason = what + "; not requeued: " +
               (settings.max_restarts == 0
                    ? std::string("--requeue-on-failure is 0")
                    : "all " + std::to_string(settings.max_restarts) +
                          " restarts of --requeue-on-failure=" +
                          std::to_string(settings.max_restarts) + " are used");
    return d;
  }

  if (early) {
    // Consecutive immediate failures with this signature: this one, plus the previous run's if it
    // was the run just before this one and failed the same way.
    int repeats = 1;
    if (previous && previous->early_repeats > 0 && previous->signature == failure.Signature() &&
        previous->restart_count == restart_count - 1) {
      repeats = previous->early_repeats + 1;
    }
    early_repeats = repeats;
    if (repeats >= settings.early_repeats_to_stop) {
      d.action = RequeueAction::kStop;
      d.reason = what + "; not requeued: the program failed within " +
                 Seconds(settings.early_failure_s) + " of its start with the same error (" +
                 failure.Signature() + ") " + std::to_string(repeats) +
                 " times in a row, so another run would fail the same way";
      return d;
    }
  }

  if (failure.kind == FailureClass::kTimeLimit && !failure.ckpt_progress) {
    d.action = RequeueAction::kStop;
    d.reason = what + "; not requeued: no checkpoint became COMPLETE during this run, so the " +
               "next run would stop at the same place";
    return d;
  }

  d.action = RequeueAction::kRequeue;
  d.attempt = used + 1;
  d.delay_s = failure.kind == FailureClass::kTimeLimit ? 0
                                                        : RequeueBackoffSeconds(settings, d.attempt);
  if (failure.kind == FailureClass::kNodeLoss) d.delay_s = std::max(d.delay_s, settings.node_loss_delay_s);
  d.exclude_nodes = excluded_now;
  if (failure.kind == FailureClass::kNodeLoss && !failure.node.empty() &&
      std::find(d.exclude_nodes.begin(), d.exclude_nodes.end(), failure.node) ==
          d.exclude_nodes.end()) {
    d.exclude_nodes.push_back(failure.node);
  }
  d.note = PastFailure{restart_count, failure.Signature(), early_repeats};
  d.reason = what + "; requeue " + std::to_string(d.attempt) + " of " +
             std::to_string(settings.max_restarts);
  if (d.delay_s > 0) d.reason += " after " + Seconds(d.delay_s);
  if (!d.exclude_nodes.empty()) d.reason += ", excluding " + Join(d.exclude_nodes, ",");
  return d;
}

std::string EncodeFailureNote(const PastFailure& note) {
  // The signature goes last: it is the only field with a space in it.
  return std::string(kNoteTag) + "restart=" + std::to_string(note.restart_count) +
         " early=" + std::to_string(note.early_repeats) + " sig=" + note.signature;
}

std::optional<PastFailure> ParseFailureNote(std::string_view text) {
  size_t at = text.rfind(kNoteTag);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + std::strlen(kNoteTag));
  // The note ends at a newline or ';' (an AdminComment may hold other text after it).
  rest = rest.substr(0, std::min(rest.find('\n'), rest.find(';')));
  PastFailure n;
  auto take = [&rest](std::string_view key) -> std::optional<std::string_view> {
    if (!StartsWith(rest, key)) return std::nullopt;
    rest.remove_prefix(key.size());
    size_t sp = rest.find(' ');
    std::string_view v = rest.substr(0, sp);
    rest.remove_prefix(sp == std::string_view::npos ? rest.size() : sp + 1);
    return v;
  };
  auto restart = take("restart=");
  auto early = take("early=");
  if (!restart || !early || !StartsWith(rest, "sig=")) return std::nullopt;
  auto r = ParseInt(*restart, 0, INT64_MAX);
  auto e = ParseInt(*early, 0, 1000);
  if (!r || !e) return std::nullopt;
  n.restart_count = *r;
  n.early_repeats = static_cast<int>(*e);
  n.signature = Trim(rest.substr(4));
  if (n.signature.empty()) return std::nullopt;
  return n;
}

bool DecisionLedger::Claim(const std::string& job_id, int64_t restart_count) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = highest_.find(job_id);
  if (it != highest_.end() && restart_count <= it->second) return false;
  highest_[job_id] = restart_count;
  return true;
}

void DecisionLedger::Record(const std::string& job_id, const RequeueDecision& decision) {
  std::lock_guard<std::mutex> lock(mu_);
  decisions_[{job_id, decision.restart_count}] = decision;
}

std::optional<RequeueDecision> DecisionLedger::Recorded(const std::string& job_id,
                                                        int64_t restart_count) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = decisions_.find({job_id, restart_count});
  if (it == decisions_.end()) return std::nullopt;
  return it->second;
}

void DecisionLedger::Forget(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  highest_.erase(job_id);
  for (auto it = decisions_.begin(); it != decisions_.end();) {
    it = it->first.first == job_id ? decisions_.erase(it) : std::next(it);
  }
}

}  // namespace autopar
