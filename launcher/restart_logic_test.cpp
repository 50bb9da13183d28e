#include "restart_logic.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

FailureReport Report(int rank, double detected, int exit_status = 1) {
  FailureReport r;
  r.generation = 2;
  r.rank = rank;
  r.node = "node3";
  r.exit_status = exit_status;
  r.run_s = 12.5;
  r.detected = detected;
  return r;
}

TEST(RestartLogic, ANoticeCarriesTheReportAndNeedsTheToken) {
  FailureReport r = Report(5, 1796164710.25, 137);
  std::string line = EncodeStopNotice("s3cret", r);
  ASSERT_EQ(line.back(), '\n');
  line.pop_back();
  auto back = DecodeStopNotice(line, "s3cret");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->rank, 5);
  EXPECT_EQ(back->generation, 2);
  EXPECT_EQ(back->exit_status, 137);
  EXPECT_EQ(back->node, "node3");
  EXPECT_DOUBLE_EQ(back->detected, 1796164710.25);
  EXPECT_DOUBLE_EQ(back->run_s, 12.5);
  EXPECT_FALSE(DecodeStopNotice(line, "other").ok());
  EXPECT_FALSE(DecodeStopNotice(line, "").ok());
  EXPECT_FALSE(DecodeStopNotice("GET / HTTP/1.0", "s3cret").ok());
  EXPECT_FALSE(DecodeStopNotice("autopar-stop token=s3cret rank=x", "s3cret").ok());
}

TEST(RestartLogic, ReportFieldsNameTheSignal) {
  EventFields f = ReportFields(Report(1, 5, 128 + 9));
  bool has_signal = false;
  for (const auto& [k, v] : f) has_signal = has_signal || (k == "signal" && v == "9");
  EXPECT_TRUE(has_signal);
  EXPECT_FALSE(ReportFromFields({{"class", "node-loss"}, {"exit", "1"}, {"generation", "0"}}, 0).ok());
}

TEST(RestartLogic, TheFirstFailureIsTheEarliestThenTheLowestRank) {
  std::vector<std::optional<FailureReport>> reports = {std::nullopt, Report(1, 10.5), Report(2, 10.2),
                                                       std::nullopt, Report(4, 10.2)};
  auto first = FirstFailure(reports);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->rank, 2);
  EXPECT_FALSE(FirstFailure({std::nullopt, std::nullopt}).has_value());
}

TEST(RestartLogic, Verdicts) {
  EXPECT_TRUE(DecodeVerdict(EncodeVerdict({true, 0}))->restart);
  auto v = DecodeVerdict(EncodeVerdict({false, 137}));
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->restart);
  EXPECT_EQ(v->exit_code, 137);
  EXPECT_FALSE(DecodeVerdict("exit lots").ok());
  EXPECT_EQ(MasterKey(0), "autopar.master");
  EXPECT_EQ(MasterKey(3), "autopar.master.3");
}

}  // namespace
}  // namespace autopar
