// Slurm's plugstack.conf as Slurm reads it (spank(8)): one plugin per line,
//   required|optional PATH [ARGUMENT...]
// `include GLOB` lines (a relative glob is taken from the including file's directory), `#`
// comments, blank lines. autopard reads the site's autopar.so line for the limits a job's
// environment must stay within (its owner can change that environment); the check of a line
// before it is deployed reads it the same way.
// ParsePlugstackText is pure; ReadPlugstack reads files (and expands include globs).
#pragma once

#include <string>
#include <vector>

#include "autopar/status.h"

namespace autopar {

struct PlugstackLine {
  std::string file;  // where it was read, for messages ("plugstack.conf:3")
  int line = 0;
  bool required = false;
  std::string plugin;              // PATH as written
  std::vector<std::string> args;   // the words after PATH
};

struct PlugstackText {
  std::vector<PlugstackLine> plugins;
  std::vector<std::string> includes;  // the include lines' globs, as written
};

// The plugstack.conf Slurm reads beside `slurm_conf_path`: its PlugStackConfig= when set (a
// relative one is taken from slurm.conf's directory), else DIR/plugstack.conf.
std::string PlugstackPathFor(const std::string& slurm_conf_path);

// One file's text; `origin` names it in errors ("plugstack.conf:4: 'requird': expected
// required, optional or include").
Result<PlugstackText> ParsePlugstackText(const std::string& text, const std::string& origin);

// `path` and the files it includes (8 levels at most), in order. Errors: the file cannot be
// read, a malformed line (a missing included file is no error: Slurm skips a glob that matches
// nothing).
Result<std::vector<PlugstackLine>> ReadPlugstack(const std::string& path);

// The line that loads `plugin_name` (a file name such as "autopar.so": PATH's last component);
// nullptr when there is none. Several such lines are an error, as Slurm loads a plugin once.
Result<const PlugstackLine*> FindPlugin(const std::vector<PlugstackLine>& lines,
                                        const std::string& plugin_name);

}  // namespace autopar
