// goodput.h's renderings: text, JSON and Prometheus' exposition format.
#include <json/json.h>

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "core/failure/timeline.h"
#include "core/health/goodput.h"
#include "core/metrics/exposition.h"
#include "core/text.h"

namespace autopar {
namespace {

std::string Hours(double gpu_s) { return FormatFixed(gpu_s / 3600.0, gpu_s < 36 ? 4 : 2); }

std::string Share(double part, double whole) {
  return whole > 0 ? FormatFixed(100.0 * part / whole, 1) + "%" : "-";
}

// "  steps_kept      0.0123 GPU-h  61.2%" for each use.
std::string SplitLines(const GoodputSplit& split) {
  std::string out;
  const double total = Total(split);
  for (int u = 0; u < kGoodputUses; ++u) {
    char line[128];
    std::snprintf(line, sizeof line, "  %-13s %12s GPU-h %7s\n",
                  GoodputUseName(static_cast<GoodputUse>(u)), Hours(split[u]).c_str(),
                  Share(split[u], total).c_str());
    out += line;
  }
  return out;
}

Json::Value SplitJson(const GoodputSplit& split) {
  Json::Value v(Json::objectValue);
  for (int u = 0; u < kGoodputUses; ++u) v[GoodputUseName(static_cast<GoodputUse>(u))] = split[u];
  return v;
}

}  // namespace

std::string GoodputJobsToText(const std::vector<JobGoodput>& jobs) {
  std::string out;
  for (const JobGoodput& j : jobs) {
    const double total = j.allocated_gpu_s;
    out += "job " + j.job_id + " (" + j.user + ", " + j.partition + "): " + Hours(total) +
           " GPU-h allocated over " + std::to_string(j.runs.size()) + " run" +
           (j.runs.size() == 1 ? "" : "s") + ", goodput " +
           Share(j.gpu_s[static_cast<int>(GoodputUse::kStepsKept)], total) + "\n";
    out += SplitLines(j.gpu_s);
    out += "  steps: " + std::to_string(j.steps_kept) + " kept, " + std::to_string(j.steps_redone) +
           " redone; preemptions: " + std::to_string(j.preemptions) + "\n";
    for (const RunGoodput& r : j.runs) {
      out += "  run " + FormatEventTime(r.run.start, false) + " .. " +
             (r.run.end > 0 ? FormatEventTime(r.end, false) : std::string("(running)")) + "  " +
             FormatFixed(r.end - r.run.start, 0) + " s x " + std::to_string(r.gpus) + " GPUs (" +
             r.gpus_from + ")  " + r.run.state + "\n";
    }
  }
  if (jobs.empty()) out = "no job of which autopard has a timeline\n";
  return out;
}

std::string GoodputRowsToText(const std::vector<GoodputRow>& rows, GoodputKey by) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-12s %-12s %-10s %5s %11s", by.user ? "USER" : "",
                by.partition ? "PARTITION" : "", by.day ? "DAY" : "", "JOBS", "GPU-H");
  out += line;
  for (int u = 0; u < kGoodputUses; ++u) {
    std::snprintf(line, sizeof line, " %13s", GoodputUseName(static_cast<GoodputUse>(u)));
    out += line;
  }
  out += "\n";
  for (const GoodputRow& r : rows) {
    const double total = Total(r.gpu_s);
    std::snprintf(line, sizeof line, "%-12s %-12s %-10s %5d %11s", r.user.c_str(),
                  r.partition.c_str(), r.day.c_str(), r.jobs, Hours(total).c_str());
    out += line;
    for (double v : r.gpu_s) {
      std::snprintf(line, sizeof line, " %13s", Share(v, total).c_str());
      out += line;
    }
    out += "\n";
  }
  return out;
}

std::string GoodputToJson(const std::vector<JobGoodput>& jobs, const std::vector<GoodputRow>& rows) {
  Json::Value root(Json::objectValue);
  root["unit"] = "gpu_seconds";
  Json::Value js(Json::arrayValue);
  for (const JobGoodput& j : jobs) {
    Json::Value v(Json::objectValue);
    v["job_id"] = j.job_id;
    v["user"] = j.user;
    v["partition"] = j.partition;
    v["allocated"] = j.allocated_gpu_s;
    v["uses"] = SplitJson(j.gpu_s);
    v["steps_kept"] = static_cast<Json::Int64>(j.steps_kept);
    v["steps_redone"] = static_cast<Json::Int64>(j.steps_redone);
    v["preemptions"] = j.preemptions;
    Json::Value runs(Json::arrayValue);
    for (const RunGoodput& r : j.runs) {
      Json::Value rv(Json::objectValue);
      rv["start"] = r.run.start;
      rv["end"] = r.end;
      rv["running"] = r.run.end <= 0;
      rv["state"] = r.run.state;
      rv["partition"] = r.run.partition;
      rv["gpus"] = r.gpus;
      rv["gpus_from"] = r.gpus_from;
      rv["uses"] = SplitJson(r.gpu_s);
      Json::Value segs(Json::arrayValue);
      for (const GoodputSegment& s : r.segments) {
        Json::Value sv(Json::arrayValue);
        sv.append(s.t0);
        sv.append(s.t1);
        sv.append(GoodputUseName(s.use));
        segs.append(sv);
      }
      rv["segments"] = segs;
      runs.append(rv);
    }
    v["runs"] = runs;
    js.append(v);
  }
  root["jobs"] = js;
  Json::Value rs(Json::arrayValue);
  for (const GoodputRow& r : rows) {
    Json::Value v(Json::objectValue);
    if (!r.user.empty()) v["user"] = r.user;
    if (!r.partition.empty()) v["partition"] = r.partition;
    if (!r.day.empty()) v["day"] = r.day;
    v["jobs"] = r.jobs;
    v["allocated"] = Total(r.gpu_s);
    v["uses"] = SplitJson(r.gpu_s);
    rs.append(v);
  }
  root["rows"] = rs;
  Json::StreamWriterBuilder w;
  w["indentation"] = "  ";
  return Json::writeString(w, root) + "\n";
}

namespace {
// Apart from report_html.h's series colours (more than 24 in some channel: the page's pixel test
// tells them apart).
const char* const kColors[kGoodputUses] = {"#006d5b", "#e377c2", "#8c564b", "#bcbd22", "#17becf",
                                            "#c7c7c7"};

std::string Html(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}
}  // namespace

std::string GoodputToHtml(const JobGoodput& j) {
  std::string out = "<table class=\"goodput\">\n<tr><th>use</th><th>GPU-hours</th><th>share</th></tr>\n";
  for (int u = 0; u < kGoodputUses; ++u) {
    out += "<tr><td><span style=\"color:" + std::string(kColors[u]) + "\">&#9632;</span> " +
           GoodputUseName(static_cast<GoodputUse>(u)) + "</td><td>" + Hours(j.gpu_s[u]) +
           "</td><td>" + Share(j.gpu_s[u], j.allocated_gpu_s) + "</td></tr>\n";
  }
  out += "</table>\n<p class=\"goodput-steps\">" + std::to_string(j.steps_kept) + " steps kept, " +
         std::to_string(j.steps_redone) + " redone (reported), " + std::to_string(j.preemptions) +
         " preemption" + (j.preemptions == 1 ? "" : "s") + "; each run as Slurm accounts it:</p>\n";
  for (const RunGoodput& r : j.runs) {
    const double span = std::max(r.end - r.run.start, 1e-9);
    out += "<figure class=\"goodput-run\"><svg width=\"960\" height=\"22\" role=\"img\">";
    for (const GoodputSegment& s : r.segments) {
      out += "<rect x=\"" + FormatFixed(960 * (s.t0 - r.run.start) / span, 1) + "\" y=\"2\" width=\"" +
             FormatFixed(std::max(0.5, 960 * (s.t1 - s.t0) / span), 1) + "\" height=\"18\" fill=\"" +
             kColors[static_cast<int>(s.use)] + "\"><title>" + GoodputUseName(s.use) + " " +
             FormatFixed(s.t1 - s.t0, 1) + " s</title></rect>";
    }
    out += "</svg><figcaption>" + FormatEventTime(r.run.start, false) + " UTC, " +
           FormatFixed(r.end - r.run.start, 0) + " s x " + std::to_string(r.gpus) + " GPUs (" +
           Html(r.gpus_from) + "), " + Html(r.run.partition) + ", " + Html(r.run.state) +
           "</figcaption></figure>\n";
  }
  return out;
}

std::string GoodputToPrometheus(const std::vector<GoodputRow>& rows) {
  MetricFamily use{"autopar_goodput_gpu_seconds", MetricType::kGauge,
                   "Allocated GPU-seconds of autopar jobs by use (autopar goodput; docs/goodput.md).",
                   {}};
  MetricFamily jobs{"autopar_goodput_jobs", MetricType::kGauge,
                    "autopar jobs that held an allocation in the row (autopar goodput).", {}};
  for (const GoodputRow& r : rows) {
    MetricLabels labels;
    if (!r.user.empty()) labels.emplace_back("user", r.user);
    if (!r.partition.empty()) labels.emplace_back("partition", r.partition);
    if (!r.day.empty()) labels.emplace_back("day", r.day);
    jobs.samples.push_back({"", labels, static_cast<double>(r.jobs)});
    for (int u = 0; u < kGoodputUses; ++u) {
      MetricLabels l = labels;
      l.emplace_back("use", GoodputUseName(static_cast<GoodputUse>(u)));
      use.samples.push_back({"", l, r.gpu_s[u]});
    }
  }
  return RenderExposition({use, jobs});
}

}  // namespace autopar
