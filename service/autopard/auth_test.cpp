#include "auth.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

class FakeOwners : public JobOwnerLookup {
 public:
  std::map<std::string, uid_t> owners;
  int calls = 0;
  Result<uid_t> Owner(const std::string& job_id) override {
    ++calls;
    auto it = owners.find(job_id);
    if (it == owners.end()) return Status::Error("job " + job_id + ": Slurm does not know it");
    return it->second;
  }
};

TEST(AuthTest, DecisionsTable) {
  FakeOwners owners;
  owners.owners = {{"10", 1000}, {"11", 1001}};
  Authorizer auth(&owners, {64030});  // 64030: SlurmUser
  struct Case {
    uid_t peer;
    const char* job;
    bool allowed;
    const char* error;
  } cases[] = {
      {1000, "10", true, ""},
      {1001, "10", false, "commit: permission denied: job 10 belongs to uid 1000, not to you (uid 1001)"},
      {1000, "11", false, "permission denied"},
      {0, "10", true, ""},
      {0, "999", true, ""},  // root may act on any job, known or not
      {64030, "11", true, ""},
      {1000, "999", false, "commit: job 999: Slurm does not know it"},
  };
  for (const auto& c : cases) {
    Status st = auth.Check(Peer{1, c.peer, c.peer}, "commit", c.job);
    EXPECT_EQ(st.ok(), c.allowed) << c.peer << " " << c.job;
    if (!c.allowed) {
      EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
    }
  }
  EXPECT_EQ(*auth.FileOwner(Peer{1, 0, 0}, "10"), 1000u);  // root acting for the owner
  EXPECT_EQ(*auth.FileOwner(Peer{1, 0, 0}, "999"), 0u);    // unknown job: root's own files
  EXPECT_FALSE(auth.FileOwner(Peer{1, 1000, 1000}, "999").ok());
}

TEST(AuthTest, OwnersAreCachedButErrorsAreNot) {
  auto fake = std::make_unique<FakeOwners>();
  FakeOwners* f = fake.get();
  f->owners = {{"10", 1000}};
  auto t = std::chrono::steady_clock::time_point{};
  CachedJobOwners cached(std::move(fake), std::chrono::seconds(60), [&] { return t; });
  EXPECT_EQ(*cached.Owner("10"), 1000u);
  EXPECT_EQ(*cached.Owner("10"), 1000u);
  EXPECT_EQ(f->calls, 1);
  EXPECT_FALSE(cached.Owner("12").ok());
  f->owners["12"] = 1002;
  EXPECT_EQ(*cached.Owner("12"), 1002u);  // a new job is found on the next request
  t += std::chrono::seconds(61);
  EXPECT_EQ(*cached.Owner("10"), 1000u);
  EXPECT_EQ(f->calls, 4);
}

TEST(AuthTest, OwnerCacheIsBounded) {
  auto fake = std::make_unique<FakeOwners>();
  FakeOwners* f = fake.get();
  f->owners = {{"1", 1001}, {"2", 1002}, {"3", 1003}};
  auto t = std::chrono::steady_clock::time_point{};
  CachedJobOwners cached(std::move(fake), std::chrono::seconds(60), [&] { return t; }, 2);
  EXPECT_EQ(*cached.Owner("1"), 1001u);
  t += std::chrono::seconds(1);
  EXPECT_EQ(*cached.Owner("2"), 1002u);
  t += std::chrono::seconds(1);
  EXPECT_EQ(*cached.Owner("3"), 1003u);  // full: the oldest ("1") makes room
  EXPECT_EQ(f->calls, 3);
  EXPECT_EQ(*cached.Owner("2"), 1002u);
  EXPECT_EQ(*cached.Owner("3"), 1003u);
  EXPECT_EQ(f->calls, 3);
  EXPECT_EQ(*cached.Owner("1"), 1001u);  // evicted: asked again
  EXPECT_EQ(f->calls, 4);
}

TEST(AuthTest, OwnerCacheTtlZeroCachesNothing) {
  auto fake = std::make_unique<FakeOwners>();
  FakeOwners* f = fake.get();
  f->owners = {{"10", 1000}};
  CachedJobOwners cached(std::move(fake), std::chrono::seconds(0));
  EXPECT_EQ(*cached.Owner("10"), 1000u);
  EXPECT_EQ(*cached.Owner("10"), 1000u);
  EXPECT_EQ(f->calls, 2);
}

TEST(AuthTest, RecordedOwnersDecideWhenSlurmHasForgottenTheJob) {
  FakeOwners owners;
  owners.owners = {{"10", 1000}};
  Authorizer auth(&owners, {64030});
  struct Case {
    uid_t peer;
    const char* job;
    std::vector<int64_t> recorded;
    bool allowed;
    const char* error;
  } cases[] = {
      {1000, "10", {1001}, true, ""},  // Slurm knows the job: it decides
      {1001, "10", {1001}, false, "events: permission denied: job 10 belongs to uid 1000, not to you (uid 1001)"},
      {1000, "20", {1000, -1, 1000}, true, ""},  // forgotten: the recorded owner decides
      {1001, "20", {1000}, false, "events: permission denied: job 20 belongs to uid 1000, not to you (uid 1001)"},
      {1000, "20", {1000, 1001}, false, "belongs to uid 1001"},  // any disagreement refuses
      {1000, "20", {-1}, false, "events: job 20: Slurm does not know it"},
      {1000, "20", {}, false, "events: job 20: Slurm does not know it"},
      {0, "20", {}, true, ""},
      {64030, "20", {1000}, true, ""},
  };
  for (const auto& c : cases) {
    int asked = 0;
    Status st = auth.CheckRecorded(Peer{1, c.peer, c.peer}, "events", c.job, [&] {
      ++asked;
      return c.recorded;
    });
    EXPECT_EQ(st.ok(), c.allowed) << c.peer << " " << c.job;
    if (!c.allowed) {
      EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
    }
    if (std::string(c.job) == "10") {
      EXPECT_EQ(asked, 0);  // storage is not read when Slurm knows the job
    }
  }
}

// A user who asks about jobs Slurm does not know costs root a slurmctld call each: past
// kUnknownBudget in kUnknownWindow that user's lookups each wait kThrottle first (one at a time),
// so they reach Slurm at a bounded rate; nothing is refused, a job whose owner is known is
// answered at once, other users are not slowed, and the window passes.
TEST(AuthTest, QuestionsAboutUnknownJobsAreThrottledPerUser) {
  auto fake = std::make_unique<FakeOwners>();
  FakeOwners* f = fake.get();
  f->owners = {{"10", 1000}, {"20", 1001}, {"30", 1002}};
  auto t = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  CachedJobOwners cached(std::move(fake), std::chrono::seconds(60), [&] { return t; });
  int pauses = 0;
  Authorizer auth(&cached, {}, [&] { return t; }, [&](std::chrono::milliseconds d) {
    EXPECT_EQ(d, Authorizer::kThrottle);
    ++pauses;
  });
  const Peer mallory{1, 1002, 1002};
  EXPECT_TRUE(auth.Check(Peer{1, 1000, 1000}, "status", "10").ok());  // cached from now on
  for (int j = 0; j < 100; ++j) {
    Status st = auth.Check(mallory, "event", std::to_string(5000 + j));
    EXPECT_NE(st.message().find("Slurm does not know it"), std::string::npos) << st.message();
  }
  EXPECT_EQ(pauses, 100 - Authorizer::kUnknownBudget);
  EXPECT_NE(auth.Check(mallory, "event", "10").message().find("belongs to uid 1000"),
            std::string::npos);  // known without asking: no pause
  EXPECT_EQ(pauses, 100 - Authorizer::kUnknownBudget);
  EXPECT_TRUE(auth.Check(mallory, "commit", "30").ok());  // the user's own new job: late, not refused
  EXPECT_TRUE(auth.Check(Peer{1, 1001, 1001}, "status", "20").ok());  // another user: no pause
  EXPECT_EQ(pauses, 101 - Authorizer::kUnknownBudget);
  t += Authorizer::kUnknownWindow;
  EXPECT_FALSE(auth.Check(mallory, "event", "7000").ok());
  EXPECT_EQ(pauses, 101 - Authorizer::kUnknownBudget);  // the window has passed
}

}  // namespace
}  // namespace autopar
