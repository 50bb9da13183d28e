#include "core/health/progress.h"

#include <cmath>

#include "core/plan/planner.h"
#include "core/text.h"

namespace autopar {

std::optional<PlanTarget> PlanTargetFromJson(const std::string& plan_json) {
  if (plan_json.empty()) return std::nullopt;
  auto plan = PlanFromJson(plan_json);
  if (!plan || !(plan->chosen.step_time_s > 0)) return std::nullopt;
  PlanTarget t;
  t.step_s = plan->chosen.step_time_s;
  t.mfu = plan->chosen.mfu;
  t.global_batch = plan->global_batch;
  t.seq_len = plan->seq_len;
  t.mem_gib = plan->chosen.memory.total_gib;
  return t;
}

void ProgressTracker::Restart(const ProgressSample& s) {
  started_ = true;
  first_ = s;
  last_ = s;
  samples_ = tokens_ = 0;
  have_samples_ = have_tokens_ = false;
  loss_sum_ = 0;
  loss_n_ = 0;
  loss_last_.reset();
}

std::optional<EventFields> ProgressTracker::Add(const ProgressSample& s,
                                                const std::optional<PlanTarget>& plan) {
  if (!started_ || s.step < last_.step || s.time < last_.time) {
    Restart(s);  // the first heartbeat, or a restart that resumed an earlier step
    return std::nullopt;
  }
  if (s.step == last_.step) return std::nullopt;  // the same step again: nothing new
  // A program may send a heartbeat every few steps: each step since the last one did the work
  // this one reports for its step.
  const int64_t stepped = s.step - last_.step;
  last_ = s;
  if (s.samples >= 0) {
    samples_ += s.samples * stepped;
    have_samples_ = true;
  }
  if (s.tokens >= 0) {
    tokens_ += s.tokens * stepped;
    have_tokens_ = true;
  }
  if (s.loss) {
    loss_last_ = s.loss;
    if (std::isfinite(*s.loss)) {
      loss_sum_ += *s.loss;
      ++loss_n_;
    }
  }
  const double span = s.time - first_.time;
  const int64_t steps = s.step - first_.step;
  if (span < interval_s_ || steps <= 0 || !(span > 0)) return std::nullopt;
  const double step_s = span / static_cast<double>(steps);
  EventFields f = {{"steps", std::to_string(steps)}, {"step_s", FormatFixed(step_s, 3)}};
  if (have_samples_) f.emplace_back("samples_per_s", FormatFixed(static_cast<double>(samples_) / span, 2));
  if (have_tokens_) f.emplace_back("tokens_per_s", FormatFixed(static_cast<double>(tokens_) / span, 1));
  if (loss_n_ > 0) f.emplace_back("loss", FormatFixed(loss_sum_ / static_cast<double>(loss_n_), 6));
  if (loss_last_) {
    f.emplace_back("loss_last", std::isfinite(*loss_last_) ? FormatFixed(*loss_last_, 6)
                                : std::isnan(*loss_last_) ? std::string("nan")
                                : *loss_last_ > 0         ? std::string("inf")
                                                          : std::string("-inf"));
  }
  if (plan) {
    // The work of a step as reported, relative to the plan's (1 when not reported).
    double work = 1.0;
    if (have_tokens_ && plan->global_batch > 0 && plan->seq_len > 0) {
      work = static_cast<double>(tokens_) / static_cast<double>(steps) /
             static_cast<double>(plan->global_batch * plan->seq_len);
    } else if (have_samples_ && plan->global_batch > 0) {
      work = static_cast<double>(samples_) / static_cast<double>(steps) /
             static_cast<double>(plan->global_batch);
    }
    f.emplace_back("planned_step_s", FormatFixed(plan->step_s, 3));
    f.emplace_back("planned_mfu", FormatFixed(plan->mfu, 4));
    const double mfu = plan->mfu * plan->step_s / step_s * work;
    if (mfu <= 1.0) {
      f.emplace_back("mfu", FormatFixed(mfu, 4));
    } else {
      // Faster than any GPU could run the planned model: the program trains something else.
      f.emplace_back("note", "steps run faster than the planned model can: no MFU");
    }
    f.emplace_back("vs_plan", FormatFixed(step_s / plan->step_s, 3));
  }
  Restart(s);
  return f;
}

}  // namespace autopar
