#include "core/site_config.h"

#include "core/job_plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace autopar {
namespace {

TEST(SiteConfig, DefaultsWithoutArguments) {
  auto c = ParseSiteConfig({});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->max_requeue, 10);
  EXPECT_EQ(c->requeue_default_count, 3);
  EXPECT_EQ(c->restarts_in_place_default, 3);
  EXPECT_EQ(c->max_restarts_in_place, 20);
  EXPECT_EQ(c->socket, "/run/autopard/autopard.sock");
  EXPECT_EQ(c->ckpt_upload_schemes, (std::vector<std::string>{"s3", "file"}));
  EXPECT_TRUE(c->nccl_env.empty());
  EXPECT_FALSE(c->defaults.model.has_value());
}

TEST(SiteConfig, ParsesEveryKindOfKey) {
  auto c = ParseSiteConfig({"max_requeue=5", "socket=/tmp/c/run/autopard-%n.sock",
                            "nccl_env=NCCL_SOCKET_IFNAME=eth0",
                            "nccl_env=NCCL_IB_HCA=mlx5_0,mlx5_1", "ckpt_upload_schemes=file",
                            "ckpt_upload_prefixes=file:///shared/, file:///lustre/",
                            "default_requeue_on_failure=2", "default_gpu_type=h100-80gb",
                            "master_port_base=30000", "master_ifname=eth0"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->max_requeue, 5);
  EXPECT_EQ(SocketPathForNode(*c, "node3"), "/tmp/c/run/autopard-node3.sock");
  ASSERT_EQ(c->nccl_env.size(), 2u);
  EXPECT_EQ(c->nccl_env[1].first, "NCCL_IB_HCA");
  EXPECT_EQ(c->nccl_env[1].second, "mlx5_0,mlx5_1");
  EXPECT_EQ(c->ckpt_upload_prefixes,
            (std::vector<std::string>{"file:///shared/", "file:///lustre/"}));
  EXPECT_EQ(c->defaults.requeue_on_failure, 2);
  EXPECT_EQ(c->defaults.gpu_type, "h100-80gb");
  EXPECT_EQ(c->master_port_base, 30000);
  EXPECT_EQ(c->master_ifname, "eth0");
}

TEST(SiteConfig, DefaultsAreCheckedAgainstLimitsInAnyOrder) {
  // default_* before the limit it depends on: still checked against that limit.
  auto c = ParseSiteConfig({"default_requeue_on_failure=4", "max_requeue=3"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message(),
            "plugstack.conf: default_requeue_on_failure: --requeue-on-failure: must be an "
            "integer in [0, 3], got '4'");
}

TEST(SiteConfig, RefusesBadInputNamingTheKey) {
  struct Case {
    std::vector<std::string> args;
    const char* want;
  } cases[] = {
      {{"colour=blue"}, "plugstack.conf: colour: unknown argument (known: "},
      {{"max_requeue"}, "plugstack.conf: 'max_requeue' is not KEY=VALUE"},
      {{"max_requeue=x"}, "plugstack.conf: max_requeue: must be an integer in [0, 1000], got 'x'"},
      {{"max_ckpt_keep=0"}, "plugstack.conf: max_ckpt_keep:"},
      {{"socket=relative.sock"}, "plugstack.conf: socket: must be an absolute path"},
      {{"nccl_env=FOO=1"}, "plugstack.conf: nccl_env: expected NCCL_NAME=VALUE"},
      {{"nccl_env=NCCL_a b=1"}, "is not a variable name"},
      {{"ckpt_upload_schemes=s3,ftp"}, "plugstack.conf: ckpt_upload_schemes: unknown scheme 'ftp'"},
      {{"ckpt_dir_prefixes=scratch"}, "plugstack.conf: ckpt_dir_prefixes: 'scratch' is not"},
      {{"default_model=banana"}, "plugstack.conf: default_model: --model: unknown model 'banana'"},
      {{"min_heartbeat_timeout=100", "max_heartbeat_timeout=50"}, "min_heartbeat_timeout: is above"},
      {{"master_port_base=80"}, "plugstack.conf: master_port_base"},
      {{"builtin_ckpt_dir=tmp"}, "plugstack.conf: builtin_ckpt_dir: --ckpt-dir: must be an absolute"},
      {{"straggler_margin=0"}, "plugstack.conf: straggler_margin: must be a fraction in (0, 10], got '0'"},
      {{"straggler_margin=1/4"}, "plugstack.conf: straggler_margin: must be a fraction"},
      {{"straggler_windows=0"}, "plugstack.conf: straggler_windows: must be an integer in [1, 1000]"},
      {{"max_rollbacks=-1"}, "plugstack.conf: max_rollbacks: must be an integer in [0, 1000]"},
      {{"default_on_bad_loss=sometimes"}, "plugstack.conf: default_on_bad_loss: --on-bad-loss: must be"},
      {{"default_idle_timeout=3"}, "plugstack.conf: default_idle_timeout: --idle-timeout: must be 0"},
      {{"allow_fault_tolerance=maybe"}, "plugstack.conf: allow_fault_tolerance: must be yes or no, got 'maybe'"},
      {{"default_fault_tolerance=rank"}, "plugstack.conf: default_fault_tolerance: --fault-tolerance: must be off or step"},
      {{"plan_headroom=0.6"},
       "plugstack.conf: plan_headroom: must be a fraction of the GPU's memory in [0, 0.5], got "
       "'0.6'"},
      {{"plan_headroom=8%"}, "plugstack.conf: plan_headroom: must be a fraction"},
  };
  for (const auto& c : cases) {
    auto r = ParseSiteConfig(c.args);
    ASSERT_FALSE(r.ok()) << c.args[0];
    EXPECT_EQ(r.message().rfind(c.want, 0) == 0 || r.message().find(c.want) != std::string::npos,
              true)
        << r.message();
  }
}

TEST(SiteConfig, PlanHeadroomReachesEveryPlan) {
  EXPECT_DOUBLE_EQ(ParseSiteConfig({})->plan_headroom, kDefaultMemoryHeadroom);
  auto c = ParseSiteConfig({"plan_headroom=0.12"});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_DOUBLE_EQ(c->plan_headroom, 0.12);
  JobOptions o;
  o.auto_parallel = *ParseParallelSpec("auto");
  o.model = "llama-2-7b";
  o.gpu_type = "a100-80gb";
  o.global_batch = 64;
  auto plan = PlanStep(o, 8, 8, 0, SitePlanningOf(*c));
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_DOUBLE_EQ(plan->mem_headroom, 0.12);
  EXPECT_DOUBLE_EQ(plan->mem_usable_gib, 80.0 * 0.88);
  EXPECT_LE(plan->chosen.memory.total_gib, 80.0 * 0.88);
}

TEST(SiteConfig, KeysCoverEveryOptionDefault) {
  auto keys = SiteConfigKeys();
  for (const OptionSpec& spec : OptionTable()) {
    std::string key = std::string("default_") + spec.name;
    for (char& ch : key)
      if (ch == '-') ch = '_';
    EXPECT_NE(std::find(keys.begin(), keys.end(), key), keys.end()) << key;
  }
}

TEST(SiteConfig, CalibrationFileIsReadAndCheckedWhenParsed) {
  const std::string path = ::testing::TempDir() + "site_config_test_calibration.json";
  std::ofstream(path) << R"({"gpus": {"a100-80gb": {"factor": 0.5, "job": "1234"}}})";
  auto c = ParseSiteConfig({"calibration=" + path});
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->calibration_path, path);
  ASSERT_TRUE(c->calibration.For("a100-80gb"));
  EXPECT_DOUBLE_EQ(c->calibration.For("a100-80gb")->factor, 0.5);
  EXPECT_FALSE(ParseSiteConfig({})->calibration.For("a100-80gb"));  // unset: no calibration
  // One line naming the key and the file.
  std::ofstream(path) << R"({"gpus": {"v99": {"factor": 0.5, "job": "1234"}}})";
  auto bad = ParseSiteConfig({"calibration=" + path});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.message().rfind("plugstack.conf: calibration: " + path + ": 'gpus.v99': unknown GPU "
                                "type 'v99'", 0), 0u) << bad.message();
  std::ofstream(path) << R"({"gpus": {"a100-80gb": {"factor": 0.5, "job": "1234"})";
  EXPECT_EQ(ParseSiteConfig({"calibration=" + path}).message().rfind(
                "plugstack.conf: calibration: " + path + ": not valid JSON: ", 0), 0u);
  std::remove(path.c_str());
  EXPECT_EQ(ParseSiteConfig({"calibration=" + path}).message(),
            "plugstack.conf: calibration: " + path + ": cannot read: No such file or directory");
  EXPECT_EQ(ParseSiteConfig({"calibration=cal.json"}).message(),
            "plugstack.conf: calibration: must be an absolute path, got 'cal.json'");
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

TEST(SiteConfigProblemsTest, EveryBadArgumentIsToldAndATypoNamesTheNearestKey) {
  std::vector<std::string> problems;
  SiteConfig c = ParseSiteConfigAll(
      {"max_requeu=5", "max_spare_nodes=2", "ckpt_upload_prefixes=s3://ok/", "socket=relative",
       "oops", "default_requeue_on_failure=50"},
      &problems);
  ASSERT_EQ(problems.size(), 4u);
  EXPECT_EQ(problems[0], "plugstack.conf: max_requeu: unknown argument (did you mean max_requeue?)");
  EXPECT_EQ(problems[1], "plugstack.conf: socket: must be an absolute path, got 'relative'");
  EXPECT_EQ(problems[2], "plugstack.conf: 'oops' is not KEY=VALUE");
  EXPECT_NE(problems[3].find("default_requeue_on_failure"), std::string::npos) << problems[3];
  EXPECT_EQ(c.max_spare_nodes, 2);  // what parsed is kept
  EXPECT_EQ(c.ckpt_upload_prefixes, std::vector<std::string>{"s3://ok/"});
  EXPECT_EQ(ParseSiteConfig({"max_requeu=5", "socket=x"}).message(), problems[0]);
}

}  // namespace
}  // namespace autopar
