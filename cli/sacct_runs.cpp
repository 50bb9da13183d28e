#include "sacct_runs.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/text.h"

namespace autopar::cli {
namespace {

// Runs ARGV with TZ=UTC and SLURM_TIME_FORMAT=%s (epoch seconds in and out); its standard output,
// or an error with its first line of standard error.
Result<std::string> Capture(std::vector<std::string> argv) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Status::Error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return Status::Error(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::Error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    setenv("TZ", "UTC", 1);
    setenv("SLURM_TIME_FORMAT", "%s", 1);
    execvp(args[0], args.data());
    dprintf(2, "%s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  std::string text[2];
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        text[i].append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return text[0];
  std::string first = Trim(text[1].substr(0, text[1].find('\n')));
  if (first.empty()) first = Trim(text[0].substr(0, text[0].find('\n')));
  return Status::Error(argv[0] + " failed: " + (first.empty() ? "exit status " +
                           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status))
                                                              : first));
}

}  // namespace

Result<std::vector<SlurmRun>> QuerySacctRuns(const SacctQuery& q) {
  std::vector<std::string> argv = {"sacct", "--parsable2", "--noheader", "--duplicates",
                                   std::string("--format=") + SacctFormat()};
  if (!q.job_ids.empty()) argv.push_back("--jobs=" + Join(q.job_ids, ","));
  if (q.all_users) argv.push_back("--allusers");
  if (!q.start.empty()) argv.push_back("--starttime=" + q.start);
  if (!q.end.empty()) argv.push_back("--endtime=" + q.end);
  if (!q.users.empty()) argv.push_back("--user=" + q.users);
  if (!q.partitions.empty()) argv.push_back("--partition=" + q.partitions);
  // Only the allocations: slurmdbd's sacct lists steps too.
  argv.push_back("--allocations");
  auto text = Capture(argv);
  if (!text && text.message().find("accounting storage is disabled") != std::string::npos) {
    // No slurmdbd: the job completion log (JobCompType) has every run.
    argv.push_back("--completion");
    text = Capture(argv);
  }
  if (!text) return text.status();
  return ParseSacctRuns(*text);
}

}  // namespace autopar::cli
