#include "core/failure/stack_capture.h"

#include <cstdlib>

#include "core/text.h"
#include "core/failure/timeline.h"

namespace autopar {
namespace {

std::string JoinLines(const std::string& text, const char* sep, size_t max_lines) {
  std::vector<std::string> lines;
  for (auto& l : Split(text, '\n')) {
    std::string t = Trim(l);
    if (!t.empty()) lines.push_back(std::move(t));
  }
  if (lines.size() > max_lines) {
    size_t dropped = lines.size() - max_lines;
    lines.resize(max_lines);
    lines.push_back("... " + std::to_string(dropped) + " more lines");
  }
  return Join(lines, sep);
}

std::string Proc(int pid, const char* what) {
  return "/proc/" + std::to_string(pid) + "/" + what;
}

}  // namespace

std::string DefaultStackDir(const std::string& job_id) { return "/tmp/autopar-stacks/" + job_id; }

std::string PythonStackDumpPath(const std::string& dir, int rank) {
  return dir + "/stack-rank" + std::to_string(rank) + ".txt";
}

std::string StackCapture::ToDetail() const {
  EventFields f;
  f.emplace_back("pid", std::to_string(pid));
  if (!state.empty()) f.emplace_back("state", state);
  if (!wchan.empty()) f.emplace_back("wchan", wchan);
  if (!python_stack.empty()) f.emplace_back("python_stack", python_stack);
  if (!notes.empty()) f.emplace_back("notes", Join(notes, "; "));
  return FormatEventFields(f);
}

std::string StackCapture::KernelDetail() const {
  if (kernel_stack.empty()) return "";
  return FormatEventFields({{"pid", std::to_string(pid)}, {"kernel_stack", kernel_stack}});
}

namespace {

// State and caught signals from /proc/PID/status; whether SIGUSR2 has a handler.
bool ReadState(int pid, const ProcAccess& proc, StackCapture* c) {
  auto status = proc.read_file(Proc(pid, "status"));
  bool catches_usr2 = false;
  if (!status.ok()) {
    c->notes.push_back("no state: " + status.message());
    return false;
  }
  for (const auto& line : Split(*status, '\n')) {
    if (StartsWith(line, "State:")) c->state = Trim(line.substr(6));
    if (StartsWith(line, "SigCgt:")) {
      // Hex mask of caught signals, bit (sig - 1).
      unsigned long long mask = std::strtoull(Trim(line.substr(7)).c_str(), nullptr, 16);
      catches_usr2 = (mask >> (kPythonStackSignal - 1)) & 1ULL;
    }
  }
  return catches_usr2;
}

// What the kernel says the process waits in: wchan and /proc/PID/stack (root only).
void ReadKernelSide(int pid, const ProcAccess& proc, StackCapture* c) {
  auto wchan = proc.read_file(Proc(pid, "wchan"));
  if (!wchan.ok()) {
    c->notes.push_back("no wchan: " + wchan.message());
  } else if (Trim(*wchan) != "0") {
    c->wchan = Trim(*wchan);
  }
  auto stack = proc.read_file(Proc(pid, "stack"));
  if (!stack.ok()) {
    c->notes.push_back("no kernel stack: " + stack.message());
    return;
  }
  // Lines look like "[<0>] do_signal_stop+0x1ae/0x240"; keep the function part.
  std::vector<std::string> frames;
  for (const auto& line : Split(*stack, '\n')) {
    std::string t = Trim(line);
    if (t.empty()) continue;
    size_t sp = t.find("] ");
    frames.push_back(sp == std::string::npos ? t : t.substr(sp + 2));
  }
  c->kernel_stack = Join(frames, " <- ");
}

// Asks the Python program for its stack (SIGUSR2, autopar's faulthandler) and waits for the dump.
void CapturePythonStack(int pid, const StackCaptureOptions& options, const ProcAccess& proc,
                        StackCapture* c) {
  const auto& read_dump = options.read_dump ? options.read_dump : proc.read_file;
  // A dump left from an earlier capture must not be taken for this one.
  auto old = read_dump(options.python_dump_path);
  size_t old_size = old.ok() ? old->size() : 0;
  if (Status s = proc.send_signal(pid, kPythonStackSignal); !s.ok()) {
    c->notes.push_back("no Python stack: " + s.message());
    return;
  }
  const int step_ms = 100;
  for (int waited = 0; waited <= options.python_wait_ms; waited += step_ms) {
    auto dump = read_dump(options.python_dump_path);
    if (dump.ok() && dump->size() > old_size) {
      // faulthandler writes the whole dump at once; give it one more step to finish.
      proc.sleep_ms(step_ms);
      auto full = read_dump(options.python_dump_path);
      const std::string& text = full.ok() ? *full : *dump;
      c->python_stack = JoinLines(text.substr(old_size), "; ", 60);
      return;
    }
    proc.sleep_ms(step_ms);
  }
  c->notes.push_back("no Python stack: nothing in " + options.python_dump_path + " " +
                     std::to_string(options.python_wait_ms) +
                     " ms after SIGUSR2 (does the program import autopar?)");
}

}  // namespace

StackCapture CaptureStack(int pid, const StackCaptureOptions& options, const ProcAccess& proc) {
  StackCapture c;
  c.pid = pid;
  const bool catches_usr2 = ReadState(pid, proc, &c);
  ReadKernelSide(pid, proc, &c);
  auto cmdline = proc.read_file(Proc(pid, "cmdline"));
  if (cmdline.ok()) {
    std::string argv0 = cmdline->substr(0, cmdline->find('\0'));
    std::string base = argv0.substr(argv0.rfind('/') + 1);
    c.python = StartsWith(base, "python");
  }
  if (!c.python || options.python_dump_path.empty()) return c;
  if (StartsWith(c.state, "T") || StartsWith(c.state, "t")) {
    c.notes.push_back("no Python stack: the process is stopped and cannot run its SIGUSR2 handler");
    return c;
  }
  if (!catches_usr2) {
    // Without a handler SIGUSR2 would kill the rank (its default action).
    c.notes.push_back("no Python stack: the process has no SIGUSR2 handler (autopar's faulthandler "
                      "is not registered)");
    return c;
  }
  CapturePythonStack(pid, options, proc, &c);
  return c;
}

}  // namespace autopar
