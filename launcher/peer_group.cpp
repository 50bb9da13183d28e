#include "peer_group.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "core/text.h"

namespace autopar {
namespace {

using Clock = std::chrono::steady_clock;

bool Contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

PeerGroup::PeerGroup(RestartChannel channel, std::string token, std::vector<Peer> peers, int self,
                     Timing timing, std::function<void()> interrupted)
    : channel_(std::move(channel)),
      token_(std::move(token)),
      peers_(std::move(peers)),
      self_(self),
      timing_(timing),
      interrupted_(std::move(interrupted)),
      mail_(token_) {
  for (const Peer& p : peers_) {
    const auto n = static_cast<size_t>(p.node);
    if (tasks_per_node_.size() <= n) {
      tasks_per_node_.resize(n + 1, 0);
      node_hosts_.resize(n + 1);
    }
    ++tasks_per_node_[n];
    node_hosts_[n] = p.host;
  }
}

std::string PeerGroup::FormatPeer(const Peer& p) {
  return p.endpoint + " " + std::to_string(p.node) + " " + p.host;
}

Result<PeerGroup::Peer> PeerGroup::ParsePeer(const std::string& text, int num_nodes) {
  std::vector<std::string> parts = Split(text, ' ');
  auto node = parts.size() == 3 ? ParseInt(parts[1], 0, num_nodes - 1) : std::nullopt;
  if (!node || parts[0].empty() || parts[2].empty()) {
    return Status::Error("restart channel: malformed peer '" + text + "'");
  }
  return Peer{parts[0], static_cast<int>(*node), parts[2]};
}

std::vector<int> PeerGroup::RanksOnNodes(const std::vector<int>& nodes) const {
  std::vector<int> ranks;
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    if (Contains(nodes, peers_[static_cast<size_t>(r)].node)) ranks.push_back(r);
  }
  return ranks;
}

std::vector<int> PeerGroup::SendTo(const std::vector<int>& ranks, PeerMessage m) const {
  m.from = self_;
  std::vector<std::string> endpoints;
  for (int r : ranks) endpoints.push_back(peers_[static_cast<size_t>(r)].endpoint);
  std::vector<int> failed;
  for (size_t i : RestartChannel::Broadcast(endpoints, EncodePeerMessage(token_, m), timing_.send_timeout_ms)) {
    failed.push_back(ranks[i]);
  }
  return failed;
}

std::vector<int> PeerGroup::Probe(const std::vector<int>& ranks) const {
  std::vector<std::string> endpoints;
  for (int r : ranks) endpoints.push_back(peers_[static_cast<size_t>(r)].endpoint);
  std::vector<int> gone;
  for (size_t i : RestartChannel::Broadcast(endpoints, "", timing_.send_timeout_ms)) gone.push_back(ranks[i]);
  return gone;
}

std::vector<int> PeerGroup::NotifyStop(const FailureReport& failure) const {
  std::vector<int> others;
  for (int r = 0; r < static_cast<int>(peers_.size()); ++r) {
    if (r != self_) others.push_back(r);
  }
  return SendTo(others, StopNotice(failure, self_));
}

void PeerGroup::Poll(int64_t generation) {
  mail_.Pump(channel_, 0);
  mail_.Drop([generation](const PeerMessage& m) { return m.generation < generation; });
}

bool PeerGroup::TakeStop(int64_t generation) {
  return mail_.Take([generation](const PeerMessage& m) {
    return m.kind == PeerKind::kStop && m.generation == generation;
  }).has_value();
}

std::optional<PeerMessage> PeerGroup::Await(const Mailbox::Want& want, int timeout_s) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    if (auto m = mail_.Take(want)) return m;
    if (interrupted_) interrupted_();
    if (Clock::now() >= deadline) return std::nullopt;
    mail_.Pump(channel_, 200);
  }
}

Result<PeerGroup::Reports> PeerGroup::CollectReports(int64_t g, const std::optional<FailureReport>& mine,
                                                     const std::vector<int>& gone, int timeout_s) {
  const int ranks = static_cast<int>(peers_.size());
  Reports out;
  out.failures.resize(static_cast<size_t>(ranks));
  out.failures[static_cast<size_t>(self_)] = mine;
  std::vector<bool> heard(static_cast<size_t>(ranks), false), lost(static_cast<size_t>(ranks), false);
  heard[static_cast<size_t>(self_)] = true;
  auto mark_lost = [&](int r) {
    if (r >= 0 && r < ranks) lost[static_cast<size_t>(r)] = true;
  };
  for (int r : gone) mark_lost(r);
  const auto start = Clock::now();
  auto probe_at = start + std::chrono::milliseconds(timing_.stop_grace_ms + 2000);
  const auto deadline = start + std::chrono::seconds(timeout_s);
  auto is_report = [g](const PeerMessage& p) { return p.kind == PeerKind::kReport && p.generation == g; };
  for (;;) {
    while (auto m = mail_.Take(is_report)) {
      if (m->from < 0 || m->from >= ranks) continue;
      heard[static_cast<size_t>(m->from)] = true;
      if (auto f = FailureOf(*m)) out.failures[static_cast<size_t>(m->from)] = *f;
      if (auto unreachable = ParseIntList(PeerField(*m, "unreachable"))) {
        for (int r : *unreachable) mark_lost(r);
      }
    }
    std::vector<int> missing;
    for (int r = 0; r < ranks; ++r) {
      if (!heard[static_cast<size_t>(r)] && !lost[static_cast<size_t>(r)]) missing.push_back(r);
    }
    if (missing.empty()) break;
    const auto now = Clock::now();
    if (now >= deadline) {
      return Status::Error("the launchers of ranks " + FormatIntList(missing) + " did not report in " +
                           std::to_string(timeout_s) + " s");
    }
    if (now >= probe_at) {
      // Connecting is the test: an empty message, which the peer drops.
      std::vector<std::string> endpoints;
      for (int r : missing) endpoints.push_back(peers_[static_cast<size_t>(r)].endpoint);
      for (size_t i : RestartChannel::Broadcast(endpoints, "", timing_.send_timeout_ms)) mark_lost(missing[i]);
      probe_at = now + std::chrono::seconds(2);
    }
    if (interrupted_) interrupted_();
    mail_.Pump(channel_, 200);
  }
  for (int r = 0; r < ranks; ++r) {
    const int node = peers_[static_cast<size_t>(r)].node;
    if (heard[static_cast<size_t>(r)]) {
      if (r != self_) out.live.push_back(r);
    } else if (!Contains(out.lost_nodes, node)) {
      out.lost_nodes.push_back(node);  // a launcher that never reported is gone with its node
    }
  }
  return out;
}

Result<std::optional<RestartVerdict>> PeerGroup::ReportAndAwaitVerdict(
    int64_t g, const std::optional<FailureReport>& mine, const std::vector<int>& gone, int timeout_s) {
  PeerMessage report = mine ? StopNotice(*mine, self_) : PeerMessage{};
  report.kind = PeerKind::kReport;
  report.generation = g;
  report.fields.emplace_back("state", mine ? "failed" : "stopped");
  if (!gone.empty()) report.fields.emplace_back("unreachable", FormatIntList(gone));
  if (!SendTo({0}, report).empty()) return std::optional<RestartVerdict>();
  auto m = Await([g](const PeerMessage& p) {
    return p.kind == PeerKind::kVerdict && p.generation == g && p.from == 0;
  }, timeout_s);
  if (!m) return Status::Error("no verdict from rank 0's launcher in " + std::to_string(timeout_s) + " s");
  auto v = VerdictOf(*m);
  if (!v) return v.status();
  return std::optional<RestartVerdict>(*v);
}

Result<int64_t> PeerGroup::AgreeMin(int64_t g, const std::string& key, int64_t mine,
                                    const std::vector<int>& ranks, int timeout_s) {
  auto value_from = [g, key](int from) {
    return [g, key, from](const PeerMessage& p) {
      return p.kind == PeerKind::kValue && p.generation == g && p.from == from &&
             PeerField(p, "key") == key;
    };
  };
  auto value_of = [](const PeerMessage& p) {
    return std::strtoll(PeerField(p, "value").c_str(), nullptr, 10);
  };
  auto message = [&](int64_t v) {
    return PeerMessage{PeerKind::kValue, self_, g, {{"key", key}, {"value", std::to_string(v)}}};
  };
  if (self_ != 0) {
    if (!SendTo({0}, message(mine)).empty()) return Status::Error("rank 0's launcher cannot be reached");
    auto m = Await(value_from(0), timeout_s);
    if (!m) return Status::Error("no answer from rank 0's launcher in " + std::to_string(timeout_s) + " s");
    return static_cast<int64_t>(value_of(*m));
  }
  int64_t least = mine;
  std::vector<int> others;
  for (int r : ranks) {
    if (r == self_) continue;
    others.push_back(r);
    auto m = Await(value_from(r), timeout_s);
    if (!m) return Status::Error("no answer from the launcher of rank " + std::to_string(r));
    least = std::min<int64_t>(least, value_of(*m));
  }
  (void)SendTo(others, message(least));
  return least;
}

}  // namespace autopar
