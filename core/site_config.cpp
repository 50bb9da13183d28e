#include "core/site_config.h"

#include <cctype>
#include <cstdlib>
#include <functional>
#include <algorithm>
#include <map>

#include "core/text.h"

namespace autopar {
namespace {

using Setter = std::function<Status(SiteConfig&, const std::string& value)>;

Status BadKey(const std::string& key, const std::string& why) {
  return Status::Error("plugstack.conf: " + key + ": " + why);
}

Setter IntSetter(int64_t SiteConfig::*field, int64_t min, int64_t max) {
  return [=](SiteConfig& c, const std::string& v) -> Status {
    auto n = ParseInt(v, min, max);
    if (!n)
      return Status::Error("must be an integer in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "], got '" + v + "'");
    c.*field = *n;
    return Status::Ok();
  };
}

Setter ListSetter(std::vector<std::string> SiteConfig::*field) {
  return [=](SiteConfig& c, const std::string& v) -> Status {
    std::vector<std::string> items;
    for (const std::string& item : Split(v, ','))
      if (!Trim(item).empty()) items.push_back(Trim(item));
    c.*field = items;
    return Status::Ok();
  };
}

Setter DefaultSetter(OptionId id) {
  return [=](SiteConfig& c, const std::string& v) -> Status {
    return SetOption(c.defaults, id, v.c_str(), c);
  };
}

Status SetStragglerMargin(SiteConfig& c, const std::string& v) {
  char* end = nullptr;
  const double margin = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(margin > 0 && margin <= 10))
    return Status::Error("must be a fraction in (0, 10], got '" + v + "'");
  c.straggler_margin = margin;
  return Status::Ok();
}

Status SetCkptUploadSchemes(SiteConfig& c, const std::string& v) {
  Status s = ListSetter(&SiteConfig::ckpt_upload_schemes)(c, v);
  for (const auto& scheme : c.ckpt_upload_schemes)
    if (scheme != "s3" && scheme != "file")
      return Status::Error("unknown scheme '" + scheme + "' (s3, file)");
  return s;
}

Status SetCkptDirPrefixes(SiteConfig& c, const std::string& v) {
  Status s = ListSetter(&SiteConfig::ckpt_dir_prefixes)(c, v);
  for (const auto& p : c.ckpt_dir_prefixes)
    if (p[0] != '/') return Status::Error("'" + p + "' is not an absolute path");
  return s;
}

// Checked as a job's --ckpt-dir would be.
Status SetBuiltinCkptDir(SiteConfig& c, const std::string& v) {
  JobOptions probe;
  if (Status s = SetOption(probe, OptionId::kCkptDir, v.c_str(), c); !s.ok()) return s;
  c.builtin_ckpt_dir = v;
  return Status::Ok();
}

Status SetSocket(SiteConfig& c, const std::string& v) {
  if (v.empty() || v[0] != '/') return Status::Error("must be an absolute path, got '" + v + "'");
  c.socket = v;
  return Status::Ok();
}

Status SetNcclEnv(SiteConfig& c, const std::string& v) {
  const size_t eq = v.find('=');
  const std::string name = v.substr(0, eq);
  if (eq == std::string::npos || !StartsWith(name, "NCCL_") || name.size() == 5)
    return Status::Error("expected NCCL_NAME=VALUE, got '" + v + "'");
  for (char ch : name) {
    const auto u = static_cast<unsigned char>(ch);
    if (!(std::isupper(u) || std::isdigit(u) || ch == '_'))
      return Status::Error("'" + name + "' is not a variable name");
  }
  c.nccl_env.emplace_back(name, v.substr(eq + 1));
  return Status::Ok();
}

Status SetCalibration(SiteConfig& c, const std::string& v) {
  if (v.empty() || v[0] != '/') return Status::Error("must be an absolute path, got '" + v + "'");
  auto file = ReadCalibrationFile(v);
  if (!file) return file.status();
  c.calibration_path = v;
  c.calibration = *file;
  return Status::Ok();
}

Status SetPlanHeadroom(SiteConfig& c, const std::string& v) {
  char* end = nullptr;
  const double f = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(f >= 0 && f <= 0.5))
    return Status::Error("must be a fraction of the GPU's memory in [0, 0.5], got '" + v + "'");
  c.plan_headroom = f;
  return Status::Ok();
}

Status SetTorchrunEnv(SiteConfig& c, const std::string& v) {
  if (v != "autopar" && v != "all") return Status::Error("must be autopar or all, got '" + v + "'");
  c.torchrun_env_all = v == "all";
  return Status::Ok();
}

Status SetOnAutopardMissing(SiteConfig& c, const std::string& v) {
  if (v != "fail" && v != "warn") return Status::Error("must be fail or warn, got '" + v + "'");
  c.fail_without_autopard = v == "fail";
  return Status::Ok();
}

Status SetAllowFaultTolerance(SiteConfig& c, const std::string& v) {
  if (v != "yes" && v != "no") return Status::Error("must be yes or no, got '" + v + "'");
  c.allow_fault_tolerance = v == "yes";
  return Status::Ok();
}

Status SetMasterIfname(SiteConfig& c, const std::string& v) {
  if (v.empty() || v.size() > 15)
    return Status::Error("must be an interface name, got '" + v + "'");
  c.master_ifname = v;
  return Status::Ok();
}

// The integer keys and their bounds.
struct IntKey {
  const char* key;
  int64_t SiteConfig::*field;
  int64_t min;
  int64_t max;
};
constexpr IntKey kIntKeys[] = {
    {"requeue_default_count", &SiteConfig::requeue_default_count, 0, 1000},
    {"max_requeue", &SiteConfig::max_requeue, 0, 1000},
    {"restarts_in_place_default", &SiteConfig::restarts_in_place_default, 0, 1000},
    {"max_restarts_in_place", &SiteConfig::max_restarts_in_place, 0, 1000},
    {"max_spare_nodes", &SiteConfig::max_spare_nodes, 0, 1000},
    {"rollbacks_default", &SiteConfig::rollbacks_default, 0, 1000},
    {"max_rollbacks", &SiteConfig::max_rollbacks, 0, 1000},
    {"straggler_windows", &SiteConfig::straggler_windows, 1, 1000},
    {"max_ckpt_keep", &SiteConfig::max_ckpt_keep, 1, 100000},
    {"min_heartbeat_timeout", &SiteConfig::min_heartbeat_timeout, 1, 86400 * 7},
    {"max_heartbeat_timeout", &SiteConfig::max_heartbeat_timeout, 1, 86400 * 7},
    {"master_port_base", &SiteConfig::master_port_base, 1024, 65535},
    {"master_port_range", &SiteConfig::master_port_range, 1, 64511},
};

// The keys with a setter of their own.
struct OtherKey {
  const char* key;
  Status (*set)(SiteConfig& c, const std::string& value);
};
constexpr OtherKey kOtherKeys[] = {
    {"straggler_margin", SetStragglerMargin},
    {"ckpt_upload_schemes", SetCkptUploadSchemes},
    {"ckpt_dir_prefixes", SetCkptDirPrefixes},
    {"builtin_ckpt_dir", SetBuiltinCkptDir},
    {"socket", SetSocket},
    {"nccl_env", SetNcclEnv},
    {"calibration", SetCalibration},
    {"plan_headroom", SetPlanHeadroom},
    {"torchrun_env", SetTorchrunEnv},
    {"on_autopard_missing", SetOnAutopardMissing},
    {"master_ifname", SetMasterIfname},
    {"allow_fault_tolerance", SetAllowFaultTolerance},
};

// default_<option> for every job option (dashes as underscores): the site's default for it.
void AddDefaultSetters(std::map<std::string, Setter>* m) {
  for (const OptionSpec& spec : OptionTable()) {
    std::string key = std::string("default_") + spec.name;
    for (char& ch : key)
      if (ch == '-') ch = '_';
    (*m)[key] = DefaultSetter(spec.id);
  }
}

std::map<std::string, Setter> MakeSetters() {
  std::map<std::string, Setter> m;
  AddDefaultSetters(&m);
  for (const IntKey& k : kIntKeys) m[k.key] = IntSetter(k.field, k.min, k.max);
  m["ckpt_upload_prefixes"] = ListSetter(&SiteConfig::ckpt_upload_prefixes);
  for (const OtherKey& k : kOtherKeys) m[k.key] = k.set;
  return m;
}

const std::map<std::string, Setter>& Setters() {
  static const std::map<std::string, Setter> setters = MakeSetters();
  return setters;
}

}  // namespace

std::vector<std::string> SiteConfigKeys() {
  std::vector<std::string> keys;
  for (const auto& kv : Setters()) keys.push_back(kv.first);
  return keys;
}

namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string UnknownKey(const std::string& key) {
  std::string best;
  size_t best_distance = 3;  // a typo: at most two edits away
  for (const auto& k : SiteConfigKeys()) {
    const size_t d = EditDistance(key, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  if (!best.empty()) return "unknown argument (did you mean " + best + "?)";
  return "unknown argument (known: " + Join(SiteConfigKeys(), ", ") + ")";
}

}  // namespace

SiteConfig ParseSiteConfigAll(const std::vector<std::string>& args,
                              std::vector<std::string>* problems) {
  SiteConfig c;
  auto problem = [&](const std::string& key, const std::string& why) {
    problems->push_back(BadKey(key, why).message());
  };
  // Limits first, so that default_* values are checked against the site's own limits whatever the
  // order of the arguments.
  std::vector<std::pair<std::string, std::string>> defaults;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      problems->push_back("plugstack.conf: '" + arg + "' is not KEY=VALUE");
      continue;
    }
    const std::string key = arg.substr(0, eq);
    const std::string value = arg.substr(eq + 1);
    auto it = Setters().find(key);
    if (it == Setters().end()) {
      problem(key, UnknownKey(key));
      continue;
    }
    if (StartsWith(key, "default_")) {
      defaults.emplace_back(key, value);
      continue;
    }
    if (Status s = it->second(c, value); !s.ok()) problem(key, s.message());
  }
  if (c.min_heartbeat_timeout > c.max_heartbeat_timeout)
    problem("min_heartbeat_timeout", "is above max_heartbeat_timeout");
  for (const auto& [key, value] : defaults)
    if (Status s = Setters().at(key)(c, value); !s.ok()) problem(key, s.message());
  return c;
}

Result<SiteConfig> ParseSiteConfig(const std::vector<std::string>& args) {
  std::vector<std::string> problems;
  SiteConfig c = ParseSiteConfigAll(args, &problems);
  if (!problems.empty()) return Status::Error(problems.front());
  return c;
}

std::string SocketPathForNode(const SiteConfig& site, const std::string& node_name) {
  std::string out;
  for (size_t i = 0; i < site.socket.size(); ++i) {
    if (site.socket[i] == '%' && i + 1 < site.socket.size() && site.socket[i + 1] == 'n') {
      out += node_name;
      ++i;
    } else {
      out += site.socket[i];
    }
  }
  return out;
}

}  // namespace autopar
