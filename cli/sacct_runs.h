// Slurm's record of a job's runs, from `sacct` (slurmdbd), or from the job completion log
// (`sacct --completion`) on a cluster without accounting storage.
#pragma once

#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/health/goodput.h"

namespace autopar::cli {

struct SacctQuery {
  std::vector<std::string> job_ids;  // or every job in the window below
  std::string start, end;            // sacct's --starttime/--endtime (UTC), "" for its default
  std::string users, partitions;     // comma lists, "" for any
  bool all_users = false;
};

// Every run of the selected jobs (a requeued job has one per start); an error with sacct's
// first line when it fails.
Result<std::vector<SlurmRun>> QuerySacctRuns(const SacctQuery& query);

}  // namespace autopar::cli
