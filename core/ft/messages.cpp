#include "core/ft/messages.h"

#include <cstdlib>
#include <limits>

#include "core/text.h"

namespace autopar {
namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxStep = std::numeric_limits<int64_t>::max() / 2;

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

std::string IntList(const std::vector<int>& v) {
  std::vector<std::string> parts;
  for (int i : v) parts.push_back(std::to_string(i));
  return Join(parts, ",");
}

EventFields Versioned(EventFields fields) {
  fields.insert(fields.begin(), {"v", std::to_string(kFtMessageVersion)});
  return fields;
}

// The message's version is this schema's: a message of another is refused, naming it.
Status CheckVersion(const EventFields& fields, const char* what) {
  bool found = false;
  const std::string v = Field(fields, "v", &found);
  if (v != std::to_string(kFtMessageVersion)) {
    return Status::Error(std::string(what) + ": version " + (found ? "'" + v + "'" : "missing") +
                         ", not " + std::to_string(kFtMessageVersion));
  }
  return Status::Ok();
}

EventFields JoinFields(const FtJoin& j) {
  return {{"rank", std::to_string(j.rank)},
          {"launcher", std::to_string(j.launcher)},
          {"store", j.store},
          {"step", std::to_string(j.step)},
          {"replaced", std::to_string(j.replaced)}};
}

Result<FtJoin> JoinOf(const EventFields& fields) {
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
  if (!ValidStoreEndpoint(j.store)) return Status::Error("store: '" + j.store + "' is not ADDR:PORT");
  j.rank = static_cast<int>(*rank);
  j.launcher = static_cast<int>(*launcher);
  j.step = *step;
  return j;
}

Result<FtJoin> MemberOf(const std::string& text) {
  const auto parts = Split(text, '@');
  if (parts.size() != 4) return Status::Error("members: '" + text + "' is not RANK@LAUNCHER@STORE@STEP");
  return JoinOf({{"rank", parts[0]}, {"launcher", parts[1]}, {"store", parts[2]}, {"step", parts[3]}});
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

// The comma-separated items of `text` ("" is none), each read by `parse`, appended to `out`.
template <typename T, typename Parse>
Status ListOf(const std::string& text, Parse parse, std::vector<T>* out) {
  if (text.empty()) return Status::Ok();
  for (const auto& item : Split(text, ',')) {
    auto v = parse(item);
    if (!v) return v.status();
    out->push_back(*v);
  }
  return Status::Ok();
}

EventFields QuorumFields(const FtQuorum& q) {
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

Result<FtQuorum> QuorumOf(const EventFields& fields) {
  FtQuorum q;
  auto epoch = IntField(fields, "epoch", 0, kMaxStep);
  if (!epoch) return epoch.status();
  auto step = IntField(fields, "step", 0, kMaxStep);
  if (!step) return step.status();
  q.epoch = *epoch;
  q.step = *step;
  bool found = false;
  q.store = Field(fields, "store", &found);
  if (!ValidStoreEndpoint(q.store)) return Status::Error("store: '" + q.store + "' is not ADDR:PORT");
  const std::string members = Field(fields, "members", &found);
  if (members.empty()) return Status::Error("members: none");
  if (Status st = ListOf(members, MemberOf, &q.members); !st) return st;
  if (Status st = ListOf(Field(fields, "heals", &found), HealOf, &q.heals); !st) return st;
  const std::string replaced = Field(fields, "replaced", &found);
  if (!replaced.empty()) {
    if (Status st = ReplacedOf(replaced, &q.replaced); !st) return st;
  }
  return q;
}

}  // namespace

EventFields FtProgramJoinFields(const FtProgramJoin& j) {
  return Versioned({{"epoch", std::to_string(j.epoch)}, {"step", std::to_string(j.step)}, {"store", j.store}});
}

Result<FtProgramJoin> FtProgramJoinOf(const EventFields& fields) {
  if (Status st = CheckVersion(fields, "join"); !st) return st;
  auto epoch = IntField(fields, "epoch", -1, kMaxStep);
  if (!epoch) return epoch.status();
  auto step = IntField(fields, "step", -1, kMaxStep);
  if (!step) return step.status();
  bool found = false;
  FtProgramJoin j{*epoch, *step, Field(fields, "store", &found)};
  if (!ValidStoreEndpoint(j.store)) return Status::Error("store: '" + j.store + "' is not ADDR:PORT");
  return j;
}

EventFields FtJoinMessageFields(const FtJoinMessage& m) {
  EventFields f = Versioned(JoinFields(m.join));
  f.emplace_back("left", std::to_string(m.left));
  return f;
}

Result<FtJoinMessage> FtJoinMessageOf(const EventFields& fields) {
  if (Status st = CheckVersion(fields, "join"); !st) return st;
  auto j = JoinOf(fields);
  if (!j) return j.status();
  auto left = IntField(fields, "left", -1, kMaxStep);
  if (!left) return left.status();
  return FtJoinMessage{*j, *left};
}

EventFields FtQuorumMessageFields(const FtQuorumMessage& m) {
  EventFields f = Versioned(QuorumFields(m.quorum));
  f.emplace_back("lost", IntList(m.lost));
  f.emplace_back("formed_s", FormatFixed(m.formed_s, 3));
  return f;
}

Result<FtQuorumMessage> FtQuorumMessageOf(const EventFields& fields) {
  if (Status st = CheckVersion(fields, "quorum"); !st) return st;
  auto q = QuorumOf(fields);
  if (!q) return q.status();
  FtQuorumMessage m{*q, {}, 0};
  bool found = false;
  const std::string lost = Field(fields, "lost", &found);
  if (!lost.empty()) {
    for (const auto& item : Split(lost, ',')) {
      auto l = ParseInt(item, 0, kMaxInt);
      if (!l) return Status::Error("lost: '" + lost + "' is not a list of launchers");
      m.lost.push_back(static_cast<int>(*l));
    }
  }
  m.formed_s = std::atof(Field(fields, "formed_s", &found).c_str());
  return m;
}

EventFields FtQuorumFields(const FtQuorum& q) { return Versioned(QuorumFields(q)); }

Result<FtQuorum> FtQuorumOf(const EventFields& fields) {
  if (Status st = CheckVersion(fields, "quorum"); !st) return st;
  return QuorumOf(fields);
}

EventFields FtGiveUpFields(int64_t epoch) { return Versioned({{"epoch", std::to_string(epoch)}}); }

Result<int64_t> FtGiveUpOf(const EventFields& fields) {
  if (Status st = CheckVersion(fields, "abandon"); !st) return st;
  return IntField(fields, "epoch", -1, kMaxStep);
}

}  // namespace autopar
