#include "peer_group.h"

#include <gtest/gtest.h>

#include <thread>

namespace autopar {
namespace {

// Three launchers on loopback, one per node; the third is gone (its listener closed).
struct Step {
  std::vector<PeerGroup::Peer> peers;
  std::vector<RestartChannel> channels;

  Step() {
    for (int r = 0; r < 3; ++r) {
      auto ch = RestartChannel::Listen("127.0.0.1");
      EXPECT_TRUE(ch.ok()) << ch.message();
      peers.push_back({ch->endpoint(), r, "node" + std::to_string(r + 1)});
      channels.push_back(std::move(*ch));
    }
    channels.pop_back();  // rank 2's launcher is gone with its node
  }
  PeerGroup Group(int rank) {
    return PeerGroup(std::move(channels[static_cast<size_t>(rank)]), "tok", peers, rank,
                     PeerGroup::Timing{0, 1000}, nullptr);
  }
};

TEST(PeerGroup, PeersTravelAsOneLine) {
  auto p = PeerGroup::ParsePeer(PeerGroup::FormatPeer({"10.0.0.2:4100", 3, "gpu17"}), 4);
  ASSERT_TRUE(p.ok()) << p.message();
  EXPECT_EQ(p->endpoint, "10.0.0.2:4100");
  EXPECT_EQ(p->node, 3);
  EXPECT_EQ(p->host, "gpu17");
  EXPECT_FALSE(PeerGroup::ParsePeer("10.0.0.2:4100 4 gpu17", 4).ok());  // node out of range
  EXPECT_FALSE(PeerGroup::ParsePeer("10.0.0.2:4100", 4).ok());
}

TEST(PeerGroup, RankZeroCollectsTheReportsAndTellsAGoneNodeFromTheOthers) {
  Step step;
  PeerGroup zero = step.Group(0);
  PeerGroup one = step.Group(1);
  EXPECT_EQ(zero.host_of_node(2), "node3");
  EXPECT_EQ(zero.RanksOnNodes({0, 2}), (std::vector<int>{0, 2}));
  FailureReport crash;
  crash.rank = 1;
  crash.node = "node2";
  crash.exit_status = 1;
  crash.detected = 100;
  Result<std::optional<RestartVerdict>> followed = Status::Error("not run");
  std::thread rank1([&] { followed = one.ReportAndAwaitVerdict(0, crash, {2}, 10); });
  auto reports = zero.CollectReports(0, std::nullopt, {}, 10);
  ASSERT_TRUE(reports.ok()) << reports.message();
  EXPECT_EQ(reports->live, (std::vector<int>{1}));
  EXPECT_EQ(reports->lost_nodes, (std::vector<int>{2}));
  ASSERT_TRUE(reports->failures[1].has_value());
  EXPECT_EQ(reports->failures[1]->exit_status, 1);
  EXPECT_FALSE(reports->failures[0].has_value());

  RestartVerdict v;
  v.restart = true;
  v.master = {"127.0.0.1", 4242};
  v.active = {0, 1};
  EXPECT_TRUE(zero.SendTo(reports->live, VerdictMessage(v, 0)).empty());
  rank1.join();
  ASSERT_TRUE(followed.ok()) << followed.message();
  ASSERT_TRUE(followed->has_value());
  EXPECT_EQ((*followed)->master.port, 4242);
  EXPECT_EQ((*followed)->active, (std::vector<int>{0, 1}));

  // The restore agreement of generation 1 over the two left: both get the minimum.
  Result<int64_t> theirs = Status::Error("not run");
  std::thread agree([&] { theirs = one.AgreeMin(1, "restore.0", 15, {0, 1}, 10); });
  auto ours = zero.AgreeMin(1, "restore.0", 20, {0, 1}, 10);
  agree.join();
  ASSERT_TRUE(ours.ok() && theirs.ok()) << ours.message() << theirs.message();
  EXPECT_EQ(*ours, 15);
  EXPECT_EQ(*theirs, 15);
}

TEST(PeerGroup, WithoutRankZerosLauncherNoVerdictCanCome) {
  Step step;
  std::vector<PeerGroup::Peer> peers = {step.peers[2], step.peers[1]};  // rank 0 is the gone one
  PeerGroup one(std::move(step.channels[1]), "tok", peers, 1, PeerGroup::Timing{0, 1000}, nullptr);
  auto v = one.ReportAndAwaitVerdict(0, std::nullopt, {}, 10);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_FALSE(v->has_value());
}

}  // namespace
}  // namespace autopar
