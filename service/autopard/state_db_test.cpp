#include "state_db.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

namespace autopar {
namespace {

class StateDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/autopard-db-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/autopard.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  CommitRecord Commit(int rank) {
    CommitRecord c;
    c.job_id = "7";
    c.step = 10;
    c.rank = rank;
    c.world_size = 2;
    c.ckpt_dir = "/ck/7";
    c.upload = "s3://b/p";
    c.created = 1.0;
    c.bytes = 300;
    return c;
  }
  std::string dir_, path_;
};

TEST_F(StateDbTest, QueueSurvivesReopenWithUploadIdsAndParts) {
  int64_t id0 = 0, id1 = 0;
  {
    auto db = StateDb::Open(path_);
    ASSERT_TRUE(db.ok()) << db.message();
    bool dup = true;
    auto a = (*db)->AddCommit(Commit(0), {{"a.pt", 100, "", "", false, ""}, {"b.pt", 200, "", "", false, ""}}, &dup);
    ASSERT_TRUE(a.ok()) << a.message();
    EXPECT_FALSE(dup);
    id0 = *a;
    auto b = (*db)->AddCommit(Commit(1), {{"a.pt", 100, "", "", false, ""}}, &dup);
    ASSERT_TRUE(b.ok());
    id1 = *b;
    // The same (job, step, rank) again is a duplicate with the first id.
    auto again = (*db)->AddCommit(Commit(0), {}, &dup);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(dup);
    EXPECT_EQ(*again, id0);
    ASSERT_TRUE((*db)->SetCommitState(id0, "uploading", "", 300).ok());
    ASSERT_TRUE((*db)->SetUploadId(id0, "b.pt", "UP-1").ok());
    ASSERT_TRUE((*db)->AddPart(id0, "b.pt", {1, "e1", "00112233445566778899aabbccddeeff"}).ok());
    ASSERT_TRUE((*db)->AddPart(id0, "b.pt", {3, "e3", "ffeeddccbbaa99887766554433221100"}).ok());
    ASSERT_TRUE((*db)->SetFileUploaded(id0, "a.pt", "etag-a").ok());
    ASSERT_TRUE((*db)->SetCommitState(id1, "uploaded", "", 100).ok());
  }
  // A "restart": everything still pending comes back with its progress.
  auto db = StateDb::Open(path_);
  ASSERT_TRUE(db.ok());
  auto pending = (*db)->PendingCommits();
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].id, id0);
  EXPECT_EQ((*pending)[0].state, "uploading");
  EXPECT_EQ((*pending)[0].upload, "s3://b/p");
  auto files = (*db)->Files(id0);
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 2u);
  EXPECT_TRUE((*files)[0].uploaded);
  EXPECT_EQ((*files)[1].upload_id, "UP-1");
  auto parts = (*db)->Parts(id0, "b.pt");
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].part, 1);
  EXPECT_EQ((*parts)[1].etag, "e3");
  // A new upload id forgets the parts of the old one.
  ASSERT_TRUE((*db)->SetUploadId(id0, "b.pt", "UP-2").ok());
  EXPECT_TRUE((*db)->Parts(id0, "b.pt")->empty());
}

TEST_F(StateDbTest, StepsJournalAndHeartbeats) {
  auto db = StateDb::Open(path_);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->SetStepState("7", 10, "/ck/7", "COMPLETE-LOCAL").ok());
  ASSERT_TRUE((*db)->SetStepState("7", 20, "/ck/7", "COMPLETE-LOCAL").ok());
  auto steps = (*db)->Steps("/ck/7");
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 2u);
  EXPECT_EQ((*steps)[0].step, 20);
  ASSERT_TRUE((*db)->DeleteStep("7", 10, "/ck/7").ok());
  EXPECT_EQ((*db)->Steps("/ck/7")->size(), 1u);
  ASSERT_TRUE((*db)->AddEvent({2.0, "node1", "7", "ckpt_complete", -1, 20, "x"}).ok());
  ASSERT_TRUE((*db)->AddEvent({1.0, "node1", "7", "ckpt_committed", 0, 20, ""}).ok());
  auto ev = (*db)->Events("7");
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 2u);
  EXPECT_EQ((*ev)[0].kind, "ckpt_committed");  // in time order
  EXPECT_TRUE((*db)->Heartbeat("7", 0, 21, 3.0).ok());
}

TEST_F(StateDbTest, FailedCommitsToRetrySurviveReopenAndOldDatabasesUpgrade) {
  {
    // A database from before commits.retry existed.
    auto db = StateDb::Open(path_, CommitSync::kNormal);
    ASSERT_TRUE(db.ok()) << db.message();
    bool dup = false;
    ASSERT_TRUE((*db)->AddCommit(Commit(0), {{"a.pt", 100, "", "", false, ""}}, &dup).ok());
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(raw, "ALTER TABLE commits DROP COLUMN retry", nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  auto db = StateDb::Open(path_, CommitSync::kFull);
  ASSERT_TRUE(db.ok()) << db.message();
  bool dup = false;
  auto id1 = (*db)->AddCommit(Commit(1), {{"a.pt", 100, "", "", false, ""}}, &dup);
  ASSERT_TRUE(id1.ok()) << id1.message();
  CommitRecord other = Commit(0);
  other.upload = "file:///elsewhere";
  auto id2 = (*db)->AddCommit(other, {}, &dup);
  ASSERT_TRUE(id2.ok()) << id2.message();
  ASSERT_TRUE((*db)->SetCommitState(*id1, "failed", "storage down", 100, /*retry=*/true).ok());
  ASSERT_TRUE((*db)->SetCommitState(*id2, "failed", "storage down", 0, /*retry=*/true).ok());
  auto pending = (*db)->PendingCommits();
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);  // rank 0, still queued
  EXPECT_FALSE((*pending)[0].retry);
  auto all = (*db)->RetryableCommits("");
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, *id1);
  EXPECT_TRUE((*all)[0].retry);
  auto same_uri = (*db)->RetryableCommits("s3://b/p");
  ASSERT_TRUE(same_uri.ok());
  ASSERT_EQ(same_uri->size(), 1u);
  EXPECT_EQ((*same_uri)[0].id, *id1);
  // Failed for good: not retried.
  ASSERT_TRUE((*db)->SetCommitState(*id1, "failed", "files gone", 100, /*retry=*/false).ok());
  EXPECT_EQ((*db)->RetryableCommits("s3://b/p")->size(), 0u);
}

TEST_F(StateDbTest, JournalOwnersAndSegmentsSurviveReopen) {
  {
    auto db = StateDb::Open(path_, CommitSync::kNormal);
    ASSERT_TRUE(db.ok()) << db.message();
    for (const char* job : {"7", "8", "7", "7"}) {
      ASSERT_TRUE((*db)->AddEvent({1.0, "n1", job, "e", -1, -1, ""}).ok());
    }
    ASSERT_TRUE((*db)->SetJobOwner("7", 1001).ok());
    ASSERT_TRUE((*db)->SetJournalSegments("7", {{1, 1, 0}, {3, 3, 0}}).ok());
    ASSERT_TRUE((*db)->SetJournalSegments("7", {{1, 3, 1}, {4, 4, 0}}).ok());  // replaced whole
    ASSERT_TRUE((*db)->SetJournalSegments("8", {{2, 2, 0}}).ok());
  }
  auto db = StateDb::Open(path_, CommitSync::kNormal);
  ASSERT_TRUE(db.ok()) << db.message();
  EXPECT_EQ(*(*db)->JobOwner("7"), 1001);
  EXPECT_EQ(*(*db)->JobOwner("8"), -1);
  auto segs = (*db)->JournalSegments("7");
  ASSERT_TRUE(segs.ok()) << segs.message();
  ASSERT_EQ(segs->size(), 2u);
  EXPECT_EQ((*segs)[0].first_id, 1);
  EXPECT_EQ((*segs)[0].last_id, 3);
  EXPECT_EQ((*segs)[0].level, 1);
  EXPECT_EQ((*segs)[1].first_id, 4);
  // Only the job's events, by id, within the range.
  auto rows = (*db)->EventsBetween("7", 2, 4);
  ASSERT_TRUE(rows.ok()) << rows.message();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].id, 3);
  EXPECT_EQ((*rows)[1].id, 4);
  EXPECT_EQ((*rows)[1].event.job_id, "7");
}

TEST_F(StateDbTest, UnopenableDatabaseNamesThePath) {
  auto db = StateDb::Open("/nonexistent-dir/x.db");
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.message().find("/nonexistent-dir/x.db"), std::string::npos);
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

// The uploader's threads run at nice +10 and are raised to nice 0 while they hold the database;
// each call leaves the caller's nice as it found it.
TEST_F(StateDbTest, CallsLeaveTheCallersNiceAsItWas) {
  auto db = StateDb::Open(path_);
  ASSERT_TRUE(db.ok()) << db.message();
  for (int nice : {10, 0}) {
    int before = -100, after = -100;
    Status st;
    std::thread t([&] {
      const auto tid = static_cast<id_t>(syscall(SYS_gettid));
      if (nice > 0) (void)setpriority(PRIO_PROCESS, tid, nice);
      before = getpriority(PRIO_PROCESS, tid);
      st = (*db)->AddEvent({1.0, "n", "7", "ckpt_committed", 0, 1, "d"});
      if (st.ok()) st = (*db)->SetStepState("7", 1, "/ck/7", "COMPLETE-LOCAL");
      after = getpriority(PRIO_PROCESS, tid);
    });
    t.join();
    EXPECT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(before, nice);
    EXPECT_EQ(after, before) << "nice " << nice;
  }
}

}  // namespace
}  // namespace autopar
