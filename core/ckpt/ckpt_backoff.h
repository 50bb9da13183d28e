// Exponential backoff with full jitter, and a retry loop built on it.
//
// Delay before retry n (n = 1, 2, ...): uniform in [0, min(max_delay, initial * multiplier^(n-1))]
// ("full jitter", as in AWS's "Exponential Backoff And Jitter" architecture note). Randomness,
// clock and sleep are injected so tests are exact and instantaneous.
//
// Backoff is thread-compatible (its Uniform function is called from the calling thread only);
// RetryWithBackoff is reentrant when its functions are.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "autopar/status.h"

namespace autopar {

struct BackoffPolicy {
  std::chrono::milliseconds initial{200};
  std::chrono::milliseconds max_delay{5000};
  double multiplier = 2.0;
  // Stop after this many attempts in all (0: no limit besides max_elapsed).
  int max_attempts = 0;
  // Stop retrying once this much time has passed since the first attempt (0: no limit). Must
  // outlast a storage outage worth riding through (the tests stop s3rver for 20 s).
  std::chrono::milliseconds max_elapsed{std::chrono::minutes(3)};
};

class Backoff {
 public:
  using Uniform = std::function<double()>;  // returns a number in [0, 1)
  Backoff(BackoffPolicy policy, Uniform uniform);

  // The upper bound of the delay before retry `retry` (1-based).
  std::chrono::milliseconds Ceiling(int retry) const;
  // A random delay in [0, Ceiling(retry)].
  std::chrono::milliseconds Delay(int retry);

  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  Uniform uniform_;
};

// A Uniform backed by a thread-local std::mt19937_64 seeded from std::random_device.
Backoff::Uniform DefaultUniform();

struct RetryClock {
  std::function<std::chrono::steady_clock::time_point()> now;
  std::function<void(std::chrono::milliseconds)> sleep;
};
// steady_clock and std::this_thread::sleep_for.
RetryClock RealRetryClock();

// The outcome of one attempt of an operation.
struct Attempt {
  Status status;           // OK: done
  bool retryable = false;  // for errors: may a later attempt succeed (timeouts, 5xx, resets)?
  static Attempt Ok() { return {}; }
  static Attempt Retry(std::string message) { return {Status::Error(std::move(message)), true}; }
  static Attempt Fail(std::string message) { return {Status::Error(std::move(message)), false}; }
};

struct RetryStats {
  int attempts = 0;
};

// Calls `op(attempt)` (attempt = 1, 2, ...) until it succeeds, fails permanently, the policy's
// attempts or time run out, or `cancel` (may be null) becomes true (checked before each attempt).
// Returns OK, or the last error with "(gave up after N attempts)" added when retries ran out, or
// "cancelled".
Status RetryWithBackoff(const std::function<Attempt(int attempt)>& op, Backoff& backoff,
                        const RetryClock& clock, const std::atomic<bool>* cancel,
                        RetryStats* stats = nullptr);

}  // namespace autopar
