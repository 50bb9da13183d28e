#include <gtest/gtest.h>

#include <csignal>
#include <sys/wait.h>

#include "launcher/launch.h"

namespace autopar {
namespace {

LaunchDecisions Decisions() {
  LaunchDecisions d;
  d.rank = {5, 8, 1, 2, 2, 4, "node3"};
  d.master = {"10.0.0.1", 41234};
  return d;
}

TEST(BuildLaunchEnv, TorchrunNames) {
  auto ch = BuildLaunchEnv(Decisions(), {{"SLURM_RESTART_COUNT", "2"}, {"SLURM_JOB_ID", "77"}});
  ASSERT_TRUE(ch.ok()) << ch.message();
  EnvMap want = {{"RANK", "5"},
                 {"LOCAL_RANK", "1"},
                 {"WORLD_SIZE", "8"},
                 {"LOCAL_WORLD_SIZE", "2"},
                 {"GROUP_RANK", "2"},
                 {"GROUP_WORLD_SIZE", "4"},
                 {"ROLE_RANK", "5"},
                 {"ROLE_WORLD_SIZE", "8"},
                 {"MASTER_ADDR", "10.0.0.1"},
                 {"MASTER_PORT", "41234"},
                 {"TORCHELASTIC_RESTART_COUNT", "2"},
                 {"TORCHELASTIC_RUN_ID", "77"},
                 {"AUTOPAR_NODE_RANK", "2"}};
  for (const auto& [k, v] : want) {
    ASSERT_TRUE(ch->set.count(k)) << k;
    EXPECT_EQ(ch->set.at(k), v) << k;
  }
  EXPECT_FALSE(ch->set.count("CUDA_VISIBLE_DEVICES"));
  EXPECT_FALSE(ch->set.count("AUTOPAR_CPUS"));
  EXPECT_FALSE(ch->defaults.count("OMP_NUM_THREADS"));
}

TEST(BuildLaunchEnv, RestartCountDefaultsToZeroAndIsValidated) {
  EXPECT_EQ(BuildLaunchEnv(Decisions(), {})->set.at("TORCHELASTIC_RESTART_COUNT"), "0");
  auto bad = BuildLaunchEnv(Decisions(), {{"SLURM_RESTART_COUNT", "x"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("SLURM_RESTART_COUNT"), std::string::npos);
}

TEST(BuildLaunchEnv, BindingAndUserWins) {
  LaunchDecisions d = Decisions();
  d.gpu = GpuChoice{"3", 3, false};
  d.cpus = {4, 5, 6};
  EnvMap current = {{"NCCL_DEBUG", "INFO"},       // the user's choice
                    {"CUDA_VISIBLE_DEVICES", "0,1,2,3"},  // the step's GPUs
                    {"RANK", "0"}, {"MASTER_PORT", "29500"}};  // the plugin's guesses
  auto ch = BuildLaunchEnv(d, current);
  ASSERT_TRUE(ch.ok());
  EnvMap env = ApplyEnvChanges(current, *ch);
  struct Case {
    std::string key, value;
  } cases[] = {
      {"NCCL_DEBUG", "INFO"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"CUDA_VISIBLE_DEVICES", "3"},
      {"AUTOPAR_CPUS", "4-6"},
      {"OMP_NUM_THREADS", "3"},
      {"RANK", "5"},
      {"MASTER_PORT", "41234"},
  };
  for (const auto& c : cases) EXPECT_EQ(env[c.key], c.value) << c.key;
}

TEST(Messages, Prefix) {
  EXPECT_EQ(LaunchMessagePrefix(3, "node2"), "autopar-launch: rank 3 on node2: ");
  EXPECT_EQ(LaunchMessagePrefix(-1, ""), "autopar-launch: rank ? on ?: ");
}

TEST(ExitCode, FromWaitStatus) {
  // Real wait statuses from real children.
  struct Case {
    int how;  // >= 0: _exit(how); < 0: raise(-how)
    int want;
  } cases[] = {{0, 0}, {1, 1}, {42, 42}, {-SIGTERM, 128 + SIGTERM}, {-SIGKILL, 128 + SIGKILL}};
  for (const auto& c : cases) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (c.how < 0) {
        signal(-c.how, SIG_DFL);
        raise(-c.how);
      }
      _exit(c.how < 0 ? 99 : c.how);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_EQ(ExitCodeFromWaitStatus(status), c.want) << c.how;
  }
}

TEST(Signals, ProctrackDecidesForwarding) {
  struct Case {
    std::string conf;
    std::string type;
    bool forward;
  } cases[] = {
      {"ProctrackType=proctrack/linuxproc\n", "proctrack/linuxproc", false},
      {"# ProctrackType=proctrack/pgid\nproctracktype = proctrack/pgid  # old\n", "proctrack/pgid",
       true},
      {"ProctrackType=proctrack/cgroup", "proctrack/cgroup", false},
      {"TaskPlugin=task/none\n", "", false},
      {"ProctrackTypeX=proctrack/pgid\n", "", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ProctrackTypeFromSlurmConf(c.conf), c.type) << c.conf;
    EXPECT_EQ(ForwardSignalFromSlurm(ProctrackTypeFromSlurmConf(c.conf)), c.forward) << c.conf;
  }
}

}  // namespace
}  // namespace autopar
