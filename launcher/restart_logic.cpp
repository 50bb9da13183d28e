#include "restart_logic.h"

#include <algorithm>
#include <cstdlib>

#include "core/text.h"

namespace autopar {
namespace {

constexpr char kNoticeTag[] = "autopar-stop ";

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
  return f;
}

Result<FailureReport> ReportFromFields(const EventFields& fields, int rank) {
  FailureReport r;
  r.rank = rank;
  r.kind = FieldOf(fields, "class");
  if (r.kind != "rank-crash" && r.kind != "hang") {
    return Status::Error("failure report: class: unknown '" + r.kind + "'");
  }
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

std::string EncodeStopNotice(const std::string& token, const FailureReport& r) {
  EventFields f = {{"token", token}, {"rank", std::to_string(r.rank)}};
  for (auto& kv : ReportFields(r)) f.push_back(std::move(kv));
  return kNoticeTag + FormatEventFields(f) + "\n";
}

Result<FailureReport> DecodeStopNotice(const std::string& line, const std::string& token) {
  if (!StartsWith(line, kNoticeTag)) return Status::Error("stop notice: not a notice");
  EventFields f = ParseEventFields(std::string_view(line).substr(sizeof(kNoticeTag) - 1));
  if (token.empty() || FieldOf(f, "token") != token) {
    return Status::Error("stop notice: wrong token");
  }
  auto rank = ParseInt(FieldOf(f, "rank"), 0, INT32_MAX);
  if (!rank) return Status::Error("stop notice: rank: not a rank");
  return ReportFromFields(f, static_cast<int>(*rank));
}

std::optional<FailureReport> FirstFailure(const std::vector<std::optional<FailureReport>>& reports) {
  std::optional<FailureReport> first;
  for (const auto& r : reports) {
    if (!r) continue;
    if (!first || r->detected < first->detected ||
        (r->detected == first->detected && r->rank < first->rank)) {
      first = r;
    }
  }
  return first;
}

std::string EncodeVerdict(const RestartVerdict& v) {
  return v.restart ? "restart" : "exit " + std::to_string(v.exit_code);
}

Result<RestartVerdict> DecodeVerdict(const std::string& text) {
  RestartVerdict v;
  if (text == "restart") {
    v.restart = true;
    return v;
  }
  if (StartsWith(text, "exit ")) {
    if (auto code = ParseInt(text.substr(5), 0, 255)) {
      v.exit_code = static_cast<int>(*code);
      return v;
    }
  }
  return Status::Error("restart verdict: malformed '" + text + "'");
}

std::string FailureKey(int64_t generation) { return "autopar.fail." + std::to_string(generation); }
std::string VerdictKey(int64_t generation) {
  return "autopar.verdict." + std::to_string(generation);
}
std::string MasterKey(int64_t generation) {
  return generation == 0 ? "autopar.master" : "autopar.master." + std::to_string(generation);
}

}  // namespace autopar
