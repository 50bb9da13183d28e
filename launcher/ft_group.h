// FtGroup: a launcher's part in a fault-tolerant run (--fault-tolerance=step, docs/ft.md). The
// program trains as a member of a data-parallel group (python/autopar/ft) that re-forms between
// steps without any healthy program stopping; the launchers agree on each new membership (a
// quorum, core/ft/quorum.h) over their restart channels:
//
//  - A program asks its launcher to join the next quorum (at its start, when a collective of its
//    group broke, or as a replacement with no state); the launcher sends the join to the launcher
//    that leads: the lowest of the step's launchers still alive. No fixed node leads: when the
//    leader cannot be reached, the next one does, and the joins are sent again.
//  - The leader, on the first join of a new epoch, tells every launcher that the group is being
//    re-formed; each tells its program to give up the epoch's collective (gloo cannot abort one).
//    It waits for a join from every rank whose launcher is alive (a crashed program's launcher
//    is: it starts a replacement, which joins), decides the quorum and sends it to every member's
//    launcher, which hands it to its program.
//  - A launcher that cannot be reached is lost with its node. With nodes held in reserve
//    (--spare-nodes), the leader gives a lost node's ranks to a spare's launchers (every launcher
//    is told the nodes in use), whose programs join without state and receive it from a live
//    member. Without a spare, its ranks leave the group, which goes on when enough remain
//    (FtQuorumRules), else the run falls back to the in-place restart.
// Not thread-safe; the launcher's main thread uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/failure/timeline.h"
#include "core/ft/messages.h"
#include "core/ft/quorum.h"
#include "launcher/ft_program_channel.h"
#include "launcher/peer_group.h"

namespace autopar {

class FtGroup {
 public:
  struct Config {
    int program_rank = -1;      // this launcher's program's rank (-1: a spare's, in reserve)
    FtQuorumRules rules;        // world: the program's ranks (one per launcher in use)
    // The step's nodes that run programs, in the order their ranks are numbered; the others are
    // spares (restart_logic.h). Program ranks number the launchers of these nodes in order when
    // nodes are held in reserve, else they are the launchers' own (Slurm's).
    std::vector<int> active;
    bool ranks_in_node_order = false;
    int join_timeout_s = 600;   // a quorum not formed by then: the run falls back
    double hang_timeout_s = 0;  // autopard's hang limit for the job (--heartbeat-timeout)
  };
  // What the group did that the timeline should show (the leader's quorums, the program's heals).
  using Journal = std::function<void(const char* kind, int64_t step, const EventFields& fields)>;
  // Spares took lost nodes' places: the nodes in use now.
  using Take = std::function<void(const std::vector<int>& active)>;

  FtGroup() = default;
  FtGroup(PeerGroup* peers, FtProgramChannel channel, Config config, Journal journal, Take take);
  ~FtGroup();  // closes the timer
  FtGroup(const FtGroup&) = delete;
  FtGroup& operator=(const FtGroup&) = delete;

  const std::string& socket_path() const { return channel_.path(); }
  int program_fd() const { return channel_.fd(); }
  // A periodic tick (a timerfd) while a quorum is being formed or waited for; -1 otherwise.
  int timer_fd() const;

  // Acts on what arrived: the program's lines and the launchers' fault-tolerance messages (Poll
  // the peer group first). Returns why the group cannot go on, when it cannot.
  std::optional<std::string> Pump();
  // The program ended (a replacement will connect and join).
  void ProgramEnded();
  // The leader's word that spares take lost nodes' places (a launcher in reserve waits for it:
  // Launcher::Standby; the others take it in Pump).
  void OnTake(const PeerMessage& m);
  // A spare's launcher took ranks in the group: its program's is `rank`.
  void set_program_rank(int rank) { config_.program_rank = rank; }
  // This launcher leads the group (the lowest launcher in use not lost).
  bool leads() const { return Leader() == peers_->self(); }
  // Whether a hang autopard reports in this launcher's (running, not stopped) program is a
  // peer's, not its own: the program said it waits in a collective of the group, or it waits for
  // a quorum, or it was handed a quorum within the hang limit (a verdict about a stall that the
  // group's re-form has ended already: each node's autopard hands its verdict over on its own
  // tick, and the first node's hand-over may have replaced the hung member before the others').
  bool SpareFromHang() const;
  // This rank's program trains in the group (it has joined once): a program that never joins
  // (one not on autopar.ft) recovers as without fault tolerance.
  bool in_group() const { return joined_; }
  // The program running now has asked to join (it is past its own start-up).
  bool program_joined() const { return program_joined_; }

  int64_t epoch() const { return epoch_; }
  // The programs the run has replaced (every launcher's, as the latest quorum and this launcher
  // know them): the budget of --restarts-in-place is the run's, not each rank's.
  int64_t replacements() const;
  // Whether one more replacement is within the run's budget (--restarts-in-place), as far as
  // this launcher knows the run's count; the quorum checks the whole count again.
  bool MayReplace() const { return WithinReplacementBudget(replacements() + 1, config_.rules); }
  int64_t max_replacements() const { return config_.rules.max_replacements; }
  // This launcher replaced its program: counted in its next join, and so in the next quorum.
  void CountReplacement() { ++own_replaced_; }
  // The launchers' generation (docs/recovery.md): messages of an earlier one are stale. It moves
  // only when the run fell back to an in-place restart of every program.
  void set_generation(int64_t g) {
    generation_ = g;
    forming_ = false;
    joins_.clear();
    my_join_.reset();
  }

 private:
  void OnProgramLine(const std::string& line);
  void OnJoin(const PeerMessage& m);      // the leader
  void OnForming(const PeerMessage& m);
  void OnQuorum(const PeerMessage& m);
  void TakeQuorum(const FtQuorumMessage& m);  // the leader's own, or one it sent
  void SendJoin();                        // this program's join, to the leader
  int Leader() const;                     // the lowest launcher in use not lost
  int LauncherOf(int rank) const;         // the launcher that runs program rank `rank`
  void SetActive(const std::vector<int>& active);
  void TakeSpares();                      // the leader: spares for nodes whose launchers are lost
  void MarkLost(const std::vector<int>& launchers);
  std::optional<std::string> TryDecide();  // the leader: every expected rank joined?
  std::optional<std::string> Tick();       // probes, re-sends, the timeout
  void ArmTimer(bool on);

  PeerGroup* peers_ = nullptr;
  FtProgramChannel channel_;
  Config config_;
  Journal journal_;
  Take take_;
  int timer_ = -1;
  std::vector<int> launcher_of_;  // by program rank
  size_t lost_taken_ = 0;         // lost_.size() when the leader last looked for spares

  int64_t generation_ = 0;
  int64_t epoch_ = -1;                  // the latest quorum's
  std::set<int> lost_;                  // launchers (step ranks) that could not be reached
  bool waiting_ = false;
  bool joined_ = false;
  bool program_joined_ = false;
  // This launcher's program's join, while it waits for a quorum.
  std::optional<FtJoin> my_join_;
  int64_t my_left_ = -1;
  int sent_to_ = -1;
  // The leader's forming of the next quorum.
  bool forming_ = false;
  std::map<int, FtJoin> joins_;  // by rank
  std::chrono::steady_clock::time_point forming_since_, waiting_since_;
  std::optional<std::chrono::steady_clock::time_point> quorum_told_;  // to the program, last
  FtReplacements replaced_;   // the run's replacements per launcher, as the latest quorum said
  int64_t own_replaced_ = 0;  // this launcher's
};

}  // namespace autopar
