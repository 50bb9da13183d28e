// `autopar report JOBID --html FILE` (docs/health.md): the job's report as one
// self-contained HTML page: a header (job, model, layout), a summary table (planned against
// measured step time and MFU, throughput, recoveries and the time they cost, the end) and inline
// SVG plots drawn here: throughput, step time against the plan's, and loss, over the job's time,
// each recovery a vertical marker labelled with its failure class. No script, font, image or
// style sheet from anywhere else: the page opens the same offline, attached to a ticket or years
// later. Pure and thread-safe.
#pragma once

#include <string>

#include "core/health/report.h"

namespace autopar {

// The page (UTF-8, <!DOCTYPE html>). Every string from the journal is escaped. Without progress
// windows the page says "no progress reported" instead of drawing empty plots; without a plan it
// draws no planned line and says so in the summary. Non-finite values (a NaN loss) are not drawn
// and the plot says how many were left out.
std::string ReportToHtml(const JobReport& report);

// The series' colours, fixed so that a reader learns them once and a test can find them in a
// screenshot (tests/integration/test_health.py): distinct hues from the Tableau 10 palette, none
// used for anything else on the page (text, axes and grid are greys; a recovery's downtime is a
// translucent band of its marker's colour).
namespace report_color {
inline constexpr char kThroughput[] = "#1f77b4";   // blue: tokens/s or samples/s
inline constexpr char kStepTime[] = "#2ca02c";     // green: measured step time
inline constexpr char kPlannedStep[] = "#ff7f0e";  // orange, dashed: the plan's step time
inline constexpr char kLoss[] = "#9467bd";         // purple: loss
inline constexpr char kRecovery[] = "#d62728";     // red: a recovery (vertical marker)
}  // namespace report_color

}  // namespace autopar
