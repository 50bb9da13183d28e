// `autopar calibrate JOBID --file PATH [--gpu-type T] [--socket PATH]`: the planner learns from a
// finished (or running) job. The job's report (the same BuildReport over the same timeline as
// `autopar report`) gives its plan's MFU and the median measured one; their ratio becomes the
// factor of the job's GPU type in the site calibration file PATH (docs/planner.md,
// "Calibration"), the file's other GPU types kept. PATH is written whole or not at all
// (PATH.tmp, renamed); a refusal is one line and leaves it as it was.
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>
#include <utility>

#include "commands.h"
#include "core/calibration/calibration.h"
#include "core/health/report.h"
#include "core/plan/hardware.h"
#include "core/text.h"
#include "job_events.h"
#include "replacing_file.h"

namespace autopar::cli {
namespace {

constexpr char kUsage[] =
    "usage: autopar calibrate JOBID --file PATH [--gpu-type T] [--socket PATH]\n"
    "  the job's measured MFU (the median of its progress windows, as autopar report has it)\n"
    "  against its plan's, for its GPU type, into the site calibration file PATH (created, or\n"
    "  updated with the other GPU types kept); plugstack.conf calibration=PATH and autopar plan\n"
    "  --calibration PATH then plan with it (docs/planner.md, Calibration). --gpu-type: when the\n"
    "  job's timeline does not name its GPU type.\n";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "autopar calibrate: %s\n", message.c_str());
  return code;
}

struct CalibrateArgs {
  std::string job, file, gpu_type, socket;
  bool help = false;
};

Result<CalibrateArgs> Parse(int argc, char** argv) {
  CalibrateArgs a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i], value;
    bool has_value = false;
    if (StartsWith(s, "--") && s.find('=') != std::string::npos) {
      value = s.substr(s.find('=') + 1);
      s = s.substr(0, s.find('='));
      has_value = true;
    }
    if (s == "--help" || s == "-h") {
      a.help = true;
    } else if (s == "--file" || s == "--gpu-type" || s == "--socket") {
      if (!has_value) {
        if (i + 1 >= argc) return Status::Error(s + ": needs a value");
        value = argv[++i];
      }
      if (value.empty()) return Status::Error(s + ": needs a value");
      (s == "--file" ? a.file : s == "--gpu-type" ? a.gpu_type : a.socket) = value;
    } else if (StartsWith(s, "-")) {
      return Status::Error(s + ": unknown option");
    } else if (a.job.empty()) {
      a.job = s;
    } else {
      return Status::Error("unexpected argument '" + s + "'");
    }
  }
  if (a.socket.empty()) a.socket = DefaultSocket();
  return a;
}

// "2026-12-02T09:10:04Z"
std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  struct tm tm {};
  gmtime_r(&now, &tm);
  char buf[32];
  return std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) ? buf : "";
}

}  // namespace

int RunCalibrateCommand(int argc, char** argv) {
  auto args = Parse(argc, argv);
  if (!args) return Fail(args.message(), 2);
  if (args->help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args->job.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (args->file.empty()) return Fail("--file: required (the site calibration file)", 2);
  std::string gpu;
  if (!args->gpu_type.empty()) {
    auto spec = ResolveGpuType(args->gpu_type);
    if (!spec) return Fail("--gpu-type: " + spec.message(), 2);
    gpu = spec->name;
  }
  // The file as it is (its other GPU types are kept), and its replacement opened before autopard
  // is asked: a malformed or unwritable file fails at once, and is left as it was.
  auto file = ReadCalibrationFile(args->file, /*missing_is_empty=*/true);
  if (!file) return Fail("--file: " + file.message(), 1);
  auto out = ReplacingFile::Open(args->file);
  if (!out) return Fail("--file: " + out.message(), 1);

  auto events = FetchJobEvents("calibrate", args->job, args->socket);
  if (!events) return Fail(events.message(), 1);
  if (events->empty()) {
    return Fail("job " + args->job + ": no events in any node's journal (an unknown job?)", 1);
  }
  const JobReport report = BuildReport(args->job, *events);
  const SubmittedPlan submitted = ReadSubmittedPlan(*events);
  if (!submitted.gpu.empty()) {
    auto spec = ResolveGpuType(submitted.gpu);
    if (!spec) return Fail("job " + args->job + ": its plan's GPU type: " + spec.message(), 1);
    if (!gpu.empty() && gpu != spec->name) {
      return Fail(
          "--gpu-type: " + gpu + ", but job " + args->job + " was planned for " + spec->name, 2);
    }
    gpu = spec->name;
  }
  auto entry = CalibrationFromReport(report, submitted.calibration, UtcNow());
  if (!entry) return Fail(entry.message(), 1);
  if (gpu.empty()) {
    return Fail("--gpu-type: required: job " + args->job +
                    "'s timeline does not name the GPU type it was planned for",
                2);
  }
  file->gpus[gpu] = *entry;
  if (Status s = out->Commit(CalibrationToJson(*file)); !s)
    return Fail("--file: " + s.message(), 1);
  std::printf("%s: %s (measured MFU %s%% / planned %s%%, median of %lld progress windows) -> %s\n",
              gpu.c_str(), CalibrationLabel(*file->For(gpu)).c_str(),
              FormatFixed(entry->measured_mfu.value_or(0) * 100, 2).c_str(),
              FormatFixed(entry->planned_mfu.value_or(0) * 100, 2).c_str(),
              static_cast<long long>(entry->windows), args->file.c_str());
  return 0;
}

}  // namespace autopar::cli
