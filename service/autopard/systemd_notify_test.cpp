#include "systemd_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace autopar {
namespace {

// A datagram socket standing where systemd's would: what autopard sends arrives there.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.data(), path.size());
    if (path[0] == '@') a.sun_path[0] = '\0';
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0;
  }
  ~NotifySocket() {
    close(fd_);
    if (path_[0] == '/') unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  std::string Receive() {
    char buf[512];
    ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotifyTest, WithoutNotifySocketNothingIsSent) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(NotifySystemd("READY=1").ok());
}

TEST(SystemdNotifyTest, SendsTheStateToAPathSocket) {
  const std::string path = "/tmp/autopar-notify-test-" + std::to_string(getpid());
  NotifySocket sock(path);
  ASSERT_TRUE(sock.bound());
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  ASSERT_TRUE(NotifySystemd("READY=1").ok());
  EXPECT_EQ(sock.Receive(), "READY=1");
  unsetenv("NOTIFY_SOCKET");
}

TEST(SystemdNotifyTest, SendsToAnAbstractSocket) {
  const std::string name = "@autopar-notify-test-" + std::to_string(getpid());
  NotifySocket sock(name);
  ASSERT_TRUE(sock.bound());
  setenv("NOTIFY_SOCKET", name.c_str(), 1);
  ASSERT_TRUE(NotifySystemd(ReloadingState()).ok());
  const std::string got = sock.Receive();
  EXPECT_EQ(got.rfind("RELOADING=1\nMONOTONIC_USEC=", 0), 0u) << got;
  EXPECT_GT(std::stoull(got.substr(got.find('=', 12) + 1)), 0ull);
  unsetenv("NOTIFY_SOCKET");
}

TEST(SystemdNotifyTest, AnUnusableSocketIsAnError) {
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_FALSE(NotifySystemd("READY=1").ok());
  setenv("NOTIFY_SOCKET", "/nonexistent/autopar-notify", 1);
  EXPECT_FALSE(NotifySystemd("READY=1").ok());
  unsetenv("NOTIFY_SOCKET");
}

}  // namespace
}  // namespace autopar
