#include "core/ft/quorum.h"
#include "core/ft/messages.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

FtJoin J(int rank, int64_t step, int launcher = -1, int64_t replaced = 0) {
  return {rank, launcher < 0 ? rank : launcher,
          "10.0.0." + std::to_string(rank + 1) + ":4100" + std::to_string(rank), step, replaced};
}

const FtQuorumRules kEight{8, 8};

TEST(FtQuorum, AReplacementHealsFromTheLowestMemberAtTheStep) {
  std::vector<FtJoin> joins;
  for (int r = 7; r >= 0; --r) joins.push_back(J(r, r == 5 ? -1 : 120));
  auto q = DecideQuorum(3, joins, kEight);
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->epoch, 3);
  EXPECT_EQ(q->step, 120);
  ASSERT_EQ(q->members.size(), 8u);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(q->members[static_cast<size_t>(r)].rank, r);  // rank order
  EXPECT_EQ(q->store, "10.0.0.1:41000");  // rank 0's: the lowest at the step
  EXPECT_EQ(q->heals, (std::vector<std::pair<int, int>>{{5, 0}}));
}

TEST(FtQuorum, MembersBehindTakeTurnsOverTheSources) {
  // Rank 0's node was lost and its replacement has no state; ranks 1 and 3 had not committed the
  // step the others did when the collective broke.
  std::vector<FtJoin> joins = {J(0, -1), J(1, 40), J(2, 41), J(3, 40), J(4, 41), J(5, 41), J(6, 41), J(7, 41)};
  auto q = DecideQuorum(1, joins, kEight);
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->step, 41);
  EXPECT_EQ(q->store, "10.0.0.3:41002");  // not rank 0's: it has nothing
  EXPECT_EQ(q->heals, (std::vector<std::pair<int, int>>{{0, 2}, {1, 4}, {3, 5}}));
}

TEST(FtQuorum, FewerMembersWhenTheRunMayShrink) {
  std::vector<FtJoin> joins = {J(0, 9), J(1, 9), J(4, 9), J(5, 9), J(6, 9), J(7, 9)};
  EXPECT_FALSE(DecideQuorum(2, joins, kEight).ok());
  auto q = DecideQuorum(2, joins, {8, 4});
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->members.size(), 6u);
  EXPECT_TRUE(q->heals.empty());
  auto few = DecideQuorum(2, {J(0, 9), J(1, 9), J(2, 9)}, {8, 4});
  ASSERT_FALSE(few.ok());
  EXPECT_EQ(few.message(), "3 of 8 ranks left, fewer than the 4 the run may go on with");
}

TEST(FtQuorum, RefusedWithoutStateOrWithBadJoins) {
  EXPECT_EQ(DecideQuorum(1, {J(0, -1), J(1, -1)}, {2, 1}).message(), "no member holds the training state");
  EXPECT_EQ(DecideQuorum(1, {J(0, 3), J(0, 3)}, {2, 1}).message(), "rank 0 joined twice");
  EXPECT_EQ(DecideQuorum(1, {J(0, 3), J(2, 3)}, {2, 1}).message(), "rank 2: not a rank of the run's 2");
  FtJoin bad = J(1, 3);
  bad.store = "10.0.0.2";
  EXPECT_EQ(DecideQuorum(1, {J(0, 3), bad}, {2, 1}).message(), "rank 1: store '10.0.0.2' is not ADDR:PORT");
  bad.store = "a,b:9";
  EXPECT_FALSE(DecideQuorum(1, {J(0, 3), bad}, {2, 1}).ok());
  EXPECT_FALSE(DecideQuorum(1, {}, {2, 0}).ok());
}

TEST(FtQuorum, TravelsAsFieldsAndBack) {
  auto q = DecideQuorum(7, {J(0, 12, 2), J(1, -1, 3), J(2, 12, 4)}, {3, 2});
  ASSERT_TRUE(q.ok());
  const EventFields fields = FtQuorumFields(*q);
  auto back = FtQuorumOf(fields);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->epoch, 7);
  EXPECT_EQ(back->step, 12);
  EXPECT_EQ(back->store, q->store);
  ASSERT_EQ(back->members.size(), 3u);
  EXPECT_EQ(back->members[1].launcher, 3);
  EXPECT_EQ(back->members[1].step, -1);
  EXPECT_EQ(back->members[2].store, "10.0.0.3:41002");
  EXPECT_EQ(back->heals, q->heals);

  auto join = FtJoinMessageOf(FtJoinMessageFields({J(3, 5, 3, 2), 4}));
  ASSERT_TRUE(join.ok());
  EXPECT_EQ(join->join.replaced, 2);
  EXPECT_EQ(join->left, 4);
  join = FtJoinMessageOf(FtJoinMessageFields({J(3, 5), -1}));
  ASSERT_TRUE(join.ok());
  EXPECT_EQ(join->join.store, "10.0.0.4:41003");
  EXPECT_FALSE(FtJoinMessageOf({{"v", "1"}, {"rank", "1"}, {"launcher", "1"}, {"store", "x:1"}, {"left", "-1"}}).ok());  // no step
  EXPECT_FALSE(FtQuorumOf({{"v", "1"}, {"epoch", "1"}, {"step", "1"}, {"store", "x:1"}, {"members", ""}}).ok());
  EXPECT_FALSE(FtQuorumOf({{"v", "1"}, {"epoch", "1"}, {"step", "1"}, {"store", "x:1"},
                           {"members", "0@0@x:1@1"}, {"heals", "1-0"}}).ok());
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

TEST(FtQuorum, CountsTheRunsReplacementsAcrossLeaders) {
  // Launcher 1 replaced its program twice, launcher 3 once; launcher 6's count came with the last
  // quorum (its node is gone since): the run has replaced 4 programs.
  auto q = DecideQuorum(5, {J(0, 30), J(1, -1, 1, 2), J(2, 30), J(3, 30, 3, 1)}, {8, 4}, {{1, 1}, {6, 1}});
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(q->replaced, (FtReplacements{{1, 2}, {3, 1}, {6, 1}}));
  EXPECT_EQ(TotalReplacements(q->replaced), 4);
  auto back = FtQuorumOf(FtQuorumFields(*q));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->replaced, q->replaced);
  EventFields bad = FtQuorumFields(*q);
  bad.back().second = "1:x";
  EXPECT_FALSE(FtQuorumOf(bad).ok());
}

TEST(FtQuorum, RefusesReplacementsPastTheRunsBudget) {
  // A budget of 1: launchers 1 and 3 each replaced their program at once (each knew of none
  // before), their newcomers join together: 2 of 1, refused.
  FtQuorumRules rules{8, 4, 1};
  auto q = DecideQuorum(5, {J(0, 30), J(1, -1, 1, 1), J(2, 30), J(3, -1, 3, 1)}, rules);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.message(),
            "the run's replacements would be 2, past its 1 (--restarts-in-place): launchers "
            "replaced their programs at once");
  // One newcomer within the budget joins.
  EXPECT_TRUE(DecideQuorum(5, {J(0, 30), J(1, -1, 1, 1), J(2, 30), J(3, 30)}, rules).ok());
  // After the restart of every program that the refusal causes, the members all hold state and
  // carry the count: that quorum forms, and carries it on.
  q = DecideQuorum(6, {J(0, 40), J(1, 40, 1, 1), J(2, 40), J(3, 40, 3, 1)}, rules, {{1, 1}});
  ASSERT_TRUE(q.ok()) << q.message();
  EXPECT_EQ(TotalReplacements(q->replaced), 2);
  // A newcomer that adds nothing to a count already past the budget (a spare's program) joins.
  EXPECT_TRUE(
      DecideQuorum(7, {J(0, 40), J(1, 40, 1, 1), J(2, -1, 5), J(3, 40, 3, 1)}, rules, q->replaced)
          .ok());
  // No budget: no limit.
  EXPECT_TRUE(DecideQuorum(5, {J(0, 30), J(1, -1, 1, 1), J(2, 30), J(3, -1, 3, 1)}, {8, 4}).ok());
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

TEST(FtQuorum, TheBudgetIsOneRule) {
  EXPECT_TRUE(WithinReplacementBudget(2, {8, 8, 2}));
  EXPECT_FALSE(WithinReplacementBudget(3, {8, 8, 2}));
  EXPECT_TRUE(WithinReplacementBudget(1000, {8, 8, -1}));  // no limit
  EXPECT_FALSE(WithinReplacementBudget(1, {8, 8, 0}));
}

}  // namespace
}  // namespace autopar
