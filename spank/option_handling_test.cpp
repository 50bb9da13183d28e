#include "spank/option_handling.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

OptionsSeen Seen(std::vector<std::string> site_args = {}) {
  OptionsSeen seen;
  auto site = ParseSiteConfig(site_args);
  EXPECT_TRUE(site.ok()) << site.message();
  if (site.ok()) seen.site = *site;
  return seen;
}

TEST(TakeOption, ABadValueFailsTheSubmitWithItsOneLine) {
  OptionsSeen seen = Seen();
  OptionVerdict v = TakeOption(seen, OptionId::kCkptKeep, "0", /*remote=*/false, /*allocator=*/true);
  EXPECT_EQ(v.refusal, "--ckpt-keep: must be an integer in [1, 100], got '0'");
  EXPECT_TRUE(seen.asked);
  EXPECT_TRUE(TakeOption(seen, OptionId::kCkptKeep, "3", false, true).refusal.empty());
  EXPECT_EQ(seen.user.ckpt_keep, 3);
}

TEST(TakeOption, InTheStepARefusalIsKeptForTaskInitTheFirstOnly) {
  OptionsSeen seen = Seen();
  EXPECT_TRUE(TakeOption(seen, OptionId::kCkptKeep, "0", /*remote=*/true, false).refusal.empty());
  EXPECT_TRUE(TakeOption(seen, OptionId::kHeartbeatTimeout, "5", true, false).refusal.empty());
  EXPECT_EQ(seen.option_error, "--ckpt-keep: must be an integer in [1, 100], got '0'");
}

TEST(TakeOption, ABrokenSiteLineRefusesEveryOptionNamingIt) {
  OptionsSeen seen = Seen();
  seen.site_error = "plugstack.conf: max_requeue=x: not an integer";
  EXPECT_EQ(TakeOption(seen, OptionId::kModel, "7B", false, true).refusal,
            "--model refused: plugstack.conf: max_requeue=x: not an integer");
  EXPECT_FALSE(seen.user.model.has_value());
  EXPECT_TRUE(TakeOption(seen, OptionId::kModel, "7B", true, false).refusal.empty());
  EXPECT_EQ(seen.option_error, "--model refused: plugstack.conf: max_requeue=x: not an integer");
}

TEST(TakeOption, TheNullTextALaterStepGetsIsNoArgument) {
  OptionsSeen given = Seen(), bare = Seen();
  ASSERT_TRUE(TakeOption(given, OptionId::kRequeueOnFailure, "(null)", true, false).refusal.empty());
  ASSERT_TRUE(TakeOption(bare, OptionId::kRequeueOnFailure, nullptr, false, true).refusal.empty());
  EXPECT_TRUE(given.option_error.empty()) << given.option_error;
  EXPECT_EQ(given.user.requeue_on_failure, bare.user.requeue_on_failure);
}

TEST(TakeOption, SparesAskSbatchToKeepTheJobOnANodeLossNotSrun) {
  OptionsSeen seen = Seen();
  EXPECT_TRUE(TakeOption(seen, OptionId::kSpareNodes, "1", false, /*allocator=*/true).request_no_kill);
  OptionsSeen none = Seen();
  EXPECT_FALSE(TakeOption(none, OptionId::kSpareNodes, "0", false, true).request_no_kill);
  OptionsSeen in_srun = Seen();
  EXPECT_FALSE(TakeOption(in_srun, OptionId::kMinNodes, "2", false, /*allocator=*/false).request_no_kill);
  OptionsSeen in_step = Seen();
  EXPECT_FALSE(TakeOption(in_step, OptionId::kMinNodes, "2", /*remote=*/true, false).request_no_kill);
  OptionsSeen other = Seen();
  EXPECT_FALSE(TakeOption(other, OptionId::kCkptKeep, "2", false, true).request_no_kill);
}

TEST(CommandLineSurvivesNodeLoss, SparesOrAFloorInEitherForm) {
  EXPECT_TRUE(CommandLineSurvivesNodeLoss({"sbatch", "--spare-nodes=1", "job.sh"}));
  EXPECT_TRUE(CommandLineSurvivesNodeLoss({"sbatch", "--spare-nodes", "2", "job.sh"}));
  EXPECT_TRUE(CommandLineSurvivesNodeLoss({"salloc", "-N4", "--min-nodes=2"}));
  EXPECT_FALSE(CommandLineSurvivesNodeLoss({"sbatch", "--spare-nodes=0", "job.sh"}));
  EXPECT_FALSE(CommandLineSurvivesNodeLoss({"sbatch", "--spare-nodes"}));  // no value
  EXPECT_FALSE(CommandLineSurvivesNodeLoss({"sbatch", "--spare-nodesx=3", "job.sh"}));
  EXPECT_FALSE(CommandLineSurvivesNodeLoss({"sbatch", "job.sh"}));
}

TEST(SmallestElasticSize, TheRangesLowEndLessSparesOrTheFloorWhereFewer) {
  SubmitGeometry range{2, 4, 8, "--nodes=2-4"};
  JobOptions none;
  EXPECT_EQ(SmallestElasticSize(range, none).nodes, 2);
  EXPECT_EQ(SmallestElasticSize(range, none).flag, "--nodes=2-4");
  JobOptions spare;
  spare.spare_nodes = 1;
  EXPECT_EQ(SmallestElasticSize(range, spare).nodes, 1);
  JobOptions floor;
  floor.min_nodes = 1;
  EXPECT_EQ(SmallestElasticSize(range, floor).nodes, 1);
  EXPECT_EQ(SmallestElasticSize(range, floor).flag, "--min-nodes=1");
  SubmitGeometry fixed{4, 4, 8, "--nodes=4"};
  EXPECT_EQ(SmallestElasticSize(fixed, none).nodes, 0);  // not elastic: nothing to check
  floor.min_nodes = 3;
  EXPECT_EQ(SmallestElasticSize(fixed, floor).nodes, 3);
  JobOptions all_spare;
  all_spare.spare_nodes = 3;
  EXPECT_EQ(SmallestElasticSize(range, all_spare).nodes, 0);
}

}  // namespace
}  // namespace autopar
