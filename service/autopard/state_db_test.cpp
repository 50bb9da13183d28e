#include "state_db.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

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

// Heartbeats stay in memory until flushed: a heartbeat never waits for the database (here: another
// connection holds its write lock, which a write would wait for up to ~10 s); the flush writes the
// newest per job and rank; retention sees the pending ones; the destructor writes the rest.
TEST_F(StateDbTest, HeartbeatsAreWrittenByTheFlushNotOnTheirPath) {
  auto count = [&](const char* where) {
    sqlite3* raw = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    std::string sql = std::string("SELECT COUNT(*) FROM heartbeats WHERE ") + where;
    EXPECT_EQ(sqlite3_prepare_v2(raw, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    EXPECT_EQ(sqlite3_step(s), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(raw);
    return n;
  };
  {
    auto db = StateDb::Open(path_, CommitSync::kNormal);
    ASSERT_TRUE(db.ok()) << db.message();
    sqlite3* writer = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &writer), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(writer, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 0; step < 1000; ++step) {
      ASSERT_TRUE((*db)->Heartbeat("7", step % 2, step, 100.0 + step).ok());
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
    ASSERT_EQ(sqlite3_exec(writer, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(writer);
    EXPECT_EQ(count("1"), 0);
    ASSERT_TRUE((*db)->FlushHeartbeats().ok());
    EXPECT_EQ(count("job_id='7'"), 2);
    EXPECT_EQ(count("rank=0 AND step=998 AND time=1098"), 1);
    EXPECT_EQ(count("rank=1 AND step=999 AND time=1099"), 1);
    ASSERT_TRUE((*db)->FlushHeartbeats().ok());  // nothing new
    // Retention: a job whose only activity is a pending heartbeat is active.
    ASSERT_TRUE((*db)->SetJobOwner("8", 1001).ok());
    ASSERT_TRUE((*db)->Heartbeat("8", 0, 5, 5000.0).ok());
    auto inactive = (*db)->InactiveJobs(2000.0);
    ASSERT_TRUE(inactive.ok()) << inactive.message();
    EXPECT_EQ(*inactive, std::vector<std::string>{"7"});
    ASSERT_TRUE((*db)->Heartbeat("7", 0, 1000, 6000.0).ok());
    auto r = (*db)->PruneJob("7", 2000.0, false, {});
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_FALSE(r->pruned);
    EXPECT_EQ(r->kept_because, "recently active");
    ASSERT_TRUE((*db)->Heartbeat("9", 3, 1, 7000.0).ok());
  }
  EXPECT_EQ(count("job_id='9' AND rank=3"), 1);  // written when the StateDb closed
}

// ---- retention (PruneJob) -----------------------------------------------------------------------

// Rows of `job` in every table, by table (files and parts through the job's commits), read on a
// connection of its own.
std::map<std::string, int64_t> RowsOf(const std::string& path, const std::string& job) {
  sqlite3* raw = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  std::map<std::string, int64_t> out;
  const std::string of = " WHERE commit_id IN (SELECT id FROM commits WHERE job_id='" + job + "')";
  for (const char* t : {"commits", "steps", "journal", "heartbeats", "job_owners",
                        "journal_segments", "files", "parts"}) {
    std::string table = t;
    std::string sql = "SELECT COUNT(*) FROM " + table +
                      (table == "files" || table == "parts" ? of : " WHERE job_id='" + job + "'");
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(raw, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    EXPECT_EQ(sqlite3_step(s), SQLITE_ROW);
    if (int64_t n = sqlite3_column_int64(s, 0)) out[table] = n;
    sqlite3_finalize(s);
  }
  sqlite3_close(raw);
  return out;
}

int64_t Pragma(const std::string& path, const char* pragma) {
  sqlite3* raw = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(raw, (std::string("PRAGMA ") + pragma).c_str(), -1, &s, nullptr),
            SQLITE_OK);
  EXPECT_EQ(sqlite3_step(s), SQLITE_ROW);
  int64_t n = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  sqlite3_close(raw);
  return n;
}

// A job's whole footprint at time `t`: a commit in `state` with two files (one with a recorded
// part), a step, three 1 KB journal events (all published unless `unpublished`), a heartbeat and an
// owner.
void AddJob(StateDb& db, const std::string& job, double t, const std::string& state,
            bool retry = false, bool unpublished = false, const std::string& upload = "s3://b/p") {
  CommitRecord c;
  c.job_id = job;
  c.step = 10;
  c.ckpt_dir = "/ck/" + job;
  c.upload = upload;
  c.created = t;
  c.state = state == "failed" ? "uploading" : state;
  bool dup = false;
  auto id =
      db.AddCommit(c, {{"a.pt", 100, "", "", false, ""}, {"b.pt", 200, "", "", false, ""}}, &dup);
  ASSERT_TRUE(id.ok()) << id.message();
  ASSERT_TRUE(db.SetUploadId(*id, "a.pt", "up-1").ok());
  ASSERT_TRUE(db.AddPart(*id, "a.pt", {1, "etag1", "md5"}).ok());
  if (state == "failed") {
    ASSERT_TRUE(db.SetCommitState(*id, "failed", "storage down", 100, retry).ok());
  }
  ASSERT_TRUE(db.SetStepState(job, 10, upload.empty() ? c.ckpt_dir : upload,
                              upload.empty() ? "COMPLETE-LOCAL" : "COMPLETE")
                  .ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(db.AddEvent({t + i, "n1", job, "e", 0, 10, std::string(1000, 'd')}).ok());
  }
  auto rows = db.EventsBetween(job, 0, INT64_MAX);
  ASSERT_TRUE(rows.ok());
  int64_t last = rows->back().id - (unpublished ? 1 : 0);
  ASSERT_TRUE(db.SetJournalSegments(job, {{rows->front().id, last, 0}}).ok());
  ASSERT_TRUE(db.Heartbeat(job, 0, 10, t).ok());
  ASSERT_TRUE(db.SetJobOwner(job, 1001).ok());
}

TEST_F(StateDbTest, PrunesOnlyInactiveJobsNothingOfIsStillNeeded) {
  auto db = StateDb::Open(path_, CommitSync::kNormal);
  ASSERT_TRUE(db.ok()) << db.message();
  // The injected clock: 30 days from now (SetCommitState stamps `finished` with the real time).
  const double now = static_cast<double>(std::time(nullptr)) + 30 * 86400.0;
  const double before = now - 14 * 86400.0, old = now - 20 * 86400.0, recent = now - 86400.0;
  struct Case {
    const char* job;
    double t;
    const char* state;
    bool retry, unpublished, require_published;
    const char* upload;
    bool pruned;
    const char* kept_because;
  } cases[] = {
      {"old", old, "uploaded", false, false, true, "s3://b/p", true, ""},
      {"recent", recent, "uploaded", false, false, true, "s3://b/p", false, "recently active"},
      {"retry", old, "failed", true, false, true, "s3://b/p", false, "uploads pending or to retry"},
      {"queued", old, "queued", false, false, true, "s3://b/p", false,
       "uploads pending or to retry"},
      {"failed-for-good", old, "failed", false, false, true, "s3://b/p", true, ""},
      {"unpublished", old, "uploaded", false, true, true, "s3://b/p", false,
       "journal publication pending"},
      {"no-journal-uri", old, "uploaded", false, true, false, "s3://b/p", true, ""},
  };
  for (const auto& c : cases) AddJob(**db, c.job, c.t, c.state, c.retry, c.unpublished, c.upload);
  auto inactive = (*db)->InactiveJobs(before);
  ASSERT_TRUE(inactive.ok()) << inactive.message();
  EXPECT_EQ(inactive->size(), 6u);  // all but "recent"
  for (const auto& c : cases) {
    auto full = RowsOf(path_, c.job);
    EXPECT_EQ(full.size(), 8u) << c.job;
    auto r = (*db)->PruneJob(c.job, before, c.require_published, {});
    ASSERT_TRUE(r.ok()) << c.job << ": " << r.message();
    EXPECT_EQ(r->pruned, c.pruned) << c.job;
    EXPECT_EQ(r->kept_because, c.kept_because) << c.job;
    if (c.pruned) {
      EXPECT_TRUE(RowsOf(path_, c.job).empty()) << c.job;
      // 1 commit, 2 files, 1 part, 1 step, 3 events, 1 heartbeat, 1 owner, 1 segment.
      EXPECT_EQ(r->rows, 11) << c.job;
    } else {
      EXPECT_EQ(RowsOf(path_, c.job), full) << c.job;
    }
  }
  // The pruned are forgotten (an owner lookup falls back to Slurm / the published journal).
  EXPECT_EQ(*(*db)->JobOwner("old"), -1);
  EXPECT_EQ(*(*db)->JobOwner("retry"), 1001);
  EXPECT_EQ((*db)->InactiveJobs(before)->size(), 3u);
}

TEST_F(StateDbTest, PruningKeepsLocalCheckpointsWhileTheirDirectoriesExist) {
  auto db = StateDb::Open(path_, CommitSync::kNormal);
  ASSERT_TRUE(db.ok()) << db.message();
  AddJob(**db, "loc", 1000.0, "local", false, false, /*upload=*/"");
  auto steps = (*db)->LocalCompleteSteps("loc");
  ASSERT_TRUE(steps.ok()) << steps.message();
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_EQ((*steps)[0], std::make_pair(int64_t{10}, std::string("/ck/loc")));
  // The checkpoint is still there: its commit, files and step stay (RestoreLocal needs them).
  auto r = (*db)->PruneJob("loc", 5000.0, true, {});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->pruned);
  EXPECT_EQ(r->rows, 6);  // 3 events, heartbeat, owner, segment
  EXPECT_EQ(RowsOf(path_, "loc"), (std::map<std::string, int64_t>{
                                      {"commits", 1}, {"files", 2}, {"parts", 1}, {"steps", 1}}));
  EXPECT_EQ((*db)->LocalCommits("/ck/loc", 10)->size(), 1u);
  r = (*db)->PruneJob("loc", 5000.0, true, {});  // the next pass: nothing more
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rows, 0);
  // Its directory is gone: the rest goes too.
  r = (*db)->PruneJob("loc", 5000.0, true, *steps);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->rows, 5);
  EXPECT_TRUE(RowsOf(path_, "loc").empty());
  EXPECT_TRUE((*db)->InactiveJobs(5000.0)->empty());
}

TEST_F(StateDbTest, ALargeJobIsPrunedInSeveralShortTransactions) {
  auto db = StateDb::Open(path_, CommitSync::kNormal);
  ASSERT_TRUE(db.ok()) << db.message();
  // 2500 events and 300 commits: more than one batch of each (1000 events, 125 commits).
  for (int i = 0; i < 2500; ++i)
    ASSERT_TRUE((*db)->AddEvent({1000.0 + i, "n1", "big", "e", 0, i, ""}).ok());
  for (int i = 0; i < 300; ++i) {
    CommitRecord c;
    c.job_id = "big";
    c.step = i;
    c.ckpt_dir = "/ck/big";
    c.upload = "s3://b/p";
    c.created = 1000.0;
    c.state = "uploaded";
    bool dup = false;
    ASSERT_TRUE((*db)->AddCommit(c, {{"a.pt", 1, "", "", false, ""}}, &dup).ok());
  }
  ASSERT_TRUE((*db)->SetJournalSegments("big", {{1, 2500, 2}}).ok());
  AddJob(**db, "other", 1000.0, "uploaded");  // another old job: untouched by big's pruning
  auto r = (*db)->PruneJob("big", 5000.0, true, {});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->pruned);
  EXPECT_EQ(r->rows, 2500 + 300 * 2 + 1);
  EXPECT_TRUE(RowsOf(path_, "big").empty());
  EXPECT_EQ(RowsOf(path_, "other").size(), 8u);
}

TEST_F(StateDbTest, TheDatabaseStopsGrowingWhenOldJobsArePruned) {
  auto db = StateDb::Open(path_, CommitSync::kNormal);
  ASSERT_TRUE(db.ok()) << db.message();
  // 40 simulated days, 5 jobs a day (each: a commit with 2 files, 3 events, ...), 3 days kept.
  int64_t pages_day_10 = 0, used_day_10 = 0;
  for (int day = 0; day < 40; ++day) {
    const double t = 1e6 + day * 86400.0;
    for (int j = 0; j < 5; ++j) AddJob(**db, std::to_string(day * 5 + j), t + j, "uploaded");
    auto inactive = (*db)->InactiveJobs(t - 3 * 86400.0);
    ASSERT_TRUE(inactive.ok()) << inactive.message();
    for (const auto& job : *inactive) {
      auto r = (*db)->PruneJob(job, t - 3 * 86400.0, true, {});
      ASSERT_TRUE(r.ok() && r->pruned) << job;
    }
    if (day == 10) {
      pages_day_10 = Pragma(path_, "page_count");
      used_day_10 = pages_day_10 - Pragma(path_, "freelist_count");
    }
  }
  // Only the last 4 days' jobs are left, in the pages freed by the pruned ones.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "SELECT COUNT(DISTINCT job_id) FROM journal", -1, &s, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(s, 0), 20);
  sqlite3_finalize(s);
  sqlite3_close(raw);
  const int64_t pages = Pragma(path_, "page_count");
  const int64_t used = pages - Pragma(path_, "freelist_count");
  EXPECT_LE(pages, pages_day_10 + 4) << "pages at day 10: " << pages_day_10;
  EXPECT_LE(used, used_day_10 + 4) << "used pages at day 10: " << used_day_10;
  // Without pruning the 200 jobs' events alone (600 KB) would take 150 more pages.
  EXPECT_GT(used_day_10, 30);
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
    bool set = false;
    Status st;
    std::thread t([&] {
      const auto tid = static_cast<id_t>(syscall(SYS_gettid));
      // Lowering it (a suite run under `nice`) needs the privilege; without it, whatever it is.
      set = setpriority(PRIO_PROCESS, tid, nice) == 0;
      before = getpriority(PRIO_PROCESS, tid);
      st = (*db)->AddEvent({1.0, "n", "7", "ckpt_committed", 0, 1, "d"});
      if (st.ok()) st = (*db)->SetStepState("7", 1, "/ck/7", "COMPLETE-LOCAL");
      after = getpriority(PRIO_PROCESS, tid);
    });
    t.join();
    EXPECT_TRUE(st.ok()) << st.message();
    if (set) {
      EXPECT_EQ(before, nice);
    }
    EXPECT_EQ(after, before) << "nice " << nice;
  }
}

}  // namespace
}  // namespace autopar
