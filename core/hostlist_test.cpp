#include "core/hostlist.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

using Hosts = std::vector<std::string>;

TEST(Hostlist, Expands) {
  struct Case {
    const char* in;
    Hosts want;
  } cases[] = {
      {"node1", {"node1"}},
      {"node[1-3]", {"node1", "node2", "node3"}},
      {"node[1-2,7],gpu05", {"node1", "node2", "node7", "gpu05"}},
      {"n[08-11]", {"n08", "n09", "n10", "n11"}},
      {"n[1-2]-ib", {"n1-ib", "n2-ib"}},
      {"a,b[3]", {"a", "b3"}},
  };
  for (const auto& c : cases) {
    auto got = ExpandHostlist(c.in);
    ASSERT_TRUE(got.ok()) << c.in << ": " << got.message();
    EXPECT_EQ(*got, c.want) << c.in;
  }
}

TEST(Hostlist, RejectsMalformed) {
  for (const char* in : {"", "node[1-", "node]", "n[3-1]", "n[a-b]", "n[1-2][3]", "a,,b", "n[1-2-3]"}) {
    auto got = ExpandHostlist(in);
    EXPECT_FALSE(got.ok()) << in;
    EXPECT_NE(got.message().find("hostlist"), std::string::npos) << in;
  }
  EXPECT_FALSE(ExpandHostlist("n[0-70000]").ok());
}

}  // namespace
}  // namespace autopar
