#include "launcher/program_errors.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "core/failure/oom.h"

namespace autopar {
namespace {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A program's error file: a regular file (no symlink followed, no FIFO waited on), at most 1 MiB.
std::optional<std::string> ReadErrorFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string out;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    std::vector<char> buf(1 << 16);
    ssize_t n;
    while (out.size() < (1u << 20) && (n = read(fd, buf.data(), buf.size())) > 0) out.append(buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::string Var(const EnvMap& env, const char* key, const char* dflt) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? dflt : it->second;
}

}  // namespace

ProgramErrors::~ProgramErrors() {
  if (own_dir_.empty()) return;
  unlink(error_file_.c_str());
  rmdir(own_dir_.c_str());
}

void ProgramErrors::Prepare(EnvMap* env, const std::string& cgroup_root, const std::string& proc_cgroup) {
  auto user = env->find("TORCHELASTIC_ERROR_FILE");
  if (error_file_.empty() && user != env->end() && !user->second.empty()) {
    error_file_ = user->second;  // the job's own: read, never removed
  } else if (error_file_.empty()) {
    std::string tmpl = Var(*env, "TMPDIR", "/tmp") + "/autopar-launch-" + Var(*env, "SLURM_JOB_ID", "0") +
                       ".XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) {  // 0700: this user's alone
      own_file_ = true;
      own_dir_ = tmpl;
      error_file_ = own_dir_ + "/error-" + Var(*env, "SLURM_STEP_ID", "0") + "-" +
                    Var(*env, "SLURM_PROCID", "0") + ".json";
    }
  }
  if (own_file_) {
    (*env)["TORCHELASTIC_ERROR_FILE"] = error_file_;
    unlink(error_file_.c_str());
  }
  if (counter_file_.empty()) {
    // The program runs in the launcher's memory cgroup (Slurm's task/cgroup puts the task there).
    const std::string cgroups = proc_cgroup.empty() ? ReadFile("/proc/self/cgroup").value_or("") : proc_cgroup;
    for (const std::string& f : OomCounterFiles(cgroups, Var(*env, "SLURM_JOB_ID", ""), cgroup_root)) {
      auto text = ReadFile(f);
      if (text && OomKillCount(*text)) {
        counter_file_ = f;
        break;
      }
    }
  }
  kills_before_.reset();
  if (!counter_file_.empty()) kills_before_ = OomKillCount(ReadFile(counter_file_).value_or(""));
}

std::string ProgramErrors::OutOfMemory(int exit_code) {
  if (exit_code == 0) return "";
  if (!error_file_.empty()) {
    const std::string message = ErrorFileMessage(ReadErrorFile(error_file_).value_or(""));
    if (own_file_) unlink(error_file_.c_str());
    if (IsOutOfMemoryMessage(message)) return message;
  }
  if (exit_code == 128 + SIGKILL && kills_before_) {
    auto now = OomKillCount(ReadFile(counter_file_).value_or(""));
    if (now && *now > *kills_before_) return "killed by the kernel's OOM killer (memory cgroup)";
  }
  return "";
}

}  // namespace autopar
