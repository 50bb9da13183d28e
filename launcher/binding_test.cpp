#include "binding.h"

#include <gtest/gtest.h>

#include <set>

namespace autopar {
namespace {

TEST(ParseNvidiaDeviceMinor, Cases) {
  struct Case {
    std::string text;
    int want;
  } cases[] = {
      {"Model: \t\t NVIDIA H100\nIRQ:   \t\t 45\nGPU UUID: \t GPU-1\nDevice Minor: \t 3\n", 3},
      {"Device Minor: 0\n", 0},
      {"Model: x\n", -1},
      {"Device Minor: x\n", -1},
  };
  for (const auto& c : cases) EXPECT_EQ(ParseNvidiaDeviceMinor(c.text), c.want) << c.text;
}

// On this machine (real /proc and /sys): local ranks of one node get disjoint, non-empty CPU sets
// whenever there are at least as many CPUs as ranks.
TEST(ChooseCpuBinding, DisjointOnThisMachine) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GT(ncpu, 0);
  int local_size = static_cast<int>(std::min<long>(ncpu, 4));
  std::set<int> seen;
  for (int r = 0; r < local_size; ++r) {
    RankInfo info{r, local_size, r, local_size, 0, 1, "h"};
    CpuBinding b = ChooseCpuBinding(info, {});
    if (!b.note.empty() && b.cpus.empty()) GTEST_SKIP() << b.note;  // already bound by someone
    ASSERT_FALSE(b.cpus.empty());
    for (int c : b.cpus) EXPECT_TRUE(seen.insert(c).second) << "cpu " << c;
  }
}

}  // namespace
}  // namespace autopar
