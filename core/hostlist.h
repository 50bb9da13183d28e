// Slurm hostlist expressions ("node[1-3,7],gpu[01-02]") expanded without libslurm, so the pure
// core can compute MASTER_ADDR and node lists. Thread-safe, pure.
#pragma once

#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

// Expands a Slurm hostlist into host names, in order. Supports comma-separated entries, one
// bracketed range list per entry ("n[1-3,5]"), zero padding ("n[01-10]") and a suffix after the
// bracket ("n[1-2]-ib"). Fails with a message naming the expression on malformed input or on more
// than 65536 hosts.
Result<std::vector<std::string>> ExpandHostlist(const std::string& expr);

}  // namespace autopar
