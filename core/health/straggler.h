// Stragglers (docs/health.md): a rank whose own compute time per step (the time it works
// before it waits for the others: autopar.health.watch_ddp measures it, rank 0's heartbeat carries
// every rank's) stays above the job's median by a margin for several windows in a row is flagged,
// with its node, once per run. In synchronous training everyone waits for the slowest rank, so the
// step time alone cannot tell who it is. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/failure/timeline.h"

namespace autopar {

struct StragglerSettings {
  double margin = 0.25;        // slower than the median by more than this fraction
  int windows = 3;             // ... for this many windows in a row
  double window_s = 30;        // autopard's progress_interval_s
  // ... and by at least this much: below it, timer and scheduler noise (a loaded node's jitter is
  // milliseconds; CI saw a 7 ms job flag a rank), and nothing worth a node to gain.
  double min_excess_s = 0.01;
};

struct StragglerFlag {
  int rank = -1;
  std::string node;      // "" when the ranks' nodes were not told
  double compute_s = 0;  // its median over the last window
  double median_s = 0;   // the job's (the median of every rank's)
  int windows = 0;
  EventFields Fields() const;  // node compute_s median_s ratio windows
};

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerSettings s) : s_(s) {}
  void SetNodes(std::vector<std::string> nodes) { nodes_ = std::move(nodes); }
  // Every rank's compute time of one step (index = rank), at `time`. When a window closes, the
  // ranks flagged by it (each rank at most once per detector).
  std::vector<StragglerFlag> Add(double time, const std::vector<double>& compute_s);

 private:
  StragglerSettings s_;
  std::vector<std::string> nodes_;
  double window_start_ = -1;
  std::vector<std::vector<double>> samples_;  // per rank, this window's
  std::vector<int> streak_;                   // per rank, slow windows in a row
  std::set<int> flagged_;
};

}  // namespace autopar
