#include "core/failure/task_process.h"

#include <gtest/gtest.h>

#include <string>

#include "fake_proc_for_test.h"

namespace autopar {
namespace {

class TaskProcessTest : public ::testing::Test {
 protected:
  ProcAccess Proc() { return proc_.Access(); }
  void Process(int pid, const std::string& comm, int ppid) { proc_.Process(pid, comm, ppid); }
  FakeProc proc_;
};

TEST(ProcStatTest, ParsesNamesWithSpacesAndParentheses) {
  auto s = ParseProcStat(FakeStatLine(4242, "my prog) (x", 17, 98765));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->comm, "my prog) (x");
  EXPECT_EQ(s->ppid, 17);
  EXPECT_EQ(s->start_ticks, 98765u);
  for (const char* bad : {"", "12", "12 (x) S", "x (y) S 1", "12 (x) S 1 2 3"}) {
    EXPECT_FALSE(ParseProcStat(bad).has_value()) << bad;
  }
}

TEST(ProcStatTest, CpuTimeProcessGroupAndResidentSize) {
  // A line as Linux writes it (proc(5)): utime 250, stime 50, cutime 7, cstime 3, rss 12345.
  auto s = ParseProcStat(
      "812 (python3) R 800 812 800 0 -1 4194560 5000 0 0 0 250 50 7 3 20 0 3 0 98765 "
      "1073741824 12345 18446744073709551615 1 1 0 0 0 0 0 16781312 0 0 0 17 1 0 0 0 0 0");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->state, 'R');
  EXPECT_EQ(s->pgrp, 812);
  EXPECT_EQ(s->cpu_ticks, 310u);
  EXPECT_EQ(s->rss_pages, 12345);
  EXPECT_EQ(s->start_ticks, 98765u);
}

TEST_F(TaskProcessTest, FindsTheProcessBelowTheLauncherOrSlurmstepd) {
  Process(1, "systemd", 0);
  Process(10, "slurmstepd", 1);
  Process(20, "autopar-launch", 10);
  Process(30, "bash", 20);       // the task's program: a shell script
  Process(31, "bash", 30);       // a subshell of it
  Process(32, "autopar", 31);    // `autopar heartbeat` run from the subshell
  Process(40, "bash", 10);       // a task without the launcher
  Process(41, "autopar", 40);
  Process(50, "sshd", 1);        // not a Slurm task at all
  Process(51, "autopar", 50);
  struct Case {
    int pid;
    int task;  // 0: gone
  } cases[] = {{32, 30}, {31, 30}, {30, 30}, {20, 20}, {41, 40}, {40, 40}, {51, 51}, {99, 0}};
  for (const auto& c : cases) {
    auto t = TaskProcessOf(c.pid, Proc());
    if (c.task == 0) {
      EXPECT_FALSE(t.has_value()) << c.pid;
      continue;
    }
    ASSERT_TRUE(t.has_value()) << c.pid;
    EXPECT_EQ(t->pid, c.task) << c.pid;
  }
}

TEST_F(TaskProcessTest, AnUnreadableAncestorStopsTheWalkAtTheSender) {
  Process(32, "autopar", 31);  // 31 is gone (e.g. a subshell that already exited)
  auto t = TaskProcessOf(32, Proc());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->pid, 32);
}

}  // namespace
}  // namespace autopar
