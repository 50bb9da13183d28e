// What autopar.so does with its options, free of Slurm so that it is unit-tested
// (option_handling_test.cpp): the decision for one option as sbatch, salloc, srun or slurmstepd
// hands it over (plugin.cpp's OptionCallback), whether a command line asks to survive a node
// loss, and the smallest size an elastic job may start or shrink to. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/site_config.h"
#include "core/submit_geometry.h"

namespace autopar {

// The options one plugin instance has seen, and what it could not take.
struct OptionsSeen {
  SiteConfig site;
  JobOptions user;
  bool asked = false;        // the job gave one of autopar's options
  std::string site_error;    // plugstack.conf problem: autopar's options are refused
  std::string option_error;  // the first bad option seen in the remote context (told in task_init)
};

struct OptionVerdict {
  std::string refusal;           // non-empty: refuse the option (the submit fails) with this line
  bool request_no_kill = false;  // the job must keep its other nodes when one fails (RequestNoKill)
};

// Takes option `id` with `optarg` (null: given without its optional argument; the text "(null)",
// which Slurm 22.05 passes on to a batch job's later steps for it, too). `remote`: slurmstepd's
// context, where a refusal is only recorded (the submit checked it already; a difference means the
// site changed) and told in task_init; `allocator`: sbatch's or salloc's.
OptionVerdict TakeOption(OptionsSeen& seen, OptionId id, const char* optarg, bool remote, bool allocator);

// Whether a command line (argv[0] first) asks to survive a node loss: --spare-nodes=K (or
// --spare-nodes K) with K > 0, or --min-nodes=M.
bool CommandLineSurvivesNodeLoss(const std::vector<std::string>& args);

// The fewest nodes an elastic job may run on, and the flag that allows it, for its plan check at
// submit: the low end of a --nodes range (less the spares), or --min-nodes where that is fewer.
// nodes == 0: neither applies.
struct SmallestSize {
  int64_t nodes = 0;
  std::string flag;
};
SmallestSize SmallestElasticSize(const SubmitGeometry& geometry, const JobOptions& options);

}  // namespace autopar
