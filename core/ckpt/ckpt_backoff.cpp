#include "core/ckpt/ckpt_backoff.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

namespace autopar {

Backoff::Backoff(BackoffPolicy policy, Uniform uniform)
    : policy_(policy), uniform_(std::move(uniform)) {}

std::chrono::milliseconds Backoff::Ceiling(int retry) const {
  double ceiling = static_cast<double>(policy_.initial.count()) *
                   std::pow(policy_.multiplier, std::max(0, retry - 1));
  double cap = static_cast<double>(policy_.max_delay.count());
  return std::chrono::milliseconds(static_cast<int64_t>(std::min(ceiling, cap)));
}

std::chrono::milliseconds Backoff::Delay(int retry) {
  double u = std::clamp(uniform_(), 0.0, 1.0);
  auto ceiling = Ceiling(retry).count();
  auto delay = static_cast<int64_t>(std::llround(u * static_cast<double>(ceiling)));
  return std::chrono::milliseconds(std::min<int64_t>(delay, ceiling));
}

Backoff::Uniform DefaultUniform() {
  return [] {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  };
}

RetryClock RealRetryClock() {
  return {[] { return std::chrono::steady_clock::now(); },
          [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }};
}

Status RetryWithBackoff(const std::function<Attempt(int attempt)>& op, Backoff& backoff,
                        const RetryClock& clock, const std::atomic<bool>* cancel,
                        RetryStats* stats) {
  const BackoffPolicy& policy = backoff.policy();
  auto start = clock.now();
  for (int attempt = 1;; ++attempt) {
    if (cancel && cancel->load()) return Status::Error("cancelled");
    if (stats) stats->attempts = attempt;
    Attempt a = op(attempt);
    if (a.status.ok()) return Status::Ok();
    if (!a.retryable) return a.status;
    bool out_of_attempts = policy.max_attempts > 0 && attempt >= policy.max_attempts;
    auto delay = backoff.Delay(attempt);
    bool out_of_time =
        policy.max_elapsed.count() > 0 && clock.now() - start + delay >= policy.max_elapsed;
    if (out_of_attempts || out_of_time) {
      return Status::Error(a.status.message() + " (gave up after " + std::to_string(attempt) +
                           (attempt == 1 ? " attempt)" : " attempts)"));
    }
    clock.sleep(delay);
  }
}

}  // namespace autopar
