// `autopar check-plugstack [FILE | --line 'required PATH ARGS...']`: checks the site's autopar.so
// line before it is deployed, as the plugin and autopard will read it. FILE (default: the
// plugstack.conf Slurm reads, slurm.conf's PlugStackConfig beside $SLURM_CONF or
// /etc/slurm/slurm.conf) is read with its includes. One line per problem on stderr, exit 1; an
// OK line on stdout and exit 0 when there is none. A broken line never stops slurmd or jobs that
// do not use autopar (the plugin refuses only autopar's options then), but it does stop every job
// that asks for them.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.h"
#include "core/plugstack.h"
#include "core/site_config.h"

namespace autopar::cli {
namespace {

constexpr char kUsage[] =
    "usage: autopar check-plugstack [FILE | --line 'required|optional PATH [ARG...]']\n"
    "  checks the autopar.so line of FILE (default: the plugstack.conf Slurm reads: slurm.conf's\n"
    "  PlugStackConfig, beside $SLURM_CONF or /etc/slurm/slurm.conf; includes followed) or the\n"
    "  line given: one line per problem and exit status 1, else one OK line and 0.\n";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "autopar check-plugstack: %s\n", message.c_str());
  return code;
}

}  // namespace

int RunCheckPlugstackCommand(int argc, char** argv) {
  std::string file, line;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--line" && i + 1 < argc) {
      line = argv[++i];
    } else if (a.rfind("--line=", 0) == 0) {
      line = a.substr(7);
    } else if (!a.empty() && a[0] != '-' && file.empty()) {
      file = a;
    } else {
      std::fputs(kUsage, stderr);
      return Fail("unexpected argument '" + a + "'", 2);
    }
  }
  if (!file.empty() && !line.empty()) return Fail("FILE and --line: give one", 2);

  std::vector<PlugstackLine> lines;
  if (!line.empty()) {
    auto parsed = ParsePlugstackText(line, "--line");
    if (!parsed.ok()) return Fail(parsed.message(), 1);
    lines = parsed->plugins;
  } else {
    if (file.empty()) {
      const char* conf = std::getenv("SLURM_CONF");
      file = PlugstackPathFor(conf && *conf ? conf : "/etc/slurm/slurm.conf");
    }
    auto read = ReadPlugstack(file);
    if (!read.ok()) return Fail(read.message(), 1);
    lines = std::move(*read);
  }
  auto found = FindPlugin(lines, "autopar.so");
  if (!found.ok()) return Fail(found.message(), 1);
  const std::string origin = line.empty() ? file : "--line";
  if (*found == nullptr) return Fail(origin + ": no autopar.so line", 1);
  const PlugstackLine& p = **found;
  const std::string where = p.file + ":" + std::to_string(p.line);

  std::vector<std::string> problems;
  (void)ParseSiteConfigAll(p.args, &problems);
  // A required plugin that cannot be loaded stops every step on the node (slurmstepd refuses to
  // start it); Slurm looks for a relative path in its PluginDir.
  if (p.plugin[0] == '/' && access(p.plugin.c_str(), R_OK) != 0) {
    problems.push_back(p.plugin + ": cannot be read" +
                       std::string(p.required ? " (required: every step on a node without it fails)"
                                              : " (optional: jobs run without autopar)"));
  }
  for (const auto& problem : problems) std::fprintf(stderr, "%s: %s\n", where.c_str(), problem.c_str());
  if (!problems.empty()) return 1;
  std::printf("%s: autopar.so: OK (%s, %zu argument%s)\n", where.c_str(),
              p.required ? "required" : "optional", p.args.size(), p.args.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace autopar::cli
