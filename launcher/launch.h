// The pure logic of autopar-launch (one launcher per Slurm task): command-line parsing, the
// per-task identity (from PMIx, or from Slurm's variables without a PMIx server), the
// environment handed to the program, GPU selection and the split of the step's CPUs between the
// local ranks.
//
// Everything here is plain C++ with no PMIx, hwloc or process calls, so it is unit-tested in
// milliseconds (launcher/*_test.cpp); the edges (PMIx, hwloc, fork/exec) live in launcher/.
// All functions are pure and thread-safe. Failures come back as Status/Result whose message is
// ready to print after "autopar-launch: rank R on HOST: ".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

// ---- command line ---------------------------------------------------------------------------

struct LaunchOptions {
  bool bind = true;           // --no-bind turns GPU and CPU binding off
  bool nccl_check = false;    // --nccl-check: all-reduce preflight before the program starts
  double nccl_min_ratio = 0.5;  // --nccl-min-ratio=R: a node below R x median bus bandwidth fails
  bool verbose = false;       // --verbose: one line per rank describing identity and binding
  // In-place restarts of a Python program: the next generation's interpreter is prepared once the
  // program has run this long (--prewarm-after=SECONDS); --no-prewarm: never (prewarm.h).
  bool prewarm = true;
  int prewarm_after_s = 5;
  // How often the program's use of its CPUs, memory and GPU is sent to the node's autopard
  // (--usage-interval=SECONDS, 0: never; docs/health.md).
  int usage_interval_s = 10;
  bool help = false;          // --help: print usage, exit 0
  bool version = false;       // --version
  std::vector<std::string> program;  // the program and its arguments (never empty on success)
};

// Parses the launcher's arguments (argv[1..]). Options come first; the program starts at "--" or
// at the first argument that does not start with '-'. Fails naming the option on an unknown
// option or bad value, and with "no program given" when nothing follows the options (unless
// --help/--version was given).
Result<LaunchOptions> ParseLaunchArgs(const std::vector<std::string>& args);

// The usage text printed by --help (several lines, ends with a newline).
std::string LaunchUsage();

// ---- identity of this task --------------------------------------------------------------------

// What a task knows about itself and the step. Filled from PMIx (launcher/pmix_client.cpp) or,
// without a PMIx server, by RankInfoFromSlurmEnv().
struct RankInfo {
  int rank = 0;         // global rank, 0..size-1
  int size = 1;         // number of tasks in the step
  int local_rank = 0;   // rank among this node's tasks, 0..local_size-1
  int local_size = 1;   // number of tasks on this node
  int node_rank = 0;    // index of this node in the step, 0..num_nodes-1
  int num_nodes = 1;
  std::string host;     // this task's host name
};

// Consistency checks on a RankInfo (ranks inside their sizes, sizes positive). Fails naming the
// inconsistent field, e.g. "PMIx: local rank 3 is not below local size 2".
Status ValidateRankInfo(const RankInfo& info);

using EnvMap = std::map<std::string, std::string>;

// Without a PMIx server: the identity from Slurm's per-task variables (SLURM_PROCID,
// SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID, SLURM_STEP_NUM_NODES or
// SLURM_NNODES, SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE, SLURMD_NODENAME). Outside Slurm
// (no SLURM_PROCID) it is rank 0 of 1 on `hostname`. Fails naming the variable that is missing or
// malformed.
Result<RankInfo> RankInfoFromSlurmEnv(const EnvMap& env, const std::string& hostname);

// The identity autopar-launch exported to its program (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, AUTOPAR_NODE_RANK, AUTOPAR_NUM_NODES, AUTOPAR_HOST), for libautopar inside the
// program. Fails naming the first missing or malformed variable, or an inconsistent identity.
Result<RankInfo> LaunchedRankInfo(const EnvMap& env);

// Parses Slurm's compressed tasks-per-node list ("2(x3),1") into one count per node. Fails
// naming the text on malformed input.
Result<std::vector<int>> ParseTasksPerNode(const std::string& text);

// Without PMIx the port cannot be reserved; the launcher keeps the MASTER_ADDR/MASTER_PORT the
// SPANK plugin exported, or else uses the first host of SLURM_STEP_NODELIST and a port derived
// from the job and step ids (29500 + (job*7 + step) % 20000). Fails naming the variable when
// neither is available.
struct MasterEndpoint {
  std::string addr;
  int port = 0;
};
Result<MasterEndpoint> FallbackMasterEndpoint(const EnvMap& env);

// What rank 0 publishes in its one PMIx Put (key "autopar.master") and every rank Gets after the
// Fence: the master endpoint and the checkpoint step the job resumes from (-1: a fresh start or no
// checkpoints), as "ADDR PORT STEP". Decoding fails naming the value when it is malformed.
struct RendezvousValue {
  MasterEndpoint master;
  int64_t resume_step = -1;
};
std::string EncodeRendezvous(const RendezvousValue& v);
Result<RendezvousValue> DecodeRendezvous(const std::string& text);

// ---- GPUs -----------------------------------------------------------------------------------

// Splits a CUDA_VISIBLE_DEVICES value ("0,1,2,3", UUIDs allowed) into its entries.
std::vector<std::string> SplitDeviceList(const std::string& visible);

// The GPU for one local rank: the step's visible devices are dealt out one per local rank
// (entry local_rank, or local_rank % count when there are fewer GPUs than local ranks, which
// `shared` then reports). Returns nullopt when the step has no GPUs (empty list).
struct GpuChoice {
  std::string device;  // the CUDA_VISIBLE_DEVICES value for the program
  int index = 0;       // the device's position in the step's list
  bool shared = false; // more local ranks than GPUs: several ranks share this one
};
std::optional<GpuChoice> SelectGpu(const std::vector<std::string>& step_devices, int local_rank,
                                   int local_size);

// ---- CPUs -----------------------------------------------------------------------------------

// Parses a Linux CPU list ("0-3,8,10-11"), returns sorted unique CPU ids. Fails naming the text.
Result<std::vector<int>> ParseCpuList(const std::string& text);
// Formats CPU ids (any order) as a compact sorted list ("0-3,8").
std::string FormatCpuList(std::vector<int> cpus);

// Input of the CPU split. `allowed` are the CPUs the step may use on this node. `domains` are the
// node's NUMA domains (CPU ids each; empty when the topology is unknown). `rank_domain` has one
// entry per local rank: the index in `domains` that is near the rank's GPU, or -1 (empty when no
// rank has a GPU locality).
struct CpuSplitInput {
  std::vector<int> allowed;
  std::vector<std::vector<int>> domains;
  std::vector<int> rank_domain;
  int local_size = 1;
};

// One CPU set per local rank. When there are at least as many allowed CPUs as local ranks the
// sets are disjoint, non-empty and together cover `allowed`:
//  - if every rank has a GPU domain and each domain holds at least as many allowed CPUs as ranks
//    placed in it, each domain's CPUs are split between its ranks (NUMA-near the GPU);
//  - otherwise the allowed CPUs, ordered domain by domain, are cut into local_size contiguous
//    blocks whose sizes differ by at most one.
// With fewer CPUs than ranks, rank r gets CPU allowed[r % n] (sets overlap; nothing better
// exists). Returns an empty vector when `allowed` is empty or local_size < 1.
std::vector<std::vector<int>> SplitCpus(const CpuSplitInput& in);

// ---- environment ----------------------------------------------------------------------------

// Everything the launcher decided for its program.
struct LaunchDecisions {
  RankInfo rank;
  MasterEndpoint master;
  std::optional<GpuChoice> gpu;      // nullopt: leave CUDA_VISIBLE_DEVICES alone
  std::vector<int> cpus;             // empty: no CPU binding
};

// The environment changes for the program, given the launcher's own environment `current`.
//  `set` overwrites: torchrun's names (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
//    GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR,
//    MASTER_PORT, TORCHELASTIC_RESTART_COUNT from SLURM_RESTART_COUNT, TORCHELASTIC_RUN_ID from
//    SLURM_JOB_ID), AUTOPAR_NODE_RANK/AUTOPAR_NUM_NODES/AUTOPAR_HOST, CUDA_VISIBLE_DEVICES for the chosen GPU,
//    AUTOPAR_CPUS for the bound CPUs.
//  `defaults` are set only when absent from `current` (the user wins): NCCL_DEBUG=WARN,
//    TORCH_NCCL_ASYNC_ERROR_HANDLING=1, OMP_NUM_THREADS = number of bound CPUs (only with CPU binding).
// Fails when SLURM_RESTART_COUNT is present but not a non-negative integer.
struct EnvChanges {
  EnvMap set;
  EnvMap defaults;
};
Result<EnvChanges> BuildLaunchEnv(const LaunchDecisions& d, const EnvMap& current);

// Applies changes to an environment (set overwrites, defaults only when absent) and returns it.
EnvMap ApplyEnvChanges(EnvMap env, const EnvChanges& changes);

// The job's plan for this rank: when AUTOPAR_PLAN_JSON (exported by the SPANK plugin with
// --auto-parallel) is present, the per-rank variables of PlanTaskEnv(PlanFromJson(json), rank)
// (AUTOPAR_TP_RANK/PP_RANK/DP_RANK and the rest), never a new plan. When the plan's
// tp x pp x dp differs from the step's size (a helper step inside the job), no per-rank
// coordinates are set and `warning` says why. Fails naming AUTOPAR_PLAN_JSON when it does not
// parse. Without the variable: no variables, no warning.
struct PlanEnv {
  EnvMap vars;
  std::string warning;
};
Result<PlanEnv> PlanEnvForRank(const EnvMap& env, int rank, int size);

// Elastic runs (--min-nodes, docs/elastic.md): the plan for `world` ranks, `per_node` on each
// node, made from the job's options in `env` (AUTOPAR_MODEL, AUTOPAR_GLOBAL_BATCH, ...) the way
// srun made the step's first one (core/job_plan.h), so that every launcher computes the same
// plan. Fails with the planner's one line. `max_mem_gib` > 0: within that memory per GPU (after
// an out-of-memory failure, docs/health.md).
Result<std::string> ReplanJson(const EnvMap& env, int world, int per_node, double max_mem_gib = 0);
// The plan's predicted memory per GPU in GiB (0 without a readable plan).
double PlanMemGib(const std::string& plan_json);
// "tp=1 pp=1 dp=8 micro_batch=2 grad_accum=3" for a plan JSON; "none" without one.
std::string PlanSummary(const std::string& plan_json);

// ---- messages, exit codes, signals -----------------------------------------------------------

// "autopar-launch: rank R on HOST: " (R is "?" when rank < 0, i.e. not yet known).
std::string LaunchMessagePrefix(int rank, const std::string& host);

// The launcher's exit code for a program's wait status: the exit code when it exited, 128+N when
// killed by signal N.
int ExitCodeFromWaitStatus(int wait_status);

// Whether a signal the launcher received from Slurm's step daemon must be forwarded to the
// program. With proctrack/cgroup or proctrack/linuxproc Slurm signals every process of the step,
// the program included, so forwarding would deliver the signal twice (a SIGUSR1 "checkpoint now"
// would run twice); with proctrack/pgid Slurm signals only the task's process group, which the
// program (in its own group) has left. `proctrack_type` is slurm.conf's ProctrackType ("" when
// unknown: treated as whole-step delivery, Slurm's default proctrack/cgroup).
bool ForwardSignalFromSlurm(const std::string& proctrack_type);

// Finds `ProctrackType=...` in slurm.conf text (case-insensitive key, comments ignored); "" when
// absent.
std::string ProctrackTypeFromSlurmConf(const std::string& conf_text);

}  // namespace autopar
