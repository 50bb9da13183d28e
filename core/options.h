// The user-facing job options of autopar (`sbatch --model=... --ckpt-upload=...`), one table for
// the SPANK plugin to register, the parsing and checking of each value, the checks that span several
// options, and their AUTOPAR_* environment form. Pure; thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autopar/status.h"

namespace autopar {

struct SiteConfig;

enum class OptionId : int {
  kAutoParallel = 1,
  kModel,
  kGpuType,
  kGlobalBatch,
  kSeqLen,
  kCkptDir,
  kCkptUpload,
  kCkptKeep,
  kRequeueOnFailure,
  kHeartbeatTimeout,
  kRestartsInPlace,
  kSpareNodes,
  kMinNodes,
  kOnBadLoss,
  kLossSpike,
  kIdleTimeout,
  kExcludeStragglers,
  kFaultTolerance,
};

struct OptionSpec {
  OptionId id;
  const char* name;     // long option name, without "--"
  const char* arginfo;  // argument placeholder shown by --help
  const char* usage;    // one line for --help
  bool optional_arg;    // true: `--name` alone is valid (SPANK has_arg = 2)
  const char* env;      // the AUTOPAR_* variable that carries it into tasks
};

// Every option, in --help order.
const std::vector<OptionSpec>& OptionTable();
const OptionSpec& GetOptionSpec(OptionId id);

// `--auto-parallel` alone or `=auto` lets the planner choose; `=tp=4,pp=2[,dp=8]` pins sizes
// (0 = not pinned). FSDP (ZeRO-3): `fsdp` plans FSDP layouts only, `fsdp=N` with shard groups of
// N GPUs (HSDP when the data-parallel ranks are more than N), `hsdp=S,R` with shard groups of S
// replicated R times; each combines with tp=T (FSDP x TP). `grad_sharding=on|off` pins ZeRO-2
// (optimizer states and gradients sharded over the data-parallel ranks, weights whole; planned
// without pp, ep or FSDP) on or off (unset: searched). `grad_reduce=fp32|bf16` pins the precision
// the gradients are accumulated and reduced in (unset: fp32, or bf16 where no layout fits with
// fp32). Each combines with the sizes and alone leaves them to the planner.
struct ParallelSpec {
  int64_t tp = 0, cp = 0, ep = 0, pp = 0, dp = 0;
  bool fsdp = false;                           // set by fsdp, fsdp=N and hsdp=S,R
  int64_t fsdp_shard = 0, fsdp_replicate = 0;  // 0 = not pinned
  std::string grad_sharding;                   // "" = not pinned, "on" or "off"
  std::string grad_reduce;                     // "" = not pinned, "fp32" or "bf16"
  // Sizes or FSDP pinned (ZeRO-2 or the precision alone pins no size).
  bool pinned() const { return tp || cp || ep || pp || dp || fsdp; }
  // "auto", "tp=4,pp=2", "tp=8,fsdp=124", "hsdp=8,4", "tp=8,pp=8,grad_reduce=bf16",
  // "tp=2,grad_sharding=on"
  std::string ToString() const;
  bool operator==(const ParallelSpec& o) const {
    return tp == o.tp && cp == o.cp && ep == o.ep && pp == o.pp && dp == o.dp &&
           fsdp == o.fsdp && fsdp_shard == o.fsdp_shard && fsdp_replicate == o.fsdp_replicate &&
           grad_sharding == o.grad_sharding && grad_reduce == o.grad_reduce;
  }
};
Result<ParallelSpec> ParseParallelSpec(const std::string& text);
// --fault-tolerance=step heals a member from another's whole state and averages over every
// member: refused, naming both options, when `pin` shards the model or optimizer state over
// ranks (tp, pp, cp or ep above 1, fsdp, hsdp, grad_sharding=on). Checked at submit
// (ResolveOptions) and again wherever a step is planned (core/job_plan.h).
Status CheckWholeStatePin(const ParallelSpec& pin);

// --on-bad-loss (docs/health.md): what autopard does when rank 0's reported loss goes bad (NaN or
// infinite, or a spike above --loss-spike times its recent mean): journal it (warn), roll the run
// back in place to the last COMPLETE checkpoint before the bad step at most `rollbacks` times
// (rollback[:N]), or end the job (stop).
enum class BadLossAction { kWarn, kRollback, kStop };
struct BadLossPolicy {
  BadLossAction action = BadLossAction::kWarn;
  int64_t rollbacks = 0;  // kRollback: the budget N
  std::string ToString() const;  // "warn", "stop", "rollback:N"
  bool operator==(const BadLossPolicy& o) const {
    return action == o.action && rollbacks == o.rollbacks;
  }
};
// "warn", "stop", "rollback" (N = default_rollbacks) or "rollback:N" (1 <= N <= max_rollbacks).
Result<BadLossPolicy> ParseBadLossPolicy(const std::string& text, int64_t default_rollbacks,
                                         int64_t max_rollbacks);
// --loss-spike: FACTOR is 0 (spikes are not looked for; NaN/Inf always are) or in (1, 1000].
Result<double> ParseLossSpike(const std::string& text);

// Each field is set only when the user (or the site's default) gave it.
struct JobOptions {
  std::optional<ParallelSpec> auto_parallel;
  std::optional<std::string> model;
  std::optional<std::string> gpu_type;
  std::optional<int64_t> global_batch;
  std::optional<int64_t> seq_len;
  std::optional<std::string> ckpt_dir;     // node-local directory pattern (%j %n %u %%)
  std::optional<std::string> ckpt_upload;  // s3://bucket/prefix or file:///path
  std::optional<int64_t> ckpt_keep;
  std::optional<int64_t> requeue_on_failure;
  std::optional<int64_t> heartbeat_timeout;  // seconds
  // In-place restarts (the program restarted inside the running job, docs/recovery.md) before
  // a failure goes to the requeue path; with --requeue-on-failure and no value of its own, the
  // site's restarts_in_place_default.
  std::optional<int64_t> restarts_in_place;
  // Nodes of the allocation held in reserve (docs/recovery.md): the program runs on the first
  // nodes of each step but these, and a lost node is replaced by one of them in place.
  std::optional<int64_t> spare_nodes;
  // Elastic runs (docs/elastic.md): a lost node that no spare can replace leaves the run going,
  // in place and re-planned, on the nodes left, as long as at least this many remain.
  std::optional<int64_t> min_nodes;
  // Training health (docs/health.md): what a bad loss does, and what a spike is.
  std::optional<BadLossPolicy> on_bad_loss;
  std::optional<double> loss_spike;
  // Seconds without progress or use of the job's CPUs/GPUs on a node before it is flagged idle
  // (docs/health.md); 0: never.
  std::optional<int64_t> idle_timeout;
  // A node flagged as a straggler is left out of the job's next restart (docs/health.md).
  std::optional<bool> exclude_stragglers;
  // Per-step fault tolerance (docs/ft.md): a failed program is replaced alone and the healthy
  // ones never stop (a program on autopar.ft); false: off.
  std::optional<bool> fault_tolerance_step;
  // Slurm must keep the job when one of its nodes fails (--no-kill): spares or an elastic floor.
  bool survives_node_loss() const { return spare_nodes.value_or(0) > 0 || min_nodes.has_value(); }

  bool checkpointing() const { return ckpt_dir.has_value() || ckpt_upload.has_value(); }
};

// The options given that need the node's autopard (checkpoints, recovery, heartbeat and health
// watches), as "--name" in the table's order; empty for a job that only plans.
std::vector<std::string> OptionsNeedingAutopard(const JobOptions& opts);

// Checks one option's value on its own (format, range, the site's limits) and stores it.
// `value` is nullptr for an option given without its optional argument. Setting the same option
// twice keeps the last value. The error names the option: "--ckpt-keep: must be an integer >= 1,
// got '-2'".
Status SetOption(JobOptions& opts, OptionId id, const char* value, const SiteConfig& site);

// Fills what the user left unset from the site's defaults, then checks the options together
// (e.g. --ckpt-keep needs --ckpt-dir or --ckpt-upload). The result is what the job runs with.
Result<JobOptions> ResolveOptions(const JobOptions& user, const SiteConfig& site);

// AUTOPAR_<OPTION>=value for each option that is set, values in the form SetOption accepts.
// Path patterns are passed through unexpanded (see BuildTaskEnv for the expanded form).
std::vector<std::pair<std::string, std::string>> OptionsEnv(const JobOptions& opts);

// Reads options back from AUTOPAR_* variables (for the launcher, the daemon and the CLI), checking
// each as SetOption does; `getenv` returns nullptr for an unset variable.
Result<JobOptions> OptionsFromEnv(const std::function<const char*(const char*)>& getenv,
                                  const SiteConfig& site);

}  // namespace autopar
