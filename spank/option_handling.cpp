#include "spank/option_handling.h"

#include <cstdlib>
#include <cstring>

namespace autopar {

OptionVerdict TakeOption(OptionsSeen& seen, OptionId id, const char* optarg, bool remote, bool allocator) {
  if (optarg != nullptr && std::strcmp(optarg, "(null)") == 0) optarg = nullptr;
  seen.asked = true;
  auto refuse = [&](const std::string& why) {
    if (!remote) return OptionVerdict{why, false};
    if (seen.option_error.empty()) seen.option_error = why;
    return OptionVerdict{};
  };
  if (!seen.site_error.empty()) {
    // The site's line is broken: autopar's limits and defaults are unknown, so none of its
    // options is taken (jobs that use none run as without the plugin).
    return refuse(std::string("--") + GetOptionSpec(id).name + " refused: " + seen.site_error);
  }
  Status s = SetOption(seen.user, id, optarg, seen.site);
  if (!s.ok()) return refuse(s.message());
  const bool node_loss_option = id == OptionId::kSpareNodes || id == OptionId::kMinNodes;
  return OptionVerdict{"", !remote && allocator && node_loss_option && seen.user.survives_node_loss()};
}

bool CommandLineSurvivesNodeLoss(const std::vector<std::string>& args) {
  for (OptionId id : {OptionId::kSpareNodes, OptionId::kMinNodes}) {
    const std::string flag = std::string("--") + GetOptionSpec(id).name;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string value;
      if (args[i].rfind(flag + "=", 0) == 0) {
        value = args[i].substr(flag.size() + 1);
      } else if (args[i] == flag && i + 1 < args.size()) {
        value = args[i + 1];
      } else {
        continue;
      }
      if (std::atoll(value.c_str()) > 0) return true;
    }
  }
  return false;
}

SmallestSize SmallestElasticSize(const SubmitGeometry& g, const JobOptions& opts) {
  SmallestSize s;
  if (g.min_nodes > 0 && g.min_nodes < g.max_nodes) {  // a range
    s.nodes = g.min_nodes - opts.spare_nodes.value_or(0);
    s.flag = g.nodes_flag;
  }
  if (opts.min_nodes && (s.nodes == 0 || *opts.min_nodes < s.nodes)) {
    s.nodes = *opts.min_nodes;
    s.flag = "--min-nodes=" + std::to_string(*opts.min_nodes);
  }
  if (s.nodes < 0) s.nodes = 0;
  return s;
}

}  // namespace autopar
