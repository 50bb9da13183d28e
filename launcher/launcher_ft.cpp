// The Launcher's part in per-step fault tolerance (docs/ft.md; ft_group.h): the group set up
// beside the restart channels, its messages handled while the program runs, and a failed
// program replaced alone, with no stop notice to any other launcher.
#include <cstdlib>

#include "core/text.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"

namespace autopar {
using launcher_detail::Get;
using launcher_detail::Lookup;
using launcher_detail::TellEvent;

void Launcher::SetUpFaultTolerance() {
  if (Get(env_, "AUTOPAR_FAULT_TOLERANCE") != "step") return;
  if (!in_place_) {
    // The plugin refuses the option without in-place restarts; what is left is a launch without
    // PMIx or autopard, where nobody can agree on a group.
    Say("--fault-tolerance=step: needs srun --mpi=pmix and the node's autopard; a failure ends "
        "the step and goes to the requeue path");
    return;
  }
  auto addr = ReachableAddress(info_.host, Get(env_, "AUTOPAR_MASTER_IFNAME"));
  if (!addr) Fail("--fault-tolerance=step: " + addr.message(), 1);
  ft_addr_ = *addr;
  auto channel = FtProgramChannel::Open(Get(env_, "TMPDIR", "/tmp"));
  if (!channel) Fail("--fault-tolerance=step: " + channel.message(), 1);
  FtGroup::Config config;
  const bool in_use = ActiveNode(step_.node_rank);
  config.program_rank = in_use ? info_.rank : -1;
  config.rules.world = 0;
  for (int n : active_) config.rules.world += peers_.tasks_per_node()[static_cast<size_t>(n)];
  config.active = active_;
  config.ranks_in_node_order = static_cast<int>(active_.size()) != step_.num_nodes;
  const int per_node = config.rules.world / std::max(1, static_cast<int>(active_.size()));
  config.rules.min_world = min_nodes_ > 0 ? min_nodes_ * per_node : info_.size;
  config.join_timeout_s = timeout_s_;
  config.hang_timeout_s = std::atof(Get(env_, "AUTOPAR_HEARTBEAT_TIMEOUT", "0").c_str());
  config.rules.max_replacements = std::atoll(Get(env_, "AUTOPAR_RESTARTS_IN_PLACE", "0").c_str());
  ft_ = std::make_unique<FtGroup>(
      &peers_, std::move(*channel), config,
      [this](const char* kind, int64_t step, const EventFields& fields) {
        TellEvent(child_env_, info_.rank, host_, LaunchMessagePrefix(rank_, host_), verbose_, kind,
                  step, fields);
      },
      [this](const std::vector<int>& active) { active_ = active; });
}

void Launcher::AddGroupEnv(EnvMap* env) const {
  if (!ft_) return;
  (*env)["AUTOPAR_FT_SOCKET"] = ft_->socket_path();
  (*env)["AUTOPAR_FT_ADDR"] = ft_addr_;
  // The group's key: its store admits, and its heals are sealed for, the job's ranks only.
  (*env)["AUTOPAR_FT_KEY"] = peers_.DerivedKey("autopar-ft-group/v1");
}

bool Launcher::PrepareInGroup() {
  const bool takeover = std::exchange(ft_takeover_, false);
  if (takeover) {
    // A spare's program takes a lost node's ranks in the group the others go on in: it starts
    // without state (a live member sends it), reads no checkpoint and agrees on nothing.
    child_env_["AUTOPAR_FT_NEWCOMER"] = "1";
    launcher_detail::ForgetResume(&child_env_);
    ft_->set_program_rank(info_.rank);
  } else if (ft_) {
    // Every program of a new generation starts from the checkpoint (or the start): none is a
    // newcomer, and the group's messages of the last generation are stale.
    child_env_.erase("AUTOPAR_FT_NEWCOMER");
    ft_->set_generation(generation_);
  }
  return takeover;
}

bool Launcher::TakenIntoGroup(const PeerMessage& take) {
  ft_->OnTake(take);
  if (!ActiveNode(step_.node_rank)) return false;
  ft_takeover_ = true;
  return true;
}

std::optional<std::string> Launcher::PumpGroup() {
  peers_.Poll(generation_);
  return ft_->Pump();
}

bool Launcher::CanReplaceInGroup() const {
  // Otherwise today's path: every program restarted (a plan may change), or requeued. So is a
  // program that does not train through autopar.ft: its peers would wait in their collectives
  // for it. And so is the group that cannot go on (fewer ranks than it may continue with, no
  // quorum): its launcher stopped its program to fall back, not to replace it.
  return ft_ && ft_->in_group() && !ft_failed_ && ft_->MayReplace() &&
         failure_->kind != "oom" && failure_->kind != "bad-loss";
}

LaunchEvent Launcher::ReplaceInGroup() {
  ft_->CountReplacement();
  (void)ReportRankExit(Lookup(child_env_), info_.rank, host_,
                       RankExit{failure_->exit_status, failure_->run_s, generation_, failure_->error});
  Say("program " + failure_->kind + " (exit " + std::to_string(failure_->exit_status) +
      "): a replacement takes rank " + std::to_string(info_.rank) + "'s place in the group (" +
      std::to_string(ft_->replacements()) + " of the run's " + std::to_string(ft_->max_replacements()) +
      ")");
  ft_->ProgramEnded();
  child_env_["AUTOPAR_FT_NEWCOMER"] = "1";  // no state: it receives it from a live member
  launcher_detail::ForgetResume(&child_env_);  // and reads no checkpoint
  return LaunchEvent::kReplaced;
}

}  // namespace autopar
