// The Launcher before its program: who this task is, the rendezvous (PMIx), the in-place
// set-up, the binding and the program's environment, the NCCL preflight (launcher.h).
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "binding.h"
#include "core/text.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"

namespace autopar {
using launcher_detail::kStopGraceMs;
using launcher_detail::kNoticeTimeoutMs;
using launcher_detail::Get;
using launcher_detail::Lookup;
using launcher_detail::TellEvent;
namespace {

constexpr char kChannelKey[] = "autopar.ctl";
constexpr char kTokenKey[] = "autopar.token";
constexpr char kMasterKey[] = "autopar.master";  // rank 0's RendezvousValue

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

}  // namespace

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
                         TellTerminated(128 + sig);
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
  // With nodes held in reserve, the program's ranks number the nodes in use only (ProgramRank);
  // a spare's are its step's. Without, they are Slurm's, in the distribution the user asked
  // for (srun -m cyclic, arbitrary with SLURM_HOSTFILE).
  if (static_cast<int>(active_.size()) != info_.num_nodes) {
    if (auto program = ProgramRank(step_, peers_.tasks_per_node(), active_)) info_ = *program;
  }
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
  AddGroupEnv(&out);
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

}  // namespace autopar
