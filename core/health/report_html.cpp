#include "core/health/report_html.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "core/failure/timeline.h"
#include "core/text.h"

namespace autopar {
namespace {

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// SVG coordinates with one decimal: finer than a pixel, short in a page of thousands of points.
std::string Px(double v) { return FormatFixed(v, 1); }

std::string TrimZeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

struct Scale {
  double div;
  const char* suffix;
};

// The SI suffix for numbers of `magnitude`: the ticks of one axis share the largest one's.
Scale ScaleFor(double magnitude) {
  static const Scale kScales[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const Scale& s : kScales) {
    if (magnitude >= s.div) return s;
  }
  return {1, ""};
}

// Three significant digits with an SI suffix: 28000 -> "28k", 26214.4 -> "26.2k", 0.512 ->
// "0.512", 3.4e6 -> "3.4M".
std::string Readable(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  if (v == 0) return "0";
  const Scale s = ScaleFor(std::fabs(v) * 1.0005);  // 999.7 reads "1k", not "1000"
  const double x = v / s.div;
  const int digits = std::clamp(2 - static_cast<int>(std::floor(std::log10(std::fabs(x)))), 0, 6);
  return TrimZeros(FormatFixed(x, digits)) + s.suffix;
}

// An axis over [lo, hi] widened to round ticks (1, 2 or 5 times a power of ten), about `count`
// of them.
struct Axis {
  double lo = 0, hi = 1, step = 1;
  int Ticks() const { return static_cast<int>(std::lround((hi - lo) / step)); }
  double Tick(int i) const { return lo + i * step; }
  std::string Label(double v) const {
    const Scale s = ScaleFor(std::max(std::fabs(lo), std::fabs(hi)));
    const int digits =
        std::clamp(static_cast<int>(std::ceil(-std::log10(step / s.div) - 1e-9)), 0, 9);
    if (std::fabs(v) < step * 1e-6) return "0";  // not "-0" or "0M"
    return FormatFixed(v / s.div, digits) + s.suffix;
  }
};

Axis NiceAxis(double lo, double hi, int count) {
  if (!(hi > lo)) {  // one value: a band around it
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  const double raw = (hi - lo) / count;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double f = raw / magnitude;
  const double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude;
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step, step};
}

// The job's time, shared by every plot so that they line up: seconds, minutes or hours since its
// first event, whichever keeps the tick labels short.
struct TimeAxis {
  double start = 0;  // epoch s
  double unit_s = 1;
  const char* unit = "s";
  Axis axis;
};

TimeAxis MakeTimeAxis(const JobReport& r) {
  TimeAxis t;
  t.start = r.first_time;
  const double span = std::max(r.last_time - r.first_time, 0.0);
  if (span >= 5 * 3600) {
    t.unit_s = 3600;
    t.unit = "h";
  } else if (span >= 300) {
    t.unit_s = 60;
    t.unit = "min";
  }
  t.axis = NiceAxis(0, span / t.unit_s, 8);
  return t;
}

// One plot's pixels: the plot area inside a fixed-size SVG.
constexpr double kWidth = 960, kHeight = 260;
constexpr double kLeft = 72, kRight = 24, kTop = 46, kBottom = 46;  // kTop: recovery labels
constexpr size_t kMaxDots = 200;  // a dot per window up to this many; beyond, the line alone

struct Frame {
  TimeAxis time;
  Axis y;
  double X(double epoch_s) const { return XOfTick((epoch_s - time.start) / time.unit_s); }
  double XOfTick(double v) const {
    return kLeft + (v - time.axis.lo) / (time.axis.hi - time.axis.lo) * (kWidth - kLeft - kRight);
  }
  double Y(double v) const {
    return kHeight - kBottom - (v - y.lo) / (y.hi - y.lo) * (kHeight - kTop - kBottom);
  }
};

struct PlotSpec {
  PlotSpec(std::string id_, std::string title_, std::string y_label_, const char* color_)
      : id(std::move(id_)), title(std::move(title_)), y_label(std::move(y_label_)), color(color_) {}
  std::string id;  // the series' class and the figure's id: "throughput", "step-time", "loss"
  std::string title;
  std::string y_label;  // with its unit
  const char* color = "";
  std::vector<std::pair<double, double>> points;  // (epoch s, value), finite
  int non_finite = 0;                             // windows whose value is NaN or infinite
  std::optional<double> planned;                  // a dashed horizontal line
  bool from_zero = true;
};

std::string GridSvg(const Frame& f, const std::string& y_label) {
  std::ostringstream os;
  const double right = kWidth - kRight, bottom = kHeight - kBottom;
  os << "<g class=\"grid\" stroke=\"#e3e3e3\" stroke-width=\"1\">\n";
  for (int i = 0; i <= f.y.Ticks(); ++i) {
    const double y = f.Y(f.y.Tick(i));
    os << "<line x1=\"" << Px(kLeft) << "\" y1=\"" << Px(y) << "\" x2=\"" << Px(right) << "\" y2=\""
       << Px(y) << "\"/>\n";
  }
  os << "</g>\n<g class=\"axes\" fill=\"#444\" font-size=\"12\">\n";
  for (int i = 0; i <= f.y.Ticks(); ++i) {
    const double y = f.Y(f.y.Tick(i));
    os << "<text x=\"" << Px(kLeft - 6) << "\" y=\"" << Px(y + 4) << "\" text-anchor=\"end\">"
       << f.y.Label(f.y.Tick(i)) << "</text>\n";
  }
  const Axis& t = f.time.axis;
  for (int i = 0; i <= t.Ticks(); ++i) {
    const double x = f.XOfTick(t.Tick(i));
    os << "<line x1=\"" << Px(x) << "\" y1=\"" << Px(bottom) << "\" x2=\"" << Px(x) << "\" y2=\""
       << Px(bottom + 5) << "\" stroke=\"#444\"/>\n"
       << "<text x=\"" << Px(x) << "\" y=\"" << Px(bottom + 18) << "\" text-anchor=\"middle\">"
       << t.Label(t.Tick(i)) << "</text>\n";
  }
  os << "<text x=\"" << Px((kLeft + right) / 2) << "\" y=\"" << Px(kHeight - 6)
     << "\" text-anchor=\"middle\">time since the job's first event (" << f.time.unit
     << ")</text>\n"
     << "<text transform=\"translate(16 " << Px((kTop + bottom) / 2)
     << ") rotate(-90)\" text-anchor=\"middle\">" << Escape(y_label) << "</text>\n"
     << "<path d=\"M" << Px(kLeft) << " " << Px(kTop) << "V" << Px(bottom) << "H" << Px(right)
     << "\" fill=\"none\" stroke=\"#444\"/>\n</g>\n";
  return os.str();
}

// Each recovery: its downtime as a translucent band, the failure as a vertical line labelled
// with its class (labels of close recoveries staggered on three rows).
std::string RecoveriesSvg(const Frame& f, const std::vector<JobReport::Recovery>& recoveries) {
  std::ostringstream os;
  const double bottom = kHeight - kBottom, right = kWidth - kRight;
  for (size_t i = 0; i < recoveries.size(); ++i) {
    const auto& rec = recoveries[i];
    const double x = f.X(rec.time);
    os << "<g class=\"recovery\"><title>" << Escape(rec.failure_class) << " at "
       << FormatEventTime(rec.time, false)
       << " UTC: " << Escape(rec.action.empty() ? "-" : rec.action)
       << (rec.lost_s ? ", " + FormatFixed(*rec.lost_s, 1) + " s lost"
                      : std::string(", not resumed"))
       << "</title>\n";
    if (rec.lost_s && *rec.lost_s > 0) {
      const double x2 = std::min(f.X(rec.time + *rec.lost_s), right);
      os << "<rect x=\"" << Px(x) << "\" y=\"" << Px(kTop) << "\" width=\"" << Px(x2 - x)
         << "\" height=\"" << Px(bottom - kTop) << "\" fill=\"" << report_color::kRecovery
         << "\" fill-opacity=\"0.12\"/>\n";
    }
    os << "<line class=\"recovery-marker\" x1=\"" << Px(x) << "\" y1=\"" << Px(kTop) << "\" x2=\""
       << Px(x) << "\" y2=\"" << Px(bottom) << "\" stroke=\"" << report_color::kRecovery
       << "\" stroke-width=\"2\"/>\n"
       << "<text x=\"" << Px(x + 4) << "\" y=\"" << Px(kTop - 6 - 13.0 * static_cast<double>(i % 3))
       << "\" font-size=\"11\" fill=\"" << report_color::kRecovery << "\">"
       << Escape(rec.failure_class) << "</text></g>\n";
  }
  return os.str();
}

std::string SeriesSvg(const Frame& f, const PlotSpec& p) {
  std::ostringstream os;
  if (p.planned) {
    const double y = f.Y(*p.planned);
    os << "<line class=\"planned\" x1=\"" << Px(kLeft) << "\" y1=\"" << Px(y) << "\" x2=\""
       << Px(kWidth - kRight) << "\" y2=\"" << Px(y) << "\" stroke=\"" << report_color::kPlannedStep
       << "\" stroke-width=\"2\" stroke-dasharray=\"8 5\"/>\n"
       << "<text x=\"" << Px(kWidth - kRight - 4) << "\" y=\"" << Px(y - 6)
       << "\" text-anchor=\"end\" font-size=\"12\" fill=\"" << report_color::kPlannedStep
       << "\">planned " << Readable(*p.planned) << " s</text>\n";
  }
  os << "<polyline class=\"" << p.id << "\" fill=\"none\" stroke=\"" << p.color
     << "\" stroke-width=\"2.5\" stroke-linejoin=\"round\" points=\"";
  for (size_t i = 0; i < p.points.size(); ++i) {
    os << (i ? " " : "") << Px(f.X(p.points[i].first)) << "," << Px(f.Y(p.points[i].second));
  }
  os << "\"/>\n";
  if (p.points.size() <= kMaxDots) {  // a single window is a dot, not an invisible line
    os << "<g fill=\"" << p.color << "\">";
    for (const auto& [t, v] : p.points) {
      os << "<circle cx=\"" << Px(f.X(t)) << "\" cy=\"" << Px(f.Y(v)) << "\" r=\"3\"/>";
    }
    os << "</g>\n";
  }
  return os.str();
}

std::string PlotHtml(const PlotSpec& p, const TimeAxis& time,
                     const std::vector<JobReport::Recovery>& recoveries) {
  double lo = p.points.front().second, hi = lo;
  for (const auto& pt : p.points) {
    lo = std::min(lo, pt.second);
    hi = std::max(hi, pt.second);
  }
  if (p.planned) {
    lo = std::min(lo, *p.planned);
    hi = std::max(hi, *p.planned);
  }
  if (p.from_zero) lo = std::min(lo, 0.0);
  const Frame f{time, NiceAxis(lo, hi, 5)};
  std::ostringstream os;
  os << "<h2>" << Escape(p.title) << "</h2>\n<figure id=\"" << p.id << "\">\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
     << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" role=\"img\" aria-label=\""
     << Escape(p.title) << "\">\n"
     << GridSvg(f, p.y_label) << RecoveriesSvg(f, recoveries) << SeriesSvg(f, p) << "</svg>\n";
  if (p.non_finite) {
    os << "<figcaption>" << p.non_finite << (p.non_finite == 1 ? " window" : " windows")
       << " with a non-finite value (NaN or infinite) not drawn</figcaption>\n";
  }
  os << "</figure>\n";
  return os.str();
}

// The plots the windows have data for: throughput (tokens/s, else samples/s), step time against
// the plan's, loss.
std::vector<PlotSpec> Plots(const JobReport& r) {
  const bool tokens =
      std::any_of(r.progress.begin(), r.progress.end(),
                  [](const JobReport::Window& w) { return w.tokens_per_s.has_value(); });
  PlotSpec throughput{"throughput", "Throughput", tokens ? "tokens/s" : "samples/s",
                      report_color::kThroughput};
  PlotSpec step{"step-time", "Step time", "s/step", report_color::kStepTime};
  if (r.planned_step_s && std::isfinite(*r.planned_step_s) && *r.planned_step_s > 0) {
    step.planned = r.planned_step_s;
  }
  PlotSpec loss{"loss", "Loss", "loss", report_color::kLoss};
  loss.from_zero = false;  // a loss curve's shape is in its last digits
  auto add = [](PlotSpec& p, double t, const std::optional<double>& v) {
    if (!v) return;
    if (std::isfinite(*v)) {
      p.points.emplace_back(t, *v);
    } else {
      ++p.non_finite;
    }
  };
  for (const JobReport::Window& w : r.progress) {
    add(throughput, w.time, tokens ? w.tokens_per_s : w.samples_per_s);
    add(step, w.time, w.step_s > 0 ? std::optional<double>(w.step_s) : std::nullopt);
    add(loss, w.time, w.loss);
  }
  std::vector<PlotSpec> out;
  for (PlotSpec* p : {&throughput, &step, &loss}) {
    if (!p->points.empty()) out.push_back(std::move(*p));
  }
  return out;
}

std::string Percent(double v) { return FormatFixed(v * 100, 1) + "%"; }

std::string SummaryHtml(const JobReport& r) {
  std::ostringstream os;
  os << "<table class=\"summary\">\n<tr><th></th><th>planned</th><th>measured</th></tr>\n"
     << "<tr><th>step time</th><td>";
  if (r.planned_step_s) {
    os << FormatFixed(*r.planned_step_s, 3) << " s";
  } else {
    os << "no plan (submit with --auto-parallel)";
  }
  os << "</td><td>";
  if (r.step_s) {
    os << FormatFixed(*r.step_s, 3) << " s (median of " << r.progress.size()
       << (r.progress.size() == 1 ? " window)" : " windows)");
    if (r.planned_step_s && *r.planned_step_s > 0) {
      os << ", " << FormatFixed(*r.step_s / *r.planned_step_s, 2) << "&times; the plan's";
    }
  } else {
    os << "no progress reported";
  }
  os << "</td></tr>\n<tr><th>MFU</th><td>" << (r.planned_mfu ? Percent(*r.planned_mfu) : "&ndash;")
     << "</td><td>" << (r.mfu ? Percent(*r.mfu) : "&ndash;") << "</td></tr>\n"
     << "<tr><th>throughput</th><td>&ndash;</td><td>";
  std::vector<std::string> rates;
  if (r.tokens_per_s) rates.push_back(Readable(*r.tokens_per_s) + " tokens/s");
  if (r.samples_per_s) rates.push_back(Readable(*r.samples_per_s) + " samples/s");
  os << (rates.empty() ? std::string("&ndash;") : Join(rates, ", ")) << "</td></tr>\n";
  const RecoveryCounts counts = CountRecoveries(r);
  os << "<tr><th>recoveries</th><td colspan=\"2\">" << r.recoveries.size() << " ("
     << counts.in_place << " in place, " << counts.requeued << " requeued), "
     << FormatFixed(r.lost_s, 1) << " s lost</td></tr>\n"
     << "<tr><th>end</th><td colspan=\"2\">"
     << Escape(r.end.empty() ? "running (or not told)" : r.end) << " after "
     << FormatFixed(r.last_time - r.first_time, 1) << " s</td></tr>\n</table>\n";
  return os.str();
}

std::string RecoveryTableHtml(const JobReport& r) {
  if (r.recoveries.empty()) return "<p>No recoveries.</p>\n";
  std::ostringstream os;
  os << "<table class=\"recoveries\">\n<tr><th>failure (UTC)</th><th>class</th><th>action</th>"
        "<th>lost</th></tr>\n";
  for (const auto& rec : r.recoveries) {
    os << "<tr><td>" << FormatEventTime(rec.time, false) << "</td><td>" << Escape(rec.failure_class)
       << "</td><td>" << Escape(rec.action.empty() ? "-" : rec.action) << "</td><td>"
       << (rec.lost_s ? FormatFixed(*rec.lost_s, 1) + " s to the next step" : "not resumed")
       << "</td></tr>\n";
  }
  os << "</table>\n";
  return os.str();
}

std::string UtilisationTableHtml(const JobReport& r) {
  if (r.utilisation.empty() && r.idle.empty()) return "<p>No utilisation reported.</p>\n";
  std::ostringstream os;
  os << "<table class=\"utilisation\">\n<tr><th>node</th><th>ranks</th><th>CPU cores</th>"
        "<th>memory</th><th>GPU</th></tr>\n";
  for (const auto& u : r.utilisation) {
    os << "<tr><td>" << Escape(u.node) << "</td><td>" << u.ranks << "</td><td>"
       << FormatFixed(u.cpu_cores, 2) << "</td><td>" << FormatFixed(u.rss_gib, 2) << " GiB</td><td>"
       << (u.gpu_util ? FormatFixed(*u.gpu_util, 1) + "%, " + FormatFixed(*u.gpu_mem_gib, 1) + " GiB"
                      : std::string("&ndash;"))
       << "</td></tr>\n";
  }
  os << "</table>\n";
  for (const auto& i : r.idle) {
    os << "<p class=\"idle\">idle: " << Escape(i.node) << " at " << FormatEventTime(i.time, false)
       << " UTC, no progress or use for " << FormatFixed(i.idle_s, 0) << " s</p>\n";
  }
  return os.str();
}

constexpr char kStyle[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#222;"
    "background:#fff;max-width:1000px;margin:16px auto;padding:0 16px}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:22px 0 4px}\n"
    ".layout,.when{color:#555;margin:2px 0}\n"
    "table{border-collapse:collapse;margin:12px 0}\n"
    "th,td{text-align:left;padding:4px 12px;border-bottom:1px solid #ddd;vertical-align:top}\n"
    "figure{margin:0}figcaption{color:#555;font-size:13px}\n"
    "svg{display:block;font-family:inherit}\n";

}  // namespace

std::string ReportToHtml(const JobReport& r) {
  std::ostringstream os;
  const std::string job = "job " + r.job_id + (r.model.empty() ? "" : ": " + r.model);
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
     << "<title>autopar report: " << Escape(job) << "</title>\n<style>\n"
     << kStyle << "</style>\n</head>\n<body>\n<h1>" << Escape(job) << "</h1>\n";
  if (!r.layout.empty()) os << "<p class=\"layout\">" << Escape(r.layout) << "</p>\n";
  if (r.last_time > 0) {
    os << "<p class=\"when\">" << FormatEventTime(r.first_time, false) << " to "
       << FormatEventTime(r.last_time, false) << " UTC</p>\n";
  }
  os << SummaryHtml(r);
  const std::vector<PlotSpec> plots = Plots(r);
  if (plots.empty()) {
    os << "<p class=\"no-progress\">No progress reported: rank 0's heartbeats carried no samples "
          "or tokens (autopar.ckpt.heartbeat(step, tokens=...), docs/health.md).</p>\n";
  }
  const TimeAxis time = MakeTimeAxis(r);
  for (const PlotSpec& p : plots) os << PlotHtml(p, time, r.recoveries);
  os << "<h2>Where the allocation went</h2>\n"
     << (r.goodput ? GoodputToHtml(*r.goodput)
                   : "<p>" + Escape(r.goodput_note.empty() ? "not known" : r.goodput_note) + "</p>\n");
  os << "<h2>Recoveries</h2>\n" << RecoveryTableHtml(r) << "<h2>Utilisation</h2>\n"
     << UtilisationTableHtml(r) << "</body>\n</html>\n";
  return os.str();
}

}  // namespace autopar
