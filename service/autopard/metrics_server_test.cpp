#include "metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace autopar {
namespace {

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  timeval limit{10, 0};  // a reply that never comes fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  return fd;
}

// Sends `request` and reads the whole reply (the server closes the connection).
std::string Ask(int port, const std::string& request) {
  int fd = Connect(port);
  EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  return reply;
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start({"127.0.0.1", 0}, [] { return std::string("up 1\n"); }).ok());
    ASSERT_GT(server_.port(), 0);
  }
  MetricsServer server_;
};

TEST_F(MetricsServerTest, AnswersGetMetricsInTheTextFormat) {
  const std::string r = Ask(server_.port(), "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Content-Length: 5\r\n"), std::string::npos) << r;
  EXPECT_EQ(r.substr(r.find("\r\n\r\n") + 4), "up 1\n");
  // A query string is ignored; HEAD has no body.
  EXPECT_EQ(Ask(server_.port(), "GET /metrics?x=1 HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  const std::string head = Ask(server_.port(), "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;
}

TEST_F(MetricsServerTest, RefusesOtherPathsMethodsAndGarbage) {
  struct Case {
    const char* request;
    const char* status;
  } cases[] = {
      {"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 404 "},
      {"POST /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 "},
      {"hello\r\n\r\n", "HTTP/1.1 400 "},
      {"GET /metrics SMTP\r\n\r\n", "HTTP/1.1 400 "},
  };
  for (const auto& c : cases) EXPECT_EQ(Ask(server_.port(), c.request).rfind(c.status, 0), 0u) << c.request;
  EXPECT_EQ(Ask(server_.port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a')).rfind("HTTP/1.1 431 ", 0), 0u);
}

TEST_F(MetricsServerTest, ASilentClientIsDroppedAndTheNextOneServed) {
  int silent = Connect(server_.port());  // sends nothing: dropped after the per-client budget
  EXPECT_EQ(Ask(server_.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  char c;
  EXPECT_EQ(recv(silent, &c, 1, 0), 0);  // closed without a reply
  close(silent);
}

// Connections someone holds open without a word (more than the 64 served at once) delay no
// scrape: the scraper is answered while the newest of them are still open, and the oldest made room.
TEST_F(MetricsServerTest, ConnectionsHeldOpenDoNotDelayAScrape) {
  std::vector<int> silent;
  for (int i = 0; i < 200; ++i) silent.push_back(Connect(server_.port()));
  EXPECT_EQ(Ask(server_.port(), "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  char c;
  errno = 0;
  EXPECT_EQ(recv(silent.back(), &c, 1, MSG_DONTWAIT), -1);  // still open: served beside the scrape
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(recv(silent.front(), &c, 1, 0), 0);  // the oldest was closed to make room
  for (int fd : silent) close(fd);
}

TEST(ListenAddressTest, ParsesNumericAddresses) {
  auto v4 = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(v4.ok()) << v4.message();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9464);
  auto v6 = ParseListenAddress("[::1]:80");
  ASSERT_TRUE(v6.ok()) << v6.message();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 80);
  for (const char* bad : {"", ":9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "host:1", "[::1]", "::1:80", "1.2.3.4:65536"}) {
    EXPECT_FALSE(ParseListenAddress(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace autopar
