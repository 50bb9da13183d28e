#include "launcher/ft_group.h"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>

#include "core/ft/messages.h"
#include "core/text.h"
#include "launcher/restart_logic.h"

namespace autopar {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTickMs = 500;
constexpr int kResendAfterMs = 2000;  // a join not answered: is the leader still there?

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The program's line: its kind and fields (python/autopar/ft/channel.py writes them).
std::pair<std::string, EventFields> ProgramLine(const std::string& line) {
  const size_t sp = line.find(' ');
  const std::string kind = line.substr(0, sp);
  return {kind, sp == std::string::npos ? EventFields{} : ParseEventFields(line.substr(sp + 1))};
}

std::string Field(const EventFields& f, const char* key) {
  for (const auto& [k, v] : f) {
    if (k == key) return v;
  }
  return "";
}

}  // namespace

FtGroup::FtGroup(PeerGroup* peers, FtProgramChannel channel, Config config, Journal journal, Take take)
    : peers_(peers), channel_(std::move(channel)), config_(std::move(config)), journal_(std::move(journal)),
      take_(std::move(take)) {
  timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  SetActive(config_.active);
}

FtGroup::~FtGroup() {
  if (timer_ >= 0) close(timer_);
}

int FtGroup::timer_fd() const { return (forming_ || my_join_) ? timer_ : -1; }

void FtGroup::ArmTimer(bool on) {
  if (timer_ < 0) return;
  itimerspec when{};
  if (on) {
    when.it_value.tv_nsec = kTickMs * 1000000L;
    when.it_interval = when.it_value;
  }
  timerfd_settime(timer_, 0, &when, nullptr);
}

int FtGroup::Leader() const {
  int leader = -1;
  for (int l : launcher_of_) {
    if (!lost_.count(l) && (leader < 0 || l < leader)) leader = l;
  }
  return leader < 0 ? peers_->self() : leader;
}

int FtGroup::LauncherOf(int rank) const {
  return rank >= 0 && rank < static_cast<int>(launcher_of_.size()) ? launcher_of_[static_cast<size_t>(rank)] : -1;
}

void FtGroup::SetActive(const std::vector<int>& active) {
  config_.active = active;
  launcher_of_.clear();
  if (!config_.ranks_in_node_order) {
    for (int r = 0; r < config_.rules.world; ++r) launcher_of_.push_back(r);
    return;
  }
  for (int n : active) {
    for (int l : peers_->RanksOnNodes({n})) launcher_of_.push_back(l);
  }
}

void FtGroup::OnTake(const PeerMessage& m) {
  auto active = ParseIntList(PeerField(m, "active"));
  if (!active || active->size() != config_.active.size()) return;
  SetActive(*active);
  if (take_) take_(*active);
}

void FtGroup::TakeSpares() {
  if (!config_.ranks_in_node_order || lost_.size() == lost_taken_) return;
  lost_taken_ = lost_.size();
  const std::vector<int>& tasks = peers_->tasks_per_node();
  std::vector<int> lost_nodes, standby;
  for (int n = 0; n < static_cast<int>(tasks.size()); ++n) {
    const std::vector<int> launchers = peers_->RanksOnNodes({n});
    const auto gone = static_cast<size_t>(
        std::count_if(launchers.begin(), launchers.end(), [&](int l) { return lost_.count(l) > 0; }));
    const bool in_use = std::find(config_.active.begin(), config_.active.end(), n) != config_.active.end();
    // A node is replaced as a whole: one with a launcher left keeps its ranks.
    if (in_use && !launchers.empty() && gone == launchers.size()) lost_nodes.push_back(n);
    if (!in_use && gone == 0) standby.push_back(n);
  }
  if (lost_nodes.empty() || standby.empty()) return;
  if (lost_nodes.size() > standby.size()) lost_nodes.resize(standby.size());  // the rest leave
  auto next = ReplaceLostNodes(config_.active, lost_nodes, standby, tasks);
  if (!next) return;
  PeerMessage m{PeerKind::kFtTake, peers_->self(), generation_, {{"active", FormatIntList(*next)}}};
  std::vector<int> others;
  for (int n = 0; n < static_cast<int>(tasks.size()); ++n) {
    for (int l : peers_->RanksOnNodes({n})) {
      if (l != peers_->self() && !lost_.count(l)) others.push_back(l);
    }
  }
  MarkLost(peers_->SendTo(others, m));  // a spare not reached is lost: its ranks leave the group
  OnTake(m);
}

void FtGroup::MarkLost(const std::vector<int>& launchers) {
  for (int r : launchers) {
    if (r != peers_->self()) lost_.insert(r);
  }
}

int64_t FtGroup::replacements() const {
  FtReplacements all = replaced_;
  all[peers_->self()] = std::max(all[peers_->self()], own_replaced_);
  return TotalReplacements(all);
}

bool FtGroup::SpareFromHang() const {
  return waiting_ || my_join_.has_value() ||
         (quorum_told_ && SecondsSince(*quorum_told_) < config_.hang_timeout_s);
}

void FtGroup::ProgramEnded() {
  channel_.Disconnect();
  waiting_ = false;
  program_joined_ = false;
  my_join_.reset();  // a replacement joins anew
}

std::optional<std::string> FtGroup::Pump() {
  for (const std::string& line : channel_.Drain()) OnProgramLine(line);
  auto is_ft = [](const PeerMessage& m) {
    return m.kind == PeerKind::kFtJoin || m.kind == PeerKind::kFtForming || m.kind == PeerKind::kFtQuorum ||
           m.kind == PeerKind::kFtTake;
  };
  while (auto m = peers_->Take(is_ft)) {
    if (m->kind == PeerKind::kFtJoin) OnJoin(*m);
    if (m->kind == PeerKind::kFtForming) OnForming(*m);
    if (m->kind == PeerKind::kFtQuorum) OnQuorum(*m);
    if (m->kind == PeerKind::kFtTake) OnTake(*m);
  }
  uint64_t ticks = 0;
  if (timer_ >= 0 && read(timer_, &ticks, sizeof(ticks)) == sizeof(ticks)) {
    if (auto why = Tick()) return why;
  }
  if (forming_) return TryDecide();
  return std::nullopt;
}

void FtGroup::OnProgramLine(const std::string& line) {
  auto [kind, f] = ProgramLine(line);
  if (kind == "waiting") {
    waiting_ = true;
  } else if (kind == "running") {
    waiting_ = false;
  } else if (kind == "healed" || kind == "discarded") {
    journal_(kind == "healed" ? event_kind::kFtHealed : event_kind::kFtDiscarded,
             std::atoll(Field(f, "step").c_str()), f);
  } else if (kind == "join") {
    auto j = FtProgramJoinOf(f);
    if (!j) {
      (void)channel_.Send("error " + FormatEventFields({{"reason", "malformed-join"}, {"why", j.message()}}));
      return;
    }
    // Who joins and what it has cost are the launcher's to say, not the program's.
    my_join_ = FtJoin{config_.program_rank, peers_->self(), j->store, j->step, own_replaced_};
    my_left_ = j->epoch;
    joined_ = program_joined_ = true;
    waiting_since_ = Clock::now();
    SendJoin();
  }
}

void FtGroup::SendJoin() {
  if (!my_join_) return;
  ArmTimer(true);
  PeerMessage m{PeerKind::kFtJoin, peers_->self(), generation_, FtJoinMessageFields({*my_join_, my_left_})};
  for (;;) {
    const int leader = Leader();
    sent_to_ = leader;
    if (leader == peers_->self()) {
      m.from = leader;
      OnJoin(m);
      return;
    }
    if (peers_->SendTo({leader}, m).empty()) return;
    MarkLost({leader});  // the next one leads
  }
}

void FtGroup::OnJoin(const PeerMessage& m) {
  auto msg = FtJoinMessageOf(m.fields);
  if (!msg || msg->join.rank >= config_.rules.world) return;
  if (!forming_) {
    // The group is re-formed: every program gives up the epoch it is in.
    forming_ = true;
    forming_since_ = Clock::now();
    joins_.clear();
    ArmTimer(true);
    std::vector<int> others;
    for (int l : launcher_of_) {
      if (l != peers_->self() && !lost_.count(l)) others.push_back(l);
    }
    PeerMessage forming{PeerKind::kFtForming, peers_->self(), generation_, FtGiveUpFields(epoch_)};
    MarkLost(peers_->SendTo(others, forming));
    OnForming(forming);
  }
  epoch_ = std::max(epoch_, msg->left);
  joins_[msg->join.rank] = msg->join;
}

void FtGroup::OnForming(const PeerMessage& m) {
  auto e = FtGiveUpOf(m.fields);
  if (e && *e >= 0) (void)channel_.Send("abandon " + FormatEventFields(FtGiveUpFields(*e)));
}

std::optional<std::string> FtGroup::TryDecide() {
  TakeSpares();
  std::vector<FtJoin> joins;
  for (int r = 0; r < config_.rules.world; ++r) {
    if (lost_.count(LauncherOf(r))) continue;
    auto it = joins_.find(r);
    if (it == joins_.end()) return std::nullopt;  // its program (or its replacement) has not joined
    joins.push_back(it->second);
  }
  auto q = DecideQuorum(epoch_ + 1, joins, config_.rules, replaced_);
  forming_ = false;
  joins_.clear();
  if (!q) return "no quorum: " + q.message();
  const FtQuorumMessage msg{*q, std::vector<int>(lost_.begin(), lost_.end()), SecondsSince(forming_since_)};
  EventFields fields = FtQuorumMessageFields(msg);
  journal_(event_kind::kFtQuorum, q->step, EventFields(fields.begin() + 1, fields.end()));  // v= aside
  PeerMessage m{PeerKind::kFtQuorum, peers_->self(), generation_, fields};
  std::vector<int> others;
  for (const auto& member : q->members) {
    if (member.launcher != peers_->self()) others.push_back(member.launcher);
  }
  MarkLost(peers_->SendTo(others, m));  // a member lost now breaks this epoch: it re-forms
  TakeQuorum(msg);
  return std::nullopt;
}

void FtGroup::OnQuorum(const PeerMessage& m) {
  if (auto msg = FtQuorumMessageOf(m.fields)) TakeQuorum(*msg);
}

void FtGroup::TakeQuorum(const FtQuorumMessage& msg) {
  const FtQuorum& q = msg.quorum;
  if (q.epoch <= epoch_ && !my_join_) return;  // one this launcher has handed on already
  epoch_ = std::max(epoch_, q.epoch);
  for (const auto& [launcher, count] : q.replaced) {
    replaced_[launcher] = std::max(replaced_[launcher], count);
  }
  MarkLost(msg.lost);
  const bool member = std::any_of(q.members.begin(), q.members.end(),
                                  [&](const FtJoin& j) { return j.rank == config_.program_rank; });
  if (!member || !my_join_) return;
  (void)channel_.Send("quorum " + FormatEventFields(FtQuorumFields(q)));
  quorum_told_ = Clock::now();
  my_join_.reset();
  if (!forming_) ArmTimer(false);
}

std::optional<std::string> FtGroup::Tick() {
  if (forming_) {
    std::vector<int> missing;
    for (int r = 0; r < config_.rules.world; ++r) {
      const int l = LauncherOf(r);
      if (!lost_.count(l) && !joins_.count(r) && l != peers_->self()) missing.push_back(l);
    }
    // Connecting is the test (an empty line, which the peer drops).
    if (!missing.empty()) MarkLost(peers_->Probe(missing));
    if (SecondsSince(forming_since_) > config_.join_timeout_s) {
      forming_ = false;
      return "no quorum in " + std::to_string(config_.join_timeout_s) + " s";
    }
  }
  if (my_join_) {
    if (SecondsSince(waiting_since_) > config_.join_timeout_s) {
      return "no quorum in " + std::to_string(config_.join_timeout_s) + " s";
    }
    if (sent_to_ != peers_->self() && SecondsSince(waiting_since_) * 1000 > kResendAfterMs) {
      MarkLost(peers_->Probe({sent_to_}));
      if (lost_.count(sent_to_)) SendJoin();  // the next launcher leads
    }
  }
  return std::nullopt;
}

}  // namespace autopar
