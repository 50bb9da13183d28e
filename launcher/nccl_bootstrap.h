// Pure helpers of the NCCL bootstrap and preflight, usable without CUDA or NCCL (unit-tested on
// machines without a GPU): how rank 0's ncclUniqueId travels through PMIx, and the arithmetic of
// `autopar-launch --nccl-check`. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

// NCCL_UNIQUE_ID_BYTES in nccl.h; checked against it where NCCL is compiled in.
inline constexpr size_t kNcclUniqueIdBytes = 128;

// The PMIx key under which rank 0 publishes the bootstrap id of the communicator named `tag`
// ("autopar.nccl.id.<tag>"). Fails when the tag is empty, longer than 64 characters, or has a
// character outside [A-Za-z0-9._-] (keys must be the same on every rank and fit PMIx's limit).
Result<std::string> BootstrapKey(const std::string& tag);

// Encodes a bootstrap id as text: "apid1:" followed by lower-case hex of the bytes. Text travels
// through PMIx strings, environment variables and logs unchanged.
std::string EncodeBootstrapId(const std::vector<uint8_t>& id);

// Decodes EncodeBootstrapId's text. Fails when the prefix is not "apid1:", a character is not hex,
// the hex has odd length, or the id is not `expected_bytes` long (the message names the length;
// expected_bytes 0 accepts any length).
Result<std::vector<uint8_t>> DecodeBootstrapId(const std::string& text,
                                               size_t expected_bytes = kNcclUniqueIdBytes);

// nccl-tests' bus bandwidth of an all-reduce: bytes / seconds x 2 (n-1) / n, in GB/s (1e9).
// Returns 0 for n < 1 or seconds <= 0.
double AllReduceBusBandwidthGBs(size_t bytes, double seconds, int nranks);

// The message sizes of the preflight: powers of two from `min_bytes` to `max_bytes` inclusive
// (both rounded up to a power of two, min at least 4 bytes).
std::vector<size_t> PreflightSizes(size_t min_bytes, size_t max_bytes);

// One node's result of the preflight.
struct NodeBandwidth {
  std::string host;
  double busbw_gbs = 0;
};
// The nodes whose bandwidth is below ratio x the median of all nodes (the median of an even
// count is the mean of the two middle values), in input order. Empty for fewer than 2 nodes.
std::vector<NodeBandwidth> SlowNodes(const std::vector<NodeBandwidth>& nodes, double ratio);

}  // namespace autopar
