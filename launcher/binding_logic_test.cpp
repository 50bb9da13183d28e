#include <gtest/gtest.h>

#include <set>

#include "launcher/launch.h"

namespace autopar {
namespace {

TEST(CpuList, ParseAndFormat) {
  struct Case {
    std::string text;
    bool ok;
    std::vector<int> cpus;
    std::string formatted;
  } cases[] = {
      {"0-3,8", true, {0, 1, 2, 3, 8}, "0-3,8"},
      {"5,1,2", true, {1, 2, 5}, "1-2,5"},
      {"0\n", true, {0}, "0"},
      {"", true, {}, ""},
      {"3-1", false, {}, ""},
      {"a", false, {}, ""},
      {"1,,2", false, {}, ""},
      {"-1", false, {}, ""},
  };
  for (const auto& c : cases) {
    auto r = ParseCpuList(c.text);
    ASSERT_EQ(r.ok(), c.ok) << c.text;
    if (!r.ok()) continue;
    EXPECT_EQ(*r, c.cpus) << c.text;
    EXPECT_EQ(FormatCpuList(*r), c.formatted);
  }
}

std::vector<int> Range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i < hi; ++i) v.push_back(i);
  return v;
}

void ExpectDisjointCover(const std::vector<std::vector<int>>& sets, const std::vector<int>& all) {
  std::set<int> seen;
  for (const auto& s : sets) {
    EXPECT_FALSE(s.empty());
    for (int c : s) EXPECT_TRUE(seen.insert(c).second) << "cpu " << c << " given twice";
  }
  EXPECT_EQ(seen, std::set<int>(all.begin(), all.end()));
}

TEST(SplitCpus, EvenSplitWithoutTopology) {
  struct Case {
    std::vector<int> allowed;
    int local_size;
    std::vector<std::vector<int>> want;
  } cases[] = {
      {{0, 1}, 2, {{0}, {1}}},
      {Range(0, 8), 4, {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
      {Range(0, 7), 3, {{0, 1, 2}, {3, 4}, {5, 6}}},
      {{4, 6, 9}, 1, {{4, 6, 9}}},
  };
  for (const auto& c : cases) {
    auto got = SplitCpus({c.allowed, {}, {}, c.local_size});
    EXPECT_EQ(got, c.want);
    ExpectDisjointCover(got, c.allowed);
  }
}

TEST(SplitCpus, FewerCpusThanRanksShareRoundRobin) {
  auto got = SplitCpus({{0, 1}, {}, {}, 3});
  EXPECT_EQ(got, (std::vector<std::vector<int>>{{0}, {1}, {0}}));
}

TEST(SplitCpus, EmptyInputs) {
  EXPECT_TRUE(SplitCpus({{}, {}, {}, 2}).empty());
  EXPECT_TRUE(SplitCpus({{0, 1}, {}, {}, 0}).empty());
}

TEST(SplitCpus, NumaNearGpu) {
  // Two domains of 4 CPUs with interleaved numbering; GPUs 0,1 near domain 1, GPUs 2,3 near 0.
  std::vector<std::vector<int>> domains = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  auto got = SplitCpus({Range(0, 8), domains, {1, 1, 0, 0}, 4});
  EXPECT_EQ(got, (std::vector<std::vector<int>>{{1, 3}, {5, 7}, {0, 2}, {4, 6}}));
  ExpectDisjointCover(got, Range(0, 8));
}

TEST(SplitCpus, NumaOrderWithoutGpuLocality) {
  std::vector<std::vector<int>> domains = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  auto got = SplitCpus({Range(0, 8), domains, {}, 2});
  EXPECT_EQ(got, (std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}}));
}

TEST(SplitCpus, CrowdedDomainFallsBackToEvenSplit) {
  // All four ranks near domain 0, which has only 2 allowed CPUs: an even split over all.
  std::vector<std::vector<int>> domains = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  std::vector<int> allowed = {0, 1, 4, 5, 6, 7};
  auto got = SplitCpus({allowed, domains, {0, 0, 0, 0}, 4});
  ExpectDisjointCover(got, allowed);
  EXPECT_EQ(got[0], (std::vector<int>{0, 1}));
}

TEST(SplitCpus, AllowedCpusOutsideDomainsAreKept) {
  auto got = SplitCpus({{0, 1, 2, 3}, {{0, 1}}, {}, 2});
  ExpectDisjointCover(got, {0, 1, 2, 3});
}

TEST(SelectGpu, Cases) {
  struct Case {
    std::string visible;
    int local_rank, local_size;
    bool present;
    std::string device;
    int index;
    bool shared;
  } cases[] = {
      {"0,1,2,3", 2, 4, true, "2", 2, false},
      {"4,5", 1, 2, true, "5", 1, false},
      {"GPU-aa,GPU-bb", 0, 2, true, "GPU-aa", 0, false},
      {"0", 1, 2, true, "0", 0, true},
      {"0, 1", 1, 2, true, "1", 1, false},
      {"", 0, 2, false, "", 0, false},
  };
  for (const auto& c : cases) {
    auto g = SelectGpu(SplitDeviceList(c.visible), c.local_rank, c.local_size);
    ASSERT_EQ(g.has_value(), c.present) << c.visible;
    if (!g) continue;
    EXPECT_EQ(g->device, c.device);
    EXPECT_EQ(g->index, c.index);
    EXPECT_EQ(g->shared, c.shared);
  }
}

}  // namespace
}  // namespace autopar
