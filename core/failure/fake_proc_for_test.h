// Tests only: a /proc made of a map from path to content, behind ProcAccess, with helpers that
// write the /proc/PID/stat line TaskProcessOf and FailureHandler read.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/failure/stack_capture.h"

namespace autopar {

// "PID (COMM) S PPID 0 ... 0 START 0 0": fields 5-21 zero, field 22 the start time.
inline std::string FakeStatLine(int pid, const std::string& comm, int ppid, long long start = 100) {
  std::string s = std::to_string(pid) + " (" + comm + ") S " + std::to_string(ppid);
  for (int field = 5; field <= 21; ++field) s += " 0";
  return s + " " + std::to_string(start) + " 0 0\n";
}

struct FakeProc {
  std::map<std::string, std::string> files;
  std::vector<std::tuple<int, int, int>> queued;  // (pid, sig, value) of every queue_signal

  // Reads `files` (a missing path: "No such file or directory"); signals succeed; no sleeping.
  ProcAccess Access() {
    ProcAccess p;
    p.read_file = [this](const std::string& path) -> Result<std::string> {
      auto it = files.find(path);
      if (it == files.end()) return Status::Error(path + ": No such file or directory");
      return it->second;
    };
    p.send_signal = [](int, int) { return Status::Ok(); };
    p.queue_signal = [this](int pid, int sig, int value) {
      queued.emplace_back(pid, sig, value);
      return Status::Ok();
    };
    p.sleep_ms = [](int) {};
    return p;
  }
  // A process named `comm` with parent `ppid` (its /proc/PID/stat).
  void Process(int pid, const std::string& comm, int ppid, long long start = 100) {
    files["/proc/" + std::to_string(pid) + "/stat"] = FakeStatLine(pid, comm, ppid, start);
  }
  void Gone(int pid) { files.erase("/proc/" + std::to_string(pid) + "/stat"); }
};

}  // namespace autopar
