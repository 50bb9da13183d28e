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

int Main(int argc, char** argv) {
  S3Config s3;
  s3.endpoint = "http://127.0.0.1:18900";
  PosixConfig posix;
  TransferOptions opts;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "autopar-storage-tool: " << a << ": missing value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--endpoint") {
      s3.endpoint = value();
    } else if (a == "--region") {
      s3.region = value();
    } else if (a == "--credentials") {
      std::string path = value();
      std::ifstream f(path);
      if (!f || !std::getline(f, s3.credentials.access_key_id) ||
          !std::getline(f, s3.credentials.secret_access_key)) {
        return Fail("--credentials: " + path + ": cannot read two lines (access key id, secret)");
      }
    } else if (a == "--part-size-mib") {
      opts.part_size = std::strtoull(value().c_str(), nullptr, 10) << 20;
    } else if (a == "--multipart-threshold-mib") {
      opts.multipart_threshold = std::strtoull(value().c_str(), nullptr, 10) << 20;
    } else if (a == "--concurrency") {
      opts.concurrency = std::atoi(value().c_str());
    } else if (a == "--sign-payload") {
      s3.sign_payload = true;
    } else if (a == "--no-md5") {
      s3.content_md5 = false;
    } else if (a == "--no-fsync") {
      posix.fsync = false;
    } else if (a == "--as-uid") {
      posix.identity = WithGroups(IdentityOf(static_cast<uid_t>(std::atol(value().c_str()))));
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a.rfind("--", 0) == 0) {
      return Fail(a + ": unknown option\n" + kUsage);
    } else {
      args.push_back(a);
    }
  }
  if (args.size() < 2) return Fail(std::string("missing URI or command\n") + kUsage);
  auto uri = ParseCheckpointUri(args[0]);
  if (!uri.ok()) return Fail(uri.message());
  auto opened = OpenObjectStore(*uri, s3, posix);
  if (!opened.ok()) return Fail(opened.message());
  ObjectStore& store = **opened;
  const std::string& cmd = args[1];
  auto need = [&](size_t n) { return args.size() >= n + 2; };

  if (cmd == "upload" && need(2)) {
    std::vector<std::string> files;
    Walk(args[2], "", &files);
    std::vector<UploadItem> items;
    for (const auto& f : files) items.push_back({args[2] + "/" + f, args[3] + "/" + f});
    opts.compute_sha256 = false;
    auto start = std::chrono::steady_clock::now();
    auto r = UploadFiles(store, items, opts);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) return Fail(r.message());
    uint64_t bytes = 0;
    for (const auto& u : *r) bytes += u.size;
    std::printf("uploaded %zu files, %llu bytes in %.3f s (%.1f MiB/s)\n", r->size(),
                static_cast<unsigned long long>(bytes), secs,
                static_cast<double>(bytes) / (1 << 20) / secs);
    return 0;
  }
  if (cmd == "put" && need(2)) {
    auto r = UploadFiles(store, {{args[2], args[3]}}, opts);
    if (!r.ok()) return Fail(r.message());
    std::printf("%s %llu %s\n", (*r)[0].key.c_str(), static_cast<unsigned long long>((*r)[0].size),
                (*r)[0].sha256.c_str());
    return 0;
  }
  if (cmd == "get" && need(2)) {
    ObjectInfo info;
    StoreStatus h = store.Head(args[2], &info);
    if (!h.ok()) return Fail(store.Describe() + "/" + args[2] + ": " + h.message);
    Status s = DownloadFiles(store, {{args[2], args[3], info.size, need(3) ? args[4] : ""}}, opts);
    if (!s.ok()) return Fail(s.message());
    return 0;
  }
  if (cmd == "cat" && need(1)) {
    auto r = GetSmallObject(store, args[2], opts);
    if (!r.ok()) return Fail(r.message());
    std::fwrite(r->data(), 1, r->size(), stdout);
    return 0;
  }
  if (cmd == "ls") {
    auto r = ListObjects(store, need(1) ? args[2] : "", opts);
    if (!r.ok()) return Fail(r.message());
    for (const auto& o : *r) {
      std::printf("%llu %s\n", static_cast<unsigned long long>(o.size), o.key.c_str());
    }
    return 0;
  }
  if (cmd == "rm" && need(1)) {
    auto r = DeletePrefix(store, args[2], opts);
    if (!r.ok()) return Fail(r.message());
    std::printf("deleted %zu objects\n", *r);
    return 0;
  }
  if (cmd == "steps") {
    auto r = ListSteps(store, need(1) ? args[2] : "", opts);
    if (!r.ok()) return Fail(r.message());
    for (const auto& s : *r) {
      std::printf("%s %lld %s %llu\n", s.job_id.c_str(), static_cast<long long>(s.step),
                  s.has_manifest ? "complete" : "incomplete",
                  static_cast<unsigned long long>(s.bytes));
    }
    return 0;
  }
  return Fail("unknown command or missing arguments: " + cmd + "\n" + kUsage);
}

}  // namespace
}  // namespace autopar

int main(int argc, char** argv) { return autopar::Main(argc, argv); }
