// The site administrator's settings: the arguments after the plugin's path in plugstack.conf
// (`required autopar.so max_requeue=5 ckpt_upload_prefixes=s3://ckpt/ ...`). Every key is listed,
// with its default and meaning, in etc/plugstack.conf.d/autopar.conf. Pure but for calibration=PATH
// (which reads that file); thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autopar/status.h"
#include "core/calibration/calibration.h"
#include "core/options.h"
#include "core/plan/planner.h"

namespace autopar {

struct SiteConfig {
  JobOptions defaults;                    // default_<option>=VALUE
  int64_t requeue_default_count = 3;      // N for a bare --requeue-on-failure
  int64_t max_requeue = 10;               // most restarts a user may ask for
  int64_t restarts_in_place_default = 3;  // --restarts-in-place of a job with --requeue-on-failure
  int64_t max_restarts_in_place = 20;     // most in-place restarts a user may ask for
  int64_t max_spare_nodes = 4;            // most --spare-nodes a user may ask for
  int64_t rollbacks_default = 2;          // N of a bare --on-bad-loss=rollback
  int64_t max_rollbacks = 5;              // most rollbacks a user may ask for
  double straggler_margin = 0.25;         // a rank this much slower than the median ...
  int64_t straggler_windows = 3;          // ... for this many progress windows is a straggler
  int64_t max_ckpt_keep = 100;
  int64_t min_heartbeat_timeout = 10;     // seconds
  int64_t max_heartbeat_timeout = 86400;  // seconds
  std::vector<std::string> ckpt_upload_schemes = {"s3", "file"};
  std::vector<std::string> ckpt_upload_prefixes;  // empty: any destination of an allowed scheme
  std::vector<std::string> ckpt_dir_prefixes;     // empty: any absolute path
  std::string builtin_ckpt_dir = "/tmp/autopar/%u/%j";  // used by --ckpt-upload without --ckpt-dir
  std::string socket = "/run/autopard/autopard.sock";   // %n: the node's name
  std::vector<std::pair<std::string, std::string>> nccl_env;  // nccl_env=NAME=VALUE, repeatable
  std::string master_ifname;            // interface for rank 0's address (launcher); empty: route
  int64_t master_port_base = 29500;     // MASTER_PORT = base + (job_id + step_id) % range
  int64_t master_port_range = 2000;
  // torchrun_env=all: every job's tasks get torchrun's variables, also jobs that use none of
  // autopar's options; autopar (the default): only jobs that use autopar.
  bool torchrun_env_all = false;
  // on_autopard_missing=fail (the default): a task of a job whose options need autopard fails when
  // its node's autopard does not answer; warn: it says so on stderr and runs unprotected.
  bool fail_without_autopard = true;
  // allow_fault_tolerance=no: --fault-tolerance=step is refused on this site (docs/ft.md).
  bool allow_fault_tolerance = true;
  // calibration=PATH (docs/planner.md, "Calibration"): read when the arguments are parsed; plans
  // for a GPU type in it are calibrated. Empty path: no calibration.
  std::string calibration_path;
  CalibrationFile calibration;
  // plan_headroom=F (docs/planner.md, "Memory per GPU"): every plan keeps this fraction of each
  // GPU's memory free (fragmentation, NCCL buffers, the CUDA context).
  double plan_headroom = kDefaultMemoryHeadroom;
};

// Parses plugstack.conf arguments ("key=value" each). Unknown keys, malformed values and values
// outside their range fail with one message naming the key: "plugstack.conf: max_requeue: must
// be an integer in [0, 1000], got 'x'". Defaults are checked like the user's options are.
// calibration=PATH reads that file (the only I/O here): "plugstack.conf: calibration: PATH: why".
Result<SiteConfig> ParseSiteConfig(const std::vector<std::string>& args);
// The same, going on past a bad argument: every problem goes to `problems`, one message each
// (a misspelt key names the key it is nearest to: "did you mean max_requeue?"); what parsed is
// returned. For checking a line before it is deployed (autopar check-plugstack).
SiteConfig ParseSiteConfigAll(const std::vector<std::string>& args,
                              std::vector<std::string>* problems);

// The names of all keys, for messages and docs.
std::vector<std::string> SiteConfigKeys();

// Expands %n in the socket path to the node's name.
std::string SocketPathForNode(const SiteConfig& site, const std::string& node_name);

}  // namespace autopar
