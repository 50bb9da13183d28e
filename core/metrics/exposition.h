// Prometheus' text exposition format, version 0.0.4 (what `promtool check metrics` reads and every
// Prometheus scrapes): families of samples, each family with one "# HELP" and one "# TYPE" line.
// Pure; thread-compatible (Histogram: callers lock).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace autopar {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

struct MetricSample {
  std::string suffix;  // appended to the family's name: "", "_bucket", "_sum", "_count"
  MetricLabels labels;
  double value = 0;
};

struct MetricFamily {
  std::string name;  // [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in _total, units are in the name
  MetricType type = MetricType::kGauge;
  std::string help;
  std::vector<MetricSample> samples;
};

// The exposition text of `families`, in the given order; a family without samples keeps its HELP
// and TYPE lines. Label values and help text are escaped (backslash, double quote, newline); a
// name or label name outside Prometheus' alphabet is a programming error and gets its bad
// characters replaced by '_'.
std::string RenderExposition(const std::vector<MetricFamily>& families);

// A sample value as Prometheus writes it: integers exactly ("12", "1e+21" beyond 2^53 is
// "%.17g"), others "%.17g", and "NaN", "+Inf", "-Inf".
std::string FormatMetricValue(double v);

// A cumulative histogram with fixed upper bounds (seconds, bytes...), rendered as
// <name>_bucket{le=...} (with le="+Inf"), <name>_sum and <name>_count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending
  void Observe(double v);
  // Appends this histogram's samples, with `labels` before `le`, to `family`.
  void AppendTo(MetricFamily& family, const MetricLabels& labels = {}) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; one more for +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace autopar
