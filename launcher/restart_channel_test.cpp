#include "restart_channel.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/text.h"

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

// Anyone on the network may connect and say nothing: a stop notice behind a hundred silent
// connections is still read at once, and the channel holds at most kMaxConnections of them.
TEST(RestartChannel, SilentConnectionsDoNotDelayANotice) {
  auto a = RestartChannel::Listen("127.0.0.1");
  ASSERT_TRUE(a.ok());
  std::vector<int> silent;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  const std::string ep = a->endpoint();
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(ep.substr(ep.rfind(':') + 1))));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  for (int i = 0; i < 100; ++i) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    silent.push_back(s);
  }
  EXPECT_TRUE(a->Drain(0).empty());
  ASSERT_TRUE(RestartChannel::Broadcast({a->endpoint()}, "autopar-stop token=t rank=1\n", 1000).empty());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> got;
  for (int i = 0; i < 10 && got.empty(); ++i) got = a->Drain(2000);
  EXPECT_EQ(got, (std::vector<std::string>{"autopar-stop token=t rank=1"}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  for (int s : silent) close(s);
}

// A flood that arrives in the same breath as a launcher's line (more connections than the table
// holds, behind it in the backlog) does not push the line out: it is read as its connection is
// accepted, or as its connection is closed to make room.
TEST(RestartChannel, AFloodBehindALineDoesNotDropIt) {
  auto a = RestartChannel::Listen("127.0.0.1");
  ASSERT_TRUE(a.ok());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  const std::string ep = a->endpoint();
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(ep.substr(ep.rfind(':') + 1))));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  std::vector<int> silent;
  auto flood = [&](int n) {
    for (int i = 0; i < n; ++i) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      ASSERT_EQ(connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
      silent.push_back(s);
    }
  };
  flood(10);
  ASSERT_TRUE(RestartChannel::Broadcast({ep}, "autopar-join token=t rank=3\n", 1000).empty());
  flood(3 * static_cast<int>(RestartChannel::kMaxConnections));
  std::vector<std::string> got;
  for (int i = 0; i < 5 && got.empty(); ++i) got = a->Drain(200);
  EXPECT_EQ(got, (std::vector<std::string>{"autopar-join token=t rank=3"}));
  for (int s : silent) close(s);
}

TEST(RestartLogic, TokensAreComparedInConstantTime) {
  EXPECT_TRUE(ConstantTimeEquals("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("0123456789abcdef", "0123456789abcdeF"));
  EXPECT_FALSE(ConstantTimeEquals("0123456789abcdef", "0123456789abcde"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(Mailbox, KeepsTheStepsMessagesUntilTakenAndDropsTheRest) {
  auto a = RestartChannel::Listen("127.0.0.1");
  ASSERT_TRUE(a.ok());
  Mailbox box("t");
  const PeerMessage report{PeerKind::kReport, 2, 1, {{"state", "stopped"}}};
  const PeerMessage old_stop{PeerKind::kStop, 3, 0, {}};
  for (const std::string& line : {EncodePeerMessage("t", old_stop), EncodePeerMessage("other", report),
                                  std::string("garbage\n"), EncodePeerMessage("t", report)}) {
    ASSERT_TRUE(RestartChannel::Broadcast({a->endpoint()}, line, 1000).empty());
  }
  box.Pump(*a, 1000);
  auto is_report = [](const PeerMessage& m) { return m.kind == PeerKind::kReport; };
  auto got = box.Take(is_report);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->from, 2);
  EXPECT_EQ(PeerField(*got, "state"), "stopped");
  EXPECT_FALSE(box.Take(is_report).has_value());  // the one with another token was dropped
  EXPECT_FALSE(box.empty());                       // the stale stop notice is still there
  box.Drop([](const PeerMessage& m) { return m.generation < 1; });
  EXPECT_TRUE(box.empty());
  // Nothing pending: Pump returns after its wait.
  auto start = std::chrono::steady_clock::now();
  box.Pump(*a, 100);
  EXPECT_TRUE(box.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(RestartChannel, TokensAreRandomHex) {
  auto t1 = RandomToken(), t2 = RandomToken();
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_EQ(t1->size(), 32u);
  EXPECT_NE(*t1, *t2);
  EXPECT_EQ(t1->find_first_not_of("0123456789abcdef"), std::string::npos);
}

TEST(RestartChannel, DerivedKeysAreHmacSha256OfTheToken) {
  // RFC 4231 test case 2: HMAC-SHA256(key "Jefe", "what do ya want for nothing?").
  EXPECT_EQ(DeriveKey("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_NE(DeriveKey("token", "autopar-ft-group/v1"), DeriveKey("token", "other"));
  EXPECT_NE(DeriveKey("token", "autopar-ft-group/v1"), DeriveKey("token2", "autopar-ft-group/v1"));
}

}  // namespace
}  // namespace autopar
