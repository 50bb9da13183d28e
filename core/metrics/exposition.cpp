#include "core/metrics/exposition.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace autopar {
namespace {

bool NameChar(char c, bool first, bool colon) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && c >= '0' && c <= '9';
}

std::string SafeName(const std::string& s, bool colon) {
  std::string out = s.empty() ? "_" : s;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!NameChar(out[i], i == 0, colon)) out[i] = '_';
  }
  return out;
}

// Help text escapes backslash and newline; label values also the double quote.
void AppendEscaped(std::string& out, const std::string& s, bool quote) {
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kHistogram: return "histogram";
    case MetricType::kGauge: break;
  }
  return "gauge";
}

}  // namespace

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {  // 2^53: exact integers
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  }
  return buf;
}

std::string RenderExposition(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const auto& f : families) {
    const std::string name = SafeName(f.name, true);
    out += "# HELP " + name + " ";
    AppendEscaped(out, f.help, false);
    out += "\n# TYPE " + name + " " + TypeName(f.type) + "\n";
    for (const auto& s : f.samples) {
      out += name + s.suffix;
      if (!s.labels.empty()) {
        out += '{';
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i > 0) out += ',';
          out += SafeName(s.labels[i].first, false) + "=\"";
          AppendEscaped(out, s.labels[i].second, true);
          out += '"';
        }
        out += '}';
      }
      out += ' ' + FormatMetricValue(s.value) + '\n';
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::AppendTo(MetricFamily& family, const MetricLabels& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    MetricLabels l = labels;
    l.emplace_back("le", i < bounds_.size() ? FormatMetricValue(bounds_[i]) : "+Inf");
    family.samples.push_back({"_bucket", std::move(l), static_cast<double>(cumulative)});
  }
  family.samples.push_back({"_sum", labels, sum_});
  family.samples.push_back({"_count", labels, static_cast<double>(count_)});
}

}  // namespace autopar
