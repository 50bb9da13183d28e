// How `autopar events` and the failure decision grow with the job: synthetic journals
// of 4 to 10,000 nodes, each node with the events one job leaves on it (a run of 4 ranks per node
// that checkpoints 20 times: committed and uploaded per rank, complete per step, plus the run's
// own events), as autopard's Events() handles them after reading the published segments: decode
// every node's segment, merge in time order, fold per-rank rows, render the table and the JSON.
// The decision paths: the job's node list expanded from its hostlist and one requeue decision
// excluding a lost node among them; and an in-place restart as rank 0's launcher makes it after a
// hang every node saw: one stop notice per rank (4 per node; the hung rank's class `hang`, its
// peers' collectives failed with exit 1) decoded, the cause chosen (FirstFailure) and the
// recovery decided (DecideRecovery).
//
// The events' JSON is measured twice side by side: as EncodeEventsJson writes it (directly,
// core/json_text.h) and as it was written before (a Json::Value per event, written by jsoncpp),
// kept here as the baseline.
#include <benchmark/benchmark.h>
#include <json/json.h>

#include <string>
#include <vector>

#include "core/failure/recovery_policy.h"
#include "core/failure/requeue_policy.h"
#include "core/failure/timeline.h"
#include "core/hostlist.h"
#include "core/json_fields.h"
#include "launcher/restart_logic.h"

namespace {

constexpr int kRanksPerNode = 4;
constexpr int kCheckpoints = 20;

std::string Node(int64_t i) { return "node" + std::to_string(i + 1); }

// One node's published journal segment of job 42 (EncodePublishedJournal's text).
std::string NodeSegment(int64_t node) {
  autopar::PublishedJournal j;
  j.job_id = "42";
  j.node = Node(node);
  j.uid = 1000;
  j.updated = 1796029262.0;
  double t = 1796029000.0 + static_cast<double>(node) * 1e-4;
  const std::string n = Node(node);
  j.events.push_back({t, n, "42", "step_started", -1, -1, "nodes=" + std::to_string(node + 1) + " ranks=4"});
  for (int c = 0; c < kCheckpoints; ++c) {
    const int64_t step = (c + 1) * 100;
    for (int r = 0; r < kRanksPerNode; ++r) {
      const int rank = static_cast<int>(node) * kRanksPerNode + r;
      j.events.push_back({t + c * 60.0 + r * 0.01, n, "42", "ckpt_committed", rank, step, "4194304 bytes -> s3://b/run"});
      j.events.push_back({t + c * 60.0 + 5 + r * 0.01, n, "42", "ckpt_uploaded", rank, step, "s3://b/run/job-42/step-" + std::to_string(step) + " (4194304 bytes)"});
    }
    j.events.push_back({t + c * 60.0 + 6, n, "42", "ckpt_complete", -1, step, "s3://b/run/job-42/step-" + std::to_string(step) + "/manifest.json"});
  }
  j.events.push_back({t + 1300, n, "42", "finished", -1, -1, "exit=0"});
  return autopar::EncodePublishedJournal(j);
}

// The baseline: EncodeEventsJson as it was until 2026-12-03 (a Json::Value per event, jsoncpp's
// writer), for the ratio in bench/RESULTS.md.
std::string JsoncppEventsJson(const std::string& job_id, const std::vector<autopar::JournalEvent>& events) {
  std::string out = "{\"job_id\": " + autopar::CompactJson(Json::Value(job_id)) + ", \"events\": [";
  for (size_t i = 0; i < events.size(); ++i) {
    const autopar::JournalEvent& e = events[i];
    Json::Value v(Json::objectValue);
    v["time"] = e.time;
    v["time_utc"] = autopar::FormatEventTime(e.time, true);
    v["node"] = e.node;
    v["job_id"] = e.job_id;
    v["kind"] = e.kind;
    v["rank"] = e.rank;
    v["step"] = Json::Int64(e.step);
    v["detail"] = e.detail;
    Json::Value f(Json::objectValue);
    for (const auto& [k, val] : autopar::ParseEventFields(e.detail)) f[k] = val;
    v["fields"] = f;
    out += (i ? ",\n  " : "\n  ") + autopar::CompactJson(v);
  }
  out += events.empty() ? "]}\n" : "\n]}\n";
  return out;
}

void BM_EventsMerge(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  std::vector<std::string> segments;
  for (int64_t i = 0; i < nodes; ++i) segments.push_back(NodeSegment(i));
  size_t events = 0, bytes = 0;
  for (auto _ : state) {
    std::vector<std::vector<autopar::JournalEvent>> journals;
    journals.reserve(segments.size());
    for (const auto& s : segments) journals.push_back(autopar::DecodePublishedJournal(s).value().events);
    auto merged = autopar::MergeTimelines(journals);
    events = merged.size();
    std::string table = autopar::RenderEventsTable("42", merged, true);
    std::string json = autopar::EncodeEventsJson("42", merged);
    bytes = table.size() + json.size();
    benchmark::DoNotOptimize(table);
    benchmark::DoNotOptimize(json);
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["output_MB"] = static_cast<double>(bytes) / 1e6;
}

// The same, phase by phase at one size (where the time goes).
void BM_EventsPhases(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  // 0 decode, 1 merge, 2 table, 3 json, 4 json as jsoncpp wrote it (the baseline)
  const int phase = static_cast<int>(state.range(1));
  std::vector<std::string> segments;
  for (int64_t i = 0; i < nodes; ++i) segments.push_back(NodeSegment(i));
  std::vector<std::vector<autopar::JournalEvent>> journals;
  for (const auto& seg : segments) journals.push_back(autopar::DecodePublishedJournal(seg).value().events);
  auto merged = autopar::MergeTimelines(journals);
  for (auto _ : state) {
    if (phase == 0) {
      for (const auto& seg : segments) benchmark::DoNotOptimize(autopar::DecodePublishedJournal(seg));
    } else if (phase == 1) {
      benchmark::DoNotOptimize(autopar::MergeTimelines(journals));
    } else if (phase == 2) {
      benchmark::DoNotOptimize(autopar::RenderEventsTable("42", merged, true));
    } else if (phase == 3) {
      benchmark::DoNotOptimize(autopar::EncodeEventsJson("42", merged));
    } else {
      benchmark::DoNotOptimize(JsoncppEventsJson("42", merged));
    }
  }
  static const char* kNames[] = {"decode", "merge", "fold+table", "json", "json (jsoncpp, before)"};
  state.SetLabel(kNames[phase]);
}

void BM_RequeueDecision(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  const std::string hostlist = "node[1-" + std::to_string(nodes) + "]";
  autopar::RequeueSettings settings;
  settings.max_restarts = 3;
  autopar::Failure f;
  f.kind = autopar::FailureClass::kNodeLoss;
  f.node = Node(nodes / 2);
  for (auto _ : state) {
    auto list = autopar::ExpandHostlist(hostlist).value();
    std::vector<std::string> excluded(list.begin(), list.begin() + std::min<int64_t>(nodes / 100, 64));
    auto d = autopar::DecideRequeue(settings, f, 0, std::nullopt, excluded);
    benchmark::DoNotOptimize(d);
  }
}

void BM_RestartDecision(benchmark::State& state) {
  const int64_t nodes = state.range(0);
  const int64_t ranks = nodes * kRanksPerNode;
  const std::string token = "0123456789abcdef";
  std::vector<std::string> lines;
  for (int64_t r = 0; r < ranks; ++r) {
    autopar::FailureReport f;
    f.generation = 0;
    f.rank = static_cast<int>(r);
    f.node = Node(r / kRanksPerNode);
    f.kind = r == ranks - 1 ? "hang" : "rank-crash";
    f.exit_status = r == ranks - 1 ? 137 : 1;
    f.run_s = 600;
    f.detected = 1796029000.0 + static_cast<double>(r % 97) * 1e-3;
    lines.push_back(autopar::EncodePeerMessage(token, autopar::StopNotice(f, static_cast<int>(r))));
    lines.back().pop_back();  // the newline
  }
  autopar::RequeueSettings settings;
  settings.max_restarts = 3;
  for (auto _ : state) {
    std::vector<std::optional<autopar::FailureReport>> reports(static_cast<size_t>(ranks));
    for (size_t i = 0; i < lines.size(); ++i) {
      auto m = autopar::DecodePeerMessage(lines[i], token);
      if (!m) continue;
      auto f = autopar::FailureOf(*m);
      if (f) reports[i] = std::move(*f);
    }
    auto cause = autopar::FirstFailure(reports);
    if (!cause || cause->kind != "hang") state.SkipWithError("the hang is not the cause");
    autopar::Failure failure;
    failure.kind = autopar::FailureClass::kHang;
    failure.node = cause ? cause->node : "";
    failure.rank = cause ? cause->rank : -1;
    failure.made_progress = true;
    auto d = autopar::DecideRecovery(settings, failure, 0, 0, 3, std::nullopt);
    benchmark::DoNotOptimize(d);
  }
  state.SetLabel(std::to_string(ranks) + " stop notices");
}

}  // namespace

BENCHMARK(BM_EventsMerge)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EventsPhases)->Args({1000, 0})->Args({1000, 1})->Args({1000, 2})->Args({1000, 3})->Args({1000, 4})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RequeueDecision)->Arg(4)->Arg(32)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RestartDecision)->Arg(4)->Arg(32)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
