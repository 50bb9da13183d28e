// Where ZeRO-2 (gradients and optimizer states sharded over the data-parallel ranks, weights
// whole: --auto-parallel=...,grad_sharding=on) is planned. One rule for the three places that ask:
// the submit-time check of a pin (core/options.cpp), the planner's refusal of a pinned layout and
// its search (planner_search.cpp). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace autopar {

// What of a layout (or of a pin) decides whether ZeRO-2 can be planned for it.
struct GradShardingShape {
  bool fsdp = false;                   // FSDP (or HSDP) shards the weights
  int64_t pp = 1;                      // pipeline stages
  bool experts = false;                // a mixture of experts, or ep pinned above 1
  std::optional<int64_t> data_ranks;   // dp*cp, the ranks it shards over, where known
};

// Why ZeRO-2 is not planned for `shape`, as the words that follow "ZeRO-2" ("is planned without
// pipeline parallelism (pp=2; ...)"), or "" where it is.
std::string GradShardingRefusal(const GradShardingShape& shape);

}  // namespace autopar
