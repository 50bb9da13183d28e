#include "core/failure/oom.h"

#include <json/json.h>

#include <algorithm>
#include <memory>
#include <sstream>

#include "core/text.h"

namespace autopar {

std::vector<std::string> OomCounterFiles(const std::string& proc_cgroup, const std::string& job_id,
                                         const std::string& root) {
  if (job_id.empty()) return {};
  std::vector<std::string> v1, v2;
  const std::string own = "job_" + job_id;
  std::istringstream in(proc_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    // hierarchy-ID:controller-list:path
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (path.empty() || path[0] != '/') continue;
    const std::vector<std::string> parts = Split(path, '/');
    if (std::find(parts.begin(), parts.end(), own) == parts.end()) continue;
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      v2.push_back(root + path + "/memory.events");
      v2.push_back(root + "/unified" + path + "/memory.events");
      continue;
    }
    for (const std::string& c : Split(controllers, ',')) {
      if (c == "memory") v1.push_back(root + "/memory" + path + "/memory.oom_control");
    }
  }
  v1.insert(v1.end(), v2.begin(), v2.end());
  return v1;
}

std::optional<int64_t> OomKillCount(const std::string& text) {
  std::istringstream in(text);
  std::string key, value;
  while (in >> key >> value) {
    if (key == "oom_kill") {
      if (auto n = ParseInt(value, 0, INT64_MAX)) return *n;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

bool IsOutOfMemoryMessage(const std::string& message) {
  const std::string m = ToLower(message);
  for (const char* needle : {"out of memory", "outofmemoryerror", "memoryerror",
                             "can't allocate memory", "cannot allocate memory", "std::bad_alloc",
                             "failed to allocate memory"}) {
    if (m.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string ErrorFileMessage(const std::string& json_text, size_t max_chars) {
  Json::CharReaderBuilder builder;
  std::unique_ptr<Json::CharReader> reader(builder.newCharReader());
  Json::Value v;
  std::string errs;
  if (!reader->parse(json_text.data(), json_text.data() + json_text.size(), &v, &errs) ||
      !v.isObject()) {
    return "";
  }
  const Json::Value& m = v["message"];
  std::string text = m.isString() ? m.asString()
                     : m.isObject() && m["message"].isString() ? m["message"].asString()
                                                               : "";
  text = text.substr(0, text.find('\n'));
  if (text.size() > max_chars) text = text.substr(0, max_chars - 3) + "...";
  return text;
}

}  // namespace autopar
