#include "core/metrics/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace autopar {
namespace {

TEST(ExpositionTest, RendersHelpTypeAndSamples) {
  std::vector<MetricFamily> f = {
      {"x_total", MetricType::kCounter, "Things.", {{"", {}, 3}}},
      {"y_seconds", MetricType::kGauge, "Time.", {{"", {{"job", "42"}, {"node", "n1"}}, 1.5}}},
      {"empty", MetricType::kGauge, "None yet.", {}},
  };
  EXPECT_EQ(RenderExposition(f),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total 3\n"
            "# HELP y_seconds Time.\n# TYPE y_seconds gauge\ny_seconds{job=\"42\",node=\"n1\"} 1.5\n"
            "# HELP empty None yet.\n# TYPE empty gauge\n");
}

TEST(ExpositionTest, EscapesLabelValuesAndHelp) {
  std::vector<MetricFamily> f = {
      {"m", MetricType::kGauge, "a\\b\nc \"q\"", {{"", {{"l", "x\"y\\z\nw"}}, 1}}}};
  EXPECT_EQ(RenderExposition(f),
            "# HELP m a\\\\b\\nc \"q\"\n# TYPE m gauge\nm{l=\"x\\\"y\\\\z\\nw\"} 1\n");
}

TEST(ExpositionTest, ReplacesCharactersOutsideTheNameAlphabet) {
  std::vector<MetricFamily> f = {{"9bad-name", MetricType::kGauge, "h", {{"", {{"bad label", "v"}}, 1}}}};
  EXPECT_EQ(RenderExposition(f), "# HELP _bad_name h\n# TYPE _bad_name gauge\n_bad_name{bad_label=\"v\"} 1\n");
}

TEST(ExpositionTest, FormatsValuesAsPrometheusDoes) {
  struct Case {
    double v;
    const char* want;
  } cases[] = {
      {0, "0"},
      {12, "12"},
      {-3, "-3"},
      {1.5, "1.5"},
      {0.1, "0.10000000000000001"},
      {1e300, "1.0000000000000001e+300"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
  };
  for (const auto& c : cases) EXPECT_EQ(FormatMetricValue(c.v), c.want) << c.v;
}

TEST(ExpositionTest, HistogramBucketsAreCumulativeWithInf) {
  Histogram h({1, 5});
  for (double v : {0.5, 1.0, 3.0, 10.0}) h.Observe(v);
  MetricFamily f{"d_seconds", MetricType::kHistogram, "Durations.", {}};
  h.AppendTo(f, {{"kind", "up"}});
  EXPECT_EQ(RenderExposition({f}),
            "# HELP d_seconds Durations.\n# TYPE d_seconds histogram\n"
            "d_seconds_bucket{kind=\"up\",le=\"1\"} 2\n"
            "d_seconds_bucket{kind=\"up\",le=\"5\"} 3\n"
            "d_seconds_bucket{kind=\"up\",le=\"+Inf\"} 4\n"
            "d_seconds_sum{kind=\"up\"} 14.5\n"
            "d_seconds_count{kind=\"up\"} 4\n");
}

}  // namespace
}  // namespace autopar
