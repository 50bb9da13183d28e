// The site's plugstack settings as autopard needs them: the autopar.so line of the plugstack.conf
// that the node's slurmstepd reads (slurm.conf's PlugStackConfig, else plugstack.conf beside
// slurm.conf; autopard.conf's `plugstack` names another). Its limits (max_requeue, ...) bound
// what a job's environment may claim (ClampToLimits, failure_handler.h). Reads files.
#pragma once

#include <string>

#include "core/site_config.h"
#include "autopar/status.h"

namespace autopar {

// The plugstack.conf slurmstepd reads beside `slurm_conf_path`: its PlugStackConfig= when set
// (a relative one is taken from slurm.conf's directory), else DIR/plugstack.conf.
std::string PlugstackPathFor(const std::string& slurm_conf_path);

struct SiteSettings {
  SiteConfig site;    // the plugin's defaults where the line says nothing
  std::string from;   // "PATH:LINE", or why the defaults hold ("no autopar.so line in PATH")
};

// The autopar.so line's settings; the plugin's defaults when there is no such file or line.
// Errors: the file cannot be read, a malformed plugstack line or
// argument (the message names the file, line and key: the plugin refuses autopar's options
// on such a line, so the daemon refuses to guess).
Result<SiteSettings> ReadSiteSettings(const std::string& plugstack_path);

}  // namespace autopar
