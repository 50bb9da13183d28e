// Checkpoint operations (upload rank, complete step, restore with fallback, retention) against an
// in-memory store.
#include "core/ckpt/ckpt_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core/ckpt/sha256.h"
#include "memory_store_for_test.h"

namespace autopar {
namespace {

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(std::system(("rm -rf '" + root_ + "'").c_str()), 0); }
  void SetUp() override {
    // The process's own: two runs of the suite at once (two build trees) must not share it.
    root_ = ::testing::TempDir() + "autopar_ckpt_store_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
            std::to_string(::getpid());
    Mkdirs(root_);
    opts_.part_size = 1000;
    opts_.uniform = [] { return 0.0; };
    opts_.clock.sleep = [](std::chrono::milliseconds) {};
    opts_.backoff.max_attempts = 2;
  }
  static void Mkdirs(const std::string& path) {
    for (size_t i = 1; i <= path.size(); ++i) {
      if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
    }
  }
  // Writes rank `rank`'s files of `step` (content depends on step and rank) and returns the dir.
  std::string WriteRank(int64_t step, int rank) {
    std::string dir =
        root_ + "/local/step-" + std::to_string(step) + "/rank-" + std::to_string(rank);
    Mkdirs(dir + "/optim");
    std::ofstream(dir + "/model.pt") << Content(step, rank, "model", 2500);
    std::ofstream(dir + "/optim/state.pt") << Content(step, rank, "optim", 10);
    return dir;
  }
  static std::string Content(int64_t step, int rank, const std::string& what, size_t n) {
    std::string s = what + "/" + std::to_string(step) + "/" + std::to_string(rank) + "/";
    while (s.size() < n) s += s;
    return s.substr(0, n);
  }
  Result<RankUploadResult> Upload(const std::string& job, int64_t step, int rank, int world = 2) {
    return UploadRank(
        mem_, {job, step, world, rank, WriteRank(step, rank), {"model.pt", "optim/state.pt"}},
        opts_);
  }
  static std::string Read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  RestoreRequest Request(const std::string& job, std::vector<int> ranks) {
    return {job, ranks, [this](const std::string& j, int64_t step, int rank) {
              return root_ + "/restore/job-" + j + "/step-" + std::to_string(step) + "/rank-" +
                     std::to_string(rank);
            }};
  }

  std::string root_;
  TransferOptions opts_;
  MemoryStore mem_;
};

TEST_F(CheckpointStoreTest, StepCompletesWhenTheLastRankArrivesAndManifestIsLast) {
  auto r0 = Upload("7", 10, 0);
  ASSERT_TRUE(r0.ok()) << r0.message();
  EXPECT_FALSE(r0->step.complete);
  EXPECT_EQ(r0->step.Describe(), "incomplete: rank 1 missing");
  EXPECT_EQ(mem_.objects.count("job-7/step-10/manifest.json"), 0u);
  EXPECT_EQ(r0->bytes, 2510u);
  const auto& files = r0->rank_manifest.ranks.at(0).files;
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, "model.pt");
  EXPECT_EQ(files[0].sha256, Sha256Hex(Content(10, 0, "model", 2500)));

  auto r1 = Upload("7", 10, 1);
  ASSERT_TRUE(r1.ok()) << r1.message();
  EXPECT_TRUE(r1->step.complete);
  ASSERT_FALSE(mem_.put_order.empty());
  EXPECT_EQ(mem_.put_order.back(), "job-7/step-10/manifest.json");
  auto m = ReadStepManifest(mem_, "7", 10, opts_);
  ASSERT_TRUE(m.ok()) << m.message();
  EXPECT_EQ(m->ranks.size(), 2u);
  EXPECT_EQ(m->TotalBytes(), 5020u);

  // A repeated completion attempt is harmless and writes nothing new.
  size_t puts = mem_.put_order.size();
  auto again = TryCompleteStep(mem_, "7", 10, opts_);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->complete);
  EXPECT_EQ(mem_.put_order.size(), puts);
}

// Retention deleted rank 0's files of a step while rank 1 was still completing it: no COMPLETE
// manifest may be written over files that are gone.
TEST_F(CheckpointStoreTest, AStepWhoseFilesWereDeletedIsNeverMarkedComplete) {
  ASSERT_TRUE(Upload("7", 10, 0).ok());
  mem_.objects.erase("job-7/step-10/rank-0/model.pt");
  auto r1 = Upload("7", 10, 1);
  ASSERT_TRUE(r1.ok()) << r1.message();
  EXPECT_FALSE(r1->step.complete);
  EXPECT_NE(r1->step.Describe().find("1 file(s) no longer in storage (rank 0: model.pt)"), std::string::npos)
      << r1->step.Describe();
  EXPECT_EQ(mem_.objects.count("job-7/step-10/manifest.json"), 0u);
}

// What a store says of an object's size is not trusted: a "manifest" of a terabyte is an error,
// not an allocation.
TEST_F(CheckpointStoreTest, AnOversizedManifestIsRefusedNotRead) {
  ASSERT_TRUE(Upload("7", 10, 0, 1).ok());
  opts_.max_small_object = 100;
  auto m = ReadStepManifest(mem_, "7", 10, opts_);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("more than the 100 a manifest or record may have"), std::string::npos)
      << m.message();
}

TEST_F(CheckpointStoreTest, InconsistentWorldSizeIsAnError) {
  ASSERT_TRUE(Upload("7", 10, 0, 2).ok());
  auto r = Upload("7", 10, 1, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("world size"), std::string::npos) << r.message();
}

TEST_F(CheckpointStoreTest, RestoresTheLatestCompleteStep) {
  for (int64_t step : {10, 20}) {
    ASSERT_TRUE(Upload("7", step, 0).ok());
    ASSERT_TRUE(Upload("7", step, 1).ok());
  }
  ASSERT_TRUE(Upload("7", 30, 0).ok());  // incomplete: ignored
  auto r = RestoreLatest(mem_, Request("7", {0, 1}), opts_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->step, 20);
  EXPECT_TRUE(r->skipped.empty());
  EXPECT_EQ(Read(root_ + "/restore/job-7/step-20/rank-1/model.pt"), Content(20, 1, "model", 2500));
  EXPECT_EQ(Read(root_ + "/restore/job-7/step-20/rank-0/optim/state.pt"),
            Content(20, 0, "optim", 10));
}

TEST_F(CheckpointStoreTest, CorruptOrMissingObjectFallsBackToThePreviousStep) {
  for (int64_t step : {10, 20, 30}) {
    ASSERT_TRUE(Upload("7", step, 0).ok());
    ASSERT_TRUE(Upload("7", step, 1).ok());
  }
  mem_.objects["job-7/step-30/rank-1/model.pt"][5] ^= 1;  // same size, different bytes
  mem_.objects.erase("job-7/step-20/rank-0/optim/state.pt");
  auto r = RestoreLatest(mem_, Request("7", {0, 1}), opts_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->step, 10);
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_NE(
      r->skipped[0].find("step 30: mem://test/job-7/step-30/rank-1/model.pt: SHA-256 mismatch"),
      std::string::npos)
      << r->skipped[0];
  EXPECT_EQ(r->skipped[1],
            "step 20: mem://test/job-7/step-20/rank-0/optim/state.pt: object not found");
  EXPECT_EQ(Read(root_ + "/restore/job-7/step-10/rank-0/model.pt"), Content(10, 0, "model", 2500));
}

TEST_F(CheckpointStoreTest, NothingToRestoreIsAFreshStart) {
  ASSERT_TRUE(Upload("7", 10, 0).ok());  // never complete
  auto r = RestoreLatest(mem_, Request("7", {0}), opts_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->step, -1);
  EXPECT_TRUE(r->skipped.empty());
}

TEST_F(CheckpointStoreTest, AnyJobRestoreTakesTheNewestStep) {
  for (int rank : {0, 1}) ASSERT_TRUE(Upload("7", 10, rank).ok());
  for (int rank : {0, 1}) ASSERT_TRUE(Upload("8", 40, rank).ok());
  auto r = RestoreLatest(mem_, Request("", {1}), opts_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->job_id, "8");
  EXPECT_EQ(r->step, 40);
  auto other = RestoreLatest(mem_, Request("7", {1}), opts_);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->step, 10);
}

TEST_F(CheckpointStoreTest, RetentionDeletesOldStepsOnly) {
  for (int64_t step : {10, 20, 30}) {
    for (int rank : {0, 1}) ASSERT_TRUE(Upload("7", step, rank).ok());
  }
  ASSERT_TRUE(Upload("7", 40, 0).ok());  // in progress
  mem_.objects["foreign/file"] = "x";
  auto plan = ApplyRetention(mem_, "7", 2, opts_);
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->remove, (std::vector<int64_t>{10}));
  EXPECT_EQ(plan->keep, (std::vector<int64_t>{40, 30, 20}));
  for (const auto& [key, value] : mem_.objects) {
    EXPECT_EQ(key.find("job-7/step-10/"), std::string::npos) << key;
  }
  EXPECT_EQ(mem_.objects.count("job-7/step-20/manifest.json"), 1u);
  EXPECT_EQ(mem_.objects.count("job-7/step-40/rank-0.json"), 1u);
  EXPECT_EQ(mem_.objects.count("foreign/file"), 1u);
  auto steps = ListSteps(mem_, "7", opts_);
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 3u);
  EXPECT_FALSE((*steps)[0].has_manifest);
}

TEST_F(CheckpointStoreTest, BadInputIsRejectedBeforeUploading) {
  auto bad_rank = UploadRank(mem_, {"7", 1, 2, 2, root_, {}}, opts_);
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_EQ(bad_rank.message(), "rank 2 is outside world size 2");
  auto bad_path = UploadRank(mem_, {"7", 1, 2, 0, root_, {"../x"}}, opts_);
  ASSERT_FALSE(bad_path.ok());
  EXPECT_NE(bad_path.message().find("'..' segment"), std::string::npos);
  EXPECT_TRUE(mem_.objects.empty());
}

}  // namespace
}  // namespace autopar
