#include "restart_channel.h"

#include <gtest/gtest.h>

#include <thread>

namespace autopar {
namespace {

TEST(RestartChannel, ANoticeReachesEveryListenerAndAClosedOneIsReported) {
  auto a = RestartChannel::Listen("127.0.0.1");
  auto b = RestartChannel::Listen("127.0.0.1");
  ASSERT_TRUE(a.ok()) << a.message();
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(a->endpoint().rfind("127.0.0.1:", 0), 0u) << a->endpoint();
  std::string gone;
  {
    auto c = RestartChannel::Listen("127.0.0.1");
    ASSERT_TRUE(c.ok());
    gone = c->endpoint();
  }  // closed: nobody listens there any more
  auto failed = RestartChannel::Broadcast({a->endpoint(), gone, b->endpoint(), "not-an-endpoint"},
                                          "autopar-stop token=t rank=1\n", 2000);
  EXPECT_EQ(failed, (std::vector<size_t>{1, 3}));
  // Delivered while nobody accepted (the listeners wait in a fence): read later.
  EXPECT_EQ(a->Drain(500), (std::vector<std::string>{"autopar-stop token=t rank=1"}));
  EXPECT_EQ(b->Drain(500), (std::vector<std::string>{"autopar-stop token=t rank=1"}));
  EXPECT_TRUE(a->Drain(500).empty());
}

TEST(RestartChannel, AConnectionThatSendsNothingIsDroppedWithinItsTimeout) {
  auto a = RestartChannel::Listen("127.0.0.1");
  ASSERT_TRUE(a.ok());
  // A peer that only connects: Broadcast of an empty line connects and sends nothing.
  EXPECT_TRUE(RestartChannel::Broadcast({a->endpoint()}, "", 1000).empty());
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(a->Drain(200).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_FALSE(RestartChannel::Listen("no-address").ok());
}

TEST(RestartChannel, TokensAreRandomHex) {
  auto t1 = RandomToken(), t2 = RandomToken();
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_EQ(t1->size(), 32u);
  EXPECT_NE(*t1, *t2);
  EXPECT_EQ(t1->find_first_not_of("0123456789abcdef"), std::string::npos);
}

}  // namespace
}  // namespace autopar
