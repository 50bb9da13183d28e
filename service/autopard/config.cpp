#include "config.h"

#include "core/ckpt/ckpt_uri.h"
#include "metrics_server.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace autopar {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

Result<int64_t> ParseInt(const std::string& v, int64_t lo, int64_t hi) {
  if (v.empty()) return Status::Error("must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got ''");
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || x < lo || x > hi) {
    return Status::Error("must be an integer in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "], got '" + v + "'");
  }
  return static_cast<int64_t>(x);
}

Result<bool> ParseBool(const std::string& v) {
  if (v == "true" || v == "yes" || v == "1" || v == "on") return true;
  if (v == "false" || v == "no" || v == "0" || v == "off") return false;
  return Status::Error("must be true or false, got '" + v + "'");
}

// The setters below get a key's trimmed value and fail with a reason that ParseDaemonConfig
// prefixes with the file, line and key.
template <typename T>
Status SetInteger(const std::string& v, int64_t lo, int64_t hi, T* out) {
  auto x = ParseInt(v, lo, hi);
  if (!x) return x.status();
  *out = static_cast<T>(*x);
  return Status::Ok();
}

// A duration key counted in `Unit`s (seconds, milliseconds) into a std::chrono field.
template <typename Unit, typename Duration>
Status SetDuration(const std::string& v, int64_t lo, int64_t hi, Duration* out) {
  int64_t x = 0;
  if (Status st = SetInteger(v, lo, hi, &x); !st) return st;
  *out = Unit(x);
  return Status::Ok();
}

Status SetBool(const std::string& v, bool* out) {
  auto x = ParseBool(v);
  if (!x) return x.status();
  *out = *x;
  return Status::Ok();
}

Status SetPath(const std::string& v, bool allow_empty, std::string* out) {
  if (v.empty() && allow_empty) {
    out->clear();
    return Status::Ok();
  }
  if (v.empty() || v[0] != '/') return Status::Error("must be an absolute path, got '" + v + "'");
  *out = v;
  return Status::Ok();
}

Status SetSize(const std::string& v, bool allow_auto, uint64_t* out) {
  if (allow_auto && v == "auto") {
    *out = 0;
    return Status::Ok();
  }
  auto x = ParseByteSize(v);
  if (!x) return Status::Error(x.message() + (allow_auto ? " (or auto)" : ""));
  if (*x < (5ull << 20) || *x > (5ull << 30)) {
    return Status::Error(allow_auto
                             ? "must be auto or between 5M and 5G (S3's single PUT limit), got '" + v + "'"
                             : "must be between 5M and 5G (S3's part limits), got '" + v + "'");
  }
  *out = *x;
  return Status::Ok();
}

// Every key of autopard.conf, in etc/autopard.conf's order: the parser knows exactly these, and
// DaemonConfigKeys() lists them for the man page's check (docs/man/autopard.conf.5).
struct ConfigKey {
  const char* name;
  Status (*set)(DaemonConfig& c, const std::string& v);
};

const ConfigKey kKeys[] = {
    {"socket", [](DaemonConfig& c, const std::string& v) { return SetPath(v, false, &c.socket); }},
    {"socket_mode",
     [](DaemonConfig& c, const std::string& v) {
       char* end = nullptr;
       unsigned long m = std::strtoul(v.c_str(), &end, 8);
       if (v.empty() || *end != '\0' || m > 0777)
         return Status::Error("must be an octal mode like 0666, got '" + v + "'");
       c.socket_mode = static_cast<mode_t>(m);
       return Status::Ok();
     }},
    {"max_connections",
     [](DaemonConfig& c, const std::string& v) { return SetInteger(v, 1, 65536, &c.max_connections); }},
    {"max_connections_per_uid",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 1, 65536, &c.max_connections_per_uid);
     }},
    {"request_timeout_s",
     [](DaemonConfig& c, const std::string& v) { return SetInteger(v, 1, 3600, &c.request_timeout_s); }},
    {"idle_timeout_s",
     [](DaemonConfig& c, const std::string& v) { return SetInteger(v, 1, 86400, &c.idle_timeout_s); }},
    {"max_events_per_job",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 1, 100000000, &c.max_events_per_job);
     }},
    {"max_event_bytes_per_job",
     [](DaemonConfig& c, const std::string& v) {
       auto n = ParseByteSize(v);
       if (!n) return n.status();
       if (*n < (1u << 20)) return Status::Error("must be at least 1M, got '" + v + "'");
       c.max_event_bytes_per_job = static_cast<int64_t>(*n);
       return Status::Ok();
     }},
    {"max_ranks_per_job",
     [](DaemonConfig& c, const std::string& v) { return SetInteger(v, 1, 1 << 20, &c.max_ranks_per_job); }},
    {"state_dir",
     [](DaemonConfig& c, const std::string& v) { return SetPath(v, false, &c.state_dir); }},
    {"commit_sync",
     [](DaemonConfig& c, const std::string& v) {
       if (v == "normal") {
         c.commit_sync = CommitSync::kNormal;
       } else if (v == "full") {
         c.commit_sync = CommitSync::kFull;
       } else {
         return Status::Error("must be normal or full, got '" + v + "'");
       }
       return Status::Ok();
     }},
    {"local_ckpt_cleanup",
     [](DaemonConfig& c, const std::string& v) -> Status {
       auto policy = ParseLocalCleanup(v);
       if (!policy) return policy.status();
       c.local_ckpt_cleanup = *policy;
       return Status::Ok();
     }},
    {"state_keep_days",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 0, 36500, &c.state_keep_days);
     }},
    {"node",
     [](DaemonConfig& c, const std::string& v) {
       c.node = v;
       return Status::Ok();
     }},
    {"slurm_conf",
     [](DaemonConfig& c, const std::string& v) { return SetPath(v, true, &c.slurm_conf); }},
    {"plugstack",
     [](DaemonConfig& c, const std::string& v) { return SetPath(v, true, &c.plugstack); }},
    {"slurm_user",
     [](DaemonConfig& c, const std::string& v) {
       c.slurm_user = v;
       return Status::Ok();
     }},
    {"owner_cache_s",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 0, 86400, &c.owner_cache_s);
     }},
    {"s3_endpoint",
     [](DaemonConfig& c, const std::string& v) {
       c.s3.endpoint = v;
       if (!v.empty() && v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0)
         return Status::Error("must start with http:// or https://, got '" + v + "'");
       return Status::Ok();
     }},
    {"s3_region",
     [](DaemonConfig& c, const std::string& v) {
       c.s3.region = v;
       return Status::Ok();
     }},
    {"s3_access_key",
     [](DaemonConfig& c, const std::string& v) {
       c.s3.credentials.access_key_id = v;
       return Status::Ok();
     }},
    {"s3_secret_key",
     [](DaemonConfig& c, const std::string& v) {
       c.s3.credentials.secret_access_key = v;
       return Status::Ok();
     }},
    {"s3_session_token",
     [](DaemonConfig& c, const std::string& v) {
       c.s3.credentials.session_token = v;
       return Status::Ok();
     }},
    {"s3_sign_payload",
     [](DaemonConfig& c, const std::string& v) { return SetBool(v, &c.s3.sign_payload); }},
    {"s3_verify_tls",
     [](DaemonConfig& c, const std::string& v) { return SetBool(v, &c.s3.verify_tls); }},
    {"s3_ca_file",
     [](DaemonConfig& c, const std::string& v) { return SetPath(v, true, &c.s3.ca_file); }},
    {"s3_connect_timeout_ms",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 1, 600000, &c.s3.connect_timeout_ms);
     }},
    {"s3_stall_timeout_s",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 1, 3600, &c.s3.stall_timeout_s);
     }},
    {"posix_fsync",
     [](DaemonConfig& c, const std::string& v) { return SetBool(v, &c.posix.fsync); }},
    {"journal_uri",
     [](DaemonConfig& c, const std::string& v) {
       if (v.empty()) return Status::Ok();
       auto uri = ParseCheckpointUri(v);
       if (!uri) {
         std::string m = uri.message();
         if (m.rfind("--ckpt-upload: ", 0) == 0) m = m.substr(15);
         return Status::Error(m);
       }
       c.journal_uri = uri->ToString();
       return Status::Ok();
     }},
    {"journal_keep_days",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 0, 36500, &c.journal_keep_days);
     }},
    {"part_size",
     [](DaemonConfig& c, const std::string& v) { return SetSize(v, false, &c.part_size); }},
    {"multipart_threshold",
     [](DaemonConfig& c, const std::string& v) {
       return SetSize(v, true, &c.multipart_threshold);
     }},
    {"concurrency",
     [](DaemonConfig& c, const std::string& v) { return SetInteger(v, 1, 256, &c.concurrency); }},
    {"max_active_uploads",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 1, 1024, &c.max_active_uploads);
     }},
    {"retry_initial_ms",
     [](DaemonConfig& c, const std::string& v) {
       return SetDuration<std::chrono::milliseconds>(v, 1, 600000, &c.retry.initial);
     }},
    {"retry_max_delay_ms",
     [](DaemonConfig& c, const std::string& v) {
       return SetDuration<std::chrono::milliseconds>(v, 1, 3600000, &c.retry.max_delay);
     }},
    {"retry_max_attempts",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 0, 1000000, &c.retry.max_attempts);
     }},
    {"retry_max_elapsed_s",
     [](DaemonConfig& c, const std::string& v) {
       return SetDuration<std::chrono::seconds>(v, 0, 7 * 86400, &c.retry.max_elapsed);
     }},
    {"upload_retry_initial_s",
     [](DaemonConfig& c, const std::string& v) {
       return SetDuration<std::chrono::seconds>(v, 1, 86400, &c.upload_retry_initial);
     }},
    {"upload_retry_max_s",
     [](DaemonConfig& c, const std::string& v) {
       return SetDuration<std::chrono::seconds>(v, 1, 7 * 86400, &c.upload_retry_max);
     }},
    {"restore_wait_s",
     [](DaemonConfig& c, const std::string& v) { return SetInteger(v, 0, 280, &c.restore_wait_s); }},
    {"progress_interval_s",
     [](DaemonConfig& c, const std::string& v) {
       return SetInteger(v, 1, 86400, &c.progress_interval_s);
     }},
    {"log_level",
     [](DaemonConfig& c, const std::string& v) -> Status {
       auto level = ParseLogLevel(v);
       if (!level) return level.status();
       c.log_level = *level;
       return Status::Ok();
     }},
    {"metrics_listen",
     [](DaemonConfig& c, const std::string& v) {
       if (v.empty()) return Status::Ok();
       auto a = ParseListenAddress(v);
       if (!a) return a.status();
       c.metrics_listen = v;
       return Status::Ok();
     }},
};

const ConfigKey* FindKey(const std::string& name) {
  for (const ConfigKey& k : kKeys)
    if (name == k.name) return &k;
  return nullptr;
}

}  // namespace

Result<uint64_t> ParseByteSize(const std::string& text) {
  if (text.empty()) return Status::Error("empty size");
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0 || digits > 15) return Status::Error("not a size: '" + text + "'");
  uint64_t n = std::stoull(text.substr(0, digits));
  std::string unit = text.substr(digits);
  uint64_t mult = 1;
  if (unit == "" || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mult = 1ull << 10;
  else if (unit == "M" || unit == "MiB") mult = 1ull << 20;
  else if (unit == "G" || unit == "GiB") mult = 1ull << 30;
  else return Status::Error("not a size: '" + text + "' (use a number with K, M or G)");
  return n * mult;
}

Result<DaemonConfig> ParseDaemonConfig(const std::string& text, const std::string& origin) {
  DaemonConfig c;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    ++lineno;
    std::string t = Trim(line);
    if (t.empty() || t[0] == '#') continue;
    const std::string where = origin + ":" + std::to_string(lineno) + ": ";
    size_t eq = t.find('=');
    // The line itself is not repeated: a broken s3_secret_key line would be, into the log.
    if (eq == std::string::npos) return Status::Error(where + "expected 'key = value' (the line is not shown)");
    std::string key = Trim(t.substr(0, eq));
    std::string v = Trim(t.substr(eq + 1));
    if (!seen.insert(key).second) return Status::Error(where + key + ": given twice");
    const ConfigKey* known = FindKey(key);
    if (known == nullptr) {
      return Status::Error(where + key + ": unknown key (etc/autopard.conf lists every key)");
    }
    if (Status st = known->set(c, v); !st) return Status::Error(where + key + ": " + st.message());
    c.given[key] = v;
  }
  if (c.journal_uri.rfind("s3://", 0) == 0 && c.s3.endpoint.empty()) {
    return Status::Error(origin + ": journal_uri: " + c.journal_uri + " needs s3_endpoint");
  }
  if (c.upload_retry_max < c.upload_retry_initial) {
    return Status::Error(origin + ": upload_retry_max_s: must be at least upload_retry_initial_s (" +
                         std::to_string(c.upload_retry_initial.count()) + "), got " +
                         std::to_string(c.upload_retry_max.count()));
  }
  if (c.journal_keep_days > 0 && c.state_keep_days > 0 && c.journal_keep_days < c.state_keep_days) {
    return Status::Error(origin + ": journal_keep_days: must be 0 or at least state_keep_days (" +
                         std::to_string(c.state_keep_days) + "), got " +
                         std::to_string(c.journal_keep_days));
  }
  if (!c.s3.credentials.secret_access_key.empty() && c.s3.credentials.access_key_id.empty()) {
    return Status::Error(origin + ": s3_secret_key is set but s3_access_key is not");
  }
  return c;
}

ConfigChanges CompareForReload(const DaemonConfig& running, const DaemonConfig& fresh) {
  static const std::set<std::string> kReloadable = {
      "log_level",     "max_events_per_job", "max_event_bytes_per_job", "max_ranks_per_job",
      "s3_endpoint",   "s3_region",          "s3_access_key",           "s3_secret_key",
      "s3_session_token", "s3_sign_payload", "s3_verify_tls",           "s3_ca_file",
      "s3_connect_timeout_ms", "s3_stall_timeout_s", "posix_fsync"};
  ConfigChanges changes;
  for (const ConfigKey& k : kKeys) {
    auto a = running.given.find(k.name);
    auto b = fresh.given.find(k.name);
    const bool same = (a == running.given.end()) == (b == fresh.given.end()) &&
                      (a == running.given.end() || a->second == b->second);
    if (same) continue;
    (kReloadable.count(k.name) ? changes.applied : changes.need_restart).emplace_back(k.name);
  }
  return changes;
}

std::vector<std::string> DaemonConfigKeys() {
  std::vector<std::string> keys;
  for (const ConfigKey& k : kKeys) keys.emplace_back(k.name);
  return keys;
}

Status CheckConfigFilePermissions(const struct stat& st, bool has_secret, const std::string& path) {
  if (!has_secret) return Status::Ok();
  if (st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH)) {
    return Status::Error(path + ": holds S3 credentials (s3_secret_key or s3_session_token) but is readable or writable by others (mode " +
                         [&] {
                           char b[8];
                           std::snprintf(b, sizeof(b), "%04o", st.st_mode & 07777);
                           return std::string(b);
                         }() +
                         "); run chmod 600 on it");
  }
  if (st.st_uid != geteuid()) {
    return Status::Error(path + ": holds S3 credentials (s3_secret_key or s3_session_token) but is owned by uid " +
                         std::to_string(st.st_uid) + ", not by autopard's user");
  }
  return Status::Ok();
}

Result<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::Error(path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  auto c = ParseDaemonConfig(ss.str(), path);
  if (!c) return c;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return Status::Error(path + ": " + std::strerror(errno));
  const bool has_secret =
      !c->s3.credentials.secret_access_key.empty() || !c->s3.credentials.session_token.empty();
  if (Status s = CheckConfigFilePermissions(st, has_secret, path); !s) {
    return s;
  }
  return c;
}

}  // namespace autopar
