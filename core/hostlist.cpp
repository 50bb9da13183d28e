#include "core/hostlist.h"

#include "core/text.h"

namespace autopar {
namespace {

constexpr size_t kMaxHosts = 65536;

// Splits at commas that are not inside brackets.
std::vector<std::string> TopLevelEntries(const std::string& expr) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : expr) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(const std::string& expr) {
  auto bad = [&](const std::string& why) {
    return Status::Error("hostlist '" + expr + "': " + why);
  };
  std::vector<std::string> hosts;
  for (const std::string& entry : TopLevelEntries(expr)) {
    if (entry.empty()) return bad("empty host name");
    size_t open = entry.find('[');
    if (open == std::string::npos) {
      if (entry.find(']') != std::string::npos) return bad("unbalanced ']'");
      hosts.push_back(entry);
      continue;
    }
    size_t close = entry.find(']', open);
    if (close == std::string::npos) return bad("unbalanced '['");
    const std::string prefix = entry.substr(0, open);
    const std::string suffix = entry.substr(close + 1);
    if (suffix.find_first_of("[]") != std::string::npos) return bad("only one range per host");
    for (const std::string& range : Split(entry.substr(open + 1, close - open - 1), ',')) {
      std::vector<std::string> ends = Split(range, '-');
      if (ends.size() > 2 || ends[0].empty()) return bad("bad range '" + range + "'");
      const std::string& lo_s = ends[0];
      const std::string& hi_s = ends.size() == 2 ? ends[1] : ends[0];
      auto lo = ParseInt(lo_s, 0, 1'000'000'000);
      auto hi = ParseInt(hi_s, 0, 1'000'000'000);
      if (!lo || !hi || *hi < *lo) return bad("bad range '" + range + "'");
      if (static_cast<size_t>(*hi - *lo) + hosts.size() >= kMaxHosts) return bad("too many hosts");
      const size_t width = lo_s.size();  // "01" pads to two digits, as Slurm does
      for (int64_t i = *lo; i <= *hi; ++i) {
        std::string num = std::to_string(i);
        if (num.size() < width) num.insert(0, width - num.size(), '0');
        hosts.push_back(prefix + num + suffix);
      }
    }
  }
  return hosts;
}

}  // namespace autopar
