// `autopar report JOBID` (docs/health.md): what a job did, from its timeline alone:
// planned against measured step time and MFU, throughput over time, and each recovery with the
// time it cost. Pure: built from the merged journal (every node's events), rendered as text or
// JSON. Thread-compatible values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/health/goodput.h"
#include "core/proto/protocol.h"

namespace autopar {

struct JobReport {
  std::string job_id;
  std::string model;        // from the "submitted" event; empty without a plan
  std::string layout;       // "tp=1 cp=1 pp=2 dp=4 micro_batch=..." (the plan's)
  std::optional<double> planned_step_s, planned_mfu;
  struct Window {           // one "progress" event
    double time = 0;
    int64_t step = -1;
    double step_s = 0;
    std::optional<double> samples_per_s, tokens_per_s, mfu, loss;
  };
  std::vector<Window> progress;
  // Medians over the windows (nullopt without any).
  std::optional<double> step_s, mfu, tokens_per_s, samples_per_s;
  struct Recovery {
    double time = 0;            // the failure
    std::string failure_class;  // rank-crash, hang, node-loss, time-limit, ...
    std::string action;         // restart-in-place, requeue, stop, ...
    std::optional<double> lost_s;  // failure to the first step after it (in place), or to the
                                   // next run's resume (requeue)
  };
  std::vector<Recovery> recoveries;
  double lost_s = 0;  // the recoveries' total
  // Steps run again after a failure: a fault-tolerant group's discarded steps (ft_discarded),
  // and for a restart from a checkpoint the steps past it that had been reported (progress,
  // checkpoints) before the failure: a lower bound, as rank 0 reports only every few steps.
  int64_t lost_steps = 0;
  // Programs that had not failed but were stopped and started again with the failed one
  // (restarted: programs - failed); a fault-tolerant group restarts none.
  int64_t healthy_restarts = 0;
  // --fault-tolerance=step: the group's re-forms (epochs after the first) and the members healed
  // from a live peer, with the bytes they received.
  struct FaultTolerance {
    int reforms = 0, heals = 0;
    int64_t healed_bytes = 0;
  } ft;
  // Effective training time ratio: the steps the job ended with (the highest step rank 0
  // reported) at its median step time, over its wall time from the first event to the last.
  std::optional<double> ettr;
  // Utilisation per node ("usage" summaries; means over them) and idle stretches ("idle").
  struct NodeUse {
    std::string node;
    int ranks = 0;
    double cpu_cores = 0;  // mean over the node's summaries, summed over its ranks
    double rss_gib = 0;    // the largest
    std::optional<double> gpu_util, gpu_mem_gib;
    int summaries = 0;
  };
  std::vector<NodeUse> utilisation;  // by node name
  struct Idle {
    double time = 0;
    std::string node;
    double idle_s = 0;
  };
  std::vector<Idle> idle;
  double first_time = 0, last_time = 0;
  std::string end;  // "finished exit=0", "stopped: ...", "" (still running or unknown)
  // Where the allocation went (goodput.h), when Slurm's record of the runs could be read; else
  // why not.
  std::optional<JobGoodput> goodput;
  std::string goodput_note;
};

struct RecoveryCounts {
  int in_place = 0, requeued = 0, ft = 0;
};
RecoveryCounts CountRecoveries(const JobReport& report);

JobReport BuildReport(const std::string& job_id, const std::vector<JournalEvent>& events);
std::string ReportToText(const JobReport& report);
std::string ReportToJson(const JobReport& report);  // one object, pretty-printed

}  // namespace autopar
