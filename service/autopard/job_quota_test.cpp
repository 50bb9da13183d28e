#include "job_quota.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(JobQuotaTest, EventsAndRanksAreBoundedPerJobFromWhatIsStored) {
  int seeded = 0;
  JobQuota q({3, 100, 2}, [&](const std::string& job) {
    ++seeded;
    JobQuota::Seed s;
    if (job == "old") {
      s.events = 2;
      s.event_bytes = 10;
      s.ranks = {7};
    }
    return s;
  });
  EXPECT_TRUE(q.TakeEvent("old", 5).ok());
  Status full = q.TakeEvent("old", 5);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.message(), "job old sent 3 events to this node (max_events_per_job)");
  EXPECT_TRUE(q.TakeEvent("new", 60).ok());
  Status bytes = q.TakeEvent("new", 41);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.message().find("max_event_bytes_per_job: 100"), std::string::npos) << bytes.message();
  EXPECT_TRUE(q.TakeRank("old", 7).ok());
  EXPECT_TRUE(q.TakeRank("old", 100000000).ok());
  EXPECT_FALSE(q.TakeRank("old", 3).ok());
  EXPECT_TRUE(q.TakeRank("old", 7).ok());  // known ranks always
  EXPECT_EQ(seeded, 2);
  q.Forget("old");
  EXPECT_TRUE(q.TakeRank("old", 3).ok());  // seeded again: only 7 was stored
  EXPECT_EQ(seeded, 3);
}

// A rank is one of the job's: below the size Slurm gives it (tasks or CPUs), asked again (at most
// every 10 s) when a rank past it comes, as a requeued job may have grown.
TEST(JobQuotaTest, RanksAreBoundedByTheJobsSizeFromSlurm) {
  int64_t size = 8;
  int asked = 0;
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  JobQuota q({100, 1 << 20, 4096}, nullptr,
             [&](const std::string&) {
               ++asked;
               return size;
             },
             [&] { return now; });
  EXPECT_TRUE(q.TakeRank("42", 7).ok());
  Status beyond = q.TakeRank("42", 100000000);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.message(), "rank 100000000 is not a rank of job 42 (Slurm: 8 tasks or CPUs)");
  EXPECT_FALSE(q.TakeRank("42", 8).ok());
  EXPECT_EQ(asked, 1);  // not asked again within 10 s
  size = 16;            // requeued on more nodes
  now += std::chrono::seconds(11);
  EXPECT_TRUE(q.TakeRank("42", 8).ok());
  EXPECT_EQ(asked, 2);
  // Slurm does not know the job: only max_ranks bounds it.
  JobQuota unknown({100, 1 << 20, 2}, nullptr, [](const std::string&) { return int64_t{0}; });
  EXPECT_TRUE(unknown.TakeRank("7", 5000).ok());
  EXPECT_TRUE(unknown.TakeRank("7", 6000).ok());
  EXPECT_FALSE(unknown.TakeRank("7", 7000).ok());
}

// Usage samples are charged to the job: only its ranks (Slurm's size), within max_ranks, at most
// one a second each; a flood from one rank is refused without touching the event budget.
TEST(JobQuotaTest, UsageSamplesAreTheJobsRanksAtMostOneASecondEach) {
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  JobQuota q({3, 100, 4}, [](const std::string&) { return JobQuota::Seed{}; },
             [](const std::string&) -> int64_t { return 2; }, [&] { return now; });
  EXPECT_TRUE(q.TakeSample("42", 0).ok());
  EXPECT_TRUE(q.TakeSample("42", 1).ok());
  Status again = q.TakeSample("42", 0);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.message(), "rank 0 of job 42 sent usage samples faster than one a second");
  Status outside = q.TakeSample("42", 2147483647);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.message().find("is not a rank of job 42"), std::string::npos) << outside.message();
  EXPECT_FALSE(q.TakeSample("42", -1).ok());
  now += std::chrono::seconds(1);
  EXPECT_TRUE(q.TakeSample("42", 0).ok());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(q.TakeEvent("42", 1).ok());  // the event budget untouched
}

}  // namespace
}  // namespace autopar
