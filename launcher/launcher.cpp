#include "launcher/launcher.h"

#include <limits.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/text.h"
#include "launcher/launcher_internal.h"

extern char** environ;

namespace autopar {
using launcher_detail::kDefaultRendezvousTimeoutS;
using launcher_detail::kRecoverTimeoutMs;
using launcher_detail::kTerminatedTimeoutMs;
using launcher_detail::SecondsSince;
using launcher_detail::Get;
using launcher_detail::Lookup;
using launcher_detail::Contains;
using launcher_detail::TellEvent;
namespace {

EnvMap CurrentEnv() {
  EnvMap env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  }
  return env;
}

std::string HostName() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  if (in) ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// --- the task ------------------------------------------------------------------------------------

Launcher::Launcher() {
  program_mask_ = BlockForwardedSignals();
  env_ = CurrentEnv();
  host_ = HostName();
  if (auto it = env_.find("SLURM_PROCID"); it != env_.end()) rank_ = std::atoi(it->second.c_str());
  if (auto it = env_.find("SLURMD_NODENAME"); it != env_.end()) host_ = it->second;
}

void Launcher::Fail(const std::string& message, int code) {
  if (story_.joinable()) story_.join();  // bounded by its requests' timeouts
  Say(message);
  std::fflush(stderr);
  if (pmix_.initialized()) {
    // Other ranks may be waiting for this one in the Fence: end the whole step now.
    (void)pmix_.Abort(code, LaunchMessagePrefix(rank_, host_) + message);
  }
  (void)pmix_.Finalize();
  port_.Release();
  ft_.reset();  // its program channel's directory in $TMPDIR (std::exit runs no destructor)
  std::exit(code);
}

void Launcher::TellTerminated(int code) {
  // Slurm ended the step with SIGTERM (a preemption, a scancel, the time limit) and the program
  // ended at it without a checkpoint it holds for (python/autopar: time_limit_reached), or never
  // started. Before this launcher ends (and with the others the batch script, which would end a
  // preempted job COMPLETED), autopard reads Slurm's record and requeues a preempted job.
  const GetEnv get = Lookup(child_env_);
  Status st = SendJobEvent(get, JobEventRequest(get, event_kind::kTerminated, info_.rank, -1, host_,
                                                {{"exit", std::to_string(code)}}),
                           kTerminatedTimeoutMs);
  if (!st && verbose_) Say("warning: " + st.message());
}

void Launcher::Say(const std::string& message) const {
  std::fprintf(stderr, "%s%s\n", LaunchMessagePrefix(rank_, host_).c_str(), message.c_str());
}

void Launcher::Journal(const EnvMap& env, const char* kind, int64_t step,
                       const EventFields& fields) const {
  if (rank_ == 0) TellEvent(env, 0, host_, LaunchMessagePrefix(rank_, host_), verbose_, kind, step, fields);
}

int Launcher::Run(const LaunchOptions& opts) {
  launch_start_ = std::chrono::steady_clock::now();
  opts_ = opts;
  verbose_ = opts.verbose;
  usage_interval_s_ = opts.usage_interval_s;
  StartStory();
  timeout_s_ = kDefaultRendezvousTimeoutS;
  if (auto t = Get(env_, "AUTOPAR_LAUNCH_TIMEOUT"); !t.empty()) timeout_s_ = std::atoi(t.c_str());
  use_pmix_ = PmixClient::ServerAdvertised(env_);
  checkpoints_ = CheckpointsEnabled(Lookup(env_));
  // In place needs the rendezvous (PMIx) and autopard to decide.
  in_place_ = use_pmix_ && std::atoll(Get(env_, "AUTOPAR_RESTARTS_IN_PLACE", "0").c_str()) > 0 &&
              env_.count("AUTOPAR_SOCKET") && env_.count("SLURM_JOB_ID");
  if (use_pmix_) {
    JoinWithPmix();
  } else {
    JoinWithoutPmix();
  }
  if (story_.joinable()) story_.join();
  SetUpInPlace();
  SetUpFaultTolerance();
  Journal(env_, event_kind::kRendezvous, -1,
          {{"duration_s", FormatFixed(SecondsSince(launch_start_), 3)},
           {"ranks", std::to_string(info_.size)}});
  ChooseBinding();
  step_world_ = info_.size;
  child_env_ = ProgramEnv();
  SayPlacement();
  forward_from_parent_ =
      !env_.count("SLURM_JOB_ID") ||
      ForwardSignalFromSlurm(ProctrackTypeFromSlurmConf(
          ReadSmallFile(Get(env_, "SLURM_CONF", "/etc/slurm/slurm.conf"))));
  NcclPreflight();

  program_start_ = std::chrono::steady_clock::now();
  restart_base_ = std::atoll(Get(env_, "SLURM_RESTART_COUNT", "0").c_str());
  env_active_ = active_;
  env_mem_ = max_mem_gib_;
  LaunchState state = FirstLaunchState(in_place_ && !ActiveNode(step_.node_rank));
  while (state != LaunchState::kEnd) {
    auto next = NextLaunchState(state, Act(state));
    if (!next) Fail(next.message(), 1);
    state = *next;
  }
  return Finish();
}

// --- the generations -----------------------------------------------------------------------------

LaunchEvent Launcher::Act(LaunchState state) {
  switch (state) {
    case LaunchState::kReserve: return WaitInReserve();
    case LaunchState::kPrepare: return PrepareGeneration();
    case LaunchState::kRun: return RunProgram();
    case LaunchState::kReplace: return ReplaceInGroup();
    case LaunchState::kReport: return ReportFailure();
    case LaunchState::kAgree: return AgreeOnVerdict();
    case LaunchState::kEnd: break;
  }
  Fail(std::string("launcher state: nothing to do in ") + LaunchStateName(state), 1);
}

LaunchEvent Launcher::WaitInReserve() {
  // Held in reserve (--spare-nodes, or left out) until a verdict puts this node in use.
  if (generation_ == 0) Say("node held in reserve (--spare-nodes=" + std::to_string(spares_) + ")");
  if (!Standby(timeout_s_, &code_)) {
    decided_ = true;
    return LaunchEvent::kEnded;
  }
  Say("taking the place of a lost node (program ranks from " +
      std::to_string(ProgramRank(step_, peers_.tasks_per_node(), active_)->rank) + ", interpreter " +
      (!warm_.started() ? "cold" : warm_.Ready() ? "warm" : "warming") + ")");
  return LaunchEvent::kInUse;
}

LaunchEvent Launcher::PrepareGeneration() {
  if (in_place_ && (active_ != env_active_ || max_mem_gib_ != env_mem_)) {
    // The nodes in use changed (a spare took a lost node's place, or the run shrank): this
    // launcher's ranks may too. Or the program ran out of memory: a plan within less.
    info_ = *ProgramRank(step_, peers_.tasks_per_node(), active_);
    child_env_ = ProgramEnv();
    env_active_ = active_;
    env_mem_ = max_mem_gib_;
  }
  errors_.Prepare(&child_env_);
  const bool takeover = PrepareInGroup();
  if (in_place_) {
    resume_round_ = 0;
    child_env_["AUTOPAR_RESTART_GENERATION"] = std::to_string(generation_);
    child_env_["TORCHELASTIC_RESTART_COUNT"] = std::to_string(restart_base_ + generation_);
    child_env_["MASTER_PORT"] = std::to_string(master_.port);
    child_env_["MASTER_ADDR"] = master_.addr;
  }
  if (!takeover) Resume(&child_env_, use_pmix_, timeout_s_);
  if (int sig = PendingTerminationSignal(); sig != 0) {
    // A preemption while the run restores its checkpoint: autopard must hear of it as of a
    // program that ended at the notice, or the batch script ends the job instead.
    TellTerminated(128 + sig);
    Fail("terminated before the program started", 128 + sig);
  }
  return LaunchEvent::kReady;
}

LaunchEvent Launcher::RunProgram() {
  if (!in_place_) {
    code_ = RunChild(opts_.program, child_env_, decisions_.cpus, forward_from_parent_, &terminated_);
    if (!terminated_ && code_ == 128 + SIGTERM) {
      // Slurm's SIGTERM reached the program first (below: the same in place).
      usleep(100 * 1000);
      terminated_ = PendingTerminationSignal() != 0;
    }
    return LaunchEvent::kFinished;
  }
  failure_.reset();
  told_ = false;
  gone_.clear();
  ChildOutcome out = RunGeneration(opts_.program, child_env_, decisions_.cpus,
                                   forward_from_parent_, &failure_, &told_);
  code_ = ExitCodeFromWaitStatus(out.wait_status);
  terminated_ = out.termination_signal != 0;
  if (failure_ && code_ == 128 + SIGTERM && !out.hung && !out.bad_loss) {
    // Slurm ends a step with SIGTERM to every process of it (SIGKILL only KillWait later, when
    // this launcher has its SIGTERM already): the program may end before this launcher reads
    // its own. A moment tells that apart from a real failure.
    usleep(100 * 1000);
    if (int sig = PendingTerminationSignal(); sig != 0) {
      terminated_ = true;
      failure_.reset();
    }
  }
  if (failure_ && CanReplaceInGroup()) return LaunchEvent::kLostAlone;  // the others go on meanwhile
  if (failure_) return LaunchEvent::kFailed;
  return told_ ? LaunchEvent::kTold : LaunchEvent::kFinished;  // finished, or ended by Slurm
}

LaunchEvent Launcher::ReportFailure() {
  (void)ReportRankExit(Lookup(child_env_), info_.rank, host_,
                       RankExit{failure_->exit_status, failure_->run_s, generation_, failure_->error});
  gone_ = peers_.NotifyStop(*failure_);
  if (gone_.empty()) return LaunchEvent::kReported;
  Say("the launchers of ranks " + FormatIntList(gone_) + " cannot be reached");
  const bool coordinator_gone = Contains(gone_, 0);
  if ((spares_ > 0 || min_nodes_ > 0) && !coordinator_gone) {
    return LaunchEvent::kReported;  // rank 0 decides about the lost ones
  }
  // No restart without every rank (or without rank 0's launcher, which decides): this node's
  // autopard takes the requeue path (with the failure's class: a hang stays a hang), and the step
  // is ended by Finish.
  RecoverDetail detail = RecoverDetailOf(*failure_);
  detail.unreachable = FormatIntList(gone_);
  auto reply = AskRecovery(Lookup(child_env_), info_.rank, detail, kRecoverTimeoutMs);
  Say(reply ? reply->reason : reply.message());
  reported_ = reply.ok();
  code_ = failure_->exit_status;
  terminated_ = false;
  return LaunchEvent::kUnreachable;
}

LaunchEvent Launcher::AgreeOnVerdict() {
  RestartVerdict verdict = AgreeOnRestart(child_env_, failure_, gone_, timeout_s_);
  if (!verdict.restart) {
    code_ = verdict.exit_code;
    decided_ = true;
    return LaunchEvent::kEnded;
  }
  ++generation_;
  return ActiveNode(step_.node_rank) ? LaunchEvent::kRestart : LaunchEvent::kSetAside;
}

int Launcher::Finish() {
  warm_.Discard();  // no next generation
  port_.Release();
  // The group's leader when rank 0's node may be gone (fault tolerance goes on without it).
  const bool decides = ft_ ? ft_->leads() : step_.rank == 0;
  if (in_place_ && decides && code_ == 0 && !decided_ && spares_ > 0) {
    // The program is done: the launchers of the nodes still in reserve end too.
    std::vector<int> reserve;
    for (int n = 0; n < static_cast<int>(peers_.tasks_per_node().size()); ++n) {
      if (!ActiveNode(n)) reserve.push_back(n);
    }
    (void)peers_.SendTo(peers_.RanksOnNodes(reserve),
                        VerdictMessage(RestartVerdict{false, 0, {}, -1, {}}, generation_));
  }
  const double run_s = SecondsSince(program_start_);
  if (code_ == 0 && decides) {
    // Rank 0's launcher's, or the group's leader's when rank 0's node may be gone.
    TellEvent(env_, info_.rank, host_, LaunchMessagePrefix(rank_, host_), verbose_, event_kind::kFinished, -1,
              {{"exit", "0"}, {"run_s", FormatFixed(run_s, 1)}});
  }
  if (terminated_ && code_ != 0 && !decided_) TellTerminated(code_);
  if (decided_) {
    // autopard has requeued or stopped the job (or it has no failure handling): every launcher
    // ends with the failure's status, and the step with them.
    (void)pmix_.Finalize();
    return code_;
  }
  if (code_ != 0 && !terminated_ && !reported_) {
    // A crashed rank: tell the node's autopard first (launch_events.h), so that it decides
    // on a requeue while the step is being ended.
    Status st = ReportRankExit(Lookup(child_env_), info_.rank, host_,
                               RankExit{code_, run_s, -1, in_place_ ? "" : errors_.OutOfMemory(code_)});
    if (!st) Say(st.message());
  }
  const bool many = use_pmix_ && info_.size > 1;
  if (code_ == 128 + SIGKILL && !terminated_ && many) {
    // Slurm ends a step by SIGKILLing every process of it; when the program was killed first,
    // this launcher is next. Give that a moment, so that only real failures (the OOM killer, a
    // kill -9 by hand) end the step from here and teardown does not print a line per rank.
    usleep(500 * 1000);
  }
  if (code_ != 0 && !terminated_ && many) {
    std::string msg = "program exited with code " + std::to_string(code_) + "; ending the step";
    Say(msg);
    std::fflush(stderr);
    (void)pmix_.Abort(code_, LaunchMessagePrefix(rank_, host_) + msg);
  }
  if (Status st = pmix_.Finalize(); !st && code_ == 0) {
    Say(st.message());
    return 1;
  }
  return code_;
}

}  // namespace autopar
