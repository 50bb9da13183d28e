#include "proc_access.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(ProcAccessTest, RealStoppedChild) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, WUNTRACED), pid);
  ASSERT_TRUE(WIFSTOPPED(st));
  StackCapture c = CaptureStack(pid, {}, RealProcAccess());
  EXPECT_EQ(c.state.substr(0, 1), "T") << c.ToDetail();
  EXPECT_EQ(c.pid, pid);
  if (geteuid() == 0) {
    EXPECT_FALSE(c.kernel_stack.empty()) << c.KernelDetail();  // root reads /proc/PID/stack
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  StackCapture gone = CaptureStack(pid, {}, RealProcAccess());
  EXPECT_TRUE(gone.state.empty());
  EXPECT_FALSE(gone.notes.empty());
}

}  // namespace
}  // namespace autopar
