#include "core/health/straggler.h"

#include <algorithm>

#include "core/text.h"

namespace autopar {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

EventFields StragglerFlag::Fields() const {
  return {{"node", node.empty() ? "?" : node},
          {"compute_s", FormatFixed(compute_s, 4)},
          {"median_s", FormatFixed(median_s, 4)},
          {"ratio", FormatFixed(median_s > 0 ? compute_s / median_s : 0, 2)},
          {"windows", std::to_string(windows)}};
}

std::vector<StragglerFlag> StragglerDetector::Add(double time, const std::vector<double>& compute_s) {
  std::vector<StragglerFlag> out;
  if (compute_s.empty()) return out;
  if (compute_s.size() != samples_.size()) {
    // Another world size (a restart on fewer nodes): start over.
    samples_.assign(compute_s.size(), {});
    streak_.assign(compute_s.size(), 0);
    window_start_ = -1;
  }
  if (window_start_ < 0) window_start_ = time;
  for (size_t r = 0; r < compute_s.size(); ++r) samples_[r].push_back(compute_s[r]);
  if (time - window_start_ < s_.window_s) return out;
  std::vector<double> medians(samples_.size());
  for (size_t r = 0; r < samples_.size(); ++r) medians[r] = Median(samples_[r]);
  const double job = Median(medians);
  for (size_t r = 0; r < medians.size(); ++r) {
    // Relative and absolute: a rank at 0.9 ms beside 0.1 ms ones is noise, one at 100 ms beside
    // sub-millisecond ones (a small model on a fast device) is not.
    const bool slow = medians[r] > job * (1 + s_.margin) && medians[r] - job >= s_.min_excess_s;
    streak_[r] = slow ? streak_[r] + 1 : 0;
    if (streak_[r] >= s_.windows && flagged_.insert(static_cast<int>(r)).second) {
      StragglerFlag f;
      f.rank = static_cast<int>(r);
      f.node = r < nodes_.size() ? nodes_[r] : "";
      f.compute_s = medians[r];
      f.median_s = job;
      f.windows = streak_[r];
      out.push_back(f);
    }
    samples_[r].clear();
  }
  window_start_ = time;
  return out;
}

}  // namespace autopar
