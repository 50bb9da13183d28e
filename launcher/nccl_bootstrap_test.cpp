#include <gtest/gtest.h>

#include "launcher/nccl_bootstrap.h"

namespace autopar {
namespace {

TEST(BootstrapKey, Cases) {
  struct Case {
    std::string tag;
    bool ok;
    std::string key;
  } cases[] = {
      {"world", true, "autopar.nccl.id.world"},
      {"tp-0.dp_1", true, "autopar.nccl.id.tp-0.dp_1"},
      {"", false, ""},
      {"a b", false, ""},
      {"x/y", false, ""},
      {std::string(65, 'a'), false, ""},
  };
  for (const auto& c : cases) {
    auto r = BootstrapKey(c.tag);
    ASSERT_EQ(r.ok(), c.ok) << c.tag;
    if (r.ok()) {
      EXPECT_EQ(*r, c.key);
    }
  }
}

TEST(BootstrapId, RoundTrip) {
  std::vector<uint8_t> id(kNcclUniqueIdBytes);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i * 37 + 11);
  std::string text = EncodeBootstrapId(id);
  EXPECT_EQ(text.size(), 6 + 2 * kNcclUniqueIdBytes);
  EXPECT_EQ(text.substr(0, 10), "apid1:0b30");
  auto back = DecodeBootstrapId(text);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(*back, id);
}

TEST(BootstrapId, RejectsCorruptText) {
  std::string good = EncodeBootstrapId(std::vector<uint8_t>(kNcclUniqueIdBytes, 0xab));
  struct Case {
    std::string text;
    std::string message_part;
  } cases[] = {
      {"apid2:" + good.substr(6), "does not start with 'apid1:'"},
      {good.substr(0, good.size() - 1), "odd number"},
      {good.substr(0, good.size() - 2), "127 bytes, expected 128"},
      {good.substr(0, good.size() - 2) + "zz", "not hex"},
      {"", "does not start"},
  };
  for (const auto& c : cases) {
    auto r = DecodeBootstrapId(c.text);
    ASSERT_FALSE(r.ok()) << c.message_part;
    EXPECT_NE(r.message().find(c.message_part), std::string::npos) << r.message();
  }
  EXPECT_TRUE(DecodeBootstrapId("apid1:00ff", 2).ok());
  EXPECT_EQ(DecodeBootstrapId("apid1:00ff0a", 0)->size(), 3u);  // any length
  EXPECT_FALSE(DecodeBootstrapId("apid1:00ff0a", 2).ok());
}

TEST(Preflight, BusBandwidth) {
  struct Case {
    size_t bytes;
    double seconds;
    int n;
    double want;
  } cases[] = {
      {1000000000, 1.0, 2, 1.0},   // algbw 1 GB/s x 2*1/2
      {1000000000, 0.5, 8, 3.5},   // algbw 2 GB/s x 2*7/8
      {1000000000, 1.0, 1, 0.0},   // one rank moves nothing
      {1000, 0.0, 4, 0.0},
      {1000, 1.0, 0, 0.0},
  };
  for (const auto& c : cases) {
    EXPECT_DOUBLE_EQ(AllReduceBusBandwidthGBs(c.bytes, c.seconds, c.n), c.want);
  }
}

TEST(Preflight, Sizes) {
  EXPECT_EQ(PreflightSizes(1 << 20, 8 << 20),
            (std::vector<size_t>{1 << 20, 2 << 20, 4 << 20, 8 << 20}));
  EXPECT_EQ(PreflightSizes(1, 10), (std::vector<size_t>{4, 8, 16}));
}

TEST(Preflight, SlowNodes) {
  std::vector<NodeBandwidth> nodes = {{"a", 100}, {"b", 98}, {"c", 40}, {"d", 102}};
  auto slow = SlowNodes(nodes, 0.5);  // median 99
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].host, "c");
  EXPECT_TRUE(SlowNodes(nodes, 0.3).empty());
  EXPECT_TRUE(SlowNodes({{"a", 1}}, 0.9).empty());
  EXPECT_EQ(SlowNodes(nodes, 0.999).size(), 2u);  // b and c are below 98.9
}

}  // namespace
}  // namespace autopar
