#include <gtest/gtest.h>

#include "launcher/launch.h"

namespace autopar {
namespace {

TEST(ParseLaunchArgs, Accepts) {
  struct Case {
    std::vector<std::string> args;
    bool bind, nccl_check, verbose;
    double ratio;
    std::vector<std::string> program;
  } cases[] = {
      {{"--", "python", "train.py"}, true, false, false, 0.5, {"python", "train.py"}},
      {{"python", "train.py", "--lr", "3"}, true, false, false, 0.5, {"python", "train.py", "--lr", "3"}},
      {{"--no-bind", "--nccl-check", "--", "./a.out", "--no-bind"}, false, true, false, 0.5,
       {"./a.out", "--no-bind"}},
      {{"--nccl-min-ratio=0.8", "-v", "prog"}, true, false, true, 0.8, {"prog"}},
      {{"--", "--weird-program-name"}, true, false, false, 0.5, {"--weird-program-name"}},
  };
  for (const auto& c : cases) {
    auto r = ParseLaunchArgs(c.args);
    ASSERT_TRUE(r.ok()) << c.args[0] << ": " << r.message();
    EXPECT_EQ(r->bind, c.bind);
    EXPECT_EQ(r->nccl_check, c.nccl_check);
    EXPECT_EQ(r->verbose, c.verbose);
    EXPECT_DOUBLE_EQ(r->nccl_min_ratio, c.ratio);
    EXPECT_EQ(r->program, c.program);
  }
}

TEST(ParseLaunchArgs, Rejects) {
  struct Case {
    std::vector<std::string> args;
    std::string message_part;
  } cases[] = {
      {{}, "no program given"},
      {{"--"}, "no program given"},
      {{"--no-bind"}, "no program given"},
      {{"--bogus", "prog"}, "unknown option '--bogus'"},
      {{"-x", "--", "prog"}, "unknown option '-x'"},
      {{"--nccl-min-ratio=abc", "prog"}, "--nccl-min-ratio: invalid value 'abc'"},
      {{"--nccl-min-ratio=0", "prog"}, "--nccl-min-ratio"},
      {{"--nccl-min-ratio=1.5", "prog"}, "--nccl-min-ratio"},
      {{"--", ""}, "program name is empty"},
  };
  for (const auto& c : cases) {
    auto r = ParseLaunchArgs(c.args);
    ASSERT_FALSE(r.ok()) << c.message_part;
    EXPECT_NE(r.message().find(c.message_part), std::string::npos) << r.message();
  }
}

TEST(ParseLaunchArgs, Prewarm) {
  auto d = ParseLaunchArgs({"python3", "train.py"});
  EXPECT_TRUE(d->prewarm);
  EXPECT_EQ(d->prewarm_after_s, 5);
  auto off = ParseLaunchArgs({"--no-prewarm", "python3", "train.py"});
  EXPECT_FALSE(off->prewarm);
  EXPECT_EQ(ParseLaunchArgs({"--prewarm-after=0", "python3", "t.py"})->prewarm_after_s, 0);
  EXPECT_EQ(ParseLaunchArgs({"--prewarm-after=120", "python3", "t.py"})->prewarm_after_s, 120);
  for (const char* bad : {"--prewarm-after=", "--prewarm-after=-1", "--prewarm-after=1.5",
                          "--prewarm-after=86401", "--prewarm-after=x"}) {
    auto r = ParseLaunchArgs({bad, "python3", "t.py"});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.message().rfind("--prewarm-after: invalid value", 0), 0u) << r.message();
  }
}

TEST(ParseLaunchArgs, UsageInterval) {
  EXPECT_EQ(ParseLaunchArgs({"python3", "t.py"})->usage_interval_s, 10);
  EXPECT_EQ(ParseLaunchArgs({"--usage-interval=0", "python3", "t.py"})->usage_interval_s, 0);
  EXPECT_EQ(ParseLaunchArgs({"--usage-interval=2", "python3", "t.py"})->usage_interval_s, 2);
  for (const char* bad : {"--usage-interval=", "--usage-interval=-1", "--usage-interval=3601",
                          "--usage-interval=2s"}) {
    auto r = ParseLaunchArgs({bad, "python3", "t.py"});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.message().rfind("--usage-interval: invalid value", 0), 0u) << r.message();
  }
}

TEST(ParseLaunchArgs, HelpAndVersionNeedNoProgram) {
  EXPECT_TRUE(ParseLaunchArgs({"--help"})->help);
  EXPECT_TRUE(ParseLaunchArgs({"--version"})->version);
  EXPECT_NE(LaunchUsage().find("--no-bind"), std::string::npos);
}

}  // namespace
}  // namespace autopar
