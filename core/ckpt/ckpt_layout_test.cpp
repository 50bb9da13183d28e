#include "core/ckpt/ckpt_layout.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(CheckpointLayoutTest, KeysRoundTrip) {
  EXPECT_EQ(StepKeyPrefix("12_3", 40), "job-12_3/step-40/");
  EXPECT_EQ(RankFileKey("12", 40, 3, "opt/shard.pt"), "job-12/step-40/rank-3/opt/shard.pt");
  EXPECT_EQ(RankManifestKey("12", 40, 3), "job-12/step-40/rank-3.json");
  EXPECT_EQ(StepManifestKey("12", 40), "job-12/step-40/manifest.json");

  auto f = ParseCheckpointKey(RankFileKey("12", 40, 3, "opt/shard.pt"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->kind, CheckpointKey::Kind::kRankFile);
  EXPECT_EQ(f->job_id, "12");
  EXPECT_EQ(f->step, 40);
  EXPECT_EQ(f->rank, 3);
  EXPECT_EQ(f->path, "opt/shard.pt");
  auto rm = ParseCheckpointKey(RankManifestKey("12", 40, 3));
  ASSERT_TRUE(rm);
  EXPECT_EQ(rm->kind, CheckpointKey::Kind::kRankManifest);
  EXPECT_EQ(rm->rank, 3);
  auto sm = ParseCheckpointKey(StepManifestKey("12", 0));
  ASSERT_TRUE(sm);
  EXPECT_EQ(sm->kind, CheckpointKey::Kind::kStepManifest);
  EXPECT_EQ(sm->step, 0);
}

TEST(CheckpointLayoutTest, ForeignKeysAreIgnored) {
  for (const char* key :
       {"", "job-1", "job-1/step-2", "job-1/step-02/manifest.json", "job-1/step-x/manifest.json",
        "jobs-1/step-2/manifest.json", "job-1/step-2/other.json", "job-1/step-2/rank-a.json",
        "job-1/step-2/rank-1/", "job-1/step-2/rank-1/../x", "job-1/step-2/rank-.json",
        "job-a b/step-2/manifest.json", "job-1/step--2/manifest.json"}) {
    EXPECT_FALSE(ParseCheckpointKey(key)) << key;
  }
}

TEST(CheckpointLayoutTest, Validation) {
  EXPECT_TRUE(ValidateJobId("1234_5").ok());
  EXPECT_FALSE(ValidateJobId("").ok());
  EXPECT_FALSE(ValidateJobId("..").ok());
  EXPECT_FALSE(ValidateJobId("a/b").ok());
  EXPECT_TRUE(ValidateRelativePath("model/shard-0.pt").ok());
  struct Case {
    const char* path;
    const char* reason;
  } bad[] = {{"", "empty"},
             {"/abs", "relative"},
             {"a//b", "empty path segment"},
             {"a/../b", "'..' segment"},
             {"./a", "'.' segment"},
             {"a\nb", "control"},
             {"a\xc2\x9b" "31mb", "control"}};  // an 8-bit CSI (U+009B)
  for (const auto& c : bad) {
    Status s = ValidateRelativePath(c.path);
    ASSERT_FALSE(s.ok()) << c.path;
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << s.message();
  }
  // The refusal quotes the name escaped: it reaches the job's output and logs.
  Status s = ValidateRelativePath("x\n<0>forged\x1b]0;t\x07");
  EXPECT_EQ(s.message(), "invalid checkpoint file path 'x\\x0a<0>forged\\x1b]0;t\\x07': control character");
  EXPECT_TRUE(ValidateRelativePath("caf\xc3\xa9.pt").ok());  // UTF-8 that is not a control: fine
}

TEST(CheckpointLayoutTest, StepsInListingNewestFirst) {
  std::vector<ListedObject> objects = {
      {"job-7/step-9/rank-0/a.pt", 10},  {"job-7/step-9/rank-0.json", 1},
      {"job-7/step-10/rank-1/a.pt", 20}, {"job-7/step-10/rank-1.json", 2},
      {"job-7/step-10/rank-0.json", 2},  {"job-7/step-10/manifest.json", 5},
      {"job-8/step-11/rank-0/a.pt", 30}, {"unrelated/file", 99},
  };
  auto all = StepsInListing(objects, "");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].job_id, "8");
  EXPECT_EQ(all[0].step, 11);
  EXPECT_FALSE(all[0].has_manifest);
  EXPECT_EQ(all[1].step, 10);  // numeric order, not "10" < "9"
  EXPECT_TRUE(all[1].has_manifest);
  EXPECT_EQ(all[1].rank_manifests, (std::vector<int>{0, 1}));
  EXPECT_EQ(all[1].bytes, 29u);
  EXPECT_EQ(all[2].step, 9);
  auto job7 = StepsInListing(objects, "7");
  ASSERT_EQ(job7.size(), 2u);
  EXPECT_EQ(job7[0].step, 10);
}

}  // namespace
}  // namespace autopar
