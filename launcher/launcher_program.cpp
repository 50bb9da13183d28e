// The Launcher's program: started (cold, or the warm interpreter prepared during the last
// generation), supervised, stopped, and its end told as a failure report (launcher.h).
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>

#include "core/failure/requeue_policy.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"

namespace autopar {
namespace {

// Whether the process is stopped (SIGSTOP, a debugger): state T or t in /proc/PID/stat.
bool Stopped(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = text.rfind(')');  // the name may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < text.size() &&
         (text[paren + 2] == 'T' || text[paren + 2] == 't');
}

}  // namespace

using launcher_detail::kStopGraceMs;
using launcher_detail::EpochNow;
using launcher_detail::SecondsSince;

int Launcher::RunChild(const std::vector<std::string>& argv, const EnvMap& env,
                       const std::vector<int>& cpus, bool forward_from_parent, bool* terminated) {
  ChildSpec spec{argv, env, cpus, program_mask_, {}};
  int exec_errno = 0;
  auto pid = StartChild(spec, &exec_errno);
  if (!pid) Fail(pid.message(), exec_errno == ENOENT ? 127 : 126);
  usage_.Start(*pid, env, info_.rank, host_, gpu_device_, usage_interval_s_, -1);
  SuperviseOptions options;
  options.forward_from_parent = forward_from_parent;
  ChildOutcome out = SuperviseChild(*pid, options);
  usage_.Stop();
  *terminated = out.termination_signal != 0;
  return ExitCodeFromWaitStatus(out.wait_status);
}

Result<pid_t> Launcher::StartProgram(const std::vector<std::string>& argv, const EnvMap& env,
                                     const std::vector<int>& cpus) {
  Result<pid_t> pid = Status::Error("not started");
  if (warm_.started()) {
    // The interpreter prepared during the last generation becomes this one's program.
    pid = warm_.Activate(env);
    if (!pid) Say("starting the program cold: " + pid.message());
  }
  if (!pid) {
    ChildSpec spec{argv, env, cpus, program_mask_, {}};
    int exec_errno = 0;
    pid = StartChild(spec, &exec_errno);
    if (!pid) Fail(pid.message(), exec_errno == ENOENT ? 127 : 126);
  }
  return pid;
}

int Launcher::ArmPrewarmTimer() const {
  // The next generation's interpreter, prepared once this program is past its own start-up. In a
  // fault-tolerant group that moment is known: the program asks to join once its imports are done
  // (RunGeneration), so no timer guesses it (a timer that fires while the programs still import
  // makes each start compete with its replacement's where nodes share CPUs).
  if (!python_ || opts_.prewarm_after_s < 0 || warm_.started() || ft_) return -1;
  const int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  if (timer < 0) return -1;
  itimerspec when{};
  when.it_value.tv_sec = opts_.prewarm_after_s;
  when.it_value.tv_nsec = opts_.prewarm_after_s == 0 ? 1 : 0;  // 0 would disarm it
  if (timerfd_settime(timer, 0, &when, nullptr) == 0) return timer;
  close(timer);
  return -1;
}

int Launcher::PrepareInReserve(std::chrono::steady_clock::time_point since) {
  constexpr int kIdle = 3600;
  // The generation this node's program would run in: the current one when it takes a lost
  // node's ranks in the fault-tolerant group, the next one when a restart of every program puts
  // it in use. One try per generation: a start that failed once is not retried every wake-up.
  const int64_t run_in = ft_ ? generation_ : generation_ + 1;
  if (!python_ || opts_.prewarm_after_s < 0 || reserve_warm_tried_ == run_in) return kIdle;
  // As beside a running program: not before --prewarm-after, so that the spare's interpreter does
  // not compete with the others' start-up where nodes share CPUs.
  const int waited = static_cast<int>(launcher_detail::SecondsSince(since));
  if (waited < opts_.prewarm_after_s) return opts_.prewarm_after_s - waited;
  reserve_warm_tried_ = run_in;
  warm_.Discard();  // one of an earlier generation, which the verdicts since have passed
  EnvMap env = child_env_;
  env["AUTOPAR_RESTART_GENERATION"] = std::to_string(run_in);
  if (Status st = warm_.Start(*python_, env, decisions_.cpus, program_mask_); !st) Say(st.message());
  return kIdle;
}

ChildOutcome Launcher::RunGeneration(const std::vector<std::string>& argv, const EnvMap& env,
                                     const std::vector<int>& cpus, bool forward_from_parent,
                                     std::optional<FailureReport>* failure, bool* told) {
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = *StartProgram(argv, env, cpus);
  usage_.Start(pid, env, info_.rank, host_, gpu_device_, usage_interval_s_, generation_);
  SuperviseOptions options;
  options.forward_from_parent = forward_from_parent;
  options.wake_fd = peers_.fd();
  options.generation = generation_;
  options.timer_fd = ArmPrewarmTimer();
  bool warm_on_join = ft_ && python_ && opts_.prewarm_after_s >= 0 && !warm_.started();
  auto prepare_next = [&] {
    if (options.timer_fd >= 0) close(options.timer_fd);
    options.timer_fd = -1;
    warm_on_join = false;
    // With a fault-tolerant group the next program is most likely a replacement of this one in
    // the same generation; without, the next generation's (an in-place restart of all).
    const EnvMap next = ft_ ? env : NextGenerationEnv(env);
    if (Status st = warm_.Start(*python_, next, cpus, program_mask_); !st) Say(st.message());
  };
  ChildOutcome out;
  *told = false;
  std::optional<std::string> group_failed;
  for (;;) {
    // Notices of an earlier generation (several ranks failed at once) are stale.
    peers_.Poll(generation_);
    if (peers_.TakeStop(generation_)) {
      // Another rank failed: the program is stopped below (unless it ended by itself already).
      // Set here too: the notice may come before the program was waited for at all (a peer that
      // fails at its start), when `out` still holds its default, "exited".
      *told = true;
      out.exited = false;
      break;
    }
    if (ft_) {
      // The group's agreement runs beside the program: its channel and the quorum's ticks.
      if ((group_failed = PumpGroup())) {
        out.exited = false;
        break;
      }
      options.wake_fds = {ft_->program_fd(), ft_->timer_fd()};
      if (warm_on_join && ft_->program_joined()) {
        // A program that asks to join is past its start-up (its imports are done): its
        // replacement's interpreter is prepared now, so a replacement that fails soon after it
        // started is replaced warm too.
        prepare_next();
      }
    }
    const int earlier_signal = out.termination_signal;
    out = SuperviseChild(pid, options);
    // Slurm's SIGTERM of an earlier wait holds for the generation: a preemption's notice, then
    // the program's end at the requeue's own SIGTERM (which it may take before this launcher
    // does) is Slurm's doing, not a crash.
    if (out.termination_signal == 0) out.termination_signal = earlier_signal;
    if (out.hung && ft_ && ft_->SpareFromHang() && !Stopped(pid)) {
      // autopard sees every member stalled: this one waits in the group's collective for the
      // member that hung, whose own launcher replaces it (or has replaced it already).
      out.hung = false;
      continue;
    }
    if (out.timer) {
      prepare_next();
      continue;
    }
    if (out.exited || out.hung || out.bad_loss) break;
  }
  if (options.timer_fd >= 0) close(options.timer_fd);
  usage_.Stop();
  ft_failed_ = group_failed.has_value();
  if (group_failed) {
    Say("--fault-tolerance=step: " + *group_failed + "; every program is restarted");
    out.hung = true;  // stopped at once, and reported as this rank's failure
  }
  FailureReport report = EndGeneration(pid, *told, start, &out);
  if (group_failed) report.kind = FailureClassName(FailureClass::kRankCrash);
  if (out.hung || out.bad_loss || group_failed ||
      (out.exited && report.exit_status != 0 && out.termination_signal == 0)) {
    *failure = report;
  }
  return out;
}

FailureReport Launcher::EndGeneration(pid_t pid, bool told,
                                      std::chrono::steady_clock::time_point start,
                                      ChildOutcome* out) {
  FailureReport report;
  report.generation = generation_;
  report.rank = info_.rank;
  report.node = host_;
  report.detected = EpochNow();
  std::string own_oom;  // the program's own out-of-memory error, found after it was stopped
  int status = 0;
  if (out->hung && waitpid(pid, &status, WNOHANG) == pid) {
    // It had ended by itself when the verdict came (a program past its last step whose exit was
    // slower than --heartbeat-timeout on a loaded node): its own end, a failure only if it failed.
    out->hung = false;
    out->exited = true;
    out->wait_status = status;
  } else if (out->hung) {
    // autopard captured its stacks already; nothing to wait for.
    out->wait_status = StopChild(pid, 0);
    report.kind = "hang";
  } else if (out->bad_loss) {
    // Its loss went bad (autopard, --on-bad-loss=rollback): nothing it could still save is wanted.
    out->wait_status = StopChild(pid, 0);
    report.kind = FailureClassName(FailureClass::kBadLoss);
  } else if (told) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      // It had ended by itself before the notice was taken (ranks failing together: the one
      // that ran out of memory and the ones whose collectives broke): its own end, reported
      // as such when it failed. Only a program this launcher stops is the others' failure.
      out->exited = true;
      out->wait_status = status;
    } else {
      out->wait_status = StopChild(pid, kStopGraceMs);
      // Stopped while it was ending by itself: a program that ran out of memory recorded its own
      // error (the error file) before it died, and its rank's collective peers failed first,
      // within milliseconds. That error is its own failure, not the others'.
      own_oom = errors_.OutOfMemory(ExitCodeFromWaitStatus(out->wait_status));
      if (!own_oom.empty()) out->exited = true;
    }
  }
  report.exit_status = ExitCodeFromWaitStatus(out->wait_status);
  report.run_s = SecondsSince(start);
  if (!own_oom.empty()) {
    report.error = own_oom;
    report.kind = FailureClassName(FailureClass::kOom);
  } else if (out->exited && out->termination_signal == 0) {
    report.error = errors_.OutOfMemory(report.exit_status);
    if (!report.error.empty()) report.kind = FailureClassName(FailureClass::kOom);
  }
  return report;
}

}  // namespace autopar
