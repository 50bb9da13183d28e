// autopard's Prometheus endpoint (autopard.conf metrics_listen; off by default): a plain HTTP/1.x
// listener on one TCP address that answers `GET /metrics` with the text that `render` returns
// (Content-Type text/plain; version=0.0.4), 404 for other paths, 405 for other methods.
//
// One thread serves up to 64 connections at once (poll, non-blocking), each with a 2 s budget to
// send its request and read the reply (a scraper sends a few hundred bytes). When all 64 are taken
// the oldest connection is closed to make room: connections held open by a slow or silent client
// delay no scraper, and none of it touches the Unix socket's threads, the commit path or the
// uploads. Requests above 8 KiB are refused (431).
//
// Thread safety: Start and Stop from one thread; `render` is called from the server's thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "autopar/status.h"

namespace autopar {

// "127.0.0.1:9464" or "[::1]:9464": a numeric address and a port 1..65535 (0 for any free port,
// tests). Errors say what is wrong with the text (the caller names the key).
struct ListenAddress {
  std::string host;  // numeric IPv4 or IPv6, without brackets
  int port = 0;
};
Result<ListenAddress> ParseListenAddress(const std::string& text);

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  MetricsServer() = default;
  ~MetricsServer() { Stop(); }
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds `address` and starts serving. Errors: the address cannot be bound (in use, not local).
  Status Start(const ListenAddress& address, Render render);
  // The port bound (useful with port 0); 0 before Start.
  int port() const { return port_; }
  void Stop();

 private:
  void Loop();
  // The reply to one complete request (its head).
  std::string Reply(const std::string& request);
  Render render_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::thread thread_;
};

}  // namespace autopar
