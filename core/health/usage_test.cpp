#include "core/health/usage.h"

#include <gtest/gtest.h>

#include <map>

namespace autopar {
namespace {

std::map<std::string, std::string> AsMap(const EventFields& f) { return {f.begin(), f.end()}; }

UsageSample Sample(double t, int rank, double cpu, std::optional<double> gpu = std::nullopt) {
  UsageSample s;
  s.time = t;
  s.rank = rank;
  s.cpu_cores = cpu;
  s.rss_gib = 0.5;
  s.gpu_util = gpu;
  if (gpu) s.gpu_mem_gib = 10;
  return s;
}

TEST(NodeUsageTest, ASummaryPerIntervalOverTheRanksOfTheNode) {
  NodeUsage u(10, 0, 100);
  u.Add(Sample(102, 0, 1.0, 80));
  u.Add(Sample(104, 0, 0.8, 90));
  u.Add(Sample(104, 1, 0.5, 70));
  u.Progress(105);
  EXPECT_TRUE(u.Due(109).empty());
  auto due = u.Due(110);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].first, "usage");
  auto m = AsMap(due[0].second);
  EXPECT_EQ(m["ranks"], "2");
  EXPECT_EQ(m["cpu_cores"], "1.40");      // rank 0: 0.9, rank 1: 0.5
  EXPECT_EQ(m["cpu_cores_min"], "0.50");
  EXPECT_EQ(m["cpu_cores_max"], "0.90");
  EXPECT_EQ(m["rss_gib"], "1.00");
  EXPECT_EQ(m["gpu_util"], "77.5");        // (85 + 70) / 2
  EXPECT_EQ(m["gpu_mem_gib"], "20.00");
  EXPECT_EQ(m["heartbeats"], "1");
  EXPECT_EQ(m["rank_cpu_cores"], "0:0.90,1:0.50");
  EXPECT_TRUE(u.Due(115).empty()) << "nothing new";
}

TEST(NodeUsageTest, IdleAfterTheTimeoutWithoutProgressOrUseOncePerStretch) {
  NodeUsage u(1000, 30, 100);
  EXPECT_TRUE(u.Due(200).empty()) << "no sample yet: nothing is known";
  u.Add(Sample(201, 0, 0.01));
  auto due = u.Due(201);
  ASSERT_EQ(due.size(), 1u);  // idle since the start, 101 s ago
  EXPECT_EQ(due[0].first, "idle");
  auto m = AsMap(due[0].second);
  EXPECT_EQ(m["idle_s"], "101.0");
  EXPECT_EQ(m["cpu_cores"], "0.01");
  EXPECT_NE(m["reason"].find("--idle-timeout=30"), std::string::npos) << m["reason"];
  u.Add(Sample(210, 0, 0.01));
  EXPECT_TRUE(u.Due(240).empty()) << "told once";
  // Use ends the stretch; a new one is told again after the timeout.
  u.Add(Sample(241, 0, 2.0));
  EXPECT_TRUE(u.Due(260).empty());
  u.Add(Sample(262, 0, 0.0));
  EXPECT_TRUE(u.Due(270).empty());
  EXPECT_EQ(u.Due(271).size(), 1u);
}

TEST(NodeUsageTest, ProgressOrAGpuInUseIsNotIdle) {
  NodeUsage u(1000, 30, 100);
  u.Add(Sample(101, 0, 0.0));
  u.Progress(125);
  EXPECT_TRUE(u.Due(150).empty());  // 25 s since the heartbeat
  u.Add(Sample(150, 0, 0.0, 95.0));  // the GPU works while the CPU waits
  EXPECT_TRUE(u.Due(175).empty());
  EXPECT_EQ(u.Due(180).size(), 1u);
}

}  // namespace
}  // namespace autopar
