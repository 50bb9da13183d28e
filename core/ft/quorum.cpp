#include "core/ft/quorum.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "core/text.h"

namespace autopar {
namespace {

Status CheckJoin(const FtJoin& j, const FtQuorumRules& rules) {
  const std::string who = "rank " + std::to_string(j.rank);
  if (j.rank < 0 || j.rank >= rules.world) {
    return Status::Error(who + ": not a rank of the run's " + std::to_string(rules.world));
  }
  if (j.launcher < 0) return Status::Error(who + ": no launcher");
  if (!ValidStoreEndpoint(j.store)) return Status::Error(who + ": store '" + j.store + "' is not ADDR:PORT");
  if (j.step < -1) return Status::Error(who + ": step " + std::to_string(j.step));
  if (j.replaced < 0) return Status::Error(who + ": replaced " + std::to_string(j.replaced));
  return Status::Ok();
}

}  // namespace

bool ValidStoreEndpoint(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || !ParseInt(s.substr(colon + 1), 1, 65535)) {
    return false;
  }
  return std::all_of(s.begin(), s.begin() + static_cast<long>(colon), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
           c == '[' || c == ']';
  });
}

bool WithinReplacementBudget(int64_t total, const FtQuorumRules& rules) {
  return rules.max_replacements < 0 || total <= rules.max_replacements;
}

int64_t TotalReplacements(const FtReplacements& r) {
  int64_t total = 0;
  for (const auto& [launcher, count] : r) total += count;
  return total;
}

Result<FtQuorum> DecideQuorum(int64_t epoch, std::vector<FtJoin> joins, const FtQuorumRules& rules,
                              const FtReplacements& replaced) {
  for (const auto& j : joins) {
    if (Status st = CheckJoin(j, rules); !st) return st;
  }
  std::sort(joins.begin(), joins.end(), [](const FtJoin& a, const FtJoin& b) { return a.rank < b.rank; });
  for (size_t i = 1; i < joins.size(); ++i) {
    if (joins[i].rank == joins[i - 1].rank) {
      return Status::Error("rank " + std::to_string(joins[i].rank) + " joined twice");
    }
  }
  if (static_cast<int>(joins.size()) < std::max(rules.min_world, 1)) {
    return Status::Error(std::to_string(joins.size()) + " of " + std::to_string(rules.world) +
                         " ranks left, fewer than the " + std::to_string(rules.min_world) +
                         " the run may go on with");
  }
  FtQuorum q;
  q.epoch = epoch;
  q.replaced = replaced;
  for (const auto& j : joins) {
    if (j.replaced > 0) q.replaced[j.launcher] = std::max(q.replaced[j.launcher], j.replaced);
  }
  const int64_t total = TotalReplacements(q.replaced);
  const bool newcomer =
      std::any_of(joins.begin(), joins.end(), [](const FtJoin& j) { return j.step < 0; });
  if (newcomer && !WithinReplacementBudget(total, rules) && total > TotalReplacements(replaced)) {
    return Status::Error("the run's replacements would be " + std::to_string(total) +
                         ", past its " + std::to_string(rules.max_replacements) +
                         " (--restarts-in-place): launchers replaced their programs at once");
  }
  q.step = -1;
  for (const auto& j : joins) q.step = std::max(q.step, j.step);
  if (q.step < 0) return Status::Error("no member holds the training state");
  std::vector<int> sources;  // the members at q.step, by rank
  for (const auto& j : joins) {
    if (j.step == q.step) sources.push_back(j.rank);
  }
  q.store = std::find_if(joins.begin(), joins.end(), [&](const FtJoin& j) {
              return j.rank == sources.front();
            })->store;
  size_t turn = 0;
  for (const auto& j : joins) {
    if (j.step == q.step) continue;
    q.heals.emplace_back(j.rank, sources[turn++ % sources.size()]);
  }
  q.members = std::move(joins);
  return q;
}

}  // namespace autopar
