#include "core/failure/stack_capture.h"

#include <gtest/gtest.h>

#include <map>

#include "core/failure/timeline.h"

namespace autopar {
namespace {

struct FakeProc {
  std::map<std::string, std::string> files;
  std::vector<std::pair<int, int>> signals;
  // Written to `dump_path` when the signal arrives (what the Python handler would write).
  std::string dump_path, dump_text;
  int slept_ms = 0;

  ProcAccess Access() {
    ProcAccess p;
    p.read_file = [this](const std::string& path) -> Result<std::string> {
      auto it = files.find(path);
      if (it == files.end()) return Status::Error(path + ": Permission denied");
      return it->second;
    };
    p.send_signal = [this](int pid, int sig) -> Status {
      signals.emplace_back(pid, sig);
      if (!dump_path.empty()) files[dump_path] += dump_text;
      return Status::Ok();
    };
    p.sleep_ms = [this](int ms) { slept_ms += ms; };
    return p;
  }
};

TEST(StackCaptureTest, StoppedNativeProcess) {
  FakeProc f;
  f.files["/proc/7/status"] = "Name:\tsleep\nState:\tT (stopped)\nPid:\t7\n";
  f.files["/proc/7/wchan"] = "do_signal_stop";
  f.files["/proc/7/stack"] = "[<0>] do_signal_stop+0x1ae/0x240\n[<0>] get_signal+0x1c/0x880\n";
  f.files["/proc/7/cmdline"] = std::string("/bin/sleep\0" "100\0", 15);
  StackCapture c = CaptureStack(7, {"/tmp/d/stack-rank0.txt", 1000, nullptr}, f.Access());
  EXPECT_EQ(c.state, "T (stopped)");
  EXPECT_EQ(c.wchan, "do_signal_stop");
  EXPECT_EQ(c.kernel_stack, "do_signal_stop+0x1ae/0x240 <- get_signal+0x1c/0x880");
  EXPECT_FALSE(c.python);
  EXPECT_TRUE(f.signals.empty());
  EXPECT_TRUE(c.notes.empty());
  // The kernel stack is not in the event the job's owner sees, only in root's.
  EXPECT_EQ(c.ToDetail(), "pid=7 state=\"T (stopped)\" wchan=do_signal_stop");
  EXPECT_EQ(c.KernelDetail(),
            "pid=7 kernel_stack=\"do_signal_stop+0x1ae/0x240 <- get_signal+0x1c/0x880\"");
}

TEST(StackCaptureTest, PythonDumpOnSigusr2) {
  FakeProc f;
  f.files["/proc/9/status"] = "State:\tS (sleeping)\nSigCgt:\t0000000180000800\n";  // 12: USR2
  f.files["/proc/9/wchan"] = "0";
  f.files["/proc/9/cmdline"] = std::string("/usr/bin/python3\0train.py\0", 25);
  f.files["/tmp/d/stack-rank2.txt"] = "old dump\n";
  f.dump_path = "/tmp/d/stack-rank2.txt";
  f.dump_text = "Thread 0x1 (most recent call first):\n  File \"train.py\", line 40 in step\n";
  StackCapture c = CaptureStack(9, {"/tmp/d/stack-rank2.txt", 1000, nullptr}, f.Access());
  EXPECT_TRUE(c.python);
  ASSERT_EQ(f.signals.size(), 1u);
  EXPECT_EQ(f.signals[0], std::make_pair(9, kPythonStackSignal));
  EXPECT_EQ(c.python_stack,
            "Thread 0x1 (most recent call first):; File \"train.py\", line 40 in step");
  EXPECT_EQ(c.wchan, "");  // "0" means running
  ASSERT_EQ(c.notes.size(), 1u);  // /proc/9/stack unreadable
  EXPECT_NE(c.notes[0].find("no kernel stack: /proc/9/stack: Permission denied"), std::string::npos);
  EventFields fields = ParseEventFields(c.ToDetail());
  EXPECT_EQ(fields[2].first, "python_stack");
  EXPECT_EQ(fields[2].second, c.python_stack);
}

TEST(StackCaptureTest, PythonThatNeverAnswersAndStoppedPython) {
  FakeProc f;
  f.files["/proc/9/status"] = "State:\tS (sleeping)\nSigCgt:\t0000000000000800\n";
  f.files["/proc/9/cmdline"] = std::string("python3.11\0", 11);
  StackCapture c = CaptureStack(9, {"/tmp/d/x.txt", 500, nullptr}, f.Access());
  EXPECT_TRUE(c.python_stack.empty());
  EXPECT_GE(f.slept_ms, 500);
  EXPECT_NE(c.ToDetail().find("nothing in /tmp/d/x.txt 500 ms after SIGUSR2"), std::string::npos);

  FakeProc g;
  g.files["/proc/9/status"] = "State:\tT (stopped)\n";
  g.files["/proc/9/cmdline"] = std::string("python3\0", 8);
  StackCapture s = CaptureStack(9, {"/tmp/d/x.txt", 500, nullptr}, g.Access());
  EXPECT_TRUE(g.signals.empty());
  EXPECT_NE(s.ToDetail().find("the process is stopped"), std::string::npos);

  // No SIGUSR2 handler: the signal would kill it, so none is sent.
  FakeProc h;
  h.files["/proc/9/status"] = "State:\tS (sleeping)\nSigCgt:\t0000000180000002\n";
  h.files["/proc/9/cmdline"] = std::string("python3\0", 8);
  StackCapture n = CaptureStack(9, {"/tmp/d/x.txt", 500, nullptr}, h.Access());
  EXPECT_TRUE(h.signals.empty());
  EXPECT_NE(n.ToDetail().find("no SIGUSR2 handler"), std::string::npos) << n.ToDetail();
}

}  // namespace
}  // namespace autopar
