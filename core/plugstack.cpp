#include "core/plugstack.h"

#include <glob.h>
#include <strings.h>

#include <fstream>
#include <sstream>

#include "core/text.h"

namespace autopar {
namespace {

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Status ReadInto(const std::string& path, int depth, std::vector<PlugstackLine>* out) {
  if (depth > 8) return Status::Error(path + ": includes nested more than 8 deep");
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = ParsePlugstackText(text.str(), path);
  if (!parsed.ok()) return parsed.status();
  out->insert(out->end(), parsed->plugins.begin(), parsed->plugins.end());
  for (const auto& pattern : parsed->includes) {
    const std::string full = pattern[0] == '/' ? pattern : DirOf(path) + "/" + pattern;
    glob_t g{};
    const int rc = glob(full.c_str(), 0, nullptr, &g);
    std::vector<std::string> files;
    if (rc == 0) files.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    for (const auto& f : files) {
      if (Status st = ReadInto(f, depth + 1, out); !st) return st;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<PlugstackText> ParsePlugstackText(const std::string& text, const std::string& origin) {
  PlugstackText out;
  int number = 0;
  for (const auto& raw : Split(text, '\n')) {
    ++number;
    std::string line = raw;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    auto words = Words(line);
    if (words.empty()) continue;
    const std::string where = origin + ":" + std::to_string(number);
    if (words[0] == "include") {
      if (words.size() != 2) return Status::Error(where + ": include: expected one path or glob");
      out.includes.push_back(words[1]);
      continue;
    }
    if (words[0] != "required" && words[0] != "optional") {
      return Status::Error(where + ": '" + words[0] + "': expected required, optional or include");
    }
    if (words.size() < 2) return Status::Error(where + ": " + words[0] + ": no plugin path");
    PlugstackLine p;
    p.file = origin;
    p.line = number;
    p.required = words[0] == "required";
    p.plugin = words[1];
    p.args.assign(words.begin() + 2, words.end());
    out.plugins.push_back(std::move(p));
  }
  return out;
}

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

Result<std::vector<PlugstackLine>> ReadPlugstack(const std::string& path) {
  std::vector<PlugstackLine> lines;
  if (Status st = ReadInto(path, 0, &lines); !st) return st;
  return lines;
}

Result<const PlugstackLine*> FindPlugin(const std::vector<PlugstackLine>& lines,
                                        const std::string& plugin_name) {
  const PlugstackLine* found = nullptr;
  for (const auto& l : lines) {
    if (BaseName(l.plugin) != plugin_name) continue;
    if (found) {
      return Status::Error(l.file + ":" + std::to_string(l.line) + ": " + plugin_name +
                           " is loaded already at " + found->file + ":" +
                           std::to_string(found->line));
    }
    found = &l;
  }
  return found;
}

}  // namespace autopar
