#include "launcher/launcher.h"

#include <limits.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "binding.h"
#include "core/failure/recovery_policy.h"
#include "core/text.h"

extern char** environ;

namespace autopar {
namespace {

// Rendezvous must not hang forever when another rank never arrives (e.g. it died before
// PMIx_Init); AUTOPAR_LAUNCH_TIMEOUT overrides.
constexpr int kDefaultRendezvousTimeoutS = 300;
// In place: how long a told program may take to end after SIGTERM before SIGKILL, how long a
// stop notice may take to reach every launcher, and how long rank 0 waits for autopard's verdict.
constexpr int kStopGraceMs = 3000;
constexpr int kNoticeTimeoutMs = 2000;
constexpr int kRecoverTimeoutMs = 60000;
constexpr char kChannelKey[] = "autopar.ctl";
constexpr char kTokenKey[] = "autopar.token";
constexpr char kMasterKey[] = "autopar.master";  // rank 0's RendezvousValue

double EpochNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

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

std::string Get(const EnvMap& env, const std::string& key, const std::string& dflt = "") {
  auto it = env.find(key);
  return it == env.end() ? dflt : it->second;
}

// getenv over an EnvMap (the map must outlive the returned function).
GetEnv Lookup(const EnvMap& env) {
  return [&env](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

#ifdef AUTOPAR_HAVE_NCCL
// The directory of this executable, where the NCCL preflight helper lives in a build tree.
std::string SelfDir() {
  char buf[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}
#endif

// One event of `rank` for the job's timeline (launch_events.h). Without autopard there is nobody
// to tell, and a journal that cannot be reached never stops the training: a warning only with
// --verbose (`prefix`: LaunchMessagePrefix). Safe from any thread (reads only its arguments).
void TellEvent(const EnvMap& env, int rank, const std::string& host, const std::string& prefix,
               bool verbose, const char* kind, int64_t step, const EventFields& fields) {
  const GetEnv get = Lookup(env);
  Status st = SendJobEvent(get, JobEventRequest(get, kind, rank, step, host, fields), 1000);
  if (!st && verbose) std::fprintf(stderr, "%swarning: %s\n", prefix.c_str(), st.message().c_str());
}

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

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
  std::exit(code);
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

// --- before the program --------------------------------------------------------------------------

void Launcher::StartStory() {
  if (rank_ != 0 || !env_.count("AUTOPAR_SOCKET") || !env_.count("SLURM_JOB_ID")) return;
  // Told in the background, so that the rendezvous never waits for autopard (autopard asks
  // Slurm for the submit time); joined once the rendezvous is done.
  story_ = std::thread([env = env_, host = host_, verbose = verbose_,
                        prefix = LaunchMessagePrefix(rank_, host_)] {
    const GetEnv get = Lookup(env);
    if (FirstStepOfJob(get)) {
      TellEvent(env, 0, host, prefix, verbose, event_kind::kSubmitted, -1, SubmittedFields(get));
    }
    TellEvent(env, 0, host, prefix, verbose, event_kind::kStepStarted, -1, StepStartedFields(get));
  });
}

void Launcher::JoinWithPmix() {
  // The launcher's own PMIx client reads the job data through the "hash" store rather than
  // attaching the server's shared-memory store (ds21): measured on the local cluster with 32
  // tasks on 4 nodes, PMIx_Init's mean wall time drops from ~0.68 s to ~0.30 s (the client
  // CPU is the same, ~17 ms; the time is spent waiting on the step's PMIx server). Only this
  // process: the program's environment was read at start (env_). A user's PMIX_MCA_gds wins.
  setenv("PMIX_MCA_gds", "hash", /*overwrite=*/0);
  if (Status st = pmix_.Init(); !st) Fail(st.message(), 1);
  rank_ = pmix_.rank();
  auto info = pmix_.QueryRankInfo();
  if (info) {
    info_ = *info;
  } else {
    // Slurm 22.05's PMIx server sometimes answers a process-level key (pmix.lrank) with
    // NOT-FOUND right after PMIx_Init (seen on the local cluster, rarely, with a plain PMIx
    // client under srun); Slurm's own per-task variables carry the same facts, so use them
    // when they agree on the rank.
    auto slurm = RankInfoFromSlurmEnv(env_, host_);
    if (!env_.count("SLURM_PROCID") || !slurm || slurm->rank != pmix_.rank()) {
      Fail(info.message(), 1);
    }
    info_ = *slurm;
  }
  if (info_.host.empty()) info_.host = host_;
  host_ = info_.host;
  if (Status st = Rendezvous(timeout_s_); !st) Fail(st.message(), 1);
}

void Launcher::JoinWithoutPmix() {
  auto info = RankInfoFromSlurmEnv(env_, host_);
  if (!info) Fail(info.message(), 1);
  info_ = *info;
  rank_ = info_.rank;
  if (!env_.count("SLURM_PROCID") && !env_.count("MASTER_ADDR")) {
    // Outside Slurm: a single rank on this host, whose port can be reserved like under PMIx.
    auto reserved = PortReservation::Reserve();
    if (!reserved) Fail(reserved.message(), 1);
    port_ = std::move(*reserved);
    master_ = {"127.0.0.1", port_.port()};
  } else {
    auto ep = FallbackMasterEndpoint(env_);
    if (!ep) Fail(ep.message(), 1);
    master_ = *ep;
  }
  if (!env_.count("SLURM_PROCID")) {
    Say("warning: not under Slurm or PMIx: running the program as a single rank");
  } else if (info_.rank == 0) {
    Say("warning: no PMIx server (srun --mpi=none?): using Slurm's variables; MASTER_PORT " +
        std::to_string(master_.port) + " is not reserved and a failing rank does not end the "
        "step (use srun --mpi=pmix)");
  }
}

Status Launcher::Rendezvous(int timeout_s) {
  if (info_.rank == 0) {
    auto addr = ReachableAddress(info_.host, Get(env_, "AUTOPAR_MASTER_IFNAME"));
    if (!addr) return addr.status();
    auto reserved = PortReservation::Reserve();
    if (!reserved) return reserved.status();
    port_ = std::move(*reserved);
    RendezvousValue v{{*addr, port_.port()}, -1};
    if (checkpoints_) {
      // Rank 0 decides the job's resume step (a probe: nothing fetched yet) and publishes it
      // with the port: every rank, rank 0 included, then restores that step in parallel.
      EnvMap ckpt_env = CkptEnv(env_);
      own_resume_ = DecideResume(ProbeForRank(Lookup(ckpt_env)));
      v.resume_step = own_resume_->step;
    }
    Status st = pmix_.PutString(kMasterKey, EncodeRendezvous(v));
    if (!st) return st;
  }
  RestartChannel channel;
  if (in_place_) {
    // Every launcher's restart channel, and rank 0's token for the step's stop notices.
    auto addr = ReachableAddress(info_.host, Get(env_, "AUTOPAR_MASTER_IFNAME"));
    auto ch = addr ? RestartChannel::Listen(*addr) : Result<RestartChannel>(addr.status());
    auto token = info_.rank == 0 ? RandomToken() : Result<std::string>(std::string());
    if (!ch || !token) return Status::Error("in-place restarts: " + (ch ? token.message() : ch.message()));
    channel = std::move(*ch);
    const std::string me = PeerGroup::FormatPeer({channel.endpoint(), info_.node_rank, info_.host});
    if (Status st = pmix_.PutString(kChannelKey, me); !st) return st;
    if (info_.rank == 0) {
      if (Status st = pmix_.PutString(kTokenKey, *token); !st) return st;
    }
  }
  if (Status st = pmix_.Commit(); !st) return st;
  if (Status st = pmix_.Fence(/*collect=*/true, timeout_s); !st) return st;
  auto value = pmix_.GetString(0, kMasterKey, timeout_s);
  if (!value) return value.status();
  auto v = DecodeRendezvous(*value);
  if (!v) return v.status();
  master_ = v->master;
  resume_step_ = v->resume_step;
  return in_place_ ? JoinPeerGroup(std::move(channel), timeout_s) : Status::Ok();
}

Status Launcher::JoinPeerGroup(RestartChannel channel, int timeout_s) {
  auto token = pmix_.GetString(0, kTokenKey, timeout_s);
  if (!token) return token.status();
  std::vector<PeerGroup::Peer> peers;
  for (int r = 0; r < info_.size; ++r) {
    auto text = pmix_.GetString(r, kChannelKey, timeout_s);
    if (!text) return text.status();
    auto peer = PeerGroup::ParsePeer(*text, info_.num_nodes);
    if (!peer) return Status::Error("rank " + std::to_string(r) + ": " + peer.message());
    peers.push_back(*peer);
  }
  peers_ = PeerGroup(std::move(channel), *token, std::move(peers), info_.rank,
                     PeerGroup::Timing{kStopGraceMs, kNoticeTimeoutMs}, [this] {
                       if (int sig = PendingTerminationSignal(); sig != 0) {
                         Fail("terminated during an in-place restart", 128 + sig);
                       }
                     });
  return Status::Ok();
}

void Launcher::SetUpInPlace() {
  step_ = info_;
  active_ = InitialActiveNodes(info_.num_nodes, 0);
  if (!in_place_) return;
  spares_ = std::atoi(Get(env_, "AUTOPAR_SPARE_NODES", "0").c_str());
  min_nodes_ = std::atoi(Get(env_, "AUTOPAR_MIN_NODES", "0").c_str());
  if (spares_ > 0) {
    const std::vector<int>& tasks = peers_.tasks_per_node();
    if (std::count(tasks.begin(), tasks.end(), tasks.front()) != static_cast<long>(tasks.size())) {
      Fail("--spare-nodes: needs the same number of tasks on every node", 1);
    }
    if (spares_ >= info_.num_nodes) {
      Fail("--spare-nodes=" + std::to_string(spares_) + ": the step has " +
           std::to_string(info_.num_nodes) + " node(s); it needs at least " +
           std::to_string(spares_ + 1), 2);
    }
    active_ = InitialActiveNodes(info_.num_nodes, spares_);
  }
  if (opts_.prewarm) python_ = ParsePythonCommand(opts_.program);
  // The program's ranks number the nodes in use only (ProgramRank); a spare's are its step's.
  if (auto program = ProgramRank(step_, peers_.tasks_per_node(), active_)) info_ = *program;
}

void Launcher::ChooseBinding() {
  step_gpus_ = SplitDeviceList(Get(env_, "CUDA_VISIBLE_DEVICES"));
  if (!opts_.bind) return;
  decisions_.gpu = SelectGpu(step_gpus_, info_.local_rank, info_.local_size);
  if (decisions_.gpu) gpu_device_ = decisions_.gpu->device;
  // Slurm's real GPU ids when it renumbered CUDA_VISIBLE_DEVICES (ConstrainDevices).
  std::vector<std::string> driver_ids =
      SplitDeviceList(Get(env_, "SLURM_STEP_GPUS", Get(env_, "SLURM_JOB_GPUS")));
  CpuBinding cpus =
      ChooseCpuBinding(info_, driver_ids.size() == step_gpus_.size() ? driver_ids : step_gpus_);
  decisions_.cpus = cpus.cpus;
  cpus_note_ = cpus.note;
}

EnvMap Launcher::ProgramEnv() {
  decisions_.rank = info_;
  decisions_.master = master_;
  auto changes = BuildLaunchEnv(decisions_, env_);
  if (!changes) Fail(changes.message(), 1);
  EnvMap out = ApplyEnvChanges(env_, *changes);
  EnvMap plan_source = env_;
  const bool shrunk = min_nodes_ > 0 && info_.size != step_world_;
  if ((shrunk || max_mem_gib_ > 0) && !Get(env_, "AUTOPAR_PLAN_JSON").empty()) {
    // The run shrank (--min-nodes), or ran out of memory: the plan of the nodes left, within
    // the memory allowed, the same on every launcher.
    const auto& json = Replan(env_, info_.size, info_.local_size);
    if (!json) {
      Fail(std::string(shrunk ? "--min-nodes" : "out of memory") + ": no plan for " +
               std::to_string(info_.size) + " ranks: " + json.message(), 1);
    }
    plan_source["AUTOPAR_PLAN_JSON"] = *json;
    out["AUTOPAR_PLAN_JSON"] = *json;
    if (info_.rank == 0) {
      Say("re-planned for " + std::to_string(info_.size) + " ranks on " +
          std::to_string(info_.num_nodes) + " nodes: " + PlanSummary(*json) + " (global batch " +
          Get(env_, "AUTOPAR_GLOBAL_BATCH") + " kept; was " +
          PlanSummary(Get(env_, "AUTOPAR_PLAN_JSON")) + ")");
    }
  }
  auto plan_env = PlanEnvForRank(plan_source, info_.rank, info_.size);
  if (!plan_env) Fail(plan_env.message(), 1);
  for (const auto& [k, v] : plan_env->vars) out[k] = v;
  if (!plan_env->warning.empty() && info_.rank == 0) Say("warning: " + plan_env->warning);
  return out;
}

void Launcher::SayPlacement() const {
  const auto& d = decisions_;
  if (verbose_) {
    Say("local rank " + std::to_string(info_.local_rank) + "/" + std::to_string(info_.local_size) +
        ", node " + std::to_string(info_.node_rank) + "/" + std::to_string(info_.num_nodes) +
        ", world " + std::to_string(info_.size) + ", master " + master_.addr + ":" +
        std::to_string(master_.port) + (use_pmix_ ? " (PMIx)" : " (Slurm variables)") + ", gpu " +
        (d.gpu ? d.gpu->device : std::string("none")) + ", cpus " +
        (d.cpus.empty() ? std::string("unbound") : FormatCpuList(d.cpus)) +
        (cpus_note_.empty() ? "" : " (" + cpus_note_ + ")"));
  }
  if (d.gpu && d.gpu->shared && info_.local_rank == 0) {
    Say("warning: " + std::to_string(info_.local_size) + " local ranks share " +
        std::to_string(step_gpus_.size()) + " GPU(s)");
  }
}

void Launcher::NcclPreflight() {
  if (!opts_.nccl_check) return;
#ifdef AUTOPAR_HAVE_NCCL
  EnvMap check_env = child_env_;
  char ratio[32];
  std::snprintf(ratio, sizeof(ratio), "%g", opts_.nccl_min_ratio);
  check_env["AUTOPAR_NCCL_MIN_RATIO"] = ratio;
  std::string helper = Get(env_, "AUTOPAR_NCCL_CHECK", SelfDir() + "/autopar-nccl-check");
  if (access(helper.c_str(), X_OK) != 0) helper = AUTOPAR_NCCL_CHECK_INSTALLED;
  bool terminated = false;
  int rc = RunChild({helper}, check_env, decisions_.cpus, forward_from_parent_, &terminated);
  if (rc != 0) Fail("NCCL preflight failed (exit code " + std::to_string(rc) + ")", rc);
#else
  Fail("--nccl-check: this autopar-launch was built without NCCL", 2);
#endif
}

// --- the generations -----------------------------------------------------------------------------

LaunchEvent Launcher::Act(LaunchState state) {
  switch (state) {
    case LaunchState::kReserve: return WaitInReserve();
    case LaunchState::kPrepare: return PrepareGeneration();
    case LaunchState::kRun: return RunProgram();
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
      std::to_string(ProgramRank(step_, peers_.tasks_per_node(), active_)->rank) + ")");
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
  if (in_place_) {
    resume_round_ = 0;
    child_env_["AUTOPAR_RESTART_GENERATION"] = std::to_string(generation_);
    child_env_["TORCHELASTIC_RESTART_COUNT"] = std::to_string(restart_base_ + generation_);
    child_env_["MASTER_PORT"] = std::to_string(master_.port);
    child_env_["MASTER_ADDR"] = master_.addr;
  }
  Resume(&child_env_, use_pmix_, timeout_s_);
  if (int sig = PendingTerminationSignal(); sig != 0) {
    Fail("terminated before the program started", 128 + sig);
  }
  return LaunchEvent::kReady;
}

LaunchEvent Launcher::RunProgram() {
  if (!in_place_) {
    code_ = RunChild(opts_.program, child_env_, decisions_.cpus, forward_from_parent_, &terminated_);
    return LaunchEvent::kFinished;
  }
  failure_.reset();
  told_ = false;
  gone_.clear();
  ChildOutcome out = RunGeneration(opts_.program, child_env_, decisions_.cpus, forward_from_parent_,
                                   &failure_, &told_);
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
  if (in_place_ && step_.rank == 0 && code_ == 0 && !decided_ && spares_ > 0) {
    // The program is done: the launchers of the nodes still in reserve end too.
    std::vector<int> reserve;
    for (int n = 0; n < static_cast<int>(peers_.tasks_per_node().size()); ++n) {
      if (!ActiveNode(n)) reserve.push_back(n);
    }
    (void)peers_.SendTo(peers_.RanksOnNodes(reserve),
                        VerdictMessage(RestartVerdict{false, 0, {}, -1, {}}, generation_));
  }
  const double run_s = SecondsSince(program_start_);
  if (code_ == 0) Journal(env_, event_kind::kFinished, -1, {{"exit", "0"}, {"run_s", FormatFixed(run_s, 1)}});
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

// --- the program ---------------------------------------------------------------------------------

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
  // The next generation's interpreter, prepared once this program is past its own start-up.
  if (!python_ || opts_.prewarm_after_s < 0 || warm_.started()) return -1;
  const int timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  if (timer < 0) return -1;
  itimerspec when{};
  when.it_value.tv_sec = opts_.prewarm_after_s;
  when.it_value.tv_nsec = opts_.prewarm_after_s == 0 ? 1 : 0;  // 0 would disarm it
  if (timerfd_settime(timer, 0, &when, nullptr) == 0) return timer;
  close(timer);
  return -1;
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
  ChildOutcome out;
  *told = false;
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
    out = SuperviseChild(pid, options);
    if (out.timer) {
      close(options.timer_fd);
      options.timer_fd = -1;
      if (Status st = warm_.Start(*python_, NextGenerationEnv(env), cpus, program_mask_); !st) {
        Say(st.message());
      }
      continue;
    }
    if (out.exited || out.hung || out.bad_loss) break;
  }
  if (options.timer_fd >= 0) close(options.timer_fd);
  usage_.Stop();
  FailureReport report = EndGeneration(pid, *told, start, &out);
  if (out.hung || out.bad_loss ||
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
  if (out->hung) {
    // autopard captured its stacks already; nothing to wait for.
    out->wait_status = StopChild(pid, 0);
    report.kind = "hang";
  } else if (out->bad_loss) {
    // Its loss went bad (autopard, --on-bad-loss=rollback): nothing it could still save is wanted.
    out->wait_status = StopChild(pid, 0);
    report.kind = FailureClassName(FailureClass::kBadLoss);
  } else if (told) {
    int status = 0;
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

// --- agreeing on a restart -----------------------------------------------------------------------

RestartVerdict Launcher::AgreeOnRestart(const EnvMap& child_env,
                                        const std::optional<FailureReport>& mine,
                                        const std::vector<int>& gone, int timeout_s) {
  RestartVerdict verdict;
  verdict.exit_code = mine ? mine->exit_status : 1;
  if (step_.rank == 0) {
    verdict = Coordinate(child_env, mine, gone, timeout_s);
  } else {
    auto followed = peers_.ReportAndAwaitVerdict(generation_, mine, gone, timeout_s);
    if (!followed) Fail("in-place restart: " + followed.message(), verdict.exit_code);
    if (*followed) {
      verdict = **followed;
    } else if (mine) {
      // Rank 0's launcher is gone with its node (the batch host): nobody can restart the
      // program. This node's autopard takes the requeue path for this launcher's failure.
      Say("in-place restart impossible: rank 0's launcher cannot be reached");
      RecoverDetail detail = RecoverDetailOf(*mine);
      detail.unreachable = "0";
      auto reply = AskRecovery(Lookup(child_env), info_.rank, detail, kRecoverTimeoutMs);
      Say(reply ? reply->reason : reply.message());
    }
  }
  if (verdict.restart) FollowVerdict(verdict);
  return verdict;
}

void Launcher::FollowVerdict(const RestartVerdict& verdict) {
  master_ = verdict.master;
  resume_step_ = verdict.resume_step;
  active_ = verdict.active;
  if (verdict.max_mem_gib > 0) max_mem_gib_ = verdict.max_mem_gib;
}

RestartVerdict Launcher::Coordinate(const EnvMap& child_env, const std::optional<FailureReport>& mine,
                                    const std::vector<int>& gone, int timeout_s) {
  const auto stop_start = std::chrono::steady_clock::now();
  auto reports = peers_.CollectReports(generation_, mine, gone, timeout_s);
  if (!reports) Fail("in-place restart: " + reports.message(), mine ? mine->exit_status : 1);
  const double stop_s = SecondsSince(stop_start);
  const auto decide_start = std::chrono::steady_clock::now();
  RestartVerdict verdict = Decide(child_env, *reports);
  const double decide_s = SecondsSince(decide_start);
  const auto rendezvous_start = std::chrono::steady_clock::now();
  if (verdict.restart) PrepareRestart(child_env, &verdict);
  (void)peers_.SendTo(reports->live, VerdictMessage(verdict, generation_));
  if (verdict.restart) {
    JournalRestart(child_env, verdict, FirstFailure(reports->failures),
                   {stop_s, decide_s, SecondsSince(rendezvous_start)});
    if (verdict.active.size() != active_.size()) JournalResize(child_env, verdict);
  }
  return verdict;
}

void Launcher::JournalRestart(const EnvMap& child_env, const RestartVerdict& verdict,
                              const std::optional<FailureReport>& first,
                              const std::vector<double>& phases_s) {
  const bool replaced = verdict.active != active_;
  EventFields fields = {
      {"generation", std::to_string(generation_ + 1)},
      {"culprit_rank", std::to_string(first && !replaced ? first->rank : -1)},
      {"since_failure_s", FormatFixed(first ? EpochNow() - first->detected : -1, 3)},
      {"stop_s", FormatFixed(phases_s[0], 3)},
      {"decide_s", FormatFixed(phases_s[1], 3)},
      {"rendezvous_s", FormatFixed(phases_s[2], 3)},
      {"port", std::to_string(verdict.master.port)}};
  if (replaced) fields.emplace_back("nodes", Join(HostsOf(verdict.active), ","));
  Journal(child_env, event_kind::kRestarted, -1, fields);
  if (verdict.max_mem_gib <= 0) return;
  // Out of memory (docs/health.md): the plan the next generation runs with.
  const int per_node = peers_.tasks_per_node()[verdict.active.front()];
  const int world = static_cast<int>(verdict.active.size()) * per_node;
  const std::string before = Get(child_env, "AUTOPAR_PLAN_JSON");
  const auto& after = Replan(child_env, world, per_node, verdict.max_mem_gib);
  Journal(child_env, event_kind::kReplanned, -1,
          {{"generation", std::to_string(generation_ + 1)},
           {"max_mem_gib", FormatFixed(verdict.max_mem_gib, 2)},
           {"plan_before", PlanSummary(before)},
           {"mem_before_gib", FormatFixed(PlanMemGib(before), 2)},
           {"plan_after", after ? PlanSummary(*after) : "refused: " + after.message()},
           {"mem_after_gib", FormatFixed(after ? PlanMemGib(*after) : 0, 2)},
           {"reason", first ? first->kind + (first->error.empty() ? "" : ": " + first->error)
                            : std::string("oom")}});
}

void Launcher::JournalResize(const EnvMap& child_env, const RestartVerdict& verdict) {
  const int per_node = peers_.tasks_per_node()[verdict.active.front()];
  const int world = static_cast<int>(verdict.active.size()) * per_node;
  auto after = Get(child_env, "AUTOPAR_PLAN_JSON").empty() ? Result<std::string>(std::string())
                                                          : Replan(child_env, world, per_node);
  std::vector<int> dropped;
  for (int n : active_) {
    if (!Contains(verdict.active, n)) dropped.push_back(n);
  }
  Journal(child_env, event_kind::kResized, -1,
          {{"generation", std::to_string(generation_ + 1)},
           {"from_nodes", std::to_string(active_.size())},
           {"to_nodes", std::to_string(verdict.active.size())},
           {"from_ranks", std::to_string(info_.size)},
           {"to_ranks", std::to_string(world)},
           {"nodes", Join(HostsOf(verdict.active), ",")},
           {"plan_before", PlanSummary(Get(child_env, "AUTOPAR_PLAN_JSON"))},
           {"plan_after", after ? PlanSummary(*after) : "refused: " + after.message()},
           {"reason", Join(HostsOf(dropped), ",") + " lost and no spare to replace it: the run "
                      "goes on without it (--min-nodes=" + std::to_string(min_nodes_) + ")"}});
}

RestartVerdict Launcher::Decide(const EnvMap& child_env, const PeerGroup::Reports& reports) {
  std::optional<FailureReport> first = FirstFailure(reports.failures);
  RestartVerdict verdict;
  verdict.exit_code = first && first->exit_status != 0 ? first->exit_status : 1;
  std::vector<int> lost, standby;
  SortNodes(reports, &lost, &standby);
  if (!first && lost.empty()) {
    verdict.restart = true;  // told, but no rank says it failed (cannot happen): start again
    verdict.active = active_;
    return verdict;
  }
  FailureReport f = first ? *first : FailureReport{};
  f.generation = generation_;
  // Elastic runs go on without what no spare replaces; the others need a spare for each.
  const std::vector<int> left =
      min_nodes_ > 0 ? ReplaceOrDropLostNodes(active_, lost, standby, peers_.tasks_per_node())
                     : std::vector<int>{};
  const RecoverDetail detail = DetailOf(child_env, f, lost, standby, left);
  // The request names a rank (a node loss: this one's; autopard does not blame it).
  auto reply = AskRecovery(Lookup(child_env), lost.empty() ? f.rank : 0, detail, kRecoverTimeoutMs);
  if (!reply) {
    Say(reply.message());
    return verdict;
  }
  Say(reply->reason);
  history_ = reply->history;
  resume_max_step_ = reply->resume_max_step;
  const bool in_place = reply->action == RecoveryActionName(RecoveryAction::kRestartInPlace);
  if (reply->max_mem_gib > 0 && in_place && !Get(child_env, "AUTOPAR_PLAN_JSON").empty()) {
    // Out of memory: checked here, before anyone restarts, so that a plan that cannot be made
    // ends the job with that reason instead.
    if (!FitsInMemory(child_env, f, lost.empty() ? active_ : left, reply->max_mem_gib)) return verdict;
    verdict.max_mem_gib = reply->max_mem_gib;
  }
  if (!in_place) return verdict;
  auto next = min_nodes_ > 0 ? Result<std::vector<int>>(left)
                             : ReplaceLostNodes(active_, lost, standby, peers_.tasks_per_node());
  if (!next) {
    Say("in-place restart impossible: " + next.message());
    return verdict;
  }
  verdict.restart = true;
  verdict.active = *next;
  LeaveStragglersOut(reply->exclude_nodes, standby, &verdict);
  return verdict;
}

void Launcher::SortNodes(const PeerGroup::Reports& reports, std::vector<int>* lost,
                         std::vector<int>* standby) const {
  // Nodes in use whose launchers are gone: a node loss, which the spares alive may absorb.
  for (int n : reports.lost_nodes) {
    if (ActiveNode(n)) lost->push_back(n);
  }
  for (int n = 0; n < static_cast<int>(peers_.tasks_per_node().size()); ++n) {
    if (!ActiveNode(n) && !Contains(reports.lost_nodes, n) && !excluded_.count(n)) {
      standby->push_back(n);
    }
  }
}

RecoverDetail Launcher::DetailOf(const EnvMap& child_env, const FailureReport& f,
                                 const std::vector<int>& lost, const std::vector<int>& standby,
                                 const std::vector<int>& left) {
  RecoverDetail d = RecoverDetailOf(f);
  d.history = history_;
  if (lost.empty()) return d;
  d.kind = FailureClassName(FailureClass::kNodeLoss);
  d.lost = Join(HostsOf(lost), ",");
  d.spares = static_cast<int64_t>(standby.size());
  if (min_nodes_ == 0) return d;
  // Elastic: the nodes left (spares in lost nodes' places) and whether they have a plan.
  d.remaining = static_cast<int64_t>(left.size());
  d.min_nodes = min_nodes_;
  if (left.size() < active_.size() && !Get(child_env, "AUTOPAR_PLAN_JSON").empty() &&
      !left.empty()) {
    const int per_node = peers_.tasks_per_node()[left.front()];
    const auto& plan = Replan(child_env, static_cast<int>(left.size()) * per_node, per_node);
    if (!plan) d.plan_refusal = plan.message();
  }
  return d;
}

bool Launcher::FitsInMemory(const EnvMap& child_env, const FailureReport& f,
                            const std::vector<int>& nodes, double max_mem_gib) {
  const int per_node = peers_.tasks_per_node()[nodes.empty() ? 0 : nodes.front()];
  const int world = nodes.empty() ? info_.size : static_cast<int>(nodes.size()) * per_node;
  const auto& plan = Replan(child_env, world, per_node, max_mem_gib);
  if (plan) return true;
  Say("no in-place restart: no plan fits in " + FormatFixed(max_mem_gib, 1) +
      " GiB per GPU: " + plan.message());
  Journal(child_env, event_kind::kReplanned, -1,
          {{"generation", std::to_string(generation_ + 1)},
           {"max_mem_gib", FormatFixed(max_mem_gib, 2)},
           {"plan_before", PlanSummary(Get(child_env, "AUTOPAR_PLAN_JSON"))},
           {"plan_after", "refused: " + plan.message()},
           {"reason", f.kind}});
  return false;
}

void Launcher::LeaveStragglersOut(const std::vector<std::string>& hosts,
                                  const std::vector<int>& standby, RestartVerdict* verdict) {
  // Stragglers autopard names (--exclude-stragglers, docs/health.md) leave the nodes in use where
  // spares can take their places; they are never used as spares afterwards.
  std::vector<int> slow;
  for (const std::string& host : hosts) {
    for (int n : verdict->active) {
      if (peers_.host_of_node(n) == host) slow.push_back(n);
    }
  }
  if (slow.empty() || min_nodes_ != 0) return;
  std::vector<int> left_standby;
  for (int n : standby) {
    if (!Contains(verdict->active, n)) left_standby.push_back(n);
  }
  auto without = ReplaceLostNodes(verdict->active, slow, left_standby, peers_.tasks_per_node());
  if (!without) {
    Say("straggler node(s) kept: " + without.message());
    return;
  }
  verdict->active = *without;
  excluded_.insert(slow.begin(), slow.end());
}

void Launcher::PrepareRestart(const EnvMap& child_env, RestartVerdict* verdict) {
  auto check = [&](const Status& st) {
    if (!st) Fail("in-place restart: " + st.message(), verdict->exit_code);
  };
  auto addr = ReachableAddress(info_.host, Get(child_env, "AUTOPAR_MASTER_IFNAME"));
  check(addr.status());
  port_.Release();  // a fresh MASTER_PORT: the old one may still be in TIME_WAIT
  auto reserved = PortReservation::Reserve();
  check(reserved.status());
  port_ = std::move(*reserved);
  verdict->master = {*addr, port_.port()};
  if (checkpoints_) {
    EnvMap ckpt_env = CkptEnv(child_env);
    // A rollback (a bad loss) resumes no later than the step before the bad one.
    own_resume_ = DecideResume(ProbeForRank(Lookup(ckpt_env)), resume_max_step_);
    verdict->resume_step = own_resume_->step;
  }
}

bool Launcher::Standby(int timeout_s, int* code) {
  for (;;) {
    const int64_t g = generation_;
    peers_.Poll(g);
    auto m = peers_.Await([g](const PeerMessage& p) {
      return (p.kind == PeerKind::kStop || p.kind == PeerKind::kVerdict) && p.generation == g;
    }, 3600);
    if (!m) continue;
    Result<std::optional<RestartVerdict>> v = std::optional<RestartVerdict>();
    if (m->kind == PeerKind::kStop) {
      v = peers_.ReportAndAwaitVerdict(g, std::nullopt, {}, timeout_s);
    } else if (auto decoded = VerdictOf(*m)) {
      v = std::optional<RestartVerdict>(*decoded);  // unasked: the job ends (rank 0's program finished)
    }
    if (!v || !*v || !(*v)->restart) {
      *code = v && *v ? (*v)->exit_code : 1;
      return false;
    }
    FollowVerdict(**v);
    ++generation_;
    if (ActiveNode(step_.node_rank)) return true;
  }
}

EnvMap Launcher::NextGenerationEnv(EnvMap env) const {
  env["AUTOPAR_RESTART_GENERATION"] = std::to_string(generation_ + 1);
  env["TORCHELASTIC_RESTART_COUNT"] =
      std::to_string(std::atoll(Get(env, "TORCHELASTIC_RESTART_COUNT", "0").c_str()) + 1);
  return env;
}

bool Launcher::ActiveNode(int node) const { return Contains(active_, node); }

std::vector<std::string> Launcher::HostsOf(const std::vector<int>& nodes) const {
  std::vector<std::string> hosts;
  for (int n : nodes) hosts.push_back(peers_.host_of_node(n));
  return hosts;
}

const Result<std::string>& Launcher::Replan(const EnvMap& env, int world, int per_node,
                                            double max_mem_gib) {
  if (max_mem_gib < 0) max_mem_gib = max_mem_gib_;
  const auto key = std::make_pair(world, max_mem_gib);
  auto it = replans_.find(key);
  if (it == replans_.end()) {
    it = replans_.emplace(key, ReplanJson(env, world, per_node, max_mem_gib)).first;
  }
  return it->second;
}

// --- the checkpoint ------------------------------------------------------------------------------

void Launcher::Resume(EnvMap* child_env, bool use_pmix, int timeout_s) {
  const auto restore_start = std::chrono::steady_clock::now();
  for (const char* key : {"AUTOPAR_RESUME_STEP", "AUTOPAR_RESUME_DIR", "AUTOPAR_RESUME_STEP_DIR",
                          "AUTOPAR_RESUME_WORLD_SIZE"}) {
    child_env->erase(key);
  }
  if (!checkpoints_) return;
  EnvMap ckpt_env = CkptEnv(*child_env);
  RestoreFn restore = RestoreForRank(Lookup(ckpt_env));
  ResumeDecision resume;
  if (!use_pmix) {
    // No rendezvous to publish a decision through (--mpi=none): this rank decides for itself.
    resume = DecideResume(restore);
  } else {
    // One task: it decided in the rendezvous; a corrupt object moves it to an older step. More:
    // the minimum over all ranks (rounds only run when rank 0 decided to resume a step).
    auto agree = [&](int64_t mine) {
      return info_.size <= 1 ? mine : AgreeMinStep(mine, timeout_s);
    };
    auto r = RestoreDecided(resume_step_, own_resume_ ? &*own_resume_ : nullptr, restore, agree);
    if (!r) Fail(r.message(), 1);
    resume = *r;
  }
  for (const auto& note : resume.notes) Say(note);
  if (resume.step < 0) {
    if (info_.rank == 0) Say("no complete checkpoint to resume from: starting fresh");
    return;
  }
  (*child_env)["AUTOPAR_RESUME_STEP"] = std::to_string(resume.step);
  (*child_env)["AUTOPAR_RESUME_DIR"] = resume.dir;
  if (!resume.step_dir.empty()) (*child_env)["AUTOPAR_RESUME_STEP_DIR"] = resume.step_dir;
  if (resume.world_size > 0) {
    (*child_env)["AUTOPAR_RESUME_WORLD_SIZE"] = std::to_string(resume.world_size);
  }
  JournalResume(*child_env, resume, SecondsSince(restore_start));
}

int64_t Launcher::AgreeMinStep(int64_t mine, int timeout_s) {
  // In place through rank 0's launcher (a fence would wait for a lost node); else one PMIx fence.
  if (in_place_) {
    auto least = peers_.AgreeMin(generation_, "restore." + std::to_string(resume_round_++), mine,
                                 peers_.RanksOnNodes(active_), timeout_s);
    if (!least) Fail("checkpoint restore: " + least.message(), 1);
    return *least;
  }
  const std::string key = "autopar.resume." + std::to_string(resume_round_++);
  Status st = pmix_.PutString(key, std::to_string(mine));
  if (st) st = pmix_.Commit();
  // Collect: every rank reads every rank's value (direct modex Gets of a later round fail).
  if (st) st = pmix_.Fence(/*collect=*/true, timeout_s);
  if (!st) Fail("checkpoint restore: " + st.message(), 1);
  int64_t least = mine;
  for (int r = 0; r < info_.size; ++r) {
    auto v = pmix_.GetString(r, key, timeout_s);
    if (!v) Fail("checkpoint restore: " + v.message(), 1);
    least = std::min<int64_t>(least, std::strtoll(v->c_str(), nullptr, 10));
  }
  return least;
}

void Launcher::JournalResume(const EnvMap& child_env, const ResumeDecision& resume,
                             double restore_s) {
  if (generation_ > 0) {
    TellEvent(child_env, info_.rank, host_, LaunchMessagePrefix(rank_, host_), verbose_,
              event_kind::kRestored, resume.step,
              {{"generation", std::to_string(generation_)},
               {"bytes_local", std::to_string(resume.bytes_local)},
               {"bytes_fetched", std::to_string(resume.bytes_fetched)},
               {"restore_s", FormatFixed(restore_s, 3)},
               {"interpreter", !warm_.started() ? "cold" : warm_.Ready() ? "warm" : "warming"}});
  }
  if (info_.rank != 0) return;
  Say("resuming from checkpoint step " + std::to_string(resume.step) + " (job " +
      resume.source_job + ")");
  Journal(child_env, event_kind::kResumed, resume.step, {{"from_job", resume.source_job}});
  if (generation_ != 0 || resume.world_size <= 0 || resume.world_size == info_.size) return;
  // A new run of an elastic job on another size than the one that wrote the step (a requeue or
  // a resubmission that got more or fewer nodes): the size change of the run.
  const int per_node = std::max(1, info_.local_size);
  Journal(child_env, event_kind::kResized, resume.step,
          {{"generation", "0"},
           {"from_nodes", std::to_string((resume.world_size + per_node - 1) / per_node)},
           {"to_nodes", std::to_string(info_.num_nodes)},
           {"from_ranks", std::to_string(resume.world_size)},
           {"to_ranks", std::to_string(info_.size)},
           {"plan_after", PlanSummary(Get(child_env, "AUTOPAR_PLAN_JSON"))},
           {"reason", "step " + std::to_string(resume.step) + " was written by " +
                          std::to_string(resume.world_size) + " ranks; this run has " +
                          std::to_string(info_.size) + " (its allocation " +
                          (resume.world_size < info_.size ? "grew" : "shrank") + ")"}});
}

EnvMap Launcher::CkptEnv(const EnvMap& env) const {
  EnvMap out = env;
  out["RANK"] = std::to_string(info_.rank);
  out["WORLD_SIZE"] = std::to_string(info_.size);
  return out;
}

}  // namespace autopar
