#include "core/failure/timeline.h"

#include <json/json.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include "core/text.h"
#include <tuple>

#include "core/json_fields.h"
#include "core/json_text.h"

namespace autopar {
namespace {

bool KeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '\\' || c == '=' || c == '\t' || c == '\n') return true;
  }
  return false;
}

// One event as a JSON object, appended to `out`, its keys in name order. `for_people`: with
// time_utc and fields, derived from time and detail (readers ignore them): `autopar events --json`
// has them, published segments do not (half the bytes to write, store and parse). Written
// directly (core/json_text.h): a Json::Value per event was most of the cost of both.
void AppendEventJson(std::string* out, const JournalEvent& e, bool for_people = true) {
  out->append("{\"detail\":");
  AppendJsonString(out, e.detail);
  if (for_people) {
    // Keys in order, the last of a repeated key kept: a JSON object has each key once.
    std::map<std::string, std::string> fields;
    for (auto& [k, v] : ParseEventFields(e.detail)) fields[std::move(k)] = std::move(v);
    out->append(",\"fields\":{");
    bool first = true;
    for (const auto& [k, v] : fields) {
      if (!first) out->push_back(',');
      first = false;
      AppendJsonString(out, k);
      out->push_back(':');
      AppendJsonString(out, v);
    }
    out->push_back('}');
  }
  out->append(",\"job_id\":");
  AppendJsonString(out, e.job_id);
  out->append(",\"kind\":");
  AppendJsonString(out, e.kind);
  out->append(",\"node\":");
  AppendJsonString(out, e.node);
  out->append(",\"rank\":");
  AppendJsonInt(out, e.rank);
  out->append(",\"step\":");
  AppendJsonInt(out, e.step);
  out->append(",\"time\":");
  AppendJsonNumber(out, e.time);
  if (for_people) {
    out->append(",\"time_utc\":");
    AppendJsonString(out, FormatEventTime(e.time, true));
  }
  out->push_back('}');
}

}  // namespace

const std::vector<std::string>& AllEventKinds() {
  static const std::vector<std::string> kinds = {
      event_kind::kSubmitted,
      event_kind::kStepStarted,
      event_kind::kRendezvous,
      event_kind::kCkptCommitted,
      event_kind::kCkptComplete,
      event_kind::kCkptUploaded,
      event_kind::kCkptFailed,
      event_kind::kCkptUploadRetry,
      event_kind::kCkptRetentionFailed,
      event_kind::kCkptLocalRemoved,
      event_kind::kCkptRestored,
      event_kind::kCkptRestoreSkipped,
      event_kind::kFreshStart,
      event_kind::kRestoreWaited,
      event_kind::kWatchResumed,
      event_kind::kRankExit,
      event_kind::kHeartbeatMissed,
      event_kind::kFailure,
      event_kind::kStack,
      event_kind::kRequeue,
      event_kind::kRequeueFailed,
      event_kind::kStopped,
      event_kind::kNodeDown,
      event_kind::kClaimRefused,
      event_kind::kStackKernel,
      event_kind::kResumed,
      event_kind::kTimeLimitRequest,
      event_kind::kTimeLimitCheckpoint,
      event_kind::kTimeLimitMissed,
      event_kind::kTimeLimitNotRequeued,
      event_kind::kTerminationCheckpoint,
      event_kind::kTerminated,
      event_kind::kRequeuedBySlurm,
      event_kind::kPreempted,
      event_kind::kFinished,
      event_kind::kRecovery,
      event_kind::kHangStop,
      event_kind::kRestarted,
      event_kind::kRestored,
      event_kind::kFirstStep,
      event_kind::kResized,
      event_kind::kProgress,
      event_kind::kBadLoss,
      event_kind::kReplanned,
      event_kind::kUsageSample,
      event_kind::kUsage,
      event_kind::kIdle,
      event_kind::kStraggler,
      event_kind::kFtQuorum,
      event_kind::kFtHealed,
      event_kind::kFtDiscarded,
  };
  return kinds;
}

std::string FormatEventFields(const EventFields& fields) {
  std::string out;
  for (const auto& [key, value] : fields) {
    if (!out.empty()) out += ' ';
    for (char c : key) out += KeyChar(c) ? c : '_';
    if (key.empty()) out += '_';
    out += '=';
    if (!NeedsQuotes(value)) {
      out += value;
      continue;
    }
    out += '"';
    for (char c : value) {
      if (c == '"' || c == '\\') out += '\\';
      out += c == '\n' ? ' ' : c;  // one event, one line (multi-line stacks use ';' instead)
    }
    out += '"';
  }
  return out;
}

EventFields ParseEventFields(std::string_view d) {
  EventFields out;
  std::string text;  // free text that is not key=value
  size_t i = 0;
  auto add_text = [&text](std::string_view t) {
    if (!text.empty()) text += ' ';
    text += t;
  };
  while (i < d.size()) {
    while (i < d.size() && d[i] == ' ') ++i;
    if (i >= d.size()) break;
    size_t k = i;
    while (k < d.size() && KeyChar(d[k])) ++k;
    if (k == i || k >= d.size() || d[k] != '=') {  // not a key=: a free-text word
      size_t end = d.find(' ', i);
      if (end == std::string_view::npos) end = d.size();
      add_text(d.substr(i, end - i));
      i = end;
      continue;
    }
    std::string key(d.substr(i, k - i));
    std::string value;
    i = k + 1;
    if (i < d.size() && d[i] == '"') {
      ++i;
      while (i < d.size() && d[i] != '"') {
        if (d[i] == '\\' && i + 1 < d.size()) ++i;
        value += d[i++];
      }
      if (i < d.size()) ++i;  // the closing quote
    } else {
      while (i < d.size() && d[i] != ' ') value += d[i++];
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  if (!text.empty()) out.emplace_back("text", text);
  return out;
}

std::vector<JournalEvent> MergeTimelines(const std::vector<std::vector<JournalEvent>>& journals) {
  struct Keyed {
    const JournalEvent* e;
    size_t journal, index;
  };
  std::vector<Keyed> all;
  for (size_t j = 0; j < journals.size(); ++j) {
    for (size_t i = 0; i < journals[j].size(); ++i) all.push_back({&journals[j][i], j, i});
  }
  std::stable_sort(all.begin(), all.end(), [](const Keyed& a, const Keyed& b) {
    return std::tie(a.e->time, a.e->node, a.journal, a.index) <
           std::tie(b.e->time, b.e->node, b.journal, b.index);
  });
  std::vector<JournalEvent> out;
  std::set<std::tuple<double, std::string, std::string, std::string, int, int64_t, std::string>>
      seen;
  for (const auto& k : all) {
    const JournalEvent& e = *k.e;
    if (!seen.insert({e.time, e.node, e.job_id, e.kind, e.rank, e.step, e.detail}).second) continue;
    out.push_back(e);
  }
  return out;
}

std::string FormatEventTime(double epoch_s, bool iso) {
  // A time read from storage or a client may be anything: converting one beyond time_t (or NaN)
  // is undefined (found by fuzz/journal_fuzz), so it is clamped to the years 1..9999, NaN to 0.
  if (std::isnan(epoch_s)) epoch_s = 0;
  epoch_s = std::clamp(epoch_s, -62135596800.0, 253402300799.0);
  double whole = std::floor(epoch_s);
  auto ms = static_cast<int>(std::lround((epoch_s - whole) * 1000));
  auto t = static_cast<time_t>(whole);
  if (ms >= 1000) {
    ms -= 1000;
    ++t;
  }
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d%c%02d:%02d:%02d.%03d%s", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, iso ? 'T' : ' ', tm.tm_hour, tm.tm_min, tm.tm_sec, ms,
                iso ? "Z" : "");
  return buf;
}

std::optional<double> ParseEventTime(std::string_view text) {
  const std::string s(text);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0, used = 0;
  char sep = 0;
  const int n = std::sscanf(s.c_str(), "%4d-%2d-%2d%n%c%2d:%2d%n:%2d%n.%3d%n", &y, &mo, &d, &used, &sep,
                            &h, &mi, &used, &sec, &used, &ms, &used);
  const bool date_only = n == 3 && used == 10;
  if (!date_only && (n < 6 || (sep != ' ' && sep != 'T'))) return std::nullopt;
  const std::string rest = s.substr(static_cast<size_t>(used));
  if (!(rest.empty() || (rest == "Z" && sep == 'T'))) return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

namespace {

bool PerRankKind(const std::string& kind) {
  return kind == event_kind::kCkptCommitted || kind == event_kind::kCkptUploaded ||
         kind == event_kind::kCkptComplete || kind == event_kind::kCkptRestored || kind == event_kind::kFreshStart ||
         kind == event_kind::kRestored;
}

// "0-3,5,7-8" for a sorted set.
std::string RankList(const std::set<int>& ranks) {
  std::string out;
  for (auto it = ranks.begin(); it != ranks.end();) {
    int first = *it, last = *it;
    for (++it; it != ranks.end() && *it == last + 1; ++it) last = *it;
    if (!out.empty()) out += ",";
    out += std::to_string(first) + (last > first ? "-" + std::to_string(last) : "");
  }
  return out;
}

}  // namespace

std::vector<JournalEvent> FoldPerRankEvents(const std::vector<JournalEvent>& events,
                                            size_t* folded) {
  struct Group {
    size_t row;  // index into out
    std::string first_detail;
    std::set<std::string> nodes;
    std::set<int> ranks;
    size_t count = 0;
  };
  std::vector<JournalEvent> out;
  std::vector<Group> groups;
  std::map<std::pair<std::string, int64_t>, size_t> open;  // (kind, step) -> groups index
  for (const auto& e : events) {
    if (e.kind == event_kind::kStepStarted || e.kind == event_kind::kRequeue ||
        e.kind == event_kind::kRestarted) {
      open.clear();  // a new run, or a new generation of the program (in place)
    }
    if (!PerRankKind(e.kind)) {
      out.push_back(e);
      continue;
    }
    auto key = std::make_pair(e.kind, e.step);
    auto it = open.find(key);
    if (it == open.end()) {
      it = open.emplace(key, groups.size()).first;
      groups.push_back({out.size(), e.detail, {}, {}, 0});
      out.push_back(e);
    }
    Group& g = groups[it->second];
    g.count++;
    if (!e.node.empty()) g.nodes.insert(e.node);
    if (e.rank >= 0) g.ranks.insert(e.rank);
  }
  for (const auto& g : groups) {
    if (g.count < 2) continue;
    JournalEvent& row = out[g.row];
    if (g.nodes.size() > 1) row.node = *g.nodes.begin() + "+" + std::to_string(g.nodes.size() - 1);
    if (g.ranks.size() != 1) row.rank = -1;
    row.detail = std::to_string(g.count) + " events" +
                 (g.ranks.empty() ? std::string() : ", ranks " + RankList(g.ranks)) + " on " +
                 std::to_string(g.nodes.size()) + (g.nodes.size() == 1 ? " node: " : " nodes: ") +
                 g.first_detail;
  }
  if (folded) *folded = events.size() - out.size();
  return out;
}

std::string RenderEventsTable(const std::string& job_id, const std::vector<JournalEvent>& all,
                              bool fold_per_rank) {
  if (all.empty()) return "no events for job " + job_id + "\n";
  size_t saved = 0;
  const std::vector<JournalEvent> events = fold_per_rank ? FoldPerRankEvents(all, &saved) : all;
  size_t node_w = 4, kind_w = 4;
  std::set<std::string> nodes;
  for (const auto& e : all) {
    if (!e.node.empty()) nodes.insert(e.node);
  }
  for (const auto& e : events) {
    node_w = std::max(node_w, EscapeControl(e.node).size());
    kind_w = std::max(kind_w, EscapeControl(e.kind).size());
  }
  auto pad = [](std::string s, size_t w) {
    if (s.size() < w) s.append(w - s.size(), ' ');
    return s;
  };
  auto num = [](int64_t v) { return v < 0 ? std::string("-") : std::to_string(v); };
  std::string out = pad("TIME (UTC)", 23) + "  " + "   +SECONDS" + "  " + pad("NODE", node_w) +
                    "  " + " RANK" + "  " + "  STEP" + "  " + pad("KIND", kind_w) + "  DETAIL\n";
  const double t0 = events.front().time;
  for (const auto& e : events) {
    char rel[32], rank[16], step[24];
    std::snprintf(rel, sizeof rel, "%11.3f", e.time - t0);
    std::snprintf(rank, sizeof rank, "%5s", num(e.rank).c_str());
    std::snprintf(step, sizeof step, "%6s", num(e.step).c_str());
    std::string line = FormatEventTime(e.time, false) + "  " + rel + "  " +
                       pad(e.node.empty() ? "-" : EscapeControl(e.node), node_w) + "  " + rank + "  " + step +
                       "  " + pad(EscapeControl(e.kind), kind_w) + "  " + EscapeControl(e.detail);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  out += std::to_string(all.size()) + (all.size() == 1 ? " event" : " events") + " from " +
         std::to_string(nodes.size()) + (nodes.size() == 1 ? " node" : " nodes");
  if (saved > 0) {
    out += " (per-rank checkpoint events folded into " +
           std::to_string(events.size()) + " rows; --all shows each)";
  }
  out += "\n";
  return out;
}

std::string EncodeEventsJson(const std::string& job_id, const std::vector<JournalEvent>& events) {
  std::string out = "{\"job_id\": ";
  AppendJsonString(&out, job_id);
  out += ", \"events\": [";
  for (size_t i = 0; i < events.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    AppendEventJson(&out, events[i]);
  }
  out += events.empty() ? "]}\n" : "\n]}\n";
  return out;
}

namespace {

Result<Json::Value> ParseJson(std::string_view text, const std::string& what) {
  Json::CharReaderBuilder b;
  b["collectComments"] = false;
  std::unique_ptr<Json::CharReader> reader(b.newCharReader());
  Json::Value v;
  std::string errs;
  if (!reader->parse(text.data(), text.data() + text.size(), &v, &errs)) {
    return Status::Error(what + ": " + errs.substr(0, errs.find('\n')));
  }
  return v;
}

Result<std::vector<JournalEvent>> EventsFromJson(const Json::Value& v) {
  if (!v.isObject() || !v["events"].isArray()) {
    return Status::Error("events JSON: no \"events\" array");
  }
  std::vector<JournalEvent> out;
  for (Json::ArrayIndex i = 0; i < v["events"].size(); ++i) {
    const Json::Value& e = v["events"][i];
    std::string where = "events JSON: events[" + std::to_string(i) + "]: ";
    if (!e.isObject()) return Status::Error(where + "not an object");
    JournalEvent ev;
    if (!e["time"].isNumeric()) return Status::Error(where + "time: not a number");
    ev.time = e["time"].asDouble();
    for (const char* key : {"node", "job_id", "kind", "detail"}) {
      if (!e[key].isNull() && !e[key].isString()) {
        return Status::Error(where + key + ": not a string");
      }
    }
    ev.node = e["node"].asString();
    ev.job_id = e["job_id"].asString();
    ev.kind = e["kind"].asString();
    ev.detail = e["detail"].asString();
    if (ev.kind.empty()) return Status::Error(where + "kind: missing");
    // isInt/isInt64, not isIntegral: asInt/asInt64 throw on an integer beyond their range
    // (found by fuzz/journal_fuzz).
    if (!e["rank"].isNull() && !e["rank"].isInt()) {
      return Status::Error(where + "rank: not an integer");
    }
    if (!e["step"].isNull() && !e["step"].isInt64()) {
      return Status::Error(where + "step: not an integer");
    }
    ev.rank = e["rank"].isNull() ? -1 : e["rank"].asInt();
    ev.step = e["step"].isNull() ? -1 : e["step"].asInt64();
    out.push_back(std::move(ev));
  }
  return out;
}

}  // namespace

Result<std::vector<JournalEvent>> DecodeEventsJson(std::string_view text) {
  auto v = ParseJson(text, "events JSON");
  if (!v) return v.status();
  return EventsFromJson(*v);
}

namespace {

std::string NodeKeyName(const std::string& node) {
  std::string name = node.empty() ? "_" : node;
  for (char& c : name) {
    if (!KeyChar(c)) c = '_';
  }
  if (name == "." || name == "..") name = "_";
  return name;
}

// A non-negative decimal integer of 1..18 digits.
bool ParseId(std::string_view s, int64_t* out) {
  if (s.empty() || s.size() > 18) return false;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::string PublishedJournalKey(const std::string& job_id, const std::string& node) {
  return PublishedJournalPrefix(job_id) + NodeKeyName(node) + ".json";
}

std::string PublishedSegmentKey(const std::string& job_id, const std::string& node,
                                int64_t first_id, int64_t last_id) {
  char range[64];
  std::snprintf(range, sizeof(range), "%012lld-%012lld.json", static_cast<long long>(first_id),
                static_cast<long long>(last_id));
  return PublishedJournalPrefix(job_id) + NodeKeyName(node) + "/" + range;
}

bool ParsePublishedKey(const std::string& job_id, const std::string& key, PublishedKey* out) {
  const std::string prefix = PublishedJournalPrefix(job_id);
  if (key.compare(0, prefix.size(), prefix) != 0 || !EndsWith(key, ".json")) return false;
  std::string_view rest(key);
  rest.remove_prefix(prefix.size());
  rest.remove_suffix(5);
  PublishedKey k;
  k.key = key;
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    if (rest.empty()) return false;
    k.node = std::string(rest);
    k.whole = true;
    k.last_id = INT64_MAX;
  } else {
    std::string_view range = rest.substr(slash + 1);
    const size_t dash = range.find('-');
    if (slash == 0 || dash == std::string_view::npos ||
        !ParseId(range.substr(0, dash), &k.first_id) ||
        !ParseId(range.substr(dash + 1), &k.last_id) || k.first_id > k.last_id) {
      return false;
    }
    k.node = std::string(rest.substr(0, slash));
  }
  *out = std::move(k);
  return true;
}

std::vector<PublishedKey> CoveringSegments(std::vector<PublishedKey> keys) {
  // By node, then first_id ascending and last_id descending: a segment is contained in another
  // exactly when an earlier one of its node reaches at least as far.
  std::sort(keys.begin(), keys.end(), [](const PublishedKey& a, const PublishedKey& b) {
    return std::make_tuple(a.node, !a.whole, a.first_id, -a.last_id) <
           std::make_tuple(b.node, !b.whole, b.first_id, -b.last_id);
  });
  std::vector<PublishedKey> out;
  std::string node;
  int64_t reach = -1;
  for (auto& k : keys) {
    if (k.whole) {  // an earlier version's journal: read as it is (its events are not ids)
      out.push_back(std::move(k));
      continue;
    }
    if (k.node != node) {
      node = k.node;
      reach = -1;
    }
    if (k.last_id <= reach) continue;
    reach = k.last_id;
    out.push_back(std::move(k));
  }
  return out;
}

std::string PublishedJournalPrefix(const std::string& job_id) { return job_id + "/"; }

std::string EncodePublishedJournal(const PublishedJournal& j) {
  std::string out = "{\"job_id\": ";
  AppendJsonString(&out, j.job_id);
  out += ", \"node\": ";
  AppendJsonString(&out, j.node);
  out += ", \"uid\": ";
  AppendJsonInt(&out, j.uid);
  out += ", \"updated\": ";
  AppendJsonNumber(&out, j.updated);
  out += ", \"events\": [";
  for (size_t i = 0; i < j.events.size(); ++i) {
    out += i ? ",\n  " : "\n  ";
    AppendEventJson(&out, j.events[i], false);
  }
  out += j.events.empty() ? "]}\n" : "\n]}\n";
  return out;
}

Result<PublishedJournal> DecodePublishedJournal(std::string_view text) {
  auto v = ParseJson(text, "published journal");
  if (!v) return v.status();
  if (!v->isObject()) return Status::Error("published journal: not a JSON object");
  PublishedJournal j;
  for (const char* key : {"job_id", "node"}) {
    if (!(*v)[key].isString()) {
      return Status::Error(std::string("published journal: ") + key + ": not a string");
    }
  }
  j.job_id = (*v)["job_id"].asString();
  j.node = (*v)["node"].asString();
  if (!(*v)["uid"].isInt64()) return Status::Error("published journal: uid: not an integer");
  j.uid = (*v)["uid"].asInt64();
  if (!(*v)["updated"].isNull() && !(*v)["updated"].isNumeric()) {
    return Status::Error("published journal: updated: not a number");
  }
  j.updated = (*v)["updated"].asDouble();
  auto events = EventsFromJson(*v);
  if (!events) return events.status();
  j.events = std::move(*events);
  return j;
}

}  // namespace autopar
