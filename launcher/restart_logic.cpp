#include "restart_logic.h"

#include <algorithm>
#include <cstdlib>

#include "core/failure/requeue_policy.h"
#include "core/text.h"

namespace autopar {
namespace {

struct KindName {
  PeerKind kind;
  const char* tag;  // the line's first word
};
constexpr KindName kKinds[] = {
    {PeerKind::kStop, "autopar-stop"},
    {PeerKind::kReport, "autopar-report"},
    {PeerKind::kVerdict, "autopar-verdict"},
    {PeerKind::kValue, "autopar-value"},
    {PeerKind::kFtJoin, "autopar-ft-join"},
    {PeerKind::kFtForming, "autopar-ft-forming"},
    {PeerKind::kFtQuorum, "autopar-ft-quorum"},
    {PeerKind::kFtTake, "autopar-ft-take"},
};

std::string FieldOf(const EventFields& f, const char* key) {
  for (const auto& [k, v] : f) {
    if (k == key) return v;
  }
  return "";
}

}  // namespace

EventFields ReportFields(const FailureReport& r) {
  EventFields f = {{"class", r.kind}, {"exit", std::to_string(r.exit_status)}};
  if (r.exit_status > 128 && r.exit_status < 128 + 65) {
    f.emplace_back("signal", std::to_string(r.exit_status - 128));
  }
  f.emplace_back("run_s", FormatFixed(r.run_s, 3));
  f.emplace_back("node", r.node);
  f.emplace_back("generation", std::to_string(r.generation));
  f.emplace_back("detected", FormatFixed(r.detected, 3));
  if (!r.error.empty()) f.emplace_back("error", r.error);
  return f;
}

RecoverDetail RecoverDetailOf(const FailureReport& r) {
  RecoverDetail d;
  d.kind = r.kind;
  d.generation = r.generation;
  d.exit_status = r.exit_status;
  d.run_s = r.run_s;
  d.node = r.node;
  d.detected = r.detected;
  d.error = r.error;
  return d;
}

Result<FailureReport> ReportFromFields(const EventFields& fields, int rank) {
  FailureReport r;
  r.rank = rank;
  r.kind = FieldOf(fields, "class");
  // What a launcher can see of its own program (a node loss is rank 0's conclusion, a time
  // limit autopard's).
  if (r.kind != "rank-crash" && r.kind != "hang" && r.kind != "oom" && r.kind != "bad-loss") {
    return Status::Error("failure report: class: unknown '" + r.kind + "'");
  }
  r.error = FieldOf(fields, "error");
  auto exit_status = ParseInt(FieldOf(fields, "exit"), 0, 255);
  auto generation = ParseInt(FieldOf(fields, "generation"), 0, INT32_MAX);
  if (!exit_status || !generation) {
    return Status::Error("failure report: exit and generation must be numbers");
  }
  r.exit_status = static_cast<int>(*exit_status);
  r.generation = *generation;
  r.node = FieldOf(fields, "node");
  r.run_s = std::strtod(FieldOf(fields, "run_s").c_str(), nullptr);
  r.detected = std::strtod(FieldOf(fields, "detected").c_str(), nullptr);
  return r;
}

std::string EncodePeerMessage(const std::string& token, const PeerMessage& m) {
  const char* tag = "";
  for (const auto& k : kKinds) {
    if (k.kind == m.kind) tag = k.tag;
  }
  EventFields f = {{"token", token},
                   {"from", std::to_string(m.from)},
                   {"generation", std::to_string(m.generation)}};
  for (const auto& kv : m.fields) {
    if (kv.first != "token" && kv.first != "from" && kv.first != "generation") f.push_back(kv);
  }
  return std::string(tag) + " " + FormatEventFields(f) + "\n";
}

Result<PeerMessage> DecodePeerMessage(const std::string& line, const std::string& token) {
  PeerMessage m;
  const std::string tag = line.substr(0, line.find(' '));
  bool known = false;
  for (const auto& k : kKinds) {
    if (tag == k.tag) {
      m.kind = k.kind;
      known = true;
    }
  }
  if (!known || tag.size() == line.size()) return Status::Error("peer message: not one");
  EventFields f = ParseEventFields(std::string_view(line).substr(tag.size() + 1));
  // Constant time: how far a guess matches must not show in how long it takes to refuse.
  if (token.empty() || !ConstantTimeEquals(FieldOf(f, "token"), token)) {
    return Status::Error("peer message: wrong token");
  }
  auto from = ParseInt(FieldOf(f, "from"), 0, INT32_MAX);
  auto generation = ParseInt(FieldOf(f, "generation"), 0, INT32_MAX);
  if (!from || !generation) return Status::Error("peer message: from and generation must be numbers");
  m.from = static_cast<int>(*from);
  m.generation = *generation;
  for (auto& kv : f) {
    if (kv.first != "token" && kv.first != "from") m.fields.push_back(std::move(kv));
  }
  return m;
}

std::string PeerField(const PeerMessage& m, const char* key) { return FieldOf(m.fields, key); }

PeerMessage StopNotice(const FailureReport& r, int from) {
  PeerMessage m{PeerKind::kStop, from, r.generation, ReportFields(r)};
  m.fields.emplace_back("rank", std::to_string(r.rank));
  return m;
}

Result<FailureReport> FailureOf(const PeerMessage& m) {
  if (m.kind == PeerKind::kReport && PeerField(m, "state") != "failed") {
    return Status::Error("peer message: not a failure");
  }
  if (m.kind != PeerKind::kStop && m.kind != PeerKind::kReport) {
    return Status::Error("peer message: not a failure");
  }
  auto rank = ParseInt(PeerField(m, "rank"), 0, INT32_MAX);
  return ReportFromFields(m.fields, rank ? static_cast<int>(*rank) : m.from);
}

namespace {

// How much a report says about the cause: 2 a class autopar recognised, 1 a death by a signal
// (exit status 128+S), 0 an exit status.
int Specificity(const FailureReport& r) {
  if (r.kind != FailureClassName(FailureClass::kRankCrash)) return 2;
  return r.exit_status > 128 ? 1 : 0;
}

}  // namespace

std::optional<FailureReport> FirstFailure(const std::vector<std::optional<FailureReport>>& reports) {
  std::optional<FailureReport> first;
  for (const auto& r : reports) {
    if (!r) continue;
    const int a = Specificity(*r);
    const int b = first ? Specificity(*first) : -1;
    if (!first || a > b ||
        (a == b && (r->detected < first->detected ||
                    (r->detected == first->detected && r->rank < first->rank)))) {
      first = r;
    }
  }
  return first;
}

PeerMessage VerdictMessage(const RestartVerdict& v, int64_t generation) {
  PeerMessage m{PeerKind::kVerdict, 0, generation, {}};
  if (!v.restart) {
    m.fields = {{"action", "exit"}, {"code", std::to_string(v.exit_code)}};
    return m;
  }
  m.fields = {{"action", "restart"},
              {"master", v.master.addr + ":" + std::to_string(v.master.port)},
              {"resume", std::to_string(v.resume_step)},
              {"active", FormatIntList(v.active)}};
  if (v.max_mem_gib > 0) m.fields.emplace_back("max_mem_gib", FormatFixed(v.max_mem_gib, 3));
  return m;
}

Result<RestartVerdict> VerdictOf(const PeerMessage& m) {
  RestartVerdict v;
  const std::string action = PeerField(m, "action");
  if (m.kind != PeerKind::kVerdict || (action != "exit" && action != "restart")) {
    return Status::Error("restart verdict: malformed");
  }
  if (action == "exit") {
    auto code = ParseInt(PeerField(m, "code"), 0, 255);
    if (!code) return Status::Error("restart verdict: code: not an exit status");
    v.exit_code = static_cast<int>(*code);
    return v;
  }
  v.restart = true;
  const std::string master = PeerField(m, "master");
  const size_t colon = master.rfind(':');
  std::optional<int64_t> port;
  if (colon != std::string::npos) port = ParseInt(master.substr(colon + 1), 1, 65535);
  auto resume = ParseInt(PeerField(m, "resume"), -1, INT64_MAX);
  auto active = ParseIntList(PeerField(m, "active"));
  if (!port || colon == 0 || !resume || !active || active->empty()) {
    return Status::Error("restart verdict: master, resume and active must be given");
  }
  v.master = {master.substr(0, colon), static_cast<int>(*port)};
  v.resume_step = *resume;
  v.active = *active;
  const std::string mem = PeerField(m, "max_mem_gib");
  if (!mem.empty()) {
    char* end = nullptr;
    v.max_mem_gib = std::strtod(mem.c_str(), &end);
    if (*end != '\0' || !(v.max_mem_gib > 0)) return Status::Error("restart verdict: max_mem_gib: not a size");
  }
  return v;
}

std::vector<int> InitialActiveNodes(int num_nodes, int spares) {
  std::vector<int> active;
  for (int n = 0; n < num_nodes - std::max(spares, 0); ++n) active.push_back(n);
  return active;
}

std::optional<RankInfo> ProgramRank(const RankInfo& step, const std::vector<int>& tasks_per_node,
                                    const std::vector<int>& active) {
  RankInfo out = step;
  int before = 0, size = 0;
  std::optional<int> position;
  for (size_t i = 0; i < active.size(); ++i) {
    const int n = active[i];
    const int tasks = n >= 0 && n < static_cast<int>(tasks_per_node.size()) ? tasks_per_node[static_cast<size_t>(n)] : 0;
    if (n == step.node_rank) position = static_cast<int>(i);
    if (!position) before += tasks;
    size += tasks;
  }
  if (!position) return std::nullopt;
  out.rank = before + step.local_rank;
  out.size = size;
  out.node_rank = *position;
  out.num_nodes = static_cast<int>(active.size());
  return out;
}

Result<std::vector<int>> ReplaceLostNodes(const std::vector<int>& active, const std::vector<int>& lost,
                                          const std::vector<int>& standby,
                                          const std::vector<int>& tasks_per_node) {
  std::vector<int> out = active;
  std::vector<int> free = standby;
  std::sort(free.begin(), free.end());
  auto tasks = [&](int n) {
    return n >= 0 && n < static_cast<int>(tasks_per_node.size()) ? tasks_per_node[static_cast<size_t>(n)] : 0;
  };
  for (int& n : out) {
    if (std::find(lost.begin(), lost.end(), n) == lost.end()) continue;
    auto it = std::find_if(free.begin(), free.end(), [&](int s) { return tasks(s) == tasks(n); });
    if (it == free.end()) {
      return Status::Error("no spare node left to replace node " + std::to_string(n) + " (" +
                           std::to_string(standby.size()) + " in reserve)");
    }
    n = *it;
    free.erase(it);
  }
  return out;
}

std::vector<int> ReplaceOrDropLostNodes(const std::vector<int>& active, const std::vector<int>& lost,
                                        const std::vector<int>& standby,
                                        const std::vector<int>& tasks_per_node) {
  std::vector<int> out;
  std::vector<int> free = standby;
  std::sort(free.begin(), free.end());
  auto tasks = [&](int n) {
    return n >= 0 && n < static_cast<int>(tasks_per_node.size()) ? tasks_per_node[static_cast<size_t>(n)] : 0;
  };
  for (int n : active) {
    if (std::find(lost.begin(), lost.end(), n) == lost.end()) {
      out.push_back(n);
      continue;
    }
    auto it = std::find_if(free.begin(), free.end(), [&](int s) { return tasks(s) == tasks(n); });
    if (it == free.end()) continue;  // dropped: the run goes on without it
    out.push_back(*it);
    free.erase(it);
  }
  return out;
}

std::string FormatIntList(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

Result<std::vector<int>> ParseIntList(const std::string& text) {
  std::vector<int> out;
  if (text.empty()) return out;
  for (const std::string& item : Split(text, ',')) {
    auto v = ParseInt(item, 0, INT32_MAX);
    if (!v) return Status::Error("'" + text + "' is not a list of numbers");
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

}  // namespace autopar
