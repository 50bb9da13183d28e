#include "site_limits.h"

#include <unistd.h>

#include <cerrno>

#include "core/plugstack.h"

namespace autopar {

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
  std::vector<std::string> problems;
  s.site = ParseSiteConfigAll((*line)->args, &problems);
  for (auto& p : problems) s.problems.push_back(where + ": " + p);
  s.from = where;
  return s;
}

}  // namespace autopar
