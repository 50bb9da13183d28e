#include "core/ft/messages.h"

#include <gtest/gtest.h>
#include <json/json.h>

#include <fstream>

namespace autopar {
namespace {

// The shared test vectors (python/tests/test_ft_messages.py checks the same file).
Json::Value Vectors() {
  std::ifstream in(AUTOPAR_SOURCE_DIR "/core/ft/messages_vectors.json");
  Json::Value v;
  Json::CharReaderBuilder b;
  std::string errors;
  EXPECT_TRUE(Json::parseFromStream(b, in, &v, &errors)) << errors;
  return v;
}

// "KIND fields..." split into its kind and fields.
std::pair<std::string, EventFields> Split(const std::string& line) {
  const size_t sp = line.find(' ');
  return {line.substr(0, sp), ParseEventFields(line.substr(sp + 1))};
}

std::string Line(const std::string& kind, const EventFields& f) { return kind + " " + FormatEventFields(f); }

TEST(FtMessages, AProgramsJoinIsTheVectorsTextBothWays) {
  const Json::Value vectors = Vectors()["program_join"];
  ASSERT_GE(vectors.size(), 1u);
  for (const auto& v : vectors) {
    const std::string line = v["line"].asString();
    auto [kind, fields] = Split(line);
    EXPECT_EQ(kind, "join");
    auto j = FtProgramJoinOf(fields);
    ASSERT_TRUE(j.ok()) << line << ": " << j.message();
    EXPECT_EQ(j->epoch, v["epoch"].asInt64()) << line;
    EXPECT_EQ(j->step, v["step"].asInt64()) << line;
    EXPECT_EQ(j->store, v["store"].asString()) << line;
    EXPECT_EQ(Line("join", FtProgramJoinFields(*j)), line);
  }
}

TEST(FtMessages, AQuorumIsTheVectorsTextBothWays) {
  const Json::Value vectors = Vectors()["quorum"];
  ASSERT_GE(vectors.size(), 1u);
  for (const auto& v : vectors) {
    FtQuorum q;
    q.epoch = v["epoch"].asInt64();
    q.step = v["step"].asInt64();
    q.store = v["store"].asString();
    for (const auto& m : v["members"]) {
      q.members.push_back({m[0].asInt(), m[1].asInt(), m[2].asString(), m[3].asInt64(), 0});
    }
    for (const auto& h : v["heals"]) q.heals.emplace_back(h[0].asInt(), h[1].asInt());
    for (const auto& name : v["replaced"].getMemberNames()) q.replaced[std::stoi(name)] = v["replaced"][name].asInt64();
    const std::string line = v["line"].asString();
    EXPECT_EQ(Line("quorum", FtQuorumFields(q)), line);
    auto back = FtQuorumOf(Split(line).second);
    ASSERT_TRUE(back.ok()) << line << ": " << back.message();
    EXPECT_EQ(Line("quorum", FtQuorumFields(*back)), line);
    EXPECT_EQ(back->heals, q.heals);
    EXPECT_EQ(back->replaced, q.replaced);
    ASSERT_EQ(back->members.size(), q.members.size());
    for (size_t i = 0; i < q.members.size(); ++i) {
      EXPECT_EQ(back->members[i].rank, q.members[i].rank);
      EXPECT_EQ(back->members[i].launcher, q.members[i].launcher);
      EXPECT_EQ(back->members[i].store, q.members[i].store);
      EXPECT_EQ(back->members[i].step, q.members[i].step);
    }
  }
}

TEST(FtMessages, AGiveUpIsTheVectorsText) {
  for (const auto& v : Vectors()["abandon"]) {
    EXPECT_EQ(Line("abandon", FtGiveUpFields(v["epoch"].asInt64())), v["line"].asString());
    auto e = FtGiveUpOf(Split(v["line"].asString()).second);
    ASSERT_TRUE(e.ok()) << e.message();
    EXPECT_EQ(*e, v["epoch"].asInt64());
  }
}

TEST(FtMessages, AnotherVersionIsRefusedNamingIt) {
  for (const auto& v : Vectors()["refused"]) {
    const std::string line = v["line"].asString();
    auto [kind, fields] = Split(line);
    const Status s = kind == "join" ? FtProgramJoinOf(fields).status() : FtQuorumOf(fields).status();
    EXPECT_FALSE(s.ok()) << line;
    EXPECT_NE(s.message().find(v["why"].asString()), std::string::npos) << s.message();
  }
}

TEST(FtMessages, TheLaunchersJoinAndQuorumCarryTheirOwnFieldsUnrenamed) {
  FtJoinMessage j{{5, 2, "10.0.0.3:7005", 12, 1}, 3};
  const EventFields f = FtJoinMessageFields(j);
  EXPECT_EQ(FormatEventFields(f), "v=1 rank=5 launcher=2 store=10.0.0.3:7005 step=12 replaced=1 left=3");
  auto back = FtJoinMessageOf(f);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->join.rank, 5);
  EXPECT_EQ(back->left, 3);
  FtQuorumMessage q{{2, {j.join}, "10.0.0.3:7005", 12, {}, {{2, 1}}}, {0, 4}, 0.25};
  auto qb = FtQuorumMessageOf(FtQuorumMessageFields(q));
  ASSERT_TRUE(qb.ok()) << qb.message();
  EXPECT_EQ(qb->lost, (std::vector<int>{0, 4}));
  EXPECT_DOUBLE_EQ(qb->formed_s, 0.25);
  EXPECT_EQ(qb->quorum.members[0].rank, 5);
}

}  // namespace
}  // namespace autopar
