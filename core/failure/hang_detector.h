// HangDetector: decides from per-rank heartbeats (rank, training step, time) that a job hangs.
// One detector per job per node; it sees the node's own ranks (each node decides for itself: in a
// data-parallel job one stuck rank stops every rank at the next collective, so every node's ranks
// stop making progress).
//
// Progress is a heartbeat with a step higher than that rank's previous one. The job hangs when no
// rank of it has made progress for `timeout_s` (--heartbeat-timeout) seconds. Before the first
// progress (no rank has advanced past the step it first reported, or sent any heartbeat at all)
// the limit is `timeout_s * first_step_factor` counted from the detector's start, because the first
// step also covers process start-up, rendezvous, checkpoint restore, data loading and warm-up
// (kDefaultFirstStepFactor = 3: a 60 s timeout gives the first step 180 s).
//
// A rank whose program says it is finishing (its training loop is done: autopar's Python module
// says so at exit) may take longer than a step to exit (a last save, an evaluation, the
// interpreter's teardown on a loaded node): from that notice the node's limit is at least the
// first-step allowance, so an exit slower than `timeout_s` is not a hang, and one that never ends
// still is.
//
// Times are seconds on any one clock the caller chooses (the daemon passes steady time or the
// epoch; tests pass numbers): the detector never reads a clock itself. Thread-compatible: the daemon
// calls it under its own lock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autopar {

inline constexpr double kDefaultFirstStepFactor = 3.0;

struct HangSettings {
  double timeout_s = 600;  // --heartbeat-timeout
  double first_step_factor = kDefaultFirstStepFactor;
};

struct HangVerdict {
  bool hung = false;
  double idle_s = 0;    // seconds since the last progress (or since the start)
  double limit_s = 0;   // the limit that applies now (first-step allowance or timeout)
  bool first_step = false;  // the first-step allowance applies
  bool finishing = false;   // a rank is finishing: its exit's allowance applies
  int64_t last_step = -1;   // highest step any rank reported (-1: none)
  // Ranks to blame, lowest first: those with the lowest step (the ones the others wait for), or
  // those that never sent a heartbeat; empty when no rank is known.
  std::vector<int> suspects;
  // "no progress from any of 2 ranks for 61.0 s (limit 60 s); last step 41; suspects: rank 1"
  std::string Describe() const;
};

class HangDetector {
 public:
  // `start_s`: when the job's ranks started on this node. `expected_ranks`: the node's rank ids
  // (may be empty; ranks are then learnt from their heartbeats).
  HangDetector(HangSettings settings, double start_s, std::vector<int> expected_ranks = {});

  // Records a heartbeat. A step lower than the rank's last one (a restarted rank) resets that
  // rank's step without counting as progress.
  void Heartbeat(int rank, int64_t step, double now_s);
  // The rank exited normally: it no longer counts. When every rank has exited, Check never
  // reports a hang.
  void RankExited(int rank);
  // The rank's program is finishing (see above): until `now_s` + timeout_s * first_step_factor,
  // Check reports no hang.
  void Finishing(double now_s);

  HangVerdict Check(double now_s) const;
  // The hang reported was acted on at `now_s` (its programs handed to their launchers): the
  // watch starts over from then, with the ranks and steps it knows.
  void Rearm(double now_s) { last_progress_s_ = std::max(last_progress_s_, now_s); }

  // Seconds until Check could first report a hang if nothing happens (0: it may now), for the
  // daemon's timer.
  double SecondsUntilDue(double now_s) const;

 private:
  struct RankState {
    int64_t first_step = -1;
    int64_t step = -1;
    double last_seen_s = 0;
    bool exited = false;
  };
  double LimitS() const;
  HangSettings settings_;
  double last_progress_s_;
  bool progressed_ = false;
  double finishing_until_s_ = 0;  // 0: no rank is finishing
  std::map<int, RankState> ranks_;
};

}  // namespace autopar
