#include "core/health/report_html.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

namespace autopar {
namespace {

JournalEvent Ev(double t, const char* kind, int64_t step, const std::string& detail) {
  return JournalEvent{t, "node1", "7", kind, 0, step, detail};
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// Every tag closed in order (void and self-closing ones excepted): what a browser needs to lay
// out the SVG as meant rather than guess.
std::string UnbalancedTag(const std::string& html) {
  static const std::regex kTag(R"(<(/?)([a-zA-Z][a-zA-Z0-9-]*)([^>]*)>)");
  std::vector<std::string> open;
  for (std::sregex_iterator it(html.begin(), html.end(), kTag), end; it != end; ++it) {
    const std::string name = (*it)[2], attrs = (*it)[3];
    if ((*it)[1] == "/") {
      if (open.empty() || open.back() != name) return "</" + name + ">";
      open.pop_back();
    } else if (name != "meta" && (attrs.empty() || attrs.back() != '/')) {
      open.push_back(name);
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

// The points of the polyline of `series` ("throughput", "step-time", "loss"); -1 without one.
int PolylinePoints(const std::string& html, const std::string& series) {
  const size_t at = html.find("<polyline class=\"" + series + "\"");
  if (at == std::string::npos) return -1;
  const size_t begin = html.find("points=\"", at) + 8, end = html.find('"', begin);
  const std::string points = html.substr(begin, end - begin);
  return points.empty() ? 0 : static_cast<int>(Count(points, " ") + 1);
}

// The figure of one plot, from its <figure> to its </figure>.
std::string Figure(const std::string& html, const std::string& id) {
  const size_t begin = html.find("<figure id=\"" + id + "\"");
  if (begin == std::string::npos) return "";
  return html.substr(begin, html.find("</figure>", begin) - begin);
}

void ExpectSelfContained(const std::string& html) {
  EXPECT_EQ(UnbalancedTag(html), "") << html;
  EXPECT_EQ(Count(html, "<svg"), Count(html, "</svg>"));
  // Nothing fetched: the only URL is SVG's namespace name, which no browser loads.
  EXPECT_EQ(Count(html, "http://") + Count(html, "https://"),
            Count(html, "xmlns=\"http://www.w3.org/2000/svg\""))
      << html;
  for (const char* fetches : {"<script", "<link", "<img", "@import", "url("}) {
    EXPECT_EQ(html.find(fetches), std::string::npos) << fetches;
  }
  EXPECT_EQ(html.find("nan"), std::string::npos) << html;
  EXPECT_EQ(html.find("inf<"), std::string::npos) << html;
}

std::vector<JournalEvent> ARecoveredJob() {
  return {
      Ev(1000, "submitted", -1,
         "model=llama-2-7b gpus=8 tp=1 cp=1 pp=2 dp=4 micro_batch=1 grad_accum=16 "
         "recompute=selective optimizer_sharding=1 mem_gib=60.1 step_s=2.000 mfu=0.4000"),
      Ev(1010, "progress", 10, "steps=10 step_s=2.500 tokens_per_s=26214.4 mfu=0.3200 loss=1.5"),
      Ev(1020, "failure", -1, "class=rank-crash exit=137 signal=9"),
      Ev(1020.1, "recovery", -1, "action=restart-in-place generation=0 attempt=1 of=3"),
      Ev(1021.4, "first_step", 12, "generation=1 since_failure_s=1.300"),
      Ev(1040, "progress", 20, "steps=8 step_s=2.300 tokens_per_s=28000 mfu=0.3478 loss=1.2"),
      Ev(1050, "progress", 30, "steps=10 step_s=2.100 tokens_per_s=3000000 mfu=0.3810 loss=1.1"),
      Ev(1055, "failure", -1, "class=hang"),
      Ev(1056, "requeue", -1, "attempt=1 of=3"),
      Ev(1070, "resumed", 30, "from_job=7"),
      Ev(1080, "progress", 40, "steps=10 step_s=2.200 tokens_per_s=29000 mfu=0.3600 loss=1.0"),
      Ev(1090, "finished", -1, "exit=0 run_s=90.0"),
  };
}

TEST(ReportHtml, PlotsEveryWindowAndMarksEveryRecovery) {
  const std::string html = ReportToHtml(BuildReport("7", ARecoveredJob()));
  ExpectSelfContained(html);
  EXPECT_NE(html.find("<h1>job 7: llama-2-7b</h1>"), std::string::npos);
  EXPECT_NE(html.find("tp=1 cp=1 pp=2 dp=4 micro_batch=1 grad_accum=16 recompute=selective"),
            std::string::npos);
  // The summary: planned against measured, the throughput readable, recoveries and time lost.
  EXPECT_NE(html.find("<tr><th>step time</th><td>2.000 s</td><td>2.250 s (median of 4 windows), "
                      "1.12&times; the plan's</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr><th>MFU</th><td>40.0%</td><td>35.4%</td></tr>"), std::string::npos);
  EXPECT_NE(html.find("28.5k tokens/s"), std::string::npos);
  EXPECT_NE(html.find("2 (1 in place, 1 requeued), 16.3 s lost"), std::string::npos);
  EXPECT_NE(html.find("finished exit=0 after 90.0 s"), std::string::npos);
  // One point per window in each plot; tokens/s rather than samples/s; ticks in k and M.
  EXPECT_EQ(PolylinePoints(html, "throughput"), 4);
  EXPECT_EQ(PolylinePoints(html, "step-time"), 4);
  EXPECT_EQ(PolylinePoints(html, "loss"), 4);
  EXPECT_NE(Figure(html, "throughput").find(">tokens/s</text>"), std::string::npos);
  for (const char* tick : {">0</text>", ">1M</text>", ">3M</text>"}) {
    EXPECT_NE(Figure(html, "throughput").find(tick), std::string::npos) << tick;
  }
  EXPECT_NE(Figure(html, "step-time").find(">2.5</text>"), std::string::npos);
  // The plan's step time, dashed, in the step-time plot only.
  EXPECT_EQ(Count(html, "class=\"planned\""), 1u);
  EXPECT_NE(Figure(html, "step-time").find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(Figure(html, "step-time").find(">planned 2 s</text>"), std::string::npos);
  // Both recoveries in every plot (same time axis), labelled with their class and in red.
  for (const char* plot : {"throughput", "step-time", "loss"}) {
    const std::string fig = Figure(html, plot);
    EXPECT_EQ(Count(fig, "class=\"recovery-marker\""), 2u) << plot;
    EXPECT_NE(fig.find(">rank-crash</text>"), std::string::npos) << plot;
    EXPECT_NE(fig.find(">hang</text>"), std::string::npos) << plot;
  }
  EXPECT_NE(html.find(std::string("stroke=\"") + report_color::kRecovery), std::string::npos);
  EXPECT_NE(html.find(std::string("stroke=\"") + report_color::kThroughput), std::string::npos);
  EXPECT_NE(html.find(std::string("stroke=\"") + report_color::kPlannedStep), std::string::npos);
  EXPECT_NE(html.find(std::string("stroke=\"") + report_color::kLoss), std::string::npos);
  // The recoveries' table.
  EXPECT_NE(html.find("<td>hang</td><td>requeue</td><td>15.0 s to the next step</td>"),
            std::string::npos)
      << html;
}

TEST(ReportHtml, EscapesEveryStringFromTheJournal) {
  JobReport r;
  r.job_id = "7<&\">";
  r.model = "<script>alert('x')</script>";
  r.layout = "tp=<1>";
  r.end = "stopped: a&b <c>";
  r.first_time = 1000;
  r.last_time = 1010;
  r.progress.push_back({1005, 5, 0.5, 100.0, std::nullopt, std::nullopt, std::nullopt});
  r.recoveries.push_back({1002, "<class>&", "re\"start", 1.0});
  const std::string html = ReportToHtml(r);
  ExpectSelfContained(html);
  EXPECT_NE(
      html.find(
          "<h1>job 7&lt;&amp;&quot;&gt;: &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;</h1>"),
      std::string::npos)
      << html;
  EXPECT_NE(html.find("tp=&lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("stopped: a&amp;b &lt;c&gt;"), std::string::npos);
  EXPECT_NE(html.find(">&lt;class&gt;&amp;</text>"), std::string::npos);
  EXPECT_NE(html.find("re&quot;start"), std::string::npos);
  for (const char* raw : {"<script", "7<&", "<class>", "<1>", "<c>", "re\"start"}) {
    EXPECT_EQ(html.find(raw), std::string::npos) << raw;
  }
}

TEST(ReportHtml, WithoutWindowsSaysSoInsteadOfEmptyPlots) {
  JobReport r =
      BuildReport("9", {Ev(0, "failure", -1, "class=hang"), Ev(1, "requeue", -1, "attempt=1 of=3"),
                        Ev(21, "resumed", 30, "from_job=9")});
  const std::string html = ReportToHtml(r);
  ExpectSelfContained(html);
  EXPECT_EQ(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("No progress reported"), std::string::npos);
  EXPECT_NE(html.find("no plan (submit with --auto-parallel)"), std::string::npos);
  EXPECT_NE(html.find("<td>hang</td><td>requeue</td>"), std::string::npos);

  const std::string empty = ReportToHtml(BuildReport("10", {}));  // a job with no events at all
  ExpectSelfContained(empty);
  EXPECT_NE(empty.find("No progress reported"), std::string::npos);
  EXPECT_NE(empty.find("No recoveries."), std::string::npos);
}

TEST(ReportHtml, OneWindowWithoutAPlanIsADotAndNoPlannedLine) {
  JobReport r =
      BuildReport("11", {Ev(100, "progress", 10, "steps=10 step_s=0.512 samples_per_s=125")});
  const std::string html = ReportToHtml(r);
  ExpectSelfContained(html);
  EXPECT_EQ(PolylinePoints(html, "throughput"), 1);
  EXPECT_EQ(PolylinePoints(html, "step-time"), 1);
  EXPECT_EQ(PolylinePoints(html, "loss"), -1);  // no loss reported: no plot
  EXPECT_EQ(Count(html, "<circle"), 2u);        // a single point is drawn as a dot
  EXPECT_NE(Figure(html, "throughput").find(">samples/s</text>"), std::string::npos);
  EXPECT_EQ(html.find("class=\"planned\""), std::string::npos);
  EXPECT_NE(html.find("no plan (submit with --auto-parallel)"), std::string::npos);
  EXPECT_NE(html.find("0.512 s (median of 1 window)"), std::string::npos);
  EXPECT_NE(html.find("125 samples/s"), std::string::npos);
}

TEST(ReportHtml, NonFiniteLossIsLeftOutAndSaid) {
  JobReport r =
      BuildReport("12", {Ev(100, "progress", 10, "steps=10 step_s=1 samples_per_s=8 loss=2.5"),
                         Ev(110, "progress", 20, "steps=10 step_s=1 samples_per_s=8 loss=nan"),
                         Ev(120, "progress", 30, "steps=10 step_s=1 samples_per_s=8 loss=1.5")});
  ASSERT_TRUE(r.progress[1].loss && std::isnan(*r.progress[1].loss));
  const std::string html = ReportToHtml(r);
  ExpectSelfContained(html);
  EXPECT_EQ(PolylinePoints(html, "loss"), 2);
  EXPECT_NE(
      Figure(html, "loss").find("1 window with a non-finite value (NaN or infinite) not drawn"),
      std::string::npos);
  EXPECT_EQ(PolylinePoints(html, "throughput"), 3);  // a flat line still has an axis around it

  r.planned_step_s = std::numeric_limits<double>::infinity();  // no line at infinity
  const std::string unplanned = ReportToHtml(r);
  ExpectSelfContained(unplanned);
  EXPECT_EQ(unplanned.find("class=\"planned\""), std::string::npos);
  EXPECT_EQ(PolylinePoints(unplanned, "step-time"), 3);
}

}  // namespace
}  // namespace autopar
