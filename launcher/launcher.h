// autopar-launch's launcher: one per Slurm task.
//   srun --mpi=pmix autopar-launch [--no-bind] [--nccl-check] -- PROGRAM [ARGS...]
// Identity and rendezvous from PMIx (rank 0 reserves MASTER_PORT and publishes it; everyone
// Fences and Gets it), GPU/CPU binding, torchrun's environment plus the job's plan, then the
// program as a child in its own process group. A failing program ends the whole step through
// PMIx_Abort (Slurm's mpi/pmix kills the step) so no other rank hangs in a collective, unless
// the job restarts in place (--restarts-in-place): then every launcher stops its program,
// reports to rank 0's launcher over the restart channels, and follows its verdict (from autopard:
// a new MASTER_PORT, the resume step and the nodes that run the program, which with
// --spare-nodes may put a spare in a lost node's place) to start the program again or exit.
//
// After the rendezvous the launcher is a state machine (generation_machine.h): Run() acts in
// the state it is in (one member function each) and takes the next state from the table. The
// pure decisions live in launch.h, restart_logic.h and core/failure; this class wires the edges
// (PMIx, the restart channels, the program, autopard) together, one file per part:
// launcher.cpp (the task, Run and the states), launcher_setup.cpp (before the program),
// launcher_program.cpp (the program of a generation), launcher_restart.cpp (agreeing on a
// restart, the spares), launcher_resume.cpp (the checkpoint).
//
// Thread safety: one Launcher per process, used from its main thread (the story thread only
// reads a copy of the environment).
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/failure/launch_events.h"
#include "core/proto/proto_client.h"
#include "launcher/generation_machine.h"
#include "launcher/launch.h"
#include "launcher/restart_logic.h"
#include "child_process.h"
#include "ft_group.h"
#include "peer_group.h"
#include "pmix_client.h"
#include "port_reservation.h"
#include "prewarm.h"
#include "program_errors.h"
#include "restart_channel.h"
#include "usage_reporter.h"

namespace autopar {

class Launcher {
 public:
  // Blocks the signals the launcher forwards (before PMIx_Init starts its progress thread, which
  // must inherit the mask) and reads the task's environment, rank and host.
  Launcher();
  // The launch with `opts` to its end; returns the launcher's exit status.
  int Run(const LaunchOptions& opts);
  // One line naming rank and host, then the step ended (PMIx_Abort when joined) and exit(code).
  [[noreturn]] void Fail(const std::string& message, int code);

 private:
  void Say(const std::string& message) const;
  // Tells autopard this task ended at Slurm's SIGTERM with exit CODE ("terminated").
  void TellTerminated(int code);
  // TellEvent on rank 0 only.
  void Journal(const EnvMap& env, const char* kind, int64_t step, const EventFields& fields) const;

  // --- before the program: who this task is, the rendezvous, the program's environment ---
  void StartStory();  // rank 0: submitted and step_started, told while the rendezvous runs
  void JoinWithPmix();
  void JoinWithoutPmix();
  Status Rendezvous(int timeout_s);
  Status JoinPeerGroup(RestartChannel channel, int timeout_s);
  void SetUpInPlace();
  void ChooseBinding();
  // The program's environment for its rank (info_), rebuilt when a spare's node comes into use
  // or the run shrinks (its plan then made again for the ranks left).
  EnvMap ProgramEnv();
  void SayPlacement() const;
  void NcclPreflight();

  // --- the generations (generation_machine.h): one function per state ---
  LaunchEvent Act(LaunchState state);
  LaunchEvent WaitInReserve();
  LaunchEvent PrepareGeneration();
  LaunchEvent RunProgram();
  LaunchEvent ReportFailure();
  LaunchEvent AgreeOnVerdict();
  int Finish();  // the end: journal, rank exit, the step ended where a rank failed

  int RunChild(const std::vector<std::string>& argv, const EnvMap& env,
               const std::vector<int>& cpus, bool forward_from_parent, bool* terminated);
  // In place. The program of one generation, supervised: returns its outcome, with
  // *failure set when it failed on its own or hung (then it has been stopped) and *told when
  // another launcher's stop notice ended it.
  ChildOutcome RunGeneration(const std::vector<std::string>& argv, const EnvMap& env,
                             const std::vector<int>& cpus, bool forward_from_parent,
                             std::optional<FailureReport>* failure, bool* told);
  Result<pid_t> StartProgram(const std::vector<std::string>& argv, const EnvMap& env,
                             const std::vector<int>& cpus);
  int ArmPrewarmTimer() const;  // -1: no next interpreter to prepare
  // A node held in reserve prepares the interpreter of the program it would run (its wait began
  // at `since`); returns how many seconds the wait may last before that is due.
  int PrepareInReserve(std::chrono::steady_clock::time_point since);
  // The failure report of a generation's program that ended as `out` says (stopped when it hung,
  // its loss went bad or another rank failed).
  FailureReport EndGeneration(pid_t pid, bool told, std::chrono::steady_clock::time_point start,
                              ChildOutcome* out);

  // After a generation ended with a failure: every launcher reports to rank 0's, which decides
  // (Coordinate) and sends the verdict; with a restart, master_, resume_step_ and active_ are the
  // next generation's. `gone`: the ranks this launcher's stop notice could not reach.
  RestartVerdict AgreeOnRestart(const EnvMap& child_env, const std::optional<FailureReport>& mine,
                                const std::vector<int>& gone, int timeout_s);
  RestartVerdict Coordinate(const EnvMap& child_env, const std::optional<FailureReport>& mine,
                            const std::vector<int>& gone, int timeout_s);
  void JournalRestart(const EnvMap& child_env, const RestartVerdict& verdict,
                      const std::vector<std::optional<FailureReport>>& failures,
                      const std::vector<double>& phases_s);
  void JournalResize(const EnvMap& child_env, const RestartVerdict& verdict);
  // A launcher whose node is held in reserve: answers stop notices and follows the verdicts until
  // one puts its node in use (true) or ends the job (false, *code set).
  bool Standby(int timeout_s, int* code);
  void FollowVerdict(const RestartVerdict& verdict);
  // Rank 0's launcher: the failure autopard decides on (RecoveryPolicy) and the verdict's nodes.
  RestartVerdict Decide(const EnvMap& child_env, const PeerGroup::Reports& reports);
  // Decide's parts: the lost nodes in use and the spares alive; the failure as autopard is
  // asked about it; a plan within autopard's memory limit after an out-of-memory failure; stragglers
  // autopard names left out where spares can take their places.
  void SortNodes(const PeerGroup::Reports& reports, std::vector<int>* lost,
                 std::vector<int>* standby) const;
  RecoverDetail DetailOf(const EnvMap& child_env, const FailureReport& f,
                         const std::vector<int>& lost, const std::vector<int>& standby,
                         const std::vector<int>& left);
  bool FitsInMemory(const EnvMap& child_env, const FailureReport& f, const std::vector<int>& nodes,
                    double max_mem_gib);
  void LeaveStragglersOut(const std::vector<std::string>& hosts, const std::vector<int>& standby,
                          RestartVerdict* verdict);
  // The next generation's rendezvous in a restart verdict: a fresh port, the resume step.
  void PrepareRestart(const EnvMap& child_env, RestartVerdict* verdict);
  // The environment a warm interpreter starts with: this generation's, numbered as the next.
  // Whoever reads a program's /proc/PID/environ (autopard: the generation a hang is handed to)
  // sees the environment it was started with, not the one it is given when activated.
  EnvMap NextGenerationEnv(EnvMap env) const;
  bool ActiveNode(int node) const;
  std::vector<std::string> HostsOf(const std::vector<int>& nodes) const;
  const Result<std::string>& Replan(const EnvMap& env, int world, int per_node,
                                    double max_mem_gib = -1);

  // Per-step fault tolerance (launcher_ft.cpp, ft_group.h): the group's channel and agreement,
  // and a failed program replaced alone while every other one goes on.
  void SetUpFaultTolerance();
  // The group's variables in a program's environment (none without fault tolerance).
  void AddGroupEnv(EnvMap* env) const;
  // A new generation's program in the group: a spare's taking a lost node's ranks (true), or
  // one of a restart, which joins anew.
  bool PrepareInGroup();
  // The program of this generation failed: whether a replacement takes its place in the group
  // (the `replace` state starts it), or the run falls back to the in-place restart.
  bool CanReplaceInGroup() const;
  LaunchEvent ReplaceInGroup();
  // Acts on the group's messages while the program runs; a reason when the group cannot go on.
  std::optional<std::string> PumpGroup();
  // A spare's launcher in reserve, told that spares take lost nodes' places: true when this node
  // is one of them (its program starts as a newcomer to the group, nothing else restarts).
  bool TakenIntoGroup(const PeerMessage& take);

  // The checkpoint half of the launch (proto_client.h): rank 0's DecideResume, everyone's
  // RestoreDecided.
  void Resume(EnvMap* child_env, bool use_pmix, int timeout_s);
  int64_t AgreeMinStep(int64_t mine, int timeout_s);  // the least step every rank can restore
  void JournalResume(const EnvMap& child_env, const ResumeDecision& resume, double restore_s);
  // The job's environment as the checkpoint client reads it: this task's rank and world size.
  EnvMap CkptEnv(const EnvMap& env) const;

  // The task.
  EnvMap env_;  // the launcher's own environment, read at start
  std::string host_;
  int rank_ = -1;
  sigset_t program_mask_{};
  LaunchOptions opts_;
  bool verbose_ = false;
  int timeout_s_ = 0;
  bool use_pmix_ = false;
  std::chrono::steady_clock::time_point launch_start_;
  std::thread story_;

  // The rendezvous and the program's place.
  PmixClient pmix_;
  PortReservation port_;
  RankInfo info_;  // this task's place in the program
  RankInfo step_;  // ... in the step (a spare's differ)
  MasterEndpoint master_;
  LaunchDecisions decisions_;  // binding and rendezvous for the program's environment
  std::vector<std::string> step_gpus_;
  std::string cpus_note_;
  std::string gpu_device_;  // the rank's GPU as CUDA_VISIBLE_DEVICES names it ("" when none)
  int step_world_ = 0;      // the world srun planned the step for
  bool forward_from_parent_ = true;
  UsageReporter usage_;  // the program's use of CPUs, memory and GPU (docs/health.md)
  int usage_interval_s_ = 10;
  ProgramErrors errors_;  // out of memory (docs/health.md)

  // Checkpoints.
  bool checkpoints_ = false;
  int64_t resume_step_ = -1;                  // rank 0's decision, from the rendezvous
  std::optional<ResumeDecision> own_resume_;  // rank 0: its DecideResume (a probe)
  int64_t resume_max_step_ = -1;  // rank 0: autopard's limit for the next generation (a rollback)
  int resume_round_ = 0;  // the restore rounds (PMIx keys; in place: within a generation)

  // In-place restarts.
  bool in_place_ = false;
  int64_t generation_ = 0;
  PeerGroup peers_;          // every launcher of the step
  std::vector<int> active_;  // the step's nodes that run the program, in rank order
  int spares_ = 0;           // --spare-nodes
  int min_nodes_ = 0;        // --min-nodes (0: not elastic)
  // A Python program's next interpreter (prewarm.h): the command, the one prepared.
  std::optional<PythonCommand> python_;
  WarmInterpreter warm_;
  int64_t reserve_warm_tried_ = -1;  // the generation a spare last tried to prepare one for
  // Elastic: the plans for the world sizes the run shrank to (the options and the ranks per node
  // are the step's), so that rank 0's decision, its journal and its program share one planning.
  // After an out-of-memory failure (docs/health.md) the plans must also fit in max_mem_gib_.
  std::map<std::pair<int, double>, Result<std::string>> replans_;
  double max_mem_gib_ = 0;  // the memory the program's plan must fit in (0: the step's plan)
  std::string history_;     // rank 0: autopard's note about the last failure
  std::set<int> excluded_;  // rank 0: nodes left out as stragglers, never spares again

  // Per-step fault tolerance (--fault-tolerance=step; null otherwise).
  std::unique_ptr<FtGroup> ft_;
  std::string ft_addr_;    // where this node's programs serve their rendezvous stores
  bool ft_takeover_ = false;      // this spare's launcher takes a lost node's ranks in the group
  bool ft_failed_ = false;        // the group cannot go on (no quorum): today's path, no replacement

  // The generations so far (the state machine's).
  EnvMap child_env_;
  std::vector<int> env_active_;  // the nodes in use that child_env_ was made for
  double env_mem_ = 0;           // ... and the memory its plan was made within
  int64_t restart_base_ = 0;     // SLURM_RESTART_COUNT
  std::chrono::steady_clock::time_point program_start_;
  std::optional<FailureReport> failure_;  // the last generation's own failure
  bool told_ = false;                     // ... or another rank's stop notice ended it
  std::vector<int> gone_;  // the launchers this one's stop notice could not reach
  int code_ = 0;
  bool terminated_ = false;  // Slurm (or a signal) ended the program
  bool decided_ = false;   // in place: the failure was decided on (restart verdicts), not reported
  bool reported_ = false;  // in place impossible: this node's autopard has decided already
};

}  // namespace autopar
