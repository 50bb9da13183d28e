#include "proc_access.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace autopar {

ProcAccess RealProcAccess() {
  ProcAccess p;
  p.read_file = [](const std::string& path) -> Result<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::Error(path + ": " + std::strerror(errno));
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return Status::Error(path + ": read error");
    return ss.str();
  };
  p.send_signal = [](int pid, int sig) -> Status {
    if (kill(pid, sig) != 0) {
      return Status::Error("kill(" + std::to_string(pid) + ", " + std::to_string(sig) +
                           "): " + std::strerror(errno));
    }
    return Status::Ok();
  };
  p.queue_signal = [](int pid, int sig, int value) -> Status {
    union sigval v;
    v.sival_int = value;
    if (sigqueue(pid, sig, v) != 0) {
      return Status::Error("sigqueue(" + std::to_string(pid) + ", " + std::to_string(sig) +
                           "): " + std::strerror(errno));
    }
    return Status::Ok();
  };
  p.sleep_ms = [](int ms) {
    struct timespec ts {ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  };
  return p;
}

}  // namespace autopar
