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

}  // namespace
}  // namespace autopar
