// The daemon's request handling end to end over a file:// store in a temporary directory (no
// socket, no Slurm: job owners come from a fake).
#include "daemon.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/proto/proto_client.h"
#include "socket_client_for_test.h"

namespace autopar {
namespace {

namespace fs = std::filesystem;
using testing_socket::Connect;
using testing_socket::StatusOn;
using testing_socket::Write;

class FakeOwners : public JobOwnerLookup {
 public:
  Result<uid_t> Owner(const std::string& job_id) override {
    if (job_id == "5" || job_id == "6") return geteuid();
    if (job_id == "9") return 4242u;
    return Status::Error("job " + job_id + ": Slurm does not know it");
  }
};

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/autopard-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    DaemonConfig c;
    c.state_dir = (root_ / "state").string();
    c.socket = (root_ / "s.sock").string();
    c.node = "nodeT";
    c.posix.fsync = false;
    c.part_size = 5ull << 20;
    c.retry.max_attempts = 2;
    c.retry.initial = std::chrono::milliseconds(1);
    config_ = c;
    Restart();
    fs::create_directories(root_ / "store");
    upload_ = "file://" + (root_ / "store").string();
  }
  // A new daemon on the same state directory (what a restart of autopard does before serving).
  void Restart() {
    daemon_.reset();
    auto d = Daemon::Create(config_, std::make_unique<FakeOwners>());
    ASSERT_TRUE(d.ok()) << d.message();
    daemon_ = std::move(*d);
    ASSERT_TRUE(daemon_->uploader().ResumePending().ok());
  }
  // The commits of `job` as the state database has them, newest first.
  std::vector<CommitRecord> CommitsOf(const std::string& job) {
    auto db = StateDb::Open(config_.state_dir + "/autopard.db");
    EXPECT_TRUE(db.ok()) << db.message();
    if (!db.ok()) return {};
    auto rows = (*db)->Commits(job, 100);
    EXPECT_TRUE(rows.ok()) << rows.message();
    return rows.ok() ? *rows : std::vector<CommitRecord>{};
  }
  int CountEvents(const std::string& job, const std::string& kind, int64_t step) {
    Request ev;
    ev.op = Op::kEvents;
    ev.job_id = job;
    int n = 0;
    for (const auto& e : daemon_->Handle(ev, root_peer_).events) n += e.kind == kind && e.step == step;
    return n;
  }
  std::string StepState(const std::string& upload, int64_t step) {
    Request ls;
    ls.op = Op::kLs;
    ls.upload = upload;
    for (const auto& s : daemon_->Handle(ls, root_peer_).steps) {
      if (s.step == step) return s.state;
    }
    return "";
  }
  void TearDown() override {
    daemon_.reset();
    fs::remove_all(root_);
  }
  Request CommitReq(const std::string& job, int64_t step, int rank, int world, const std::string& dir,
                    const std::string& upload, int64_t keep = 0) {
    Request r;
    r.op = Op::kCommit;
    r.job_id = job;
    r.step = step;
    r.rank = rank;
    r.world_size = world;
    r.local_world_size = world;
    r.ckpt_dir = dir;
    r.upload = upload;
    r.keep = keep;
    return r;
  }
  // Writes rank files for a step and commits them as root.
  Reply WriteAndCommit(const std::string& job, int64_t step, int rank, int world, int64_t keep = 0,
                       const std::string& upload = "*") {
    std::string dir = (root_ / "ck" / job).string();
    Write(RankStepDir(dir, step, rank) + "/model.pt", "model of step " + std::to_string(step) + " rank " + std::to_string(rank));
    Write(RankStepDir(dir, step, rank) + "/opt/state.bin", std::string(6 << 20, static_cast<char>('a' + rank)));
    return daemon_->Handle(CommitReq(job, step, rank, world, dir, upload == "*" ? upload_ : upload, keep), root_peer_);
  }
  Request RestoreReq(const std::string& job, int rank, int world, const std::string& dir,
                     const std::string& upload) {
    Request r;
    r.op = Op::kRestore;
    r.job_id = job;
    r.rank = rank;
    r.world_size = world;
    r.ckpt_dir = dir;
    r.upload = upload;
    return r;
  }
  fs::path root_;
  DaemonConfig config_;
  std::string upload_;
  std::unique_ptr<Daemon> daemon_;
  Peer root_peer_{1, 0, 0};
};

TEST_F(DaemonTest, CommittedStepsBecomeCompleteAndRestoreInANewJob) {
  for (int64_t step : {10, 20}) {
    for (int rank : {0, 1}) {
      Reply r = WriteAndCommit("5", step, rank, 2);
      ASSERT_TRUE(r.status.ok()) << r.status.message();
      EXPECT_EQ(r.commit.files, 2);
    }
  }
  daemon_->uploader().WaitIdle();
  Request ls;
  ls.op = Op::kLs;
  ls.upload = upload_;
  Reply listed = daemon_->Handle(ls, root_peer_);
  ASSERT_TRUE(listed.status.ok()) << listed.status.message();
  ASSERT_EQ(listed.steps.size(), 2u);
  EXPECT_EQ(listed.steps[0].step, 20);
  EXPECT_EQ(listed.steps[0].state, "COMPLETE");
  EXPECT_EQ(listed.steps[0].world_size, 2);
  EXPECT_TRUE(fs::exists(root_ / "store/job-5/step-20/manifest.json"));
  EXPECT_TRUE(fs::exists(root_ / "store/job-5/step-20/rank-1/opt/state.bin"));

  // A new job (6) with the same URI resumes from job 5's newest step.
  std::string dir6 = (root_ / "ck" / "6").string();
  Reply restored = daemon_->Handle(RestoreReq("6", 1, 2, dir6, upload_), root_peer_);
  ASSERT_TRUE(restored.status.ok()) << restored.status.message();
  EXPECT_EQ(restored.restore.step, 20);
  EXPECT_EQ(restored.restore.source_job, "5");
  EXPECT_EQ(restored.restore.dir, RankStepDir(dir6, 20, 1));
  EXPECT_EQ(Read(RankStepDir(dir6, 20, 1) + "/model.pt"), "model of step 20 rank 1");
  EXPECT_EQ(restored.restore.bytes_local, 0u);
  EXPECT_GT(restored.restore.bytes_fetched, 0u);

  // Restored again on the same node (an in-place restart): the intact copy is used as it is,
  // nothing fetched; a damaged file is fetched again, alone.
  Reply again = daemon_->Handle(RestoreReq("6", 1, 2, dir6, upload_), root_peer_);
  ASSERT_TRUE(again.status.ok()) << again.status.message();
  EXPECT_EQ(again.restore.step, 20);
  EXPECT_EQ(again.restore.bytes_fetched, 0u);
  EXPECT_EQ(again.restore.bytes_local, restored.restore.bytes_fetched);
  const std::string model6 = RankStepDir(dir6, 20, 1) + "/model.pt";
  Write(model6, "model of step 20 rank X");  // same size, other bytes
  Reply repaired = daemon_->Handle(RestoreReq("6", 1, 2, dir6, upload_), root_peer_);
  ASSERT_TRUE(repaired.status.ok()) << repaired.status.message();
  EXPECT_EQ(Read(model6), "model of step 20 rank 1");
  EXPECT_EQ(repaired.restore.bytes_fetched, std::string("model of step 20 rank 1").size());
  EXPECT_GT(repaired.restore.bytes_local, 0u);

  // One rank's object corrupted in storage, on a node without a copy: that rank falls back to
  // step 10, naming the object.
  Write(root_ / "store/job-5/step-20/rank-1/model.pt", "garbage!");
  fs::remove_all(RankStepDir(dir6, 20, 1));
  Reply fallback = daemon_->Handle(RestoreReq("6", 1, 2, dir6, upload_), root_peer_);
  ASSERT_TRUE(fallback.status.ok()) << fallback.status.message();
  EXPECT_EQ(fallback.restore.step, 10);
  ASSERT_EQ(fallback.restore.skipped.size(), 1u);
  EXPECT_NE(fallback.restore.skipped[0].find("job-5/step-20/rank-1/model.pt"), std::string::npos)
      << fallback.restore.skipped[0];
  // max_step lets ranks agree on an older step.
  Request bounded = RestoreReq("6", 0, 2, dir6, upload_);
  bounded.max_step = 10;
  EXPECT_EQ(daemon_->Handle(bounded, root_peer_).restore.step, 10);
  // A different world size cannot restore.
  Reply other = daemon_->Handle(RestoreReq("6", 0, 4, dir6, upload_), root_peer_);
  EXPECT_EQ(other.restore.step, -1);
}

// A DCP checkpoint (rank 0's .metadata beside the ranks' __R_0.distcp): each rank's restore places
// every saved rank's files of the step on its node, its own directory named as usual; another
// step of the same job restores only the rank's own.
TEST_F(DaemonTest, ADcpStepIsRestoredWholeOnEveryNode) {
  const std::string dir = (root_ / "ck" / "5").string();
  for (int rank : {0, 1, 2}) {
    if (rank == 0) Write(RankStepDir(dir, 4, 0) + "/.metadata", "dcp metadata");
    Write(RankStepDir(dir, 4, rank) + "/__" + std::to_string(rank) + "_0.distcp", "shard " + std::to_string(rank));
    ASSERT_TRUE(daemon_->Handle(CommitReq("5", 4, rank, 3, dir, upload_, 0), root_peer_).status.ok());
  }
  daemon_->uploader().WaitIdle();
  const std::string dir6 = (root_ / "ck" / "6").string();
  Reply every = daemon_->Handle(RestoreReq("6", 1, 3, dir6, upload_), root_peer_);
  ASSERT_TRUE(every.status.ok()) << every.status.message();
  EXPECT_EQ(every.restore.step, 4);
  EXPECT_EQ(every.restore.dir, RankStepDir(dir6, 4, 1));
  EXPECT_EQ(every.restore.step_dir, dir6 + "/step-4");
  EXPECT_EQ(Read(RankStepDir(dir6, 4, 0) + "/.metadata"), "dcp metadata");
  for (int rank : {0, 1, 2}) {
    EXPECT_EQ(Read(RankStepDir(dir6, 4, rank) + "/__" + std::to_string(rank) + "_0.distcp"),
              "shard " + std::to_string(rank));
  }
  // Not a DCP step: the rank's own files only.
  for (int rank : {0, 1, 2}) ASSERT_TRUE(WriteAndCommit("5", 8, rank, 3).status.ok());
  daemon_->uploader().WaitIdle();
  Reply own = daemon_->Handle(RestoreReq("6", 1, 3, dir6, upload_), root_peer_);
  ASSERT_TRUE(own.status.ok()) << own.status.message();
  EXPECT_EQ(own.restore.step, 8);
  EXPECT_TRUE(fs::exists(RankStepDir(dir6, 8, 1) + "/model.pt"));
  EXPECT_FALSE(fs::exists(RankStepDir(dir6, 8, 0)));
}

// A restored file has the mode its saved file had (a private checkpoint stays private), and a
// user's file:// store holds what autopard uploads for them as theirs, with that mode.
TEST_F(DaemonTest, RestoreGivesFilesBackTheirSavedModes) {
  const std::string dir = (root_ / "ck" / "5").string();
  Write(RankStepDir(dir, 3, 0) + "/private.pt", "secret weights");
  Write(RankStepDir(dir, 3, 0) + "/shared.json", "{}");
  fs::permissions(RankStepDir(dir, 3, 0) + "/private.pt", fs::perms(0600));
  fs::permissions(RankStepDir(dir, 3, 0) + "/shared.json", fs::perms(0644));
  ASSERT_TRUE(daemon_->Handle(CommitReq("5", 3, 0, 1, dir, upload_, 0), root_peer_).status.ok());
  daemon_->uploader().WaitIdle();
  struct stat st {};
  ASSERT_EQ(stat((root_ / "store/job-5/step-3/rank-0/private.pt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(Read(root_ / "store/job-5/step-3/manifest.json").find("\"mode\" : 384"), std::string::npos);
  const std::string dir6 = (root_ / "ck" / "6").string();
  Reply restored = daemon_->Handle(RestoreReq("6", 0, 1, dir6, upload_), root_peer_);
  ASSERT_TRUE(restored.status.ok()) << restored.status.message();
  ASSERT_EQ(restored.restore.step, 3);
  ASSERT_EQ(stat((RankStepDir(dir6, 3, 0) + "/private.pt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((RankStepDir(dir6, 3, 0) + "/shared.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(DaemonTest, ProbeDecidesTheStepWithoutFetchingAnything) {
  for (int64_t step : {10, 20}) {
    for (int rank : {0, 1}) ASSERT_TRUE(WriteAndCommit("5", step, rank, 2).status.ok());
  }
  ASSERT_TRUE(WriteAndCommit("5", 30, 0, 2).status.ok());  // rank 1 never commits step 30
  daemon_->uploader().WaitIdle();
  std::string dir6 = (root_ / "ck" / "6").string();
  Request probe = RestoreReq("6", 0, 2, dir6, upload_);
  probe.probe = true;
  // Even with rank 0's object of step 20 corrupt: the probe reads manifests only (the restore
  // that follows detects the corruption, and the ranks fall back together).
  Write(root_ / "store/job-5/step-20/rank-0/model.pt", "garbage!");
  Reply p = daemon_->Handle(probe, root_peer_);
  ASSERT_TRUE(p.status.ok()) << p.status.message();
  EXPECT_EQ(p.restore.step, 20);
  EXPECT_EQ(p.restore.source_job, "5");
  EXPECT_EQ(p.restore.dir, "");
  EXPECT_TRUE(p.restore.skipped.empty());
  EXPECT_FALSE(fs::exists(dir6));  // nothing fetched
  probe.max_step = 15;
  EXPECT_EQ(daemon_->Handle(probe, root_peer_).restore.step, 10);
  probe.max_step = -1;
  // An unreadable manifest is skipped with its reason, as by the restore.
  Write(root_ / "store/job-5/step-20/manifest.json", "{");
  p = daemon_->Handle(probe, root_peer_);
  EXPECT_EQ(p.restore.step, 10);
  ASSERT_EQ(p.restore.skipped.size(), 1u);
  EXPECT_NE(p.restore.skipped[0].find("step 20 of job 5"), std::string::npos) << p.restore.skipped[0];
  // Another world size: no step fits (a fresh start).
  Request other = RestoreReq("6", 0, 4, dir6, upload_);
  other.probe = true;
  EXPECT_EQ(daemon_->Handle(other, root_peer_).restore.step, -1);
  EXPECT_FALSE(fs::exists(dir6));
  // Authorized exactly like a restore: another user's job is refused.
  Request foreign = RestoreReq("9", 0, 1, (root_ / "ck/9").string(), upload_);
  foreign.probe = true;
  Reply refused = daemon_->Handle(foreign, Peer{2, 1234, 1234});
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.message().find("permission denied: job 9 belongs to uid 4242"), std::string::npos)
      << refused.status.message();
}

TEST_F(DaemonTest, IncompleteStepIsNeverRestoredAndRetentionKeepsTheNewest) {
  for (int64_t step : {1, 2, 3}) {
    for (int rank : {0, 1}) ASSERT_TRUE(WriteAndCommit("5", step, rank, 2, 2).status.ok());
    daemon_->uploader().WaitIdle();
  }
  ASSERT_TRUE(WriteAndCommit("5", 4, 0, 2, 2).status.ok());  // rank 1 never commits step 4
  daemon_->uploader().WaitIdle();
  EXPECT_FALSE(fs::exists(root_ / "store/job-5/step-1"));
  EXPECT_FALSE(fs::exists(root_ / "ck/5/step-1"));  // local copy removed too
  EXPECT_TRUE(fs::exists(root_ / "store/job-5/step-2/manifest.json"));
  EXPECT_TRUE(fs::exists(root_ / "store/job-5/step-3/manifest.json"));
  EXPECT_FALSE(fs::exists(root_ / "store/job-5/step-4/manifest.json"));
  std::string dir = (root_ / "ck/5").string();
  Reply r = daemon_->Handle(RestoreReq("5", 0, 2, dir, upload_), root_peer_);
  EXPECT_EQ(r.restore.step, 3);
}

// A step that never completes (a rank never committed it) is watched for another node's manifest
// until a newer step completes here, not for the ten minutes of the watch: the soak saw ~20
// watching threads at a time while storage failed on and off.
TEST_F(DaemonTest, AStepThatNeverCompletesIsNoLongerWatchedOnceANewerOneCompletes) {
  ASSERT_TRUE(WriteAndCommit("6", 1, 0, 2, 2).status.ok());  // rank 1 never commits step 1
  daemon_->uploader().WaitIdle();
  EXPECT_EQ(daemon_->uploader().CurrentCounts().steps_watched, 1);
  for (int rank : {0, 1}) ASSERT_TRUE(WriteAndCommit("6", 2, rank, 2, 2).status.ok());
  daemon_->uploader().WaitIdle();
  EXPECT_EQ(StepState(upload_, 2), "COMPLETE");
  // The watcher polls with a growing pause (at most 5 s); it sees step 2 at its next poll.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (daemon_->uploader().CurrentCounts().steps_watched > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(daemon_->uploader().CurrentCounts().steps_watched, 0);
  EXPECT_FALSE(fs::exists(root_ / "store/job-6/step-1/manifest.json"));
}

TEST_F(DaemonTest, LocalOnlyCheckpointsCompleteWhenEveryLocalRankCommitted) {
  ASSERT_TRUE(WriteAndCommit("5", 7, 0, 2, 0, "").status.ok());
  daemon_->uploader().WaitIdle();
  std::string dir = (root_ / "ck/5").string();
  EXPECT_EQ(daemon_->Handle(RestoreReq("5", 0, 2, dir, ""), root_peer_).restore.step, -1);
  ASSERT_TRUE(WriteAndCommit("5", 7, 1, 2, 0, "").status.ok());
  daemon_->uploader().WaitIdle();
  Reply r = daemon_->Handle(RestoreReq("5", 0, 2, dir, ""), root_peer_);
  EXPECT_EQ(r.restore.step, 7);
  EXPECT_EQ(r.restore.dir, RankStepDir(dir, 7, 0));
  // A probe names the step without reading the files (the restore that follows verifies them).
  Request probe = RestoreReq("5", 1, 2, dir, "");
  probe.probe = true;
  Write(RankStepDir(dir, 7, 1) + "/model.pt", "tampered");
  Reply p = daemon_->Handle(probe, root_peer_);
  EXPECT_EQ(p.restore.step, 7);
  EXPECT_EQ(p.restore.dir, "");
  // A local file changed after the commit is detected.
  Reply bad = daemon_->Handle(RestoreReq("5", 1, 2, dir, ""), root_peer_);
  EXPECT_EQ(bad.restore.step, -1);
  ASSERT_FALSE(bad.restore.skipped.empty());
}

TEST_F(DaemonTest, OtherUsersJobsAndUnsafeFilesAreRefused) {
  std::string dir = (root_ / "ck/9").string();
  Write(RankStepDir(dir, 1, 0) + "/model.pt", "x");
  Peer stranger{2, 1234, 1234};
  Reply r = daemon_->Handle(CommitReq("9", 1, 0, 1, dir, upload_), stranger);
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("permission denied: job 9 belongs to uid 4242"), std::string::npos);
  Request ev;
  ev.op = Op::kEvents;
  ev.job_id = "9";
  EXPECT_FALSE(daemon_->Handle(ev, stranger).status.ok());
  Request ls;
  ls.op = Op::kLs;
  ls.job_id = "9";
  EXPECT_FALSE(daemon_->Handle(ls, stranger).status.ok());

  // A symlink in the rank directory is refused (it could point at anybody's file).
  std::string d5 = (root_ / "ck/5").string();
  Write(RankStepDir(d5, 1, 0) + "/model.pt", "x");
  fs::create_symlink("/etc/shadow", RankStepDir(d5, 1, 0) + "/secret");
  Reply sym = daemon_->Handle(CommitReq("5", 1, 0, 1, d5, upload_), root_peer_);
  ASSERT_FALSE(sym.status.ok());
  EXPECT_NE(sym.status.message().find("a symlink"), std::string::npos) << sym.status.message();
  // Committing a step whose directory does not exist names it.
  Reply missing = daemon_->Handle(CommitReq("5", 2, 0, 1, d5, upload_), root_peer_);
  ASSERT_FALSE(missing.status.ok());
  EXPECT_NE(missing.status.message().find("step-2/rank-0"), std::string::npos);
}

TEST_F(DaemonTest, UploadsFailedOnStorageResumeAfterARestartOrALaterSuccess) {
  // Storage "down" past the retry budget: the target is a plain file, so nothing can be written.
  const fs::path target = root_ / "down";
  Write(target, "not a directory");
  const std::string upload = "file://" + target.string();
  ASSERT_TRUE(WriteAndCommit("5", 1, 0, 1, 0, upload).status.ok());
  daemon_->uploader().WaitIdle();
  auto rows = CommitsOf("5");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, "failed");
  EXPECT_TRUE(rows[0].retry);
  EXPECT_NE(rows[0].error.find("retried where it stopped"), std::string::npos) << rows[0].error;

  // Storage back; autopard restarted: the failed upload resumes and the step completes.
  fs::remove(target);
  fs::create_directories(target);
  Restart();
  daemon_->uploader().WaitIdle();
  EXPECT_EQ(StepState(upload, 1), "COMPLETE");
  EXPECT_EQ(CommitsOf("5")[0].state, "uploaded");
  EXPECT_EQ(CountEvents("5", "ckpt_upload_retry", 1), 1);
  EXPECT_EQ(Read(target / "job-5/step-1/rank-0/model.pt"), "model of step 1 rank 0");

  // Down again for step 2; step 3, committed once storage is back, brings step 2 along without
  // a restart.
  fs::remove_all(target);
  Write(target, "down again");
  ASSERT_TRUE(WriteAndCommit("5", 2, 0, 1, 0, upload).status.ok());
  daemon_->uploader().WaitIdle();
  EXPECT_EQ(CommitsOf("5")[0].state, "failed");
  fs::remove(target);
  fs::create_directories(target);
  ASSERT_TRUE(WriteAndCommit("5", 3, 0, 1, 0, upload).status.ok());
  daemon_->uploader().WaitIdle();
  EXPECT_EQ(StepState(upload, 2), "COMPLETE");
  EXPECT_EQ(StepState(upload, 3), "COMPLETE");
  for (const auto& c : CommitsOf("5")) EXPECT_EQ(c.state, "uploaded") << "step " << c.step;

  // A failed step whose local files are gone by the retry fails for good, once, naming why.
  fs::remove_all(target);
  Write(target, "down");
  ASSERT_TRUE(WriteAndCommit("5", 4, 0, 1, 0, upload).status.ok());
  daemon_->uploader().WaitIdle();
  fs::remove(target);
  fs::create_directories(target);
  fs::remove_all(root_ / "ck/5/step-4");
  Restart();
  daemon_->uploader().WaitIdle();
  auto step4 = CommitsOf("5")[0];
  EXPECT_EQ(step4.step, 4);
  EXPECT_EQ(step4.state, "failed");
  EXPECT_FALSE(step4.retry);
  EXPECT_NE(step4.error.find("committed file missing or changed"), std::string::npos) << step4.error;
  Restart();
  daemon_->uploader().WaitIdle();
  EXPECT_EQ(CountEvents("5", "ckpt_upload_retry", 4), 1);  // not retried again
  EXPECT_EQ(StepState(upload, 4), "");
}

TEST_F(DaemonTest, OwnershipRecordsOthersCouldWriteAreIgnored) {
  ASSERT_TRUE(WriteAndCommit("5", 1, 0, 1).status.ok());
  daemon_->uploader().WaitIdle();
  const fs::path owner = root_ / "store/job-5/owner.json";
  struct stat st {};
  ASSERT_EQ(lstat(owner.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_mode & 022, 0u);
  EXPECT_NE(Read(owner).find("\"job_id\" : \"5\""), std::string::npos) << Read(owner);

  // A record naming user 4242 in 4242's own store (as autopard writes it for them, with their
  // identity): 4242 may list job 5 by URI. The store is read with 4242's rights.
  const std::string record = "{\"uid\": 4242, \"job_id\": \"5\"}\n";
  Write(owner, record);
  fs::permissions(root_, fs::perms(0755));
  for (const auto& e : fs::recursive_directory_iterator(root_ / "store")) {
    ASSERT_EQ(lchown(e.path().c_str(), 4242, 4242), 0);
  }
  ASSERT_EQ(lchown((root_ / "store").c_str(), 4242, 4242), 0);
  Request ls;
  ls.op = Op::kLs;
  ls.upload = upload_;
  Peer user{3, 4242, 4242};
  ASSERT_EQ(daemon_->Handle(ls, user).steps.size(), 1u);
  // The same record owned by someone else (root, here) is not 4242's: it names nobody.
  ASSERT_EQ(lchown(owner.c_str(), 0, 0), 0);
  EXPECT_TRUE(daemon_->Handle(ls, user).steps.empty());
  ASSERT_EQ(lchown(owner.c_str(), 4242, 4242), 0);
  // Writable by others: whatever it says, it no longer counts.
  fs::permissions(owner, fs::perms::others_write, fs::perm_options::add);
  EXPECT_TRUE(daemon_->Handle(ls, user).steps.empty());
  fs::permissions(owner, fs::perms::others_write, fs::perm_options::remove);
  ASSERT_EQ(daemon_->Handle(ls, user).steps.size(), 1u);
  // A record moved in from another job's directory names that job: ignored.
  Write(owner, "{\"uid\": 4242, \"job_id\": \"6\"}\n");
  EXPECT_TRUE(daemon_->Handle(ls, user).steps.empty());
  // A job directory someone else can write into: refused for records and for new uploads.
  Write(owner, record);
  ASSERT_EQ(daemon_->Handle(ls, user).steps.size(), 1u);
  fs::permissions(root_ / "store/job-5", fs::perms::group_write, fs::perm_options::add);
  EXPECT_TRUE(daemon_->Handle(ls, user).steps.empty());
  // (root's commit below writes as root into the tree it now shares with 4242)
  for (const auto& e : fs::recursive_directory_iterator(root_ / "store")) {
    ASSERT_EQ(lchown(e.path().c_str(), 0, 0), 0);
  }
  ASSERT_TRUE(WriteAndCommit("5", 2, 0, 1).status.ok());
  daemon_->uploader().WaitIdle();
  auto rows = CommitsOf("5");
  EXPECT_EQ(rows[0].state, "failed");
  EXPECT_NE(rows[0].error.find("job-5: writable by group or others (mode 07"), std::string::npos)
      << rows[0].error;
}

// State retention: an injected clock 15 days ahead (state_keep_days 14 by default).
double FifteenDaysFromNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
             .count() +
         15 * 86400.0;
}

TEST_F(DaemonTest, RetentionForgetsRowsNeverCheckpointsAndKeepsLocalOnesRestorable) {
  ASSERT_TRUE(WriteAndCommit("5", 1, 0, 1).status.ok());         // uploaded to the store
  ASSERT_TRUE(WriteAndCommit("6", 7, 0, 1, 0, "").status.ok());  // local only
  daemon_->uploader().WaitIdle();
  ASSERT_EQ(CommitsOf("5").size(), 1u);
  // Today nothing is old enough.
  Daemon::PruneSummary today = daemon_->PruneState(FifteenDaysFromNow() - 15 * 86400.0);
  EXPECT_EQ(today.jobs_pruned, 0);
  EXPECT_EQ(today.rows, 0);
  Daemon::PruneSummary s = daemon_->PruneState(FifteenDaysFromNow());
  EXPECT_EQ(s.jobs_pruned, 2);
  EXPECT_EQ(s.jobs_kept, 0);
  EXPECT_GT(s.rows, 0);
  EXPECT_TRUE(CommitsOf("5").empty());
  EXPECT_EQ(CountEvents("5", "ckpt_complete", 1), 0);  // this node's journal of it is gone
  // The checkpoints are untouched: the upload is listed, the local step restores in a new job.
  EXPECT_EQ(StepState(upload_, 1), "COMPLETE");
  std::string dir = (root_ / "ck/6").string();
  Reply r = daemon_->Handle(RestoreReq("6", 0, 1, dir, ""), root_peer_);
  EXPECT_EQ(r.restore.step, 7);
  EXPECT_EQ(CommitsOf("6").size(), 1u);
  // Once the local step directory is gone, its rows go at the next pass.
  fs::remove_all(fs::path(RankStepDir(dir, 7, 0)).parent_path());
  s = daemon_->PruneState(FifteenDaysFromNow());
  EXPECT_EQ(s.jobs_pruned, 1);
  EXPECT_TRUE(CommitsOf("6").empty());
  // Off (state_keep_days 0): nothing is ever pruned.
  config_.state_keep_days = 0;
  Restart();
  ASSERT_TRUE(WriteAndCommit("5", 2, 0, 1).status.ok());
  daemon_->uploader().WaitIdle();
  EXPECT_EQ(daemon_->PruneState(FifteenDaysFromNow() + 1e6).rows, 0);
  EXPECT_EQ(CommitsOf("5").size(), 1u);
}

TEST_F(DaemonTest, RetentionKeepsJobsWithUploadsToRetry) {
  // Storage "down" past the retry budget (the target is a plain file): the failed upload is kept
  // to retry, and so is every row of its job, however old.
  const fs::path target = root_ / "down";
  Write(target, "not a directory");
  ASSERT_TRUE(WriteAndCommit("5", 1, 0, 1, 0, "file://" + target.string()).status.ok());
  daemon_->uploader().WaitIdle();
  auto rows = CommitsOf("5");
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].state, "failed");
  ASSERT_TRUE(rows[0].retry);
  Daemon::PruneSummary s = daemon_->PruneState(FifteenDaysFromNow());
  EXPECT_EQ(s.jobs_pruned, 0);
  EXPECT_EQ(s.jobs_kept, 1);
  EXPECT_EQ(CommitsOf("5").size(), 1u);
  EXPECT_EQ(CountEvents("5", "ckpt_failed", 1), 1);
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

TEST_F(DaemonTest, ServesOverTheSocketWhileOtherConnectionsStayOpenAndStops) {
  Status served = Status::Error("not returned");
  std::thread server([&] { served = daemon_->Serve(); });
  int first = -1;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       first < 0 && std::chrono::steady_clock::now() < deadline;) {
    first = Connect(config_.socket);
    if (first < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // not bound yet
  }
  ASSERT_GE(first, 0) << config_.socket;
  // More open connections than threads waiting in accept() at rest: each keeps its thread.
  std::vector<int> open{first};
  for (int i = 0; i < 4; ++i) open.push_back(Connect(config_.socket));
  for (int fd : open) {
    ASSERT_GE(fd, 0);
    auto reply = DecodeReply(Op::kStatus, StatusOn(fd));
    EXPECT_TRUE(reply.ok()) << reply.message();
  }
  // A new connection is still answered, and so is a second request on an open one.
  int extra = Connect(config_.socket);
  ASSERT_GE(extra, 0);
  EXPECT_TRUE(DecodeReply(Op::kStatus, StatusOn(extra)).ok());
  EXPECT_TRUE(DecodeReply(Op::kStatus, StatusOn(first)).ok());
  close(extra);
  for (int fd : open) close(fd);
  daemon_->Stop();
  server.join();
  EXPECT_TRUE(served.ok()) << served.message();
  EXPECT_FALSE(fs::exists(config_.socket));
  EXPECT_LT(Connect(config_.socket), 0);
}

// The first line `fd` receives ("" at EOF before one), then whether the peer closed after it
// (waits for that up to the socket's receive timeout).
std::string LineThenEof(int fd, bool* closed) {
  std::string in;
  char buf[4096];
  ssize_t n = 0;
  while (in.find('\n') == std::string::npos && (n = recv(fd, buf, sizeof(buf), 0)) > 0) {
    in.append(buf, static_cast<size_t>(n));
  }
  // Closed: EOF, or a reset (the peer closed with our unread bytes in its buffer).
  auto eof = [&](ssize_t r) { return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR); };
  *closed = eof(n) || eof(recv(fd, buf, sizeof(buf), 0));
  return in.substr(0, in.find('\n'));
}

TEST_F(DaemonTest, HostileConnectionsAreLimitedAndTimedOut) {
  config_.max_connections_per_uid = 3;
  config_.request_timeout_s = 1;
  config_.idle_timeout_s = 3;
  Restart();
  Status served = Status::Error("not returned");
  std::thread server([&] { served = daemon_->Serve(); });
  std::vector<int> open;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       open.empty() && std::chrono::steady_clock::now() < deadline;) {
    if (int fd = Connect(config_.socket); fd >= 0) open.push_back(fd);
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(open.size(), 1u);
  for (int i = 0; i < 2; ++i) open.push_back(Connect(config_.socket));
  for (int fd : open) ASSERT_TRUE(DecodeReply(Op::kStatus, StatusOn(fd)).ok());
  // A fourth connection of the same user: one error line, closed.
  int over = Connect(config_.socket);
  bool closed = false;
  EXPECT_NE(LineThenEof(over, &closed).find("busy: uid " + std::to_string(geteuid()) +
                                            " already has 3 connections open (max_connections_per_uid)"),
            std::string::npos);
  EXPECT_TRUE(closed);
  close(over);
  // Garbage is answered with an error and the connection serves on; a request sent slowly is
  // cut at request_timeout_s, a silent connection at idle_timeout_s (a line over 1 MiB:
  // AnOverlongLineIsCutAtOnce).
  ASSERT_EQ(send(open[0], "garbage\n", 8, MSG_NOSIGNAL), 8);
  std::string reply;
  char c;
  while (recv(open[0], &c, 1, 0) == 1 && c != '\n') reply += c;
  EXPECT_NE(reply.find("\"ok\":false"), std::string::npos) << reply;
  // open[0]'s idle time starts when the server has read this request: never before it was sent
  // (the reply's arrival is later than the server's clock start by the machine's load).
  const auto last_asked = std::chrono::steady_clock::now();
  EXPECT_TRUE(DecodeReply(Op::kStatus, StatusOn(open[0])).ok());
  ASSERT_EQ(send(open[1], "{\"op\":", 6, MSG_NOSIGNAL), 6);
  EXPECT_NE(LineThenEof(open[1], &closed).find("request not complete within 1 s (request_timeout_s)"),
            std::string::npos);
  EXPECT_TRUE(closed);
  EXPECT_EQ(LineThenEof(open[0], &closed), "");  // idle: closed without a word
  EXPECT_TRUE(closed);
  // Not before its idle_timeout_s (3 s), however long the steps above took on a loaded machine.
  EXPECT_GE(std::chrono::steady_clock::now() - last_asked, std::chrono::milliseconds(2900));
  for (int fd : open) close(fd);
  // The user's slots are back: a new connection is served.
  int again = -1;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    again = Connect(config_.socket);
    if (DecodeReply(Op::kStatus, StatusOn(again)).ok()) break;
    close(again);
    again = -1;
  }
  EXPECT_GE(again, 0);
  if (again >= 0) close(again);
  daemon_->Stop();
  server.join();
  EXPECT_TRUE(served.ok()) << served.message();
}

// A line over 1 MiB is answered with an error and closed as soon as its 1 MiB has arrived, not
// at request_timeout_s (long here: the reading thread is demoted to nice 19 past 64 KiB, and on a
// loaded machine its 1 MiB took more than the other test's 1 s).
TEST_F(DaemonTest, AnOverlongLineIsCutAtOnce) {
  config_.request_timeout_s = 60;
  Restart();
  Status served = Status::Error("not returned");
  std::thread server([&] { served = daemon_->Serve(); });
  int fd = -1;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       fd < 0 && std::chrono::steady_clock::now() < deadline;) {
    if ((fd = Connect(config_.socket)) < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(fd, 0);
  const std::string huge(kMaxLineBytes + 70000, 'x');
  const auto sent = std::chrono::steady_clock::now();
  (void)!send(fd, huge.data(), huge.size(), MSG_NOSIGNAL);
  bool closed = false;
  EXPECT_EQ(LineThenEof(fd, &closed),
            EncodeErrorReply("request longer than " + std::to_string(kMaxLineBytes) + " bytes"));
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::seconds(30));
  close(fd);
  daemon_->Stop();
  server.join();
  EXPECT_TRUE(served.ok()) << served.message();
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

TEST_F(DaemonTest, ReloadTakesCapsAndStorageAtOnceAndNamesWhatNeedsARestart) {
  config_.max_events_per_job = 2;
  config_.given["max_events_per_job"] = "2";
  Restart();
  Request ev;
  ev.op = Op::kEvent;
  ev.job_id = "5";
  ev.kind = "note";
  ev.rank = 0;
  ev.step = 1;
  auto sent = [&] { return daemon_->Handle(ev, root_peer_).status.ok(); };
  EXPECT_TRUE(sent());
  EXPECT_TRUE(sent());
  EXPECT_FALSE(sent());  // the cap of 2
  const std::string s3 = "s3://bucket/ck";
  std::string dir = (root_ / "ck" / "5").string();
  Write(RankStepDir(dir, 1, 0) + "/model.pt", "m");
  Reply refused = daemon_->Handle(CommitReq("5", 1, 0, 1, dir, s3), root_peer_);
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.message().find("has no S3 endpoint"), std::string::npos);

  DaemonConfig fresh = config_;
  fresh.max_events_per_job = 4;
  fresh.given["max_events_per_job"] = "4";
  fresh.s3.endpoint = "http://127.0.0.1:1";
  fresh.given["s3_endpoint"] = fresh.s3.endpoint;
  fresh.socket = (root_ / "other.sock").string();
  fresh.given["socket"] = fresh.socket;
  fresh.log_level = LogLevel::kWarning;
  fresh.given["log_level"] = "warning";
  ConfigChanges changes = daemon_->Reload(fresh, JobLimitsOf(SiteConfig{}));
  EXPECT_EQ(changes.applied, (std::vector<std::string>{"max_events_per_job", "s3_endpoint", "log_level"}));
  EXPECT_EQ(changes.need_restart, std::vector<std::string>{"socket"});
  EXPECT_EQ(CurrentLogLevel(), LogLevel::kWarning);
  EXPECT_TRUE(sent());  // 3 and 4 of the new cap
  EXPECT_TRUE(sent());
  EXPECT_FALSE(sent());
  Reply taken = daemon_->Handle(CommitReq("5", 1, 0, 1, dir, s3), root_peer_);
  EXPECT_TRUE(taken.status.ok()) << taken.status.message();
  // The running socket stays what it was until a restart; reloading the same file again says so
  // again and applies nothing new.
  EXPECT_EQ(daemon_->config().socket, config_.socket);
  changes = daemon_->Reload(fresh, JobLimitsOf(SiteConfig{}));
  EXPECT_TRUE(changes.applied.empty());
  EXPECT_EQ(changes.need_restart, std::vector<std::string>{"socket"});
  SetLogLevel(LogLevel::kInfo);
}

TEST(JournalDirTest, AFileJournalOpenToOthersIsRefused) {
  std::string dir = ::testing::TempDir() + "journal_dir_XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  Status open = CheckJournalDirPrivate("file://" + dir);
  EXPECT_NE(open.message().find("journal_uri: " + dir + ": open to others (mode 0755)"),
            std::string::npos)
      << open.message();
  ASSERT_EQ(chmod(dir.c_str(), 0750), 0);  // a group of admins may read it
  EXPECT_TRUE(CheckJournalDirPrivate("file://" + dir).ok());
  EXPECT_TRUE(CheckJournalDirPrivate("file://" + dir + "/not-yet").ok());  // made 0700
  EXPECT_TRUE(CheckJournalDirPrivate("s3://bucket/journal").ok());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace autopar
