#include "core/plan/hardware.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(ResolveGpuType, PresetsAndAliases) {
  struct Case {
    const char* spec;
    const char* name;
    double mem_gib;
    double tflops;
  } cases[] = {
      {"a100-40gb", "a100-40gb", 40, 312}, {"A100-80GB", "a100-80gb", 80, 312},
      {"a100", "a100-80gb", 80, 312},      {"h100-80gb", "h100-80gb", 79.6, 989},
      {"H100", "h100-80gb", 79.6, 989},    {"h200-141gb", "h200-141gb", 140.4, 989},
  };
  for (const auto& c : cases) {
    auto g = ResolveGpuType(c.spec);
    ASSERT_TRUE(g.ok()) << c.spec;
    EXPECT_EQ(g->name, c.name);
    EXPECT_DOUBLE_EQ(g->mem_gib, c.mem_gib);
    EXPECT_DOUBLE_EQ(g->bf16_tflops, c.tflops);
    EXPECT_GT(g->nvlink_gbps, g->net_gbps);
    EXPECT_GT(g->matmul_efficiency, 0.3);
    EXPECT_LT(g->matmul_efficiency, 1.0);
  }
}

TEST(ResolveGpuType, UnknownNamesTheChoices) {
  auto g = ResolveGpuType("v99");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.message(),
            "unknown GPU type 'v99' (known: a100-40gb, a100-80gb, h100-80gb, h200-141gb)");
}

TEST(GpuTypeNames, AllResolve) {
  ASSERT_EQ(GpuTypeNames().size(), 4u);
  for (const auto& n : GpuTypeNames()) EXPECT_TRUE(ResolveGpuType(n).ok()) << n;
}

}  // namespace
}  // namespace autopar
