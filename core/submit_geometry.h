// The shape of a batch job as sbatch will ask Slurm for it, read from the same places sbatch
// reads: the script's #SBATCH lines, then the command line (which wins). Only what the plugin
// checks at submit time needs: the node count or range (--nodes/-N), and the GPUs (one task per
// GPU) per node (--gpus-per-node, --gres=gpu:N, else --ntasks-per-node). A SPANK plugin is not
// given these by Slurm at submit time; reading them lets it refuse a job whose smallest size has
// no plan before it is queued (docs/elastic.md). Pure; reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

struct SubmitGeometry {
  int64_t min_nodes = 0;      // --nodes=A-B: A; --nodes=N: N; 0 when not given
  int64_t max_nodes = 0;      // B or N; 0 when not given
  int64_t gpus_per_node = 0;  // 0 when neither GPUs nor tasks per node are given
  std::string nodes_flag;     // "--nodes=2-4" as the user wrote it, for messages
};

// The options of the #SBATCH lines at the top of `script` (up to its first line that is neither
// a comment nor blank, as sbatch reads them), split into words.
std::vector<std::string> SbatchLineArgs(const std::string& script);

// Folds `args` (sbatch's options, in order; later ones win) into `geometry`. Words it does not
// know are skipped, so the whole command line can be given.
void ReadSubmitGeometry(const std::vector<std::string>& args, SubmitGeometry* geometry);

}  // namespace autopar
