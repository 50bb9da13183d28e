// In-place restarts (issue 11), the launcher's pure part. When a rank's program fails (or hangs,
// as its node's autopard tells its launcher), every launcher of the step stops its program, they
// meet in a PMIx fence (each Puts its FailureReport, or nothing when it was only told to stop),
// rank 0 asks its node's autopard what to do about the generation's first failure, and publishes
// the verdict with a new MASTER_PORT and resume step in a second fence; then every launcher
// restores and starts the program again (generation + 1) or exits. docs/recovery.md tells the
// whole mechanism. Pure; reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/failure/timeline.h"

namespace autopar {

// One launcher's view of a failure of its own program in generation `generation`.
struct FailureReport {
  int64_t generation = 0;
  int rank = -1;
  std::string node;
  std::string kind = "rank-crash";  // FailureClassName: rank-crash or hang
  int exit_status = 0;              // the shell's convention: 128+S for signal S
  double run_s = -1;                // how long this generation's program ran
  double detected = 0;              // seconds since the epoch, when the launcher saw it
};
// The report as event fields (class exit [signal] run_s node generation detected), the form it
// takes in the stop fence, in the stop notice and in autopard's `recover` request.
EventFields ReportFields(const FailureReport& r);
Result<FailureReport> ReportFromFields(const EventFields& fields, int rank);

// The line one launcher sends every other launcher of the step when its program failed:
// "autopar-stop token=T generation=G rank=R class=... \n". `token` is the step's secret (rank 0's,
// shared through PMIx only), so nobody else can stop the program.
std::string EncodeStopNotice(const std::string& token, const FailureReport& r);
// Parses one notice line (without its newline); errors for a wrong token or malformed text.
Result<FailureReport> DecodeStopNotice(const std::string& line, const std::string& token);

// The failure rank 0 asks autopard about: the first one detected (then the lowest rank), of the
// reports that the stop fence collected (nullopt entries: ranks that were only stopped).
std::optional<FailureReport> FirstFailure(const std::vector<std::optional<FailureReport>>& reports);

// Rank 0's verdict in the second fence: "restart" or "exit CODE".
struct RestartVerdict {
  bool restart = false;
  int exit_code = 1;  // !restart: what every launcher exits with
};
std::string EncodeVerdict(const RestartVerdict& v);
Result<RestartVerdict> DecodeVerdict(const std::string& text);

// The PMIx keys of generation g's fences.
std::string FailureKey(int64_t generation);  // "autopar.fail.G"
std::string VerdictKey(int64_t generation);  // "autopar.verdict.G" (the verdict about G)
std::string MasterKey(int64_t generation);   // "autopar.master" (G = 0), "autopar.master.G"

}  // namespace autopar
