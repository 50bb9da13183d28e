// In-place restarts, the launcher's pure part: the messages the launchers of one step
// send each other over their restart channels (restart_channel.h), who decides, and which nodes
// run the program. docs/recovery.md tells the whole mechanism:
//
//  - A launcher whose program failed (or hung, as its node's autopard tells it) sends every other
//    launcher a stop notice; each one stops its program and sends rank 0's launcher (the step's
//    first task, on the batch host) a report: its failure, or "stopped".
//  - Rank 0's launcher collects the reports of every launcher it can still reach, asks its node's
//    autopard what to do about the generation's first failure (a node whose launchers are gone is
//    a node loss), and sends every launcher the verdict: restart (with a new MASTER_PORT, the
//    resume step and the nodes that run the program) or exit.
//  - Spare nodes (--spare-nodes=K): the step's last K nodes start in reserve; their launchers wait
//    for verdicts. A lost node's place is taken by a spare, so every other node keeps its ranks
//    (and its node-local copy of the checkpoint).
//
// PMIx carries only the first rendezvous (the channels' endpoints and the step's token): a fence
// cannot complete once a node is gone. Pure; reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/failure/launch_events.h"
#include "core/failure/timeline.h"
#include "launcher/launch.h"

namespace autopar {

// One launcher's view of a failure of its own program in generation `generation`.
struct FailureReport {
  int64_t generation = 0;
  int rank = -1;
  std::string node;
  std::string kind = "rank-crash";  // FailureClassName: rank-crash, hang, oom or bad-loss
  int exit_status = 0;              // the shell's convention: 128+S for signal S
  double run_s = -1;                // how long this generation's program ran
  double detected = 0;              // seconds since the epoch, when the launcher saw it
  std::string error;                // oom: what ran out ("killed by the kernel's OOM killer", the
                                    // program's error message), one line
};
// The report as event fields (class exit [signal] run_s node generation detected), the form it
// takes in the stop notice, the report and autopard's `recover` request.
EventFields ReportFields(const FailureReport& r);
Result<FailureReport> ReportFromFields(const EventFields& fields, int rank);
// The report as the `recover` request to autopard carries it (launch_events.h).
RecoverDetail RecoverDetailOf(const FailureReport& r);

// The messages between launchers, one line each: "autopar-KIND token=T from=R generation=G
// ...". `from` is the sender's task rank in the step (its PMIx rank), `token` the step's secret
// (rank 0's, shared through PMIx only), so nobody else can stop or steer the program. The fields
// after them are the message's own (a stop notice's rank= is its program's rank).
enum class PeerKind {
  kStop,     // a program failed: stop yours (fields: the failure report)
  kReport,   // to rank 0: state=failed + report fields, or state=stopped; unreachable=RANKS
  kVerdict,  // from rank 0: action=restart master=ADDR:PORT resume=STEP active=NODES, or
             // action=exit code=C
  kValue,    // the restore agreement: key=K value=V, to rank 0 and back with the minimum
  // Per-step fault tolerance (ft_group.h; their fields: core/ft/messages.h): a program's join for
  // the next quorum, to the launcher that leads; the leader's word that the group is being
  // re-formed (give the epoch up); the quorum decided; the leader's word that spares take lost
  // nodes' places (active=NODES, in rank order).
  kFtJoin,
  kFtForming,
  kFtQuorum,
  kFtTake,
};
struct PeerMessage {
  PeerKind kind = PeerKind::kStop;
  int from = -1;  // the sender's step rank
  int64_t generation = 0;
  EventFields fields;
};
std::string EncodePeerMessage(const std::string& token, const PeerMessage& m);  // ends with '\n'
// Parses one line (without its newline); errors for a wrong token or malformed text.
Result<PeerMessage> DecodePeerMessage(const std::string& line, const std::string& token);
std::string PeerField(const PeerMessage& m, const char* key);  // "" when absent

// A stop notice from step rank `from` about its failure `r` (r.rank: the program's rank, which
// differs from the step's once a spare is in use), and the failure of a message back.
PeerMessage StopNotice(const FailureReport& r, int from);
Result<FailureReport> FailureOf(const PeerMessage& m);  // a kStop or a state=failed kReport

// The failure rank 0 asks autopard about, of the reports collected (nullopt entries: ranks that
// were only stopped): the most specific one (a class autopar recognised: oom, hang, bad-loss;
// then a death by a signal; then an exit status), the earliest detected of those, then the
// lowest rank. A rank's death makes its peers' collectives fail with plain errors, and their
// launchers often see those first: the cause is the specific one.
std::optional<FailureReport> FirstFailure(const std::vector<std::optional<FailureReport>>& reports);

// Rank 0's verdict about a failed generation.
struct RestartVerdict {
  bool restart = false;
  int exit_code = 1;         // !restart: what every launcher exits with
  MasterEndpoint master;     // restart: the next generation's rendezvous
  int64_t resume_step = -1;  // restart: rank 0's resume decision (-1: none)
  std::vector<int> active;   // restart: the step's node indexes that run the program, in order
  // restart after an out-of-memory failure: every launcher re-plans within this many GiB per GPU
  // (0: the plan stays).
  double max_mem_gib = 0;
};
PeerMessage VerdictMessage(const RestartVerdict& v, int64_t generation);
Result<RestartVerdict> VerdictOf(const PeerMessage& m);

// Which nodes run the program. The step's nodes are numbered 0..N-1 (node_rank); `active` lists
// the ones in use, in the order their ranks are numbered.
std::vector<int> InitialActiveNodes(int num_nodes, int spares);  // 0..N-spares-1
// This launcher's ranks for the program: `step` its place in the step, `tasks_per_node[n]` the
// step's task count on node n. nullopt when its node is not in `active` (held in reserve).
std::optional<RankInfo> ProgramRank(const RankInfo& step, const std::vector<int>& tasks_per_node,
                                    const std::vector<int>& active);
// The active nodes after losing `lost`: each lost node's place goes to the first of `standby`
// (nodes alive and not in use, lowest first) with as many tasks, so that every other node keeps
// its ranks. Errors name what is missing.
Result<std::vector<int>> ReplaceLostNodes(const std::vector<int>& active, const std::vector<int>& lost,
                                          const std::vector<int>& standby,
                                          const std::vector<int>& tasks_per_node);

// Elastic runs (--min-nodes): as ReplaceLostNodes while spares last; a lost node no spare can
// replace is left out, so the nodes in use shrink (ranks renumber in the order of `active`).
std::vector<int> ReplaceOrDropLostNodes(const std::vector<int>& active, const std::vector<int>& lost,
                                        const std::vector<int>& standby,
                                        const std::vector<int>& tasks_per_node);

std::string FormatIntList(const std::vector<int>& v);  // "0,1,3"; "" for none
Result<std::vector<int>> ParseIntList(const std::string& text);

}  // namespace autopar
