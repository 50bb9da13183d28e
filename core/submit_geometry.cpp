#include "core/submit_geometry.h"

#include <sstream>

#include "core/text.h"

namespace autopar {
namespace {

// "4" or "2-4" (Slurm also accepts "2-"; the maximum is then open).
bool ParseNodes(const std::string& v, SubmitGeometry* g) {
  const size_t dash = v.find('-');
  auto min = ParseInt(v.substr(0, dash), 1, 1 << 24);
  if (!min) return false;
  int64_t max = *min;
  if (dash != std::string::npos) {
    const std::string rest = v.substr(dash + 1);
    auto m = rest.empty() ? std::optional<int64_t>(0) : ParseInt(rest, *min, 1 << 24);
    if (!m) return false;
    max = *m;
  }
  g->min_nodes = *min;
  g->max_nodes = max;
  return true;
}

// "8", "a100:8" (--gpus-per-node) or "gpu:8", "gpu:a100:8" (--gres): the last field's count.
std::optional<int64_t> GpuCount(const std::string& v) {
  const size_t colon = v.rfind(':');
  return ParseInt(colon == std::string::npos ? v : v.substr(colon + 1), 1, 1 << 16);
}

}  // namespace

std::vector<std::string> SbatchLineArgs(const std::string& script) {
  std::vector<std::string> out;
  std::istringstream in(script);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (first && StartsWith(line, "#!")) {
      first = false;
      continue;
    }
    first = false;
    const size_t text = line.find_first_not_of(" \t\r");
    if (text == std::string::npos) continue;  // blank
    if (line[text] != '#') break;             // the first command: no more #SBATCH lines
    if (line.compare(text, 7, "#SBATCH") != 0) continue;
    std::istringstream words(line.substr(text + 7));
    for (std::string w; words >> w;) {
      if (w[0] == '#') break;  // a comment after the options
      out.push_back(w);
    }
  }
  return out;
}

void ReadSubmitGeometry(const std::vector<std::string>& args, SubmitGeometry* g) {
  int64_t tasks_per_node = 0, gpus = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const std::string& long_name, const std::string& short_name,
                     std::string* out) {
      if (StartsWith(a, long_name + "=")) {
        *out = a.substr(long_name.size() + 1);
        return true;
      }
      if ((a == long_name || (!short_name.empty() && a == short_name)) && i + 1 < args.size()) {
        *out = args[++i];
        return true;
      }
      if (!short_name.empty() && StartsWith(a, short_name) && a.size() > short_name.size()) {
        *out = a.substr(short_name.size());
        return true;
      }
      return false;
    };
    std::string v;
    if (value("--nodes", "-N", &v)) {
      if (ParseNodes(v, g)) g->nodes_flag = "--nodes=" + v;
    } else if (value("--ntasks-per-node", "", &v)) {
      tasks_per_node = ParseInt(v, 1, 1 << 16).value_or(tasks_per_node);
    } else if (value("--gpus-per-node", "", &v)) {
      gpus = GpuCount(v).value_or(gpus);
    } else if (value("--gres", "", &v)) {
      for (const std::string& part : Split(v, ',')) {
        if (StartsWith(part, "gpu:")) gpus = GpuCount(part).value_or(gpus);
      }
    }
  }
  if (gpus > 0) {
    g->gpus_per_node = gpus;
  } else if (tasks_per_node > 0) {
    g->gpus_per_node = tasks_per_node;
  }
}

}  // namespace autopar
