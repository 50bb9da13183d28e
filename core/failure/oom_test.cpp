#include "core/failure/oom.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(OomTest, CounterFilesOfV1V2AndHybridHierarchies) {
  const std::string v1 =
      "12:pids:/slurm/uid_0/job_7\n4:memory:/slurm/uid_0/job_7/step_0/task_1\n0::/\n";
  EXPECT_EQ(OomCounterFiles(v1, "7", "/cg"),
            (std::vector<std::string>{"/cg/memory/slurm/uid_0/job_7/step_0/task_1/memory.oom_control"}));
  const std::string v2 = "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_1\n";
  EXPECT_EQ(OomCounterFiles(v2, "7", "/cg"),
            (std::vector<std::string>{
                "/cg/system.slice/slurmstepd.scope/job_7/step_0/user/task_1/memory.events",
                "/cg/unified/system.slice/slurmstepd.scope/job_7/step_0/user/task_1/memory.events"}));
  EXPECT_TRUE(OomCounterFiles("garbage\n", "7", "/cg").empty());
  EXPECT_EQ(OomCounterFiles("3:cpu,memory:/a/job_7\n", "7", "/cg"),
            (std::vector<std::string>{"/cg/memory/a/job_7/memory.oom_control"}));
}

TEST(OomTest, OnlyTheJobsOwnCgroupCounts) {
  // A node without task/cgroup: the tasks stay in slurmd's cgroup, whose count (hierarchical)
  // is every job's on the node. Another job's, or one whose id only begins the same, neither.
  EXPECT_TRUE(OomCounterFiles("4:memory:/system.slice/slurmd.service\n0::/\n", "7", "/cg").empty());
  EXPECT_TRUE(OomCounterFiles("4:memory:/slurm/uid_0/job_8/step_0\n", "7", "/cg").empty());
  EXPECT_TRUE(OomCounterFiles("4:memory:/slurm/uid_0/job_71/step_0\n", "7", "/cg").empty());
  EXPECT_TRUE(OomCounterFiles("4:memory:/slurm/uid_0/job_7/step_0\n", "", "/cg").empty());
}

TEST(OomTest, OomKillCountOfEitherFile) {
  EXPECT_EQ(OomKillCount("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n"), 1);
  EXPECT_EQ(OomKillCount("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), 3);
  EXPECT_FALSE(OomKillCount("oom_kill_disable 0\nunder_oom 0\n"));  // kernels before 4.13
  EXPECT_FALSE(OomKillCount("oom_kill x\n"));
}

TEST(OomTest, OutOfMemoryMessages) {
  for (const char* m : {
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
           "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes",
           "MemoryError", "terminate called after throwing an instance of 'std::bad_alloc'",
           "OSError: [Errno 12] Cannot allocate memory",
           "RuntimeError: NCCL error: unhandled cuda error ... failed to allocate memory"}) {
    EXPECT_TRUE(IsOutOfMemoryMessage(m)) << m;
  }
  for (const char* m : {"ValueError: bad shape", "KeyError: 'memory'", ""}) {
    EXPECT_FALSE(IsOutOfMemoryMessage(m)) << m;
  }
}

TEST(OomTest, ErrorFileMessageOfTorchelasticsFormat) {
  EXPECT_EQ(ErrorFileMessage(R"({"message": {"message": "MemoryError: \nTraceback...",)"
                             R"( "extraInfo": {"py_callstack": "...", "timestamp": "1"}}})"),
            "MemoryError: ");
  EXPECT_EQ(ErrorFileMessage(R"({"message": "RuntimeError: boom"})"), "RuntimeError: boom");
  EXPECT_EQ(ErrorFileMessage(R"({"message": "0123456789"})", 8), "01234...");
  EXPECT_EQ(ErrorFileMessage("not json"), "");
  EXPECT_EQ(ErrorFileMessage(R"({"other": 1})"), "");
}

}  // namespace
}  // namespace autopar
