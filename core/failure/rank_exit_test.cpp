#include "autopar/rank_exit.h"

#include <gtest/gtest.h>

#include <map>

#include "autopar/timeline.h"

namespace autopar {
namespace {

TEST(RankExitTest, Request) {
  std::map<std::string, std::string> env = {{"AUTOPAR_SOCKET", "/run/a.sock"},
                                            {"SLURM_JOB_ID", "42"}};
  GetEnv get = [&env](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  struct Case {
    int status;
    const char* detail;
  } cases[] = {
      {1, "exit=1 run_s=2.5"},
      {137, "exit=137 signal=9 run_s=2.5"},
      {255, "exit=255 run_s=2.5"},
  };
  for (const auto& c : cases) {
    auto r = RankExitRequest(get, 3, "node2", c.status, 2.5);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->op, Op::kEvent);
    EXPECT_EQ(r->kind, "rank_exit");
    EXPECT_EQ(r->job_id, "42");
    EXPECT_EQ(r->rank, 3);
    EXPECT_EQ(r->node, "node2");
    EXPECT_EQ(r->detail, c.detail);
    EXPECT_TRUE(ValidateRequest(*r).ok()) << ValidateRequest(*r).message();
  }
  env.erase("AUTOPAR_SOCKET");
  EXPECT_FALSE(RankExitRequest(get, 0, "n", 1, 0).has_value());
  EXPECT_TRUE(ReportRankExit(get, 0, "n", 1, 0).ok());  // nobody to tell
  env["AUTOPAR_SOCKET"] = "/nonexistent/autopard.sock";
  Status s = ReportRankExit(get, 0, "n", 1, 0, 200);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/autopard.sock"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace autopar
