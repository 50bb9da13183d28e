// The Launcher's checkpoint: the step rank 0 decided restored on every rank, agreed on when a
// rank cannot restore it, and told in the job's timeline (launcher.h, proto_client.h).
#include <algorithm>
#include <cstdlib>

#include "core/text.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"

namespace autopar {
using launcher_detail::SecondsSince;
using launcher_detail::ForgetResume;
using launcher_detail::Get;
using launcher_detail::Lookup;
using launcher_detail::TellEvent;

void Launcher::Resume(EnvMap* child_env, bool use_pmix, int timeout_s) {
  const auto restore_start = std::chrono::steady_clock::now();
  ForgetResume(child_env);
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
