#include "site_limits.h"

#include <strings.h>
#include <unistd.h>

#include <cerrno>

#include <fstream>

#include "core/plugstack.h"
#include "core/text.h"

namespace autopar {

std::string PlugstackPathFor(const std::string& slurm_conf_path) {
  const size_t slash = slurm_conf_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slurm_conf_path.substr(0, slash);
  std::ifstream in(slurm_conf_path);
  for (std::string line; std::getline(in, line);) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    line = Trim(line);
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    if (strcasecmp(Trim(line.substr(0, eq)).c_str(), "PlugStackConfig") != 0) continue;
    std::string value = Trim(line.substr(eq + 1));
    if (value.empty()) break;
    return value[0] == '/' ? value : dir + "/" + value;
  }
  return dir + "/plugstack.conf";
}

Result<SiteSettings> ReadSiteSettings(const std::string& plugstack_path) {
  if (access(plugstack_path.c_str(), F_OK) != 0 && errno == ENOENT) {
    SiteSettings s;
    s.from = "no " + plugstack_path + ": the plugin's defaults";
    return s;
  }
  auto lines = ReadPlugstack(plugstack_path);
  if (!lines.ok()) return lines.status();
  auto line = FindPlugin(*lines, "autopar.so");
  if (!line.ok()) return line.status();
  SiteSettings s;
  if (!*line) {
    s.from = "no autopar.so line in " + plugstack_path + ": the plugin's defaults";
    return s;
  }
  const std::string where = (*line)->file + ":" + std::to_string((*line)->line);
  auto site = ParseSiteConfig((*line)->args);
  if (!site.ok()) return Status::Error(where + ": " + site.message());
  s.site = std::move(*site);
  s.from = where;
  return s;
}

}  // namespace autopar
