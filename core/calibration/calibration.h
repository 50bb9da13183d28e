// Site calibration files (docs/planner.md, "Calibration"): per GPU type, how the MFU a finished
// job measured compares with the MFU its plan predicted, and which job that was. `autopar
// calibrate JOBID --file PATH` writes one; the plugin (plugstack.conf `calibration=PATH`) and
// `autopar plan --calibration PATH` plan with it. The file:
//
//   {"gpus": {"a100-80gb": {"factor": 0.312, "job": "1234", "model": "gpt3-1.3b",
//             "layout": "tp=1 cp=1 pp=1 dp=4 micro_batch=16 grad_accum=1 recompute=none",
//             "planned_mfu": 0.1319, "measured_mfu": 0.0412, "windows": 8,
//             "date": "2026-12-02T09:10:04Z"}}}
//
// `factor` (in (0, 2]) and `job` are required; a GPU type is a preset name or alias
// (core/plan/hardware.h), stored under its preset name. Parsing and the calibration rules are pure
// and thread-safe; the file functions do I/O (one read; a write to PATH.tmp renamed over PATH).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autopar/status.h"
#include "core/plan/planner.h"

namespace autopar {

struct JobReport;     // core/health/report.h
struct JournalEvent;  // core/proto/protocol.h

struct CalibrationEntry {
  double factor = 1.0;  // the source job's measured MFU / the MFU of its plan before calibration
  std::string job;      // the source job's id
  std::string model;    // what it trained and how (its plan's), for people
  std::string layout;
  std::optional<double> planned_mfu, measured_mfu;  // as its report has them (medians)
  int64_t windows = 0;  // progress windows the measured MFU is the median of
  std::string date;     // when it was calibrated, UTC, ISO 8601
};

struct CalibrationFile {
  std::map<std::string, CalibrationEntry> gpus;  // by preset name (GpuSpec::name)
  // The calibration of plans for `gpu_name` (a preset name); nullopt when the file has none.
  std::optional<PlanCalibration> For(const std::string& gpu_name) const;
};

// Errors name the key: "'gpus.a100-80gb.factor': must be a number in (0, 2], got 3",
// "'gpus.v99': unknown GPU type 'v99' (known: ...)", "not valid JSON: ...".
Result<CalibrationFile> ParseCalibration(const std::string& json);
std::string CalibrationToJson(const CalibrationFile& file);  // pretty, keys in a stable order

// Reads and parses PATH; errors are "PATH: <why>" (cannot read, or ParseCalibration's).
// `missing_is_empty`: a PATH that does not exist is an empty file (autopar calibrate creates it).
Result<CalibrationFile> ReadCalibrationFile(const std::string& path, bool missing_is_empty = false);

// The calibration rules of `autopar calibrate` (docs/planner.md):
// at least this many progress windows with a measured MFU (their median makes the factor, so one
// slow or fast window, a warm-up or a checkpoint, does not set it alone);
inline constexpr int64_t kMinCalibrationWindows = 5;
// a measured MFU above the plan's by more than this says the program does not train the planned
// model (a toy under a big model's plan), not that the model is pessimistic.
inline constexpr double kMaxMeasuredOverPlanned = 1.5;

// What a job's `submitted` event says about its plan beyond the report: the GPU type it was
// planned for (gpu=) and the calibration it was planned with (calibration=FACTOR
// calibration_job=JOB), each when the event carries it (empty / nullopt otherwise).
struct SubmittedPlan {
  std::string gpu;
  std::optional<PlanCalibration> calibration;
};
SubmittedPlan ReadSubmittedPlan(const std::vector<JournalEvent>& events);

// The entry a job's report makes for its GPU type: factor = planned_with's factor (1 when its plan
// was not calibrated) x measured MFU / planned MFU. Refused, with one line naming the job and the
// reason, when the job had no plan, no progress windows or fewer than kMinCalibrationWindows with
// a measured MFU, a measured MFU above kMaxMeasuredOverPlanned x the plan's, or a factor outside
// (0, 2]. `date`: the entry's date.
Result<CalibrationEntry> CalibrationFromReport(const JobReport& report,
                                               const std::optional<PlanCalibration>& planned_with,
                                               const std::string& date);

}  // namespace autopar
