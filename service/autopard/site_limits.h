// The site's plugstack settings as autopard needs them: the autopar.so line of the plugstack.conf
// that the node's slurmstepd reads (PlugstackPathFor, core/plugstack.h; autopard.conf's
// `plugstack` names another). Its limits (max_requeue, ...) bound what a job's environment may
// claim (ClampToLimits, failure_handler.h). Reads files.
#pragma once

#include <string>
#include <vector>

#include "core/site_config.h"
#include "autopar/status.h"

namespace autopar {

struct SiteSettings {
  SiteConfig site;    // the plugin's defaults where the line says nothing
  std::string from;   // "PATH:LINE", or why the defaults hold ("no autopar.so line in PATH")
  // Arguments of the line that do not parse ("PATH:LINE: plugstack.conf: KEY: why"): each keeps
  // its default, the others apply. (The plugin refuses autopar's options on such a line, but jobs
  // admitted before the line broke still run, and autopard still watches them.)
  std::vector<std::string> problems;
};

// The autopar.so line's settings; the plugin's defaults when there is no such file or line.
// Errors: the file cannot be read, a line that is not a plugin line, autopar.so loaded twice.
Result<SiteSettings> ReadSiteSettings(const std::string& plugstack_path);

}  // namespace autopar
