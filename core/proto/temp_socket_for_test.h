// A Unix socket path in a fresh temporary directory, and the listening socket the tests' fake
// daemons serve on; the socket file and its directory go with the object.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace autopar {

class TempSocket {
 public:
  TempSocket() {
    char tmpl[] = "/tmp/autopar-socket-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/s.sock";
  }
  ~TempSocket() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  TempSocket(const TempSocket&) = delete;
  TempSocket& operator=(const TempSocket&) = delete;

  // Binds and listens; the listening descriptor, or -1.
  int Listen(int backlog) {
    fd_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path_.c_str());
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd_, backlog) != 0) {
      close(fd_);
      fd_ = -1;
    }
    return fd_;
  }
  // Makes a blocked accept() return (before joining the thread that serves).
  void Shutdown() {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
  int fd_ = -1;
};

}  // namespace autopar
