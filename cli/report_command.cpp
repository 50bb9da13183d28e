// `autopar report JOBID [--json | --html FILE] [--socket PATH]`: what a job did, from its timeline.
#include <optional>
#include <utility>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "commands.h"
#include "daemon_args.h"
#include "core/health/report.h"
#include "core/health/report_html.h"
#include "job_events.h"
#include "replacing_file.h"
#include "sacct_runs.h"

namespace autopar::cli {

int RunReportCommand(int argc, char** argv) {
  auto args = ParseDaemonArgs(argc, argv);
  if (!args) return Fail("report", args.message(), 2);
  if (args->help || args->positional.size() != 1) {
    std::fputs("usage: autopar report JOBID [--json | --html FILE] [--socket PATH]\n"
               "  what the job did, from its timeline (every node's journal): the plan's step\n"
               "  time and MFU against the measured ones, throughput over time, and each recovery\n"
               "  with the time it cost (docs/health.md); as text, --json, or --html: one\n"
               "  self-contained page with plots written to FILE (- for standard output)\n",
               args->help ? stdout : stderr);
    return args->help ? 0 : 2;
  }
  if (args->json && args->html) return Fail("report", "--html: cannot be combined with --json", 2);
  // The page's file is opened first: an unwritable one fails before autopard is asked.
  std::optional<ReplacingFile> page;
  if (args->html && *args->html != "-") {
    auto opened = ReplacingFile::Open(*args->html);
    if (!opened) return Fail("report", "--html: " + opened.message(), 1);
    page.emplace(std::move(*opened));
  }
  auto events = FetchJobEvents("report", args->positional[0], args->socket);
  if (!events) return Fail("report", events.message(), 1);
  JobReport report = BuildReport(args->positional[0], *events);
  // Where the allocation went, when Slurm's record of the job's runs can be read.
  SacctQuery q;
  q.job_ids = {args->positional[0]};
  if (auto runs = QuerySacctRuns(q); !runs) {
    report.goodput_note = "Slurm's record of the runs is not readable: " + runs.message();
  } else if (runs->empty()) {
    report.goodput_note = "no run in Slurm's records (yet)";
  } else {
    report.goodput = SplitJob(*runs, *events, static_cast<double>(std::time(nullptr)));
  }
  if (page) {
    Status written = page->Commit(ReportToHtml(report));
    return written ? 0 : Fail("report", "--html: " + written.message(), 1);
  }
  const std::string out = args->html   ? ReportToHtml(report)
                          : args->json ? ReportToJson(report)
                                       : ReportToText(report);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace autopar::cli
