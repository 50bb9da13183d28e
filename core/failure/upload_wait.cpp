#include "core/failure/upload_wait.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "core/failure/timeline.h"
#include "core/text.h"

namespace autopar {

std::optional<int64_t> StepAwaitingUpload(const std::vector<JournalEvent>& timeline, int world_size,
                                          int64_t newest_complete) {
  if (world_size <= 0) return std::nullopt;
  struct Step {
    std::set<int> ranks;                  // its committed ranks in range
    std::map<std::string, double> nodes;  // the nodes that committed them, from when
  };
  std::map<int64_t, Step> committed;
  std::set<int64_t> settled;  // COMPLETE
  std::vector<std::pair<double, std::string>> lost;  // (when, node) of each node loss
  for (const auto& e : timeline) {
    if (e.kind == event_kind::kFailure) {
      EventFields f = ParseEventFields(e.detail);
      std::string cls, nodes;
      for (const auto& [k, v] : f) {
        if (k == "class") cls = v;
        if (k == "lost") nodes = v;
      }
      if (cls != "node-loss") continue;
      for (const auto& n : Split(nodes, ',')) lost.emplace_back(e.time, n);
      continue;
    }
    if (e.step <= newest_complete) continue;
    if (e.kind == event_kind::kCkptCommitted && e.rank >= 0 && e.rank < world_size) {
      Step& s = committed[e.step];
      s.ranks.insert(e.rank);
      auto [it, fresh] = s.nodes.emplace(e.node, e.time);
      if (!fresh) it->second = std::min(it->second, e.time);
    } else if (e.kind == event_kind::kCkptComplete) {
      // Not ckpt_failed: an upload that failed on storage is retried on autopard's timer.
      settled.insert(e.step);
    }
  }
  const auto node_lost_since = [&](const Step& s) {
    for (const auto& [when, node] : lost) {
      auto it = s.nodes.find(node);
      if (it != s.nodes.end() && when >= it->second) return true;
    }
    return false;
  };
  for (auto it = committed.rbegin(); it != committed.rend(); ++it) {
    if (static_cast<int>(it->second.ranks.size()) == world_size && !settled.count(it->first) &&
        !node_lost_since(it->second)) {
      return it->first;
    }
  }
  return std::nullopt;
}

}  // namespace autopar
