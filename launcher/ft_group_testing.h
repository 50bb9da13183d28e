// Launchers of a fault-tolerant group on loopback, all in one process: each with its PeerGroup,
// its FtGroup and its program's channel (a socket a program connects to as under autopar-launch).
// For tests: launcher/ft_group_test.cpp and the harness Python's tests drive
// (ft_group_harness.cpp). Not thread-safe.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "launcher/ft_group.h"

namespace autopar {

// N launchers on loopback, one per node, each with its FtGroup and its program's channel; the
// launchers in `gone` are lost with their nodes (their listeners closed before anyone starts).
struct Launchers {
  std::vector<PeerGroup::Peer> peers;
  std::vector<std::unique_ptr<PeerGroup>> groups;  // null: gone
  std::vector<std::unique_ptr<FtGroup>> ft;
  std::vector<std::vector<std::pair<std::string, int64_t>>> journal;  // by launcher: kind, step
  std::filesystem::path dir;

  // The programs' sockets go in a new directory under `parent`, removed with the launchers.
  explicit Launchers(int n, int64_t max_replacements = -1, std::vector<int> gone = {}, int min_world = 0,
                     const std::string& parent = "/tmp") {
    std::string tmpl = parent + "/ft-group-test.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp under " + parent + " failed");
    dir = tmpl;
    std::vector<RestartChannel> channels;
    for (int r = 0; r < n; ++r) {
      auto ch = RestartChannel::Listen("127.0.0.1");
      if (!ch.ok()) throw std::runtime_error(ch.message());
      peers.push_back({ch->endpoint(), r, "node" + std::to_string(r + 1)});
      channels.push_back(std::move(*ch));
    }
    journal.resize(static_cast<size_t>(n));
    std::vector<int> active;
    for (int r = 0; r < n; ++r) active.push_back(r);
    for (int r = 0; r < n; ++r) {
      const bool lost = std::find(gone.begin(), gone.end(), r) != gone.end();
      if (lost) {
        channels[static_cast<size_t>(r)] = RestartChannel();  // closed: its node is gone
        groups.emplace_back();
        ft.emplace_back();
        continue;
      }
      groups.push_back(std::make_unique<PeerGroup>(std::move(channels[static_cast<size_t>(r)]), "tok", peers, r,
                                                   PeerGroup::Timing{0, 1000}, nullptr));
      FtGroup::Config c;
      c.program_rank = r;
      c.rules = FtQuorumRules{n, min_world > 0 ? min_world : n, max_replacements};
      c.active = active;
      c.join_timeout_s = 30;
      auto channel = FtProgramChannel::Open(dir.string());
      if (!channel.ok()) throw std::runtime_error(channel.message());
      auto* j = &journal[static_cast<size_t>(r)];
      ft.push_back(std::make_unique<FtGroup>(
          groups.back().get(), std::move(*channel), c,
          [j](const char* kind, int64_t step, const EventFields&) { j->emplace_back(kind, step); }, nullptr));
    }
  }
  ~Launchers() { std::filesystem::remove_all(dir); }

  // Launcher `r` is lost with its node: its listener and its program's channel close.
  void Drop(int r) {
    ft[static_cast<size_t>(r)].reset();
    groups[static_cast<size_t>(r)].reset();
  }

  // One round: every launcher reads what arrived and acts on it; what a Pump said, if one did.
  std::optional<std::string> PumpOnce() {
    for (size_t r = 0; r < ft.size(); ++r) {
      if (!ft[r]) continue;
      groups[r]->Poll(0);
      if (auto why = ft[r]->Pump()) return why;
    }
    return std::nullopt;
  }

  // Pumps every launcher until `done()` (true) or 10 s (false); `why` gets what a Pump said.
  bool PumpUntil(const std::function<bool()>& done, std::string* why = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto w = PumpOnce()) {
        if (why) *why = *w;
        return false;
      }
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
};

}  // namespace autopar
