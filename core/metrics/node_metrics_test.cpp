#include "core/metrics/node_metrics.h"

#include <gtest/gtest.h>
#include <json/json.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace autopar {
namespace {

// The value of the sample line that starts with `series` ("name" or "name{...}"), or -1.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

JournalEvent Ev(const std::string& job, const std::string& kind, const std::string& detail, double t = 1000,
                int64_t step = -1) {
  return JournalEvent{t, "node1", job, kind, -1, step, detail};
}

TEST(NodeMetricsTest, EveryCounterExistsAtZeroWithItsLabels) {
  NodeMetrics m("0.1.0", 100);
  const std::string text = m.Render({}, 200);
  EXPECT_EQ(Sample(text, "autopard_build_info{version=\"0.1.0\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_start_time_seconds"), 100);
  EXPECT_EQ(Sample(text, "autopard_checkpoint_commits_total"), 0);
  EXPECT_EQ(Sample(text, "autopard_heartbeats_total"), 0);
  for (const char* cls : {"node-loss", "rank-crash", "hang", "time-limit", "bad-loss", "oom"}) {
    for (const char* name : {"autopard_failures_total", "autopard_restarts_in_place_total", "autopard_requeues_total"}) {
      EXPECT_EQ(Sample(text, std::string(name) + "{class=\"" + cls + "\"}"), 0) << name << " " << cls;
    }
  }
  EXPECT_EQ(Sample(text, "autopard_checkpoint_failures_total{kind=\"restore\"}"), 0);
  EXPECT_EQ(Sample(text, "autopard_upload_duration_seconds_count"), 0);
  EXPECT_EQ(text.find("autopard_job_step{"), std::string::npos);
}

TEST(NodeMetricsTest, CountsEventsByKindAndClass) {
  NodeMetrics m("v", 0);
  for (int i = 0; i < 3; ++i) m.Observe(Ev("7", "ckpt_committed", "100 bytes"));
  m.Observe(Ev("7", "ckpt_uploaded", "s3://b/x"));
  m.Observe(Ev("7", "ckpt_complete", "s3://b/x"));
  m.Observe(Ev("7", "ckpt_failed", "boom"));
  m.Observe(Ev("7", "ckpt_upload_retry", "attempt 1"));
  m.Observe(Ev("7", "heartbeat_missed", "ranks 0"));
  // A crash restarted in place, then a hang requeued: each counted under its own class.
  m.Observe(Ev("7", "failure", "class=rank-crash exit=1"));
  m.Observe(Ev("7", "recovery", "action=restart-in-place generation=1"));
  m.Observe(Ev("7", "failure", "class=hang"));
  m.Observe(Ev("7", "recovery", "action=requeue-path generation=2"));
  m.Observe(Ev("7", "requeue", "attempt=1 of=3"));
  m.Observe(Ev("8", "failure", "class=made-up"));
  m.Observe(Ev("7", "bad_loss", "kind=nan action=rollback"));
  for (int i = 0; i < 5; ++i) m.CountHeartbeat();
  m.ObserveUpload(1000, 2.0);
  const std::string text = m.Render({2, 1, 1, 3, 4096}, 1000);
  EXPECT_EQ(Sample(text, "autopard_checkpoint_commits_total"), 3);
  EXPECT_EQ(Sample(text, "autopard_checkpoint_uploads_total"), 1);
  EXPECT_EQ(Sample(text, "autopard_checkpoint_steps_completed_total"), 1);
  EXPECT_EQ(Sample(text, "autopard_checkpoint_failures_total{kind=\"upload\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_upload_retries_total"), 1);
  EXPECT_EQ(Sample(text, "autopard_heartbeats_missed_total"), 1);
  EXPECT_EQ(Sample(text, "autopard_failures_total{class=\"rank-crash\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_failures_total{class=\"hang\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_failures_total{class=\"other\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_restarts_in_place_total{class=\"rank-crash\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_restarts_in_place_total{class=\"hang\"}"), 0);
  EXPECT_EQ(Sample(text, "autopard_requeues_total{class=\"hang\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_bad_losses_total{action=\"rollback\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_heartbeats_total"), 5);
  EXPECT_EQ(Sample(text, "autopard_upload_queue_depth"), 3);
  EXPECT_EQ(Sample(text, "autopard_ckpt_steps_watched"), 3);
  EXPECT_EQ(Sample(text, "autopard_uploads_running"), 1);
  EXPECT_EQ(Sample(text, "autopard_uploads_waiting_retry"), 1);
  EXPECT_EQ(Sample(text, "autopard_upload_bytes_total"), 4096);
  EXPECT_EQ(Sample(text, "autopard_upload_throughput_bytes_per_second"), 500);
  EXPECT_EQ(Sample(text, "autopard_upload_duration_seconds_bucket{le=\"2.5\"}"), 1);
  EXPECT_EQ(Sample(text, "autopard_upload_duration_seconds_bucket{le=\"1\"}"), 0);
}

TEST(NodeMetricsTest, JobSeriesFollowProgressAndStragglersThenExpire) {
  NodeMetrics m("v", 0);
  m.Observe(Ev("42", "progress", "steps=10 step_s=0.250 samples_per_s=64.00 loss=2.500000 "
                                 "planned_step_s=0.200 planned_mfu=0.4000 mfu=0.3200 vs_plan=1.250",
               1000, 30));
  JournalEvent straggler = Ev("42", "straggler", "node=node2 compute_s=0.4 median_s=0.2 ratio=2.00 windows=3", 1001);
  straggler.rank = 3;
  m.Observe(straggler);
  std::string text = m.Render({}, 1002);
  EXPECT_EQ(Sample(text, "autopard_job_step{job=\"42\"}"), 30);
  EXPECT_EQ(Sample(text, "autopard_job_step_seconds{job=\"42\"}"), 0.25);
  EXPECT_EQ(Sample(text, "autopard_job_samples_per_second{job=\"42\"}"), 64);
  EXPECT_EQ(Sample(text, "autopard_job_mfu_ratio{job=\"42\"}"), 0.32);
  EXPECT_EQ(Sample(text, "autopard_job_planned_mfu_ratio{job=\"42\"}"), 0.4);
  EXPECT_EQ(Sample(text, "autopard_job_loss{job=\"42\"}"), 2.5);
  EXPECT_EQ(Sample(text, "autopard_job_tokens_per_second{job=\"42\"}"), -1);  // not reported
  EXPECT_EQ(Sample(text, "autopard_job_straggler_ratio{job=\"42\",rank=\"3\",node=\"node2\"}"), 2);
  EXPECT_EQ(Sample(text, "autopard_stragglers_total"), 1);
  // A later window replaces the values; a window without loss drops the loss.
  m.Observe(Ev("42", "progress", "steps=10 step_s=0.300", 1010, 40));
  text = m.Render({}, 1011);
  EXPECT_EQ(Sample(text, "autopard_job_step_seconds{job=\"42\"}"), 0.3);
  EXPECT_EQ(Sample(text, "autopard_job_loss{job=\"42\"}"), -1);
  text = m.Render({}, 1010 + NodeMetrics::kJobTtlS + 1);
  EXPECT_EQ(text.find("job=\"42\""), std::string::npos);
  EXPECT_EQ(Sample(text, "autopard_stragglers_total"), 1);  // counters stay
}

std::string ReadSource(const std::string& path) {
  std::ifstream in(std::string(AUTOPAR_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every family autopard renders ("# TYPE name type"), with its type.
std::map<std::string, std::string> RenderedFamilies() {
  NodeMetrics m("v", 0);
  m.Observe(Ev("42", "progress", "steps=1 step_s=1", 1000, 1));
  std::map<std::string, std::string> out;
  std::istringstream in(m.Render({}, 1000));
  std::string line;
  while (std::getline(in, line)) {
    std::smatch match;
    if (std::regex_match(line, match, std::regex("# TYPE (\\S+) (\\S+)"))) out[match[1]] = match[2];
  }
  return out;
}

TEST(NodeMetricsTest, DocsListEveryMetricWithItsType) {
  std::map<std::string, std::string> documented;
  std::istringstream in(ReadSource("docs/metrics.md"));
  std::string line;
  while (std::getline(in, line)) {
    std::smatch match;
    if (std::regex_search(line, match, std::regex("^\\| `(autopard_\\w+)` \\| (\\w+) \\|"))) {
      documented[match[1]] = match[2];
    }
  }
  EXPECT_EQ(documented, RenderedFamilies());
}

TEST(NodeMetricsTest, GrafanaDashboardQueriesOnlyRenderedMetrics) {
  Json::Value dash;
  std::istringstream in(ReadSource("etc/grafana/autopar.json"));
  ASSERT_TRUE(Json::parseFromStream(Json::CharReaderBuilder(), in, &dash, nullptr));
  const auto families = RenderedFamilies();
  int queries = 0;
  const std::regex metric_name("autopard_\\w+");
  for (const auto& panel : dash["panels"]) {
    for (const auto& target : panel["targets"]) {
      const std::string expr = target["expr"].asString();
      ++queries;
      for (std::sregex_iterator it(expr.begin(), expr.end(), metric_name), end; it != end; ++it) {
        std::string name = it->str();
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          const std::string base = name.substr(0, name.size() - std::min(name.size(), std::strlen(suffix)));
          if (name.size() > std::strlen(suffix) && name.compare(base.size(), std::string::npos, suffix) == 0 &&
              families.count(base) && families.at(base) == "histogram") {
            name = base;
          }
        }
        EXPECT_TRUE(families.count(name)) << panel["title"].asString() << ": " << expr;
      }
    }
  }
  EXPECT_GE(queries, 10);
}

}  // namespace
}  // namespace autopar
