#include "core/ckpt/ckpt_backoff.h"

#include <gtest/gtest.h>

#include <vector>

namespace autopar {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, CeilingGrowsAndCaps) {
  BackoffPolicy p;
  p.initial = milliseconds(100);
  p.max_delay = milliseconds(1000);
  Backoff b(p, [] { return 0.999999; });
  struct Case {
    int retry;
    int64_t ceiling;
  } cases[] = {{1, 100}, {2, 200}, {3, 400}, {4, 800}, {5, 1000}, {30, 1000}};
  for (const auto& c : cases) {
    EXPECT_EQ(b.Ceiling(c.retry).count(), c.ceiling) << c.retry;
    EXPECT_EQ(b.Delay(c.retry).count(), c.ceiling) << c.retry;
  }
}

TEST(BackoffTest, FullJitterScalesTheCeiling) {
  BackoffPolicy p;
  p.initial = milliseconds(100);
  double u = 0;
  Backoff b(p, [&] { return u; });
  u = 0.0;
  EXPECT_EQ(b.Delay(3).count(), 0);
  u = 0.5;
  EXPECT_EQ(b.Delay(3).count(), 200);
  u = 0.25;
  EXPECT_EQ(b.Delay(1).count(), 25);
  Backoff real(p, DefaultUniform());
  for (int i = 0; i < 100; ++i) {
    auto d = real.Delay(4).count();
    EXPECT_GE(d, 0);
    EXPECT_LE(d, 800);
  }
}

struct FakeClock {
  std::chrono::steady_clock::time_point t{};
  std::vector<int64_t> sleeps;
  RetryClock clock() {
    return {[this] { return t; },
            [this](milliseconds d) {
              sleeps.push_back(d.count());
              t += d;
            }};
  }
};

TEST(RetryTest, RetriesUntilSuccess) {
  BackoffPolicy p;
  p.initial = milliseconds(100);
  Backoff b(p, [] { return 0.5; });
  FakeClock fc;
  RetryStats stats;
  int calls = 0;
  Status s = RetryWithBackoff(
      [&](int attempt) {
        EXPECT_EQ(attempt, ++calls);
        return calls < 4 ? Attempt::Retry("HTTP 503") : Attempt::Ok();
      },
      b, fc.clock(), nullptr, &stats);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(stats.attempts, 4);
  EXPECT_EQ(fc.sleeps, (std::vector<int64_t>{50, 100, 200}));
}

TEST(RetryTest, PermanentErrorStopsAtOnce) {
  Backoff b(BackoffPolicy{}, [] { return 0.5; });
  FakeClock fc;
  int calls = 0;
  Status s = RetryWithBackoff(
      [&](int) {
        ++calls;
        return Attempt::Fail("HTTP 403: AccessDenied");
      },
      b, fc.clock(), nullptr);
  EXPECT_EQ(s.message(), "HTTP 403: AccessDenied");
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(fc.sleeps.empty());
}

TEST(RetryTest, GivesUpAfterMaxAttempts) {
  BackoffPolicy p;
  p.max_attempts = 3;
  Backoff b(p, [] { return 1.0; });
  FakeClock fc;
  Status s =
      RetryWithBackoff([&](int) { return Attempt::Retry("timeout"); }, b, fc.clock(), nullptr);
  EXPECT_EQ(s.message(), "timeout (gave up after 3 attempts)");
  EXPECT_EQ(fc.sleeps.size(), 2u);
}

TEST(RetryTest, RidesThroughAnOutageWithinMaxElapsed) {
  // A 20 s outage (as in the s3rver-stopped test) with the default policy: succeeds.
  BackoffPolicy p;
  Backoff b(p, [] { return 1.0; });
  FakeClock fc;
  auto start = fc.t;
  Status s = RetryWithBackoff(
      [&](int) {
        return fc.t - start < std::chrono::seconds(20) ? Attempt::Retry("connection refused")
                                                       : Attempt::Ok();
      },
      b, fc.clock(), nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  // And gives up once max_elapsed is spent.
  p.max_elapsed = std::chrono::seconds(10);
  Backoff short_b(p, [] { return 1.0; });
  FakeClock fc2;
  Status s2 = RetryWithBackoff([&](int) { return Attempt::Retry("connection refused"); }, short_b,
                               fc2.clock(), nullptr);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("connection refused (gave up after"), std::string::npos);
  EXPECT_LE(fc2.t - std::chrono::steady_clock::time_point{}, std::chrono::seconds(10));
}

TEST(RetryTest, CancelStopsBeforeTheNextAttempt) {
  Backoff b(BackoffPolicy{}, [] { return 0.0; });
  FakeClock fc;
  std::atomic<bool> cancel{false};
  int calls = 0;
  Status s = RetryWithBackoff(
      [&](int) {
        if (++calls == 2) cancel = true;
        return Attempt::Retry("503");
      },
      b, fc.clock(), &cancel);
  EXPECT_EQ(s.message(), "cancelled");
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace autopar
