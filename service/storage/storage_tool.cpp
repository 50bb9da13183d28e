// autopar-storage-tool: the storage backends from the command line, for integration tests and
// benchmarks (not installed). Credentials come from a file given with --credentials (line 1: access
// key id, line 2: secret access key), never from the environment or the command line.
#include <dirent.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/ckpt/ckpt_store.h"
#include "service/storage/storage_backends.h"

namespace autopar {
namespace {

constexpr const char* kUsage = R"(usage: autopar-storage-tool [options] URI COMMAND [ARGS]

URI: s3://BUCKET[/PREFIX] or file:///DIR
commands:
  upload LOCAL_DIR KEY_PREFIX   every regular file below LOCAL_DIR -> KEY_PREFIX/<relative path>
  put LOCAL_FILE KEY            one file
  get KEY LOCAL_FILE [SHA256]   parallel ranged download, verified when SHA256 is given
  cat KEY                       an object to stdout
  ls [PREFIX]                   "<size> <key>" per object
  rm PREFIX                     delete every object under PREFIX
  steps [JOB]                   checkpoint steps, newest first: "<job> <step> complete|incomplete <bytes>"
options:
  --endpoint URL        S3 endpoint (default http://127.0.0.1:18900)
  --region NAME         S3 region (default us-east-1)
  --credentials FILE    line 1 access key id, line 2 secret access key
  --part-size-mib N     part / range size (default 16)
  --concurrency N       requests in flight (default 8)
  --multipart-threshold-mib N  files up to N MiB go as one streamed PUT (default: auto, see docs/checkpoints.md)
  --sign-payload        sign part bodies (SHA-256) instead of UNSIGNED-PAYLOAD
  --no-md5              S3: no Content-MD5 / ETag check (saves hashing every byte with MD5)
  --no-fsync            POSIX backend: skip fsync
  --as-uid UID          POSIX backend, as root: act with UID's rights (as autopard does for a job's
                        owner; the local files are still read as the caller)
)";

int Fail(const std::string& msg) {
  std::cerr << "autopar-storage-tool: " << msg << "\n";
  return 1;
}

void Walk(const std::string& root, const std::string& rel, std::vector<std::string>* out) {
  std::string dir = rel.empty() ? root : root + "/" + rel;
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string r = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (stat((root + "/" + r).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) Walk(root, r, out);
    if (S_ISREG(st.st_mode)) out->push_back(r);
  }
  closedir(d);
}

// What the options set, and the arguments: URI, COMMAND and its own.
struct ToolOptions {
  ToolOptions() { s3.endpoint = "http://127.0.0.1:18900"; }
  S3Config s3;
  PosixConfig posix;
  TransferOptions opts;
  std::vector<std::string> args;
};

// An option: whether it takes a value and what it sets (an error ends the program).
struct ToolFlag {
  const char* name;
  bool takes_value;
  Status (*set)(ToolOptions& o, const std::string& value);
};

Status ReadCredentials(ToolOptions& o, const std::string& path) {
  std::ifstream f(path);
  if (!f || !std::getline(f, o.s3.credentials.access_key_id) ||
      !std::getline(f, o.s3.credentials.secret_access_key)) {
    return Status::Error("--credentials: " + path +
                         ": cannot read two lines (access key id, secret)");
  }
  return Status::Ok();
}

constexpr ToolFlag kFlags[] = {
    {"--endpoint", true,
     [](ToolOptions& o, const std::string& v) {
       o.s3.endpoint = v;
       return Status::Ok();
     }},
    {"--region", true,
     [](ToolOptions& o, const std::string& v) {
       o.s3.region = v;
       return Status::Ok();
     }},
    {"--credentials", true, ReadCredentials},
    {"--part-size-mib", true,
     [](ToolOptions& o, const std::string& v) {
       o.opts.part_size = std::strtoull(v.c_str(), nullptr, 10) << 20;
       return Status::Ok();
     }},
    {"--multipart-threshold-mib", true,
     [](ToolOptions& o, const std::string& v) {
       o.opts.multipart_threshold = std::strtoull(v.c_str(), nullptr, 10) << 20;
       return Status::Ok();
     }},
    {"--concurrency", true,
     [](ToolOptions& o, const std::string& v) {
       o.opts.concurrency = std::atoi(v.c_str());
       return Status::Ok();
     }},
    {"--sign-payload", false,
     [](ToolOptions& o, const std::string&) {
       o.s3.sign_payload = true;
       return Status::Ok();
     }},
    {"--no-md5", false,
     [](ToolOptions& o, const std::string&) {
       o.s3.content_md5 = false;
       return Status::Ok();
     }},
    {"--no-fsync", false,
     [](ToolOptions& o, const std::string&) {
       o.posix.fsync = false;
       return Status::Ok();
     }},
    {"--as-uid", true,
     [](ToolOptions& o, const std::string& v) {
       o.posix.identity = WithGroups(IdentityOf(static_cast<uid_t>(std::atol(v.c_str()))));
       return Status::Ok();
     }},
};

// Reads the command line into `o`; the exit status when the program ends here (help, a bad
// option; a missing value exits at once with 2).
std::optional<int> ParseArgs(int argc, char** argv, ToolOptions* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const ToolFlag* flag = nullptr;
    for (const ToolFlag& f : kFlags) {
      if (a == f.name) flag = &f;
    }
    if (flag) {
      std::string value;
      if (flag->takes_value) {
        if (i + 1 >= argc) {
          std::cerr << "autopar-storage-tool: " << a << ": missing value\n";
          std::exit(2);
        }
        value = argv[++i];
      }
      if (Status s = flag->set(*o, value); !s.ok()) return Fail(s.message());
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a.rfind("--", 0) == 0) {
      return Fail(a + ": unknown option\n" + kUsage);
    } else {
      o->args.push_back(a);
    }
  }
  return std::nullopt;
}

// Whether the command (args[1]) has at least `n` arguments of its own.
bool HasArgs(const std::vector<std::string>& args, size_t n) { return args.size() >= n + 2; }

int Upload(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts) {
  std::vector<std::string> files;
  Walk(args[2], "", &files);
  std::vector<UploadItem> items;
  for (const auto& f : files) items.push_back({args[2] + "/" + f, args[3] + "/" + f});
  TransferOptions no_digest = opts;
  no_digest.compute_sha256 = false;
  auto start = std::chrono::steady_clock::now();
  auto r = UploadFiles(store, items, no_digest);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok()) return Fail(r.message());
  uint64_t bytes = 0;
  for (const auto& u : *r) bytes += u.size;
  std::printf("uploaded %zu files, %llu bytes in %.3f s (%.1f MiB/s)\n", r->size(),
              static_cast<unsigned long long>(bytes), secs,
              static_cast<double>(bytes) / (1 << 20) / secs);
  return 0;
}

int Put(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts) {
  auto r = UploadFiles(store, {{args[2], args[3]}}, opts);
  if (!r.ok()) return Fail(r.message());
  std::printf("%s %llu %s\n", (*r)[0].key.c_str(), static_cast<unsigned long long>((*r)[0].size),
              (*r)[0].sha256.c_str());
  return 0;
}

int Get(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts) {
  ObjectInfo info;
  StoreStatus h = store.Head(args[2], &info);
  if (!h.ok()) return Fail(store.Describe() + "/" + args[2] + ": " + h.message);
  Status s =
      DownloadFiles(store, {{args[2], args[3], info.size, HasArgs(args, 3) ? args[4] : ""}}, opts);
  if (!s.ok()) return Fail(s.message());
  return 0;
}

int Cat(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts) {
  auto r = GetSmallObject(store, args[2], opts);
  if (!r.ok()) return Fail(r.message());
  std::fwrite(r->data(), 1, r->size(), stdout);
  return 0;
}

int Ls(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts) {
  auto r = ListObjects(store, HasArgs(args, 1) ? args[2] : "", opts);
  if (!r.ok()) return Fail(r.message());
  for (const auto& o : *r) {
    std::printf("%llu %s\n", static_cast<unsigned long long>(o.size), o.key.c_str());
  }
  return 0;
}

int Rm(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts) {
  auto r = DeletePrefix(store, args[2], opts);
  if (!r.ok()) return Fail(r.message());
  std::printf("deleted %zu objects\n", *r);
  return 0;
}

int Steps(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts) {
  auto r = ListSteps(store, HasArgs(args, 1) ? args[2] : "", opts);
  if (!r.ok()) return Fail(r.message());
  for (const auto& s : *r) {
    std::printf("%s %lld %s %llu\n", s.job_id.c_str(), static_cast<long long>(s.step),
                s.has_manifest ? "complete" : "incomplete",
                static_cast<unsigned long long>(s.bytes));
  }
  return 0;
}

// A command, the arguments it needs at least, and what runs it.
struct Command {
  const char* name;
  size_t min_args;
  int (*run)(ObjectStore& store, const std::vector<std::string>& args, const TransferOptions& opts);
};
constexpr Command kCommands[] = {
    {"upload", 2, Upload}, {"put", 2, Put}, {"get", 2, Get},     {"cat", 1, Cat},
    {"ls", 0, Ls},         {"rm", 1, Rm},   {"steps", 0, Steps},
};

int Main(int argc, char** argv) {
  ToolOptions o;
  if (std::optional<int> exit_status = ParseArgs(argc, argv, &o)) return *exit_status;
  if (o.args.size() < 2) return Fail(std::string("missing URI or command\n") + kUsage);
  auto uri = ParseCheckpointUri(o.args[0]);
  if (!uri.ok()) return Fail(uri.message());
  auto opened = OpenObjectStore(*uri, o.s3, o.posix);
  if (!opened.ok()) return Fail(opened.message());
  const std::string& cmd = o.args[1];
  for (const Command& c : kCommands) {
    if (cmd == c.name && HasArgs(o.args, c.min_args)) return c.run(**opened, o.args, o.opts);
  }
  return Fail("unknown command or missing arguments: " + cmd + "\n" + kUsage);
}

}  // namespace
}  // namespace autopar

int main(int argc, char** argv) { return autopar::Main(argc, argv); }
