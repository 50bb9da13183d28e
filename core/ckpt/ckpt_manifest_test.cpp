#include "core/ckpt/ckpt_manifest.h"

#include <gtest/gtest.h>

#include "core/ckpt/sha256.h"

namespace autopar {
namespace {

CheckpointManifest Rank(int rank, bool verified = true, int world = 2) {
  CheckpointManifest m;
  m.job_id = "42";
  m.step = 100;
  m.world_size = world;
  RankEntry e;
  e.verified = verified;
  e.files = {
      {"model.pt", 1000u + static_cast<uint64_t>(rank), Sha256Hex("m" + std::to_string(rank))},
      {"optim/state.pt", 7, Sha256Hex("o")}};
  m.ranks[rank] = e;
  return m;
}

TEST(CheckpointManifestTest, JsonRoundTripIsDeterministic) {
  CheckpointManifest m = Rank(0);
  ASSERT_TRUE(MergeManifest(&m, Rank(1)).ok());
  std::string json = ManifestToJson(m);
  auto back = ParseManifest(json, "manifest.json");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, m);
  EXPECT_EQ(ManifestToJson(*back), json);
  EXPECT_EQ(m.TotalBytes(), 1000u + 1001u + 14u);
  EXPECT_NE(json.find("\"format\" : \"autopar-checkpoint/1\""), std::string::npos) << json;
}

TEST(CheckpointManifestTest, ParseErrorsNameOriginAndField) {
  const std::string sha = Sha256Hex("x");
  auto doc =
      [&](const std::string& ranks,
          const std::string& head =
              "\"format\":\"autopar-checkpoint/1\",\"job_id\":\"42\",\"step\":5,\"world_size\":2") {
        return "{" + head + ",\"ranks\":" + ranks + "}";
      };
  std::string file = "{\"path\":\"a.pt\",\"size\":3,\"sha256\":\"" + sha + "\"}";
  struct Case {
    std::string json;
    const char* expect;
  } cases[] = {
      {"{", "k.json: invalid JSON: "},
      {"[]", "k.json: not a JSON object"},
      {doc("[]", "\"job_id\":\"42\",\"step\":5,\"world_size\":2"), "k.json: format: missing"},
      {doc("[]", "\"format\":\"other/2\",\"job_id\":\"42\",\"step\":5,\"world_size\":2"),
       "format: 'other/2' is not"},
      {doc("[]", "\"format\":\"autopar-checkpoint/1\",\"job_id\":42,\"step\":5,\"world_size\":2"),
       "job_id: expected a string"},
      {doc("[]",
           "\"format\":\"autopar-checkpoint/1\",\"job_id\":\"42\",\"step\":\"5\",\"world_size\":2"),
       "step: expected an integer"},
      {doc("[]",
           "\"format\":\"autopar-checkpoint/1\",\"job_id\":\"42\",\"step\":5,\"world_size\":0"),
       "world_size: must be in 1.."},
      {doc("{}"), "ranks: expected an array"},
      {doc("[{\"rank\":0,\"files\":[]}]"), "ranks[0].verified: missing"},
      {doc("[{\"rank\":2,\"verified\":true,\"files\":[]}]"), "ranks[2]: rank outside 0..1"},
      {doc("[{\"rank\":0,\"verified\":true,\"files\":[]},{\"rank\":0,\"verified\":true,\"files\":[]"
           "}]"),
       "listed twice"},
      {doc("[{\"rank\":0,\"verified\":true,\"files\":[{\"path\":\"a.pt\",\"size\":-1,\"sha256\":"
           "\"" +
           sha + "\"}]}]"),
       "ranks[0].files[0].size: expected a non-negative integer"},
      {doc("[{\"rank\":0,\"verified\":true,\"files\":[{\"path\":\"a.pt\",\"size\":1,\"sha256\":"
           "\"ABC\"}]}]"),
       "sha256: not 64 lowercase hex digits"},
      {doc("[{\"rank\":0,\"verified\":true,\"files\":[{\"path\":\"../a\",\"size\":1,\"sha256\":\"" +
           sha + "\"}]}]"),
       "path: invalid checkpoint file path '../a'"},
      {doc("[{\"rank\":0,\"verified\":true,\"files\":[" + file + "," + file + "]}]"),
       "duplicate 'a.pt'"},
  };
  for (const auto& c : cases) {
    auto r = ParseManifest(c.json, "k.json");
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_NE(r.message().find(c.expect), std::string::npos) << c.json << "\n -> " << r.message();
    EXPECT_EQ(r.message().rfind("k.json: ", 0), 0u) << r.message();
  }
}

TEST(CheckpointManifestTest, Completeness) {
  CheckpointManifest m = Rank(0, true, 4);
  ASSERT_TRUE(MergeManifest(&m, Rank(2, false, 4)).ok());
  Completeness c = CheckCompleteness(m);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(c.missing_ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(c.unverified_ranks, (std::vector<int>{2}));
  EXPECT_EQ(c.Describe(), "incomplete: ranks 1,3 missing; rank 2 not verified");

  CheckpointManifest done = Rank(0);
  EXPECT_FALSE(CheckCompleteness(done).complete);
  EXPECT_EQ(CheckCompleteness(done).Describe(), "incomplete: rank 1 missing");
  ASSERT_TRUE(MergeManifest(&done, Rank(1)).ok());
  EXPECT_TRUE(CheckCompleteness(done).complete);
  EXPECT_EQ(CheckCompleteness(done).Describe(), "complete");
  EXPECT_FALSE(CheckCompleteness(CheckpointManifest{}).complete);
}

TEST(CheckpointManifestTest, MergeRules) {
  CheckpointManifest empty;
  ASSERT_TRUE(MergeManifest(&empty, Rank(1)).ok());
  EXPECT_EQ(empty.job_id, "42");
  EXPECT_EQ(empty.world_size, 2);
  EXPECT_TRUE(MergeManifest(&empty, Rank(1)).ok());  // idempotent

  CheckpointManifest changed = Rank(1);
  changed.ranks[1].files[0].size = 1;
  Status s = MergeManifest(&empty, changed);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "job 42 step 100: rank 1 was committed twice with different files");

  Status w = MergeManifest(&empty, Rank(0, true, 3));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.message().find("world size 3 differs from 2"), std::string::npos);

  CheckpointManifest other = Rank(0);
  other.step = 101;
  EXPECT_FALSE(MergeManifest(&empty, other).ok());
}

}  // namespace
TEST(CheckpointManifestTest, ADcpStepIsKnownByRankZerosMetadataAndData) {
  auto with = [](std::vector<std::string> rank0) {
    CheckpointManifest m;
    m.job_id = "1";
    m.world_size = 2;
    for (auto& p : rank0) m.ranks[0].files.push_back({p, 1, std::string(64, 'a')});
    m.ranks[1].files.push_back({"__1_0.distcp", 1, std::string(64, 'a')});
    return m;
  };
  EXPECT_TRUE(IsDcpStep(with({".metadata", "__0_0.distcp"})));
  EXPECT_FALSE(IsDcpStep(with({"__0_0.distcp"})));                  // no metadata
  EXPECT_FALSE(IsDcpStep(with({".metadata"})));                     // no data
  EXPECT_FALSE(IsDcpStep(with({".metadata", "sub/__0_0.distcp"})));  // DCP writes its directory's root
  EXPECT_FALSE(IsDcpStep(with({"model.pt", "optimizer.pt"})));
  CheckpointManifest none;
  EXPECT_FALSE(IsDcpStep(none));
}

}  // namespace autopar
