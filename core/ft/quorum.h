// Per-step fault tolerance (docs/ft.md), the group's pure part: who trains together after a
// failure. Every program of a run with --fault-tolerance=step trains as one member of a
// data-parallel group whose membership can change between steps without any healthy program
// stopping. When a member is lost (its program crashed, hung and was killed, or its node went),
// the launchers gather a "join" from every program still there and from each replacement, and
// one of them (the lowest launcher alive: no fixed node decides) turns the joins into the next
// quorum: the members in rank order, the step they all run next, whose store the new group meets
// on, and which member sends its state to each one that is behind. Pure; reentrant.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autopar/status.h"

namespace autopar {

// A program's request to train in the next quorum.
struct FtJoin {
  int rank = -1;      // its program rank: its place in the group and its share of each batch
  int launcher = -1;  // the step rank of the launcher that runs it
  std::string store;  // "ADDR:PORT" of the rendezvous store its program serves
  // The steps its state has committed (its next step); -1 for a program with no state yet (a
  // replacement, a spare's program).
  int64_t step = -1;
  int64_t replaced = 0;  // the programs its launcher has replaced so far
};

// Replacements per launcher (step rank), the run's count: each quorum carries what its leader
// knew, so a launcher that leads after another is lost goes on counting.
using FtReplacements = std::map<int, int64_t>;
int64_t TotalReplacements(const FtReplacements& r);

// The members of one epoch of the group, and how they start it.
struct FtQuorum {
  int64_t epoch = 0;
  std::vector<FtJoin> members;  // by rank
  std::string store;            // the store the group's rendezvous uses (a member's)
  int64_t step = 0;             // the step every member runs next
  // (to rank, from rank): a member whose state is behind (or none) receives it from a live
  // member that holds step `step`; the sources take turns, lowest rank first.
  std::vector<std::pair<int, int>> heals;
  FtReplacements replaced;  // the run's, this quorum's joins included
};

struct FtQuorumRules {
  int world = 0;      // the ranks the run was planned for
  int min_world = 0;  // fewest members it may go on with (the ranks of --min-nodes; world without)
  // The run's replacements (--restarts-in-place); -1: no limit. Each launcher checks the count
  // it knows before it replaces its program, but two that replace at once both see the last
  // one free: the quorum that would take both in is where the run's count is known whole.
  int64_t max_replacements = -1;
};

// The next quorum (epoch `epoch`) of `joins`. Refused, with the reason, when no join holds
// state (nothing to heal from: the run must restore a checkpoint), when fewer than
// rules.min_world remain, when a join is malformed or names a rank twice or out of range, or
// when it would take in a newcomer (a join with no state) whose replacement put the run's count
// past rules.max_replacements: the run then restarts every program, as when a launcher finds the
// budget spent itself. A quorum of members that all hold state is never refused for the count
// (the one that follows such a restart carries it).
// `replaced`: the count the last quorum carried, merged with the joins' (the larger per launcher).
Result<FtQuorum> DecideQuorum(int64_t epoch, std::vector<FtJoin> joins, const FtQuorumRules& rules,
                              const FtReplacements& replaced = {});

// The run's replacement budget, decided here only: whether `total` replacements are within
// rules.max_replacements (-1: no limit). A launcher asks it before it replaces its program
// (FtGroup::MayReplace, with its count plus one), the quorum before it takes a newcomer in.
bool WithinReplacementBudget(int64_t total, const FtQuorumRules& rules);

// "ADDR:PORT" with a port in 1..65535 and an address of the characters an IPv4 or IPv6 address or
// a host name uses (a store travels inside comma- and '@'-separated lists: core/ft/messages.h).
bool ValidStoreEndpoint(const std::string& s);

}  // namespace autopar
