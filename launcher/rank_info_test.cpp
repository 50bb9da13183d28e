#include <gtest/gtest.h>

#include "launcher/launch.h"

namespace autopar {
namespace {

TEST(ParseTasksPerNode, Cases) {
  struct Case {
    std::string text;
    bool ok;
    std::vector<int> want;
  } cases[] = {
      {"2", true, {2}},
      {"2(x4)", true, {2, 2, 2, 2}},
      {"3(x2),1", true, {3, 3, 1}},
      {"1,2,3", true, {1, 2, 3}},
      {"", false, {}},
      {"2(x)", false, {}},
      {"2(y3)", false, {}},
      {"0", false, {}},
      {"a", false, {}},
      {"2(x3", false, {}},
      {"2,,3", false, {}},
  };
  for (const auto& c : cases) {
    auto r = ParseTasksPerNode(c.text);
    EXPECT_EQ(r.ok(), c.ok) << c.text;
    if (r.ok() && c.ok) {
      EXPECT_EQ(*r, c.want) << c.text;
    }
    if (!r.ok()) {
      EXPECT_NE(r.message().find(c.text), std::string::npos);
    }
  }
}

EnvMap SlurmEnv() {
  return {{"SLURM_PROCID", "5"},          {"SLURM_STEP_NUM_TASKS", "8"},
          {"SLURM_LOCALID", "1"},         {"SLURM_NODEID", "2"},
          {"SLURM_STEP_NUM_NODES", "4"},  {"SLURM_STEP_TASKS_PER_NODE", "2(x4)"},
          {"SLURMD_NODENAME", "node3"}};
}

TEST(RankInfoFromSlurmEnv, ReadsStepVariables) {
  auto r = RankInfoFromSlurmEnv(SlurmEnv(), "localhost");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->rank, 5);
  EXPECT_EQ(r->size, 8);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->local_size, 2);
  EXPECT_EQ(r->node_rank, 2);
  EXPECT_EQ(r->num_nodes, 4);
  EXPECT_EQ(r->host, "node3");
}

TEST(RankInfoFromSlurmEnv, OutsideSlurmIsOneRank) {
  auto r = RankInfoFromSlurmEnv({}, "laptop");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->size, 1);
  EXPECT_EQ(r->host, "laptop");
}

TEST(RankInfoFromSlurmEnv, UnevenTasksPerNode) {
  EnvMap env = SlurmEnv();
  env["SLURM_STEP_TASKS_PER_NODE"] = "3,3,1,1";
  env["SLURM_PROCID"] = "6";
  env["SLURM_LOCALID"] = "0";
  auto r = RankInfoFromSlurmEnv(env, "h");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->local_size, 1);
}

TEST(RankInfoFromSlurmEnv, Rejects) {
  struct Case {
    std::string key, value;  // value "<erase>" removes the key
    std::string message_part;
  } cases[] = {
      {"SLURM_PROCID", "x", "SLURM_PROCID: invalid value 'x'"},
      {"SLURM_PROCID", "8", "rank 8 is not below job size 8"},
      {"SLURM_LOCALID", "<erase>", "SLURM_LOCALID: not set"},
      {"SLURM_LOCALID", "2", "local rank 2 is not below local size 2"},
      {"SLURM_STEP_TASKS_PER_NODE", "2(x2)", "no entry for node 2"},
      {"SLURM_STEP_TASKS_PER_NODE", "two", "invalid tasks-per-node list 'two'"},
      {"SLURM_NODEID", "-1", "SLURM_NODEID: invalid value '-1'"},
  };
  for (const auto& c : cases) {
    EnvMap env = SlurmEnv();
    if (c.value == "<erase>") {
      env.erase(c.key);
    } else {
      env[c.key] = c.value;
    }
    auto r = RankInfoFromSlurmEnv(env, "h");
    ASSERT_FALSE(r.ok()) << c.key;
    EXPECT_NE(r.message().find(c.message_part), std::string::npos) << r.message();
  }
}

TEST(ValidateRankInfo, Cases) {
  RankInfo good{3, 8, 1, 2, 1, 4, "h"};
  EXPECT_TRUE(ValidateRankInfo(good).ok());
  struct Case {
    RankInfo info;
    std::string message_part;
  } cases[] = {
      {{0, 0, 0, 1, 0, 1, ""}, "job size 0"},
      {{0, 4, 0, 1, 4, 4, ""}, "node rank 4 is not below node count 4"},
      {{0, 2, 0, 3, 0, 1, ""}, "local size 3 exceeds job size 2"},
      {{-1, 2, 0, 1, 0, 1, ""}, "rank -1"},
  };
  for (const auto& c : cases) {
    Status st = ValidateRankInfo(c.info);
    ASSERT_FALSE(st.ok()) << c.message_part;
    EXPECT_NE(st.message().find(c.message_part), std::string::npos) << st.message();
  }
}

TEST(LaunchedRankInfo, RoundTripsTheLauncherEnvironment) {
  LaunchDecisions d;
  d.rank = {5, 8, 1, 2, 2, 4, "node3"};
  d.master = {"10.0.0.1", 29500};
  auto ch = BuildLaunchEnv(d, {});
  ASSERT_TRUE(ch.ok());
  auto back = LaunchedRankInfo(ApplyEnvChanges({}, *ch));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->rank, 5);
  EXPECT_EQ(back->size, 8);
  EXPECT_EQ(back->local_rank, 1);
  EXPECT_EQ(back->local_size, 2);
  EXPECT_EQ(back->node_rank, 2);
  EXPECT_EQ(back->num_nodes, 4);
  EXPECT_EQ(back->host, "node3");
  EnvMap broken = ApplyEnvChanges({}, *ch);
  broken.erase("AUTOPAR_NODE_RANK");
  EXPECT_NE(LaunchedRankInfo(broken).message().find("AUTOPAR_NODE_RANK: not set"),
            std::string::npos);
  broken = ApplyEnvChanges({}, *ch);
  broken["LOCAL_RANK"] = "2";
  EXPECT_FALSE(LaunchedRankInfo(broken).ok());
}

TEST(FallbackMasterEndpoint, Cases) {
  struct Case {
    EnvMap env;
    bool ok;
    std::string addr;
    int port;
  } cases[] = {
      {{{"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29510"}}, true, "node1", 29510},
      {{{"SLURM_STEP_NODELIST", "gpu[07-08]"}, {"SLURM_JOB_ID", "100"}, {"SLURM_STEP_ID", "2"}},
       true, "gpu07", 29500 + (700 + 2) % 20000},
      {{{"MASTER_ADDR", "n1"}, {"MASTER_PORT", "70000"}}, false, "", 0},
      {{}, false, "", 0},
      {{{"SLURM_STEP_NODELIST", "n[1-"}}, false, "", 0},
  };
  for (const auto& c : cases) {
    auto r = FallbackMasterEndpoint(c.env);
    ASSERT_EQ(r.ok(), c.ok) << (r.ok() ? r->addr : r.message());
    if (r.ok()) {
      EXPECT_EQ(r->addr, c.addr);
      EXPECT_EQ(r->port, c.port);
    }
  }
}

TEST(Rendezvous, RoundTripsAndRejectsMalformedValues) {
  RendezvousValue v{{"10.0.0.7", 29512}, 19};
  EXPECT_EQ(EncodeRendezvous(v), "10.0.0.7 29512 19");
  struct Case {
    std::string text;
    bool ok;
    std::string addr;
    int port;
    int64_t step;
  } cases[] = {
      {"10.0.0.7 29512 19", true, "10.0.0.7", 29512, 19},
      {"node1 1 -1", true, "node1", 1, -1},
      {"node1 29500", false, "", 0, 0},           // no step
      {"node1 0 3", false, "", 0, 0},             // port out of range
      {"node1 65536 3", false, "", 0, 0},
      {"node1 29500 -2", false, "", 0, 0},        // steps are >= -1
      {"node1 29500 7x", false, "", 0, 0},
      {"node1 29500 7 extra", false, "", 0, 0},
      {"", false, "", 0, 0},
  };
  for (const auto& c : cases) {
    auto r = DecodeRendezvous(c.text);
    ASSERT_EQ(r.ok(), c.ok) << c.text << ": " << (r.ok() ? r->master.addr : r.message());
    if (!r.ok()) {
      EXPECT_NE(r.message().find("'" + c.text + "'"), std::string::npos) << r.message();
      continue;
    }
    EXPECT_EQ(r->master.addr, c.addr);
    EXPECT_EQ(r->master.port, c.port);
    EXPECT_EQ(r->resume_step, c.step);
  }
}

}  // namespace
}  // namespace autopar
