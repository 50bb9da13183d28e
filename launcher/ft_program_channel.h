// FtProgramChannel: the line between a launcher and its program in a fault-tolerant run
// (docs/ft.md; python/autopar/ft/channel.py is the program's end). A Unix stream socket in a
// directory of its own (0700, the job's user's), whose path the program gets in
// $AUTOPAR_FT_SOCKET; one program at a time is connected (a replacement's connection takes the
// place of the program it replaces). Lines both ways: "join ...", "waiting ..." and "running ..."
// from the program; "quorum ..." and "abandon ..." to it. Only a process of the launcher's own
// user is heard (SO_PEERCRED). Not thread-safe; the launcher's main thread uses it.
#pragma once

#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

class FtProgramChannel {
 public:
  FtProgramChannel() = default;
  ~FtProgramChannel();
  FtProgramChannel(FtProgramChannel&& other) noexcept;
  FtProgramChannel& operator=(FtProgramChannel&& other) noexcept;
  FtProgramChannel(const FtProgramChannel&) = delete;
  FtProgramChannel& operator=(const FtProgramChannel&) = delete;

  static constexpr size_t kMaxLine = 64 * 1024;  // a quorum of thousands of members
  static constexpr int kSendTimeoutMs = 2000;     // a line the program does not take in time

  // Listens in a new directory under `parent` (mkdtemp, 0700); close-on-exec, non-blocking.
  static Result<FtProgramChannel> Open(const std::string& parent);
  const std::string& path() const { return path_; }
  // Readable (poll) when a connection or a line waits.
  int fd() const { return epoll_fd_; }
  bool connected() const { return conn_ >= 0; }

  // Accepts a pending connection (closing the previous one) and returns the whole lines that
  // arrived, without their newlines. A line longer than kMaxLine closes the connection.
  std::vector<std::string> Drain();
  // Sends one line (a newline is added) to the connected program.
  Status Send(const std::string& line);
  // Forgets the connected program (it ended).
  void Disconnect();

 private:
  void Close();
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int conn_ = -1;
  std::string dir_, path_, pending_;
};

}  // namespace autopar
