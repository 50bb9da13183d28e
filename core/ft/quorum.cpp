#include "core/ft/quorum.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "core/text.h"

namespace autopar {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxStep = std::numeric_limits<int64_t>::max() / 2;

// "ADDR:PORT" with a port in 1..65535 and an address of the characters an IPv4 or IPv6 address or
// a host name uses (it travels inside comma- and '@'-separated lists).
bool ValidEndpoint(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || !ParseInt(s.substr(colon + 1), 1, 65535)) {
    return false;
  }
  return std::all_of(s.begin(), s.begin() + static_cast<long>(colon), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
           c == '[' || c == ']';
  });
}

std::string Field(const EventFields& fields, const char* key, bool* found) {
  for (const auto& kv : fields) {
    if (kv.first == key) {
      *found = true;
      return kv.second;
    }
  }
  *found = false;
  return "";
}

Result<int64_t> IntField(const EventFields& fields, const char* key, int64_t min, int64_t max) {
  bool found = false;
  const std::string text = Field(fields, key, &found);
  if (!found) return Status::Error(std::string(key) + ": missing");
  auto v = ParseInt(text, min, max);
  if (!v) return Status::Error(std::string(key) + ": '" + text + "' is not an integer in range");
  return *v;
}

Status CheckJoin(const FtJoin& j, const FtQuorumRules& rules) {
  const std::string who = "rank " + std::to_string(j.rank);
  if (j.rank < 0 || j.rank >= rules.world) {
    return Status::Error(who + ": not a rank of the run's " + std::to_string(rules.world));
  }
  if (j.launcher < 0) return Status::Error(who + ": no launcher");
  if (!ValidEndpoint(j.store)) return Status::Error(who + ": store '" + j.store + "' is not ADDR:PORT");
  if (j.step < -1) return Status::Error(who + ": step " + std::to_string(j.step));
  if (j.replaced < 0) return Status::Error(who + ": replaced " + std::to_string(j.replaced));
  return Status::Ok();
}

}  // namespace

int64_t TotalReplacements(const FtReplacements& r) {
  int64_t total = 0;
  for (const auto& [launcher, count] : r) total += count;
  return total;
}

Result<FtQuorum> DecideQuorum(int64_t epoch, std::vector<FtJoin> joins, const FtQuorumRules& rules,
                              const FtReplacements& replaced) {
  for (const auto& j : joins) {
    if (Status st = CheckJoin(j, rules); !st) return st;
  }
  std::sort(joins.begin(), joins.end(), [](const FtJoin& a, const FtJoin& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < joins.size(); ++i) {
    if (joins[i].rank == joins[i - 1].rank) {
      return Status::Error("rank " + std::to_string(joins[i].rank) + " joined twice");
    }
  }
  if (static_cast<int>(joins.size()) < std::max(rules.min_world, 1)) {
    return Status::Error(std::to_string(joins.size()) + " of " + std::to_string(rules.world) +
                         " ranks left, fewer than the " + std::to_string(rules.min_world) +
                         " the run may go on with");
  }
  FtQuorum q;
  q.epoch = epoch;
  q.replaced = replaced;
  for (const auto& j : joins) {
    if (j.replaced > 0) q.replaced[j.launcher] = std::max(q.replaced[j.launcher], j.replaced);
  }
  const int64_t total = TotalReplacements(q.replaced);
  const bool newcomer =
      std::any_of(joins.begin(), joins.end(), [](const FtJoin& j) { return j.step < 0; });
  if (rules.max_replacements >= 0 && newcomer && total > rules.max_replacements &&
      total > TotalReplacements(replaced)) {
    return Status::Error("the run's replacements would be " + std::to_string(total) +
                         ", past its " + std::to_string(rules.max_replacements) +
                         " (--restarts-in-place): launchers replaced their programs at once");
  }
  q.step = -1;
  for (const auto& j : joins) q.step = std::max(q.step, j.step);
  if (q.step < 0) return Status::Error("no member holds the training state");
  std::vector<int> sources;  // the members at q.step, by rank
  for (const auto& j : joins) {
    if (j.step == q.step) sources.push_back(j.rank);
  }
  q.store = std::find_if(joins.begin(), joins.end(), [&](const FtJoin& j) {
              return j.rank == sources.front();
            })->store;
  size_t turn = 0;
  for (const auto& j : joins) {
    if (j.step == q.step) continue;
    q.heals.emplace_back(j.rank, sources[turn++ % sources.size()]);
  }
  q.members = std::move(joins);
  return q;
}

EventFields FtJoinFields(const FtJoin& j) {
  return {{"rank", std::to_string(j.rank)},
          {"launcher", std::to_string(j.launcher)},
          {"store", j.store},
          {"step", std::to_string(j.step)},
          {"replaced", std::to_string(j.replaced)}};
}

Result<FtJoin> FtJoinOf(const EventFields& fields) {
  FtJoin j;
  auto rank = IntField(fields, "rank", 0, kMaxInt);
  if (!rank) return rank.status();
  auto launcher = IntField(fields, "launcher", 0, kMaxInt);
  if (!launcher) return launcher.status();
  auto step = IntField(fields, "step", -1, kMaxStep);
  if (!step) return step.status();
  bool found = false;
  (void)Field(fields, "replaced", &found);
  if (found) {
    auto replaced = IntField(fields, "replaced", 0, kMaxStep);
    if (!replaced) return replaced.status();
    j.replaced = *replaced;
  }
  j.store = Field(fields, "store", &found);
  if (!ValidEndpoint(j.store)) return Status::Error("store: '" + j.store + "' is not ADDR:PORT");
  j.rank = static_cast<int>(*rank);
  j.launcher = static_cast<int>(*launcher);
  j.step = *step;
  return j;
}

EventFields FtQuorumFields(const FtQuorum& q) {
  std::vector<std::string> members, heals;
  for (const auto& m : q.members) {
    members.push_back(std::to_string(m.rank) + "@" + std::to_string(m.launcher) + "@" + m.store +
                      "@" + std::to_string(m.step));
  }
  for (const auto& h : q.heals) heals.push_back(std::to_string(h.first) + "<" + std::to_string(h.second));
  std::vector<std::string> replaced;
  for (const auto& [launcher, count] : q.replaced) {
    replaced.push_back(std::to_string(launcher) + ":" + std::to_string(count));
  }
  return {{"epoch", std::to_string(q.epoch)},
          {"step", std::to_string(q.step)},
          {"store", q.store},
          {"members", Join(members, ",")},
          {"heals", Join(heals, ",")},
          {"replaced", Join(replaced, ",")}};
}

namespace {

Result<FtJoin> MemberOf(const std::string& text) {
  const auto parts = Split(text, '@');
  if (parts.size() != 4) return Status::Error("members: '" + text + "' is not RANK@LAUNCHER@STORE@STEP");
  return FtJoinOf({{"rank", parts[0]}, {"launcher", parts[1]}, {"store", parts[2]}, {"step", parts[3]}});
}

Result<std::pair<int, int>> HealOf(const std::string& text) {
  const auto parts = Split(text, '<');
  auto to = parts.size() == 2 ? ParseInt(parts[0], 0, kMaxInt) : std::nullopt;
  auto from = parts.size() == 2 ? ParseInt(parts[1], 0, kMaxInt) : std::nullopt;
  if (!to || !from) return Status::Error("heals: '" + text + "' is not TO<FROM");
  return std::make_pair(static_cast<int>(*to), static_cast<int>(*from));
}

Status ReplacedOf(const std::string& text, FtReplacements* out) {
  for (const auto& item : Split(text, ',')) {
    const auto parts = Split(item, ':');
    auto launcher = parts.size() == 2 ? ParseInt(parts[0], 0, kMaxInt) : std::nullopt;
    auto count = parts.size() == 2 ? ParseInt(parts[1], 0, kMaxStep) : std::nullopt;
    if (!launcher || !count) return Status::Error("replaced: '" + item + "' is not LAUNCHER:COUNT");
    (*out)[static_cast<int>(*launcher)] = *count;
  }
  return Status::Ok();
}

}  // namespace

Result<FtQuorum> FtQuorumOf(const EventFields& fields) {
  FtQuorum q;
  auto epoch = IntField(fields, "epoch", 0, kMaxStep);
  if (!epoch) return epoch.status();
  auto step = IntField(fields, "step", 0, kMaxStep);
  if (!step) return step.status();
  q.epoch = *epoch;
  q.step = *step;
  bool found = false;
  q.store = Field(fields, "store", &found);
  if (!ValidEndpoint(q.store)) return Status::Error("store: '" + q.store + "' is not ADDR:PORT");
  const std::string members = Field(fields, "members", &found);
  if (members.empty()) return Status::Error("members: none");
  for (const auto& text : Split(members, ',')) {
    auto m = MemberOf(text);
    if (!m) return m.status();
    q.members.push_back(*m);
  }
  const std::string heals = Field(fields, "heals", &found);
  if (!heals.empty()) {
    for (const auto& text : Split(heals, ',')) {
      auto h = HealOf(text);
      if (!h) return h.status();
      q.heals.push_back(*h);
    }
  }
  const std::string replaced = Field(fields, "replaced", &found);
  if (!replaced.empty()) {
    if (Status st = ReplacedOf(replaced, &q.replaced); !st) return st;
  }
  return q;
}

}  // namespace autopar
