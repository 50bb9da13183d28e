#include "core/task_env.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>

namespace autopar {
namespace {

std::map<std::string, std::string> AsMap(const EnvList& env) {
  return std::map<std::string, std::string>(env.begin(), env.end());
}

TaskContext Task() {
  TaskContext t;
  t.job_id = 4242;
  t.step_id = 0;
  t.restart_count = 2;
  t.rank = 5;
  t.local_rank = 1;
  t.world_size = 8;
  t.local_world_size = 2;
  t.node_rank = 2;
  t.num_nodes = 4;
  t.step_nodelist = "node[1-4]";
  t.node_name = "node3";
  t.user = "alice";
  return t;
}

TEST(TaskEnv, TorchrunVariables) {
  SiteConfig site;
  auto env = BuildTaskEnv(Task(), JobOptions{}, site);
  ASSERT_TRUE(env.ok()) << env.message();
  auto m = AsMap(env->set);
  for (const auto& kv : env->torchrun) m.insert(kv);
  EXPECT_EQ(m["RANK"], "5");
  EXPECT_EQ(m["LOCAL_RANK"], "1");
  EXPECT_EQ(m["WORLD_SIZE"], "8");
  EXPECT_EQ(m["LOCAL_WORLD_SIZE"], "2");
  EXPECT_EQ(m["GROUP_RANK"], "2");
  EXPECT_EQ(m["ROLE_RANK"], "5");
  EXPECT_EQ(m["MASTER_ADDR"], "node1");
  EXPECT_EQ(m["MASTER_PORT"], std::to_string(29500 + 4242 % 2000));
  EXPECT_EQ(m["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(m["AUTOPAR_SOCKET"], "/run/autopard/autopard.sock");
  EXPECT_EQ(m.count("AUTOPAR_MODEL"), 0u);
}

TEST(TaskEnv, OptionsSocketAndNccl) {
  auto site = ParseSiteConfig({"socket=/c/run/autopard-%n.sock", "nccl_env=NCCL_SOCKET_IFNAME=lo",
                               "master_port_base=40000", "master_port_range=10"});
  ASSERT_TRUE(site.ok()) << site.message();
  JobOptions o;
  o.ckpt_dir = "/scratch/%u/%j/%n/100%%";
  o.ckpt_upload = "s3://b/p";
  o.requeue_on_failure = 3;
  auto env = BuildTaskEnv(Task(), o, *site);
  ASSERT_TRUE(env.ok()) << env.message();
  auto m = AsMap(env->set);
  for (const auto& kv : env->torchrun) m.insert(kv);
  EXPECT_EQ(m["AUTOPAR_CKPT_DIR"], "/scratch/alice/4242/node3/100%");
  EXPECT_EQ(m["AUTOPAR_CKPT_UPLOAD"], "s3://b/p");
  EXPECT_EQ(m["AUTOPAR_REQUEUE_ON_FAILURE"], "3");
  EXPECT_EQ(m["AUTOPAR_SOCKET"], "/c/run/autopard-node3.sock");
  EXPECT_EQ(m["MASTER_PORT"], "40002");
  ASSERT_EQ(env->unless_present.size(), 1u);
  EXPECT_EQ(env->unless_present[0].first, "NCCL_SOCKET_IFNAME");
}

TEST(TaskEnv, MasterIsTheFirstNodeOfTheStep) {
  struct Case {
    const char* nodelist;
    const char* master;
  } cases[] = {{"node[3-4]", "node3"}, {"gpu07,gpu01", "gpu07"}, {"a[010-012]", "a010"}};
  for (const auto& c : cases) {
    TaskContext t = Task();
    t.step_nodelist = c.nodelist;
    auto env = BuildTaskEnv(t, JobOptions{}, SiteConfig{});
    ASSERT_TRUE(env.ok());
    EXPECT_EQ(AsMap(env->torchrun)["MASTER_ADDR"], c.master);
  }
  TaskContext bad = Task();
  bad.step_nodelist = "node[1-";
  EXPECT_FALSE(BuildTaskEnv(bad, JobOptions{}, SiteConfig{}).ok());
}

TEST(TaskEnv, MasterPortIsDeterministicInRangeAndDistinctPerStep) {
  SiteConfig site;
  for (uint32_t job : {0u, 1u, 1999u, 2000u, 4294967295u}) {
    int64_t p = DeterministicMasterPort(job, 0, site);
    EXPECT_EQ(p, DeterministicMasterPort(job, 0, site));
    EXPECT_GE(p, 29500);
    EXPECT_LT(p, 31500);
    // Concurrent steps of one job (ids 0, 1, 2, ... and the batch step) do not meet.
    std::set<int64_t> ports;
    for (uint32_t step : {0u, 1u, 2u, 3u, 0xfffffffbu}) {
      const int64_t q = DeterministicMasterPort(job, step, site);
      EXPECT_GE(q, 29500);
      EXPECT_LT(q, 31500);
      ports.insert(q);
    }
    EXPECT_EQ(ports.size(), 5u) << job;
  }
}

TEST(TaskEnv, UsesAutoparOnlyWithAnOption) {
  EXPECT_FALSE(UsesAutopar(JobOptions{}));
  JobOptions o;
  o.ckpt_keep = 2;
  EXPECT_TRUE(UsesAutopar(o));
}

TEST(TaskEnv, TheUsersOwnTorchrunValuesAreKeptAndAutoparsOwnReplaced) {
  const EnvList torchrun = {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"MASTER_PORT", "29777"}};
  std::map<std::string, std::string> env;
  auto current = [&](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  // Nothing set yet: everything is set, and recorded.
  EXPECT_EQ(TorchrunToSet(torchrun, current),
            (EnvList{{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"MASTER_PORT", "29777"},
                     {kTorchrunMarker, "RANK=3;WORLD_SIZE=8;MASTER_PORT=29777"}}));
  // The batch step's values (recorded) in an srun step's task, and the user's own MASTER_PORT
  // exported in the script: autopar's are replaced, the user's kept.
  env = {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "12345"},
         {kTorchrunMarker, "RANK=0;WORLD_SIZE=1;MASTER_PORT=29776"}};
  EXPECT_EQ(TorchrunToSet(torchrun, current),
            (EnvList{{"RANK", "3"}, {"WORLD_SIZE", "8"}, {kTorchrunMarker, "RANK=3;WORLD_SIZE=8"}}));
  // Values from the submitting shell without a record of autopar's: the user's.
  env = {{"RANK", "99"}};
  EXPECT_EQ(TorchrunToSet(torchrun, current)[0], (std::pair<std::string, std::string>{"WORLD_SIZE", "8"}));
}
}  // namespace
}  // namespace autopar
