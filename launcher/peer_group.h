// PeerGroup: the launchers of one step as they reach each other for in-place restarts
// (docs/recovery.md): who they are (each one's restart channel, node and host, from the first PMIx
// rendezvous), the messages between them (restart_logic.h) and the three exchanges they make
// through rank 0's launcher: the reports after a failure, the verdict, and the restore
// agreement's minimum. What a verdict says is the launcher's business (launcher.cpp); this class only
// moves messages and tells who is gone. Not thread-safe; the launcher's main thread uses it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "launcher/restart_channel.h"
#include "launcher/restart_logic.h"

namespace autopar {

class PeerGroup {
 public:
  struct Peer {
    std::string endpoint;  // its restart channel, "ADDR:PORT"
    int node = 0;          // its node's index in the step
    std::string host;
  };
  // How long a stopped program may take (the report comes after it), and how long one message
  // may take to be delivered.
  struct Timing {
    int stop_grace_ms = 3000;
    int send_timeout_ms = 2000;
  };

  PeerGroup() = default;
  // `self`: this launcher's step rank; `peers`: every step rank's, in rank order. `interrupted` is
  // called while waiting (the launcher ends itself there on a termination signal).
  PeerGroup(RestartChannel channel, std::string token, std::vector<Peer> peers, int self,
            Timing timing, std::function<void()> interrupted);
  PeerGroup(PeerGroup&&) = default;
  PeerGroup& operator=(PeerGroup&&) = default;

  // "ENDPOINT NODE HOST", the form each launcher publishes, and back.
  static std::string FormatPeer(const Peer& p);
  static Result<Peer> ParsePeer(const std::string& text, int num_nodes);

  int self() const { return self_; }
  // A key for `purpose` that every launcher of the step derives alike (DeriveKey of the token).
  std::string DerivedKey(const std::string& purpose) const { return DeriveKey(token_, purpose); }
  int fd() const { return channel_.fd(); }
  const std::vector<int>& tasks_per_node() const { return tasks_per_node_; }
  const std::string& host_of_node(int node) const { return node_hosts_[static_cast<size_t>(node)]; }
  int node_of_rank(int rank) const { return peers_[static_cast<size_t>(rank)].node; }
  std::vector<int> RanksOnNodes(const std::vector<int>& nodes) const;

  // Sends `m` (from this launcher) to the launchers of `ranks`; returns those it could not reach.
  std::vector<int> SendTo(const std::vector<int>& ranks, PeerMessage m) const;
  // Tells every other launcher to stop its program; returns the ranks that could not be reached.
  std::vector<int> NotifyStop(const FailureReport& failure) const;

  // Reads what arrived; drops messages of generations before `generation`.
  void Poll(int64_t generation);
  // Takes a stop notice of `generation`, when one arrived (after Poll).
  bool TakeStop(int64_t generation);
  // The first message `want` accepts of those that arrived (after Poll), without waiting.
  std::optional<PeerMessage> Take(const Mailbox::Want& want) { return mail_.Take(want); }
  // The launchers of `ranks` that cannot be connected to now (an empty line, which they drop).
  std::vector<int> Probe(const std::vector<int>& ranks) const;
  // The first message `want` accepts, waiting up to timeout_s; nullopt at the timeout.
  std::optional<PeerMessage> Await(const Mailbox::Want& want, int timeout_s);

  // Rank 0's launcher, after a failure of generation g: waits for a report from every launcher
  // still there. `gone`: ranks known unreachable already. A launcher that has not reported by
  // the stop grace (+ 2 s) and cannot be connected to is gone with its node.
  struct Reports {
    std::vector<std::optional<FailureReport>> failures;  // by step rank (rank 0: `mine`)
    std::vector<int> live;                               // the ranks that reported, rank 0 aside
    std::vector<int> lost_nodes;                         // nodes with a launcher gone
  };
  Result<Reports> CollectReports(int64_t g, const std::optional<FailureReport>& mine,
                                 const std::vector<int>& gone, int timeout_s);
  // Any other launcher: reports (its failure or "stopped", and who its notice could not reach)
  // and waits for rank 0's verdict. nullopt: rank 0's launcher cannot be reached.
  Result<std::optional<RestartVerdict>> ReportAndAwaitVerdict(int64_t g,
                                                              const std::optional<FailureReport>& mine,
                                                              const std::vector<int>& gone,
                                                              int timeout_s);
  // The minimum of `mine` over the launchers of `ranks` (which include rank 0 and this one),
  // through rank 0's; `key` names the round within generation g.
  Result<int64_t> AgreeMin(int64_t g, const std::string& key, int64_t mine,
                           const std::vector<int>& ranks, int timeout_s);

 private:
  RestartChannel channel_;
  std::string token_;
  std::vector<Peer> peers_;
  std::vector<int> tasks_per_node_;
  std::vector<std::string> node_hosts_;
  int self_ = -1;
  Timing timing_;
  std::function<void()> interrupted_;
  Mailbox mail_;
};

}  // namespace autopar
