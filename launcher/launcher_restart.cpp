// The Launcher after a failed generation, in place: the reports, rank 0's decision with
// autopard, the verdict followed; the spares in reserve; the plans of the nodes left (launcher.h).
#include <algorithm>

#include "core/failure/recovery_policy.h"
#include "core/text.h"
#include "launcher/launcher.h"
#include "launcher/launcher_internal.h"

namespace autopar {
using launcher_detail::kRecoverTimeoutMs;
using launcher_detail::EpochNow;
using launcher_detail::SecondsSince;
using launcher_detail::Get;
using launcher_detail::Lookup;
using launcher_detail::Contains;

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
    JournalRestart(child_env, verdict, reports->failures,
                   {stop_s, decide_s, SecondsSince(rendezvous_start)});
    if (verdict.active.size() != active_.size()) JournalResize(child_env, verdict);
  }
  return verdict;
}

void Launcher::JournalRestart(const EnvMap& child_env, const RestartVerdict& verdict,
                              const std::vector<std::optional<FailureReport>>& failures,
                              const std::vector<double>& phases_s) {
  const std::optional<FailureReport> first = FirstFailure(failures);
  const bool replaced = verdict.active != active_;
  int programs = 0;  // every program of the generation that ends was stopped and started again
  for (int node : active_) programs += peers_.tasks_per_node()[static_cast<size_t>(node)];
  const auto failed = std::count_if(failures.begin(), failures.end(),
                                    [](const auto& f) { return f.has_value(); });
  EventFields fields = {
      {"generation", std::to_string(generation_ + 1)},
      {"culprit_rank", std::to_string(first && !replaced ? first->rank : -1)},
      {"since_failure_s", FormatFixed(first ? EpochNow() - first->detected : -1, 3)},
      {"stop_s", FormatFixed(phases_s[0], 3)},
      {"decide_s", FormatFixed(phases_s[1], 3)},
      {"rendezvous_s", FormatFixed(phases_s[2], 3)},
      {"port", std::to_string(verdict.master.port)},
      {"programs", std::to_string(programs)},
      {"failed", std::to_string(failed)}};
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
  const auto since = std::chrono::steady_clock::now();
  for (;;) {
    const int64_t g = generation_;
    peers_.Poll(g);
    const bool ft = ft_ != nullptr;
    const int wait_s = PrepareInReserve(since);
    auto m = peers_.Await([g, ft](const PeerMessage& p) {
      return (p.kind == PeerKind::kStop || p.kind == PeerKind::kVerdict || (ft && p.kind == PeerKind::kFtTake)) &&
             p.generation == g;
    }, wait_s);
    if (!m) continue;
    if (m->kind == PeerKind::kFtTake) {
      if (TakenIntoGroup(*m)) return true;
      continue;
    }
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

}  // namespace autopar
