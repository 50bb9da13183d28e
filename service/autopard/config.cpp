#include "config.h"

#include "core/ckpt/ckpt_uri.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

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
    if (eq == std::string::npos) return Status::Error(where + "expected 'key = value', got '" + t + "'");
    std::string key = Trim(t.substr(0, eq));
    std::string v = Trim(t.substr(eq + 1));
    if (!seen.insert(key).second) return Status::Error(where + key + ": given twice");
    auto bad = [&](const std::string& why) { return Status::Error(where + key + ": " + why); };
    auto integer = [&](int64_t lo, int64_t hi, auto* out) -> Status {
      auto x = ParseInt(v, lo, hi);
      if (!x) return bad(x.message());
      *out = static_cast<std::remove_pointer_t<decltype(out)>>(*x);
      return Status::Ok();
    };
    auto boolean = [&](bool* out) -> Status {
      auto x = ParseBool(v);
      if (!x) return bad(x.message());
      *out = *x;
      return Status::Ok();
    };
    auto path = [&](std::string* out, bool allow_empty) -> Status {
      if (v.empty() && allow_empty) {
        out->clear();
        return Status::Ok();
      }
      if (v.empty() || v[0] != '/') return bad("must be an absolute path, got '" + v + "'");
      *out = v;
      return Status::Ok();
    };
    Status st;
    if (key == "socket") {
      st = path(&c.socket, false);
    } else if (key == "socket_mode") {
      char* end = nullptr;
      unsigned long m = std::strtoul(v.c_str(), &end, 8);
      if (v.empty() || *end != '\0' || m > 0777) st = bad("must be an octal mode like 0666, got '" + v + "'");
      c.socket_mode = static_cast<mode_t>(m);
    } else if (key == "state_dir") {
      st = path(&c.state_dir, false);
    } else if (key == "commit_sync") {
      if (v == "normal") {
        c.commit_sync = CommitSync::kNormal;
      } else if (v == "full") {
        c.commit_sync = CommitSync::kFull;
      } else {
        st = bad("must be normal or full, got '" + v + "'");
      }
    } else if (key == "node") {
      c.node = v;
    } else if (key == "slurm_conf") {
      st = path(&c.slurm_conf, true);
    } else if (key == "slurm_user") {
      c.slurm_user = v;
    } else if (key == "s3_endpoint") {
      if (!v.empty() && v.rfind("http://", 0) != 0 && v.rfind("https://", 0) != 0) {
        st = bad("must start with http:// or https://, got '" + v + "'");
      }
      c.s3.endpoint = v;
    } else if (key == "s3_region") {
      c.s3.region = v;
    } else if (key == "s3_access_key") {
      c.s3.credentials.access_key_id = v;
    } else if (key == "s3_secret_key") {
      c.s3.credentials.secret_access_key = v;
    } else if (key == "s3_session_token") {
      c.s3.credentials.session_token = v;
    } else if (key == "s3_sign_payload") {
      st = boolean(&c.s3.sign_payload);
    } else if (key == "s3_verify_tls") {
      st = boolean(&c.s3.verify_tls);
    } else if (key == "s3_ca_file") {
      st = path(&c.s3.ca_file, true);
    } else if (key == "s3_connect_timeout_ms") {
      st = integer(1, 600000, &c.s3.connect_timeout_ms);
    } else if (key == "s3_stall_timeout_s") {
      st = integer(1, 3600, &c.s3.stall_timeout_s);
    } else if (key == "posix_fsync") {
      st = boolean(&c.posix.fsync);
    } else if (key == "part_size") {
      auto x = ParseByteSize(v);
      if (!x) {
        st = bad(x.message());
      } else if (*x < (5ull << 20) || *x > (5ull << 30)) {
        st = bad("must be between 5M and 5G (S3's part limits), got '" + v + "'");
      } else {
        c.part_size = *x;
      }
    } else if (key == "multipart_threshold") {
      if (v == "auto") {
        c.multipart_threshold = 0;
      } else if (auto x = ParseByteSize(v); !x) {
        st = bad(x.message() + " (or auto)");
      } else if (*x < (5ull << 20) || *x > (5ull << 30)) {
        st = bad("must be auto or between 5M and 5G (S3's single PUT limit), got '" + v + "'");
      } else {
        c.multipart_threshold = *x;
      }
    } else if (key == "concurrency") {
      st = integer(1, 256, &c.concurrency);
    } else if (key == "max_active_uploads") {
      st = integer(1, 1024, &c.max_active_uploads);
    } else if (key == "retry_initial_ms") {
      int64_t x = 0;
      st = integer(1, 600000, &x);
      c.retry.initial = std::chrono::milliseconds(x);
    } else if (key == "retry_max_delay_ms") {
      int64_t x = 0;
      st = integer(1, 3600000, &x);
      c.retry.max_delay = std::chrono::milliseconds(x);
    } else if (key == "retry_max_attempts") {
      st = integer(0, 1000000, &c.retry.max_attempts);
    } else if (key == "retry_max_elapsed_s") {
      int64_t x = 0;
      st = integer(0, 7 * 86400, &x);
      c.retry.max_elapsed = std::chrono::seconds(x);
    } else if (key == "upload_retry_initial_s") {
      int64_t x = 0;
      st = integer(1, 86400, &x);
      c.upload_retry_initial = std::chrono::seconds(x);
    } else if (key == "upload_retry_max_s") {
      int64_t x = 0;
      st = integer(1, 7 * 86400, &x);
      c.upload_retry_max = std::chrono::seconds(x);
    } else if (key == "owner_cache_s") {
      st = integer(0, 86400, &c.owner_cache_s);
    } else if (key == "restore_timeout_s") {
      st = integer(1, 86400, &c.restore_timeout_s);
    } else if (key == "progress_interval_s") {
      st = integer(1, 86400, &c.progress_interval_s);
    } else if (key == "state_keep_days") {
      st = integer(0, 36500, &c.state_keep_days);
    } else if (key == "journal_uri") {
      if (!v.empty()) {
        auto uri = ParseCheckpointUri(v);
        if (!uri) {
          std::string m = uri.message();
          if (m.rfind("--ckpt-upload: ", 0) == 0) m = m.substr(15);
          st = bad(m);
        } else {
          c.journal_uri = uri->ToString();
        }
      }
    } else {
      return Status::Error(where + key + ": unknown key (etc/autopard.conf lists every key)");
    }
    if (!st) return st;
  }
  if (c.journal_uri.rfind("s3://", 0) == 0 && c.s3.endpoint.empty()) {
    return Status::Error(origin + ": journal_uri: " + c.journal_uri + " needs s3_endpoint");
  }
  if (c.upload_retry_max < c.upload_retry_initial) {
    return Status::Error(origin + ": upload_retry_max_s: must be at least upload_retry_initial_s (" +
                         std::to_string(c.upload_retry_initial.count()) + "), got " +
                         std::to_string(c.upload_retry_max.count()));
  }
  if (!c.s3.credentials.secret_access_key.empty() && c.s3.credentials.access_key_id.empty()) {
    return Status::Error(origin + ": s3_secret_key is set but s3_access_key is not");
  }
  return c;
}

Status CheckConfigFilePermissions(const struct stat& st, bool has_secret, const std::string& path) {
  if (!has_secret) return Status::Ok();
  if (st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH)) {
    return Status::Error(path + ": holds s3_secret_key but is readable or writable by others (mode " +
                         [&] {
                           char b[8];
                           std::snprintf(b, sizeof(b), "%04o", st.st_mode & 07777);
                           return std::string(b);
                         }() +
                         "); run chmod 600 on it");
  }
  if (st.st_uid != geteuid()) {
    return Status::Error(path + ": holds s3_secret_key but is owned by uid " +
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
  if (Status s = CheckConfigFilePermissions(st, !c->s3.credentials.secret_access_key.empty(), path); !s) {
    return s;
  }
  return c;
}

}  // namespace autopar
