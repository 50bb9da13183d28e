// Goodput (docs/goodput.md): where a job's allocated GPU-hours went. Slurm's record of each run
// of the job (one per start: a requeued job has several) gives the allocation; the job's timeline
// says what each second of it was used for:
//
//   steps_kept     steps whose result the job kept (its final state builds on them)
//   steps_redone   steps run again later: past the checkpoint a restart resumed from, and a
//                  fault-tolerant group's discarded steps (lost work)
//   recovery       a failure to the first step after it (in place, or the next run's start-up)
//   ckpt_stall     the training loop waiting for its own checkpoint writes (save_s of each
//                  ckpt_committed)
//   preempted      from Slurm's preemption notice to the run's end, but for the steps and the
//                  checkpoint finished in the grace time
//   no_progress    everything else: a first start-up, a hang until it is found, idle stretches,
//                  the end of a run after its last step
//
// Every second of a run falls in exactly one use (the first that claims it, in the order
// ckpt_stall, recovery, steps_redone, steps_kept, preempted; no_progress takes the rest), so the
// uses add up to the run's allocation: (end - start) x GPUs, what sacct accounts.
//
// Pure: Slurm's records come in as text (`sacct --parsable2`), the timeline as events. Thread-
// compatible values.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "autopar/status.h"
#include "core/proto/protocol.h"

namespace autopar {

enum class GoodputUse { kStepsKept, kStepsRedone, kRecovery, kCkptStall, kPreempted, kNoProgress };
inline constexpr int kGoodputUses = 6;
const char* GoodputUseName(GoodputUse use);  // "steps_kept", ...
using GoodputSplit = std::array<double, kGoodputUses>;  // GPU-seconds by use (index: GoodputUse)
double Total(const GoodputSplit& split);

// One run of a job as Slurm accounts it (one line of sacct, a requeued job has one per run).
struct SlurmRun {
  std::string job_id, user, partition, state;
  double start = 0, end = 0;  // seconds since the epoch; end 0: still running
  int nodes = 0, cpus = 0;
  int gpus = 0;  // gres/gpu of its AllocTRES; 0: none accounted
};

// What `sacct` is asked for: SacctFormat() with --parsable2 --noheader, times as epoch seconds
// (SLURM_TIME_FORMAT=%s).
const char* SacctFormat();  // "JobIDRaw,User,Partition,Start,End,State,NNodes,NCPUS,AllocTRES"
// Runs that started, in sacct's order; job steps ("42.batch") are left out. A line that is not
// sacct's is an error naming it.
Result<std::vector<SlurmRun>> ParseSacctRuns(std::string_view text);

// A stretch of one run used one way.
struct GoodputSegment {
  double t0 = 0, t1 = 0;
  GoodputUse use = GoodputUse::kNoProgress;
};

struct RunGoodput {
  SlurmRun run;
  double end = 0;          // run.end, or `now` for a run still going
  int gpus = 0;            // run.gpus; else the ranks the run's launch started; else its CPUs
  std::string gpus_from;   // "gres/gpu", "ranks", "cpus"
  std::vector<GoodputSegment> segments;  // in time order, covering [run.start, end)
  GoodputSplit gpu_s{};    // segments' lengths x gpus, by use
};

struct JobGoodput {
  std::string job_id, user, partition;
  std::vector<RunGoodput> runs;
  GoodputSplit gpu_s{};   // over the runs
  double allocated_gpu_s = 0;  // sum of (end - start) x gpus: Total(gpu_s)
  int64_t steps_kept = 0, steps_redone = 0;
  int preemptions = 0;
};

// The split of one job: RUNS (Slurm's, any order), EVENTS its merged timeline (time order).
JobGoodput SplitJob(const std::vector<SlurmRun>& runs, const std::vector<JournalEvent>& events,
                    double now);

// Only the part of each run inside [from, to) (a site's window); a run outside it is dropped.
JobGoodput ClipJob(const JobGoodput& job, double from, double to);

// Jobs summed by any of user, partition and day (UTC; a run across midnight is cut there).
struct GoodputKey {
  bool user = false, partition = false, day = false;
};
struct GoodputRow {
  std::string user, partition, day;  // "" where not grouped by it
  int jobs = 0;
  GoodputSplit gpu_s{};
};
std::vector<GoodputRow> SumGoodput(const std::vector<JobGoodput>& jobs, GoodputKey by);

// Renderings (goodput_format.cpp). Text: one block per job, or a table of rows; JSON: one
// object; Prometheus: gauges autopar_goodput_gpu_seconds{user,partition,day,use} per row.
std::string GoodputJobsToText(const std::vector<JobGoodput>& jobs);
std::string GoodputRowsToText(const std::vector<GoodputRow>& rows, GoodputKey by);
std::string GoodputToJson(const std::vector<JobGoodput>& jobs, const std::vector<GoodputRow>& rows);
std::string GoodputToPrometheus(const std::vector<GoodputRow>& rows);
// The HTML report's section (a fragment): the uses' table and each run as a bar of its stretches.
std::string GoodputToHtml(const JobGoodput& job);

}  // namespace autopar
