// The transfer engine over ObjectStore (storage.h): policy lives here, single requests in the
// backends.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "core/ckpt/storage.h"

namespace autopar {
namespace {

std::string Errno(const std::string& path) { return path + ": " + std::strerror(errno); }

// Retries one request with the options' backoff. One per thread (Backoff is thread-compatible).
class Retrier {
 public:
  explicit Retrier(const TransferOptions& o)
      : options_(o), backoff_(o.backoff, o.uniform ? o.uniform : DefaultUniform()) {
    RetryClock real = RealRetryClock();
    clock_.now = o.clock.now ? o.clock.now : real.now;
    clock_.sleep = o.clock.sleep ? o.clock.sleep : real.sleep;
  }
  // Returns OK or the final error. `last` receives the last StoreStatus (to tell kNotFound apart).
  Status Run(const std::function<StoreStatus()>& request, StoreStatus* last = nullptr) {
    StoreStatus st;
    Status s = RetryWithBackoff(
        [&](int) {
          st = request();
          return st.ToAttempt();
        },
        backoff_, clock_, options_.cancel);
    if (last) *last = st;
    return s;
  }

 private:
  const TransferOptions& options_;
  Backoff backoff_;
  RetryClock clock_;
};

bool Cancelled(const TransferOptions& o) { return o.cancel && o.cancel->load(); }

// pread until `size` bytes or EOF/error.
bool ReadFull(int fd, char* buf, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, buf + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool WriteFull(int fd, const char* buf, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(fd, buf + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

Status MakeDirs(const std::string& dir, mode_t mode) {
  if (dir.empty()) return Status::Ok();
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode) ? Status::Ok() : Status::Error(dir + ": not a directory");
  }
  size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (Status s = MakeDirs(dir.substr(0, slash), mode); !s.ok()) return s;
  }
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) return Status::Error(Errno(dir));
  return Status::Ok();
}

std::string ParentDir(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Serialised progress reporting across workers.
class Progress {
 public:
  Progress(const TransferOptions& o, uint64_t total) : fn_(o.progress), total_(total) {}
  void Add(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ += bytes;
    if (fn_) fn_(done_, total_);
  }

 private:
  std::mutex mu_;
  const std::function<void(uint64_t, uint64_t)>& fn_;
  uint64_t total_;
  uint64_t done_ = 0;
};

// The first error wins; later ones are dropped.
class FirstError {
 public:
  void Set(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.load()) {
      status_ = std::move(s);
      failed_ = true;
    }
  }
  bool failed() const { return failed_.load(); }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  std::atomic<bool> failed_{false};
  Status status_;
};

// Runs `work(task, worker)` for tasks 0..n-1 on up to `concurrency` threads (worker = 0..threads-1,
// for per-worker buffers); stops taking new tasks once `stop()` is true. Returns the thread count.
size_t PoolSize(size_t n, int concurrency) {
  return std::min<size_t>(n, static_cast<size_t>(std::max(1, concurrency)));
}
void RunPool(size_t n, int concurrency, const std::function<bool()>& stop,
             const std::function<void(size_t task, size_t worker)>& work) {
  std::atomic<size_t> next{0};
  auto worker = [&](size_t id) {
    for (;;) {
      if (stop()) return;
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      work(i, id);
    }
  };
  size_t threads = PoolSize(n, concurrency);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  if (threads > 0) worker(0);
  for (auto& t : pool) t.join();
}

bool IsMultipartEtag(const std::string& etag) {
  size_t dash = etag.find('-');
  return dash == 32 && IsLowerHex(etag.substr(0, 32), 32) && dash + 1 < etag.size();
}

struct FileState {
  int fd = -1;
  uint64_t size = 0;
  int parts = 0;  // 0: single PUT
  std::string upload_id;
  std::vector<std::string> etags;
  std::vector<Md5Digest> md5s;
  std::string sha256;
};

}  // namespace

std::string MultipartEtag(const std::vector<Md5Digest>& part_md5s) {
  std::string concat;
  for (const auto& d : part_md5s) concat.append(reinterpret_cast<const char*>(d.data()), d.size());
  return HexEncode(Md5Of(concat)) + "-" + std::to_string(part_md5s.size());
}

uint64_t AutoMultipartThreshold(size_t large_files, int concurrency, uint64_t part_size) {
  if (large_files >= static_cast<size_t>(std::max(concurrency, 1))) {
    return std::max(kAutoSinglePutMax, part_size);
  }
  return part_size;
}

Result<std::vector<UploadResult>> UploadFiles(ObjectStore& store,
                                              const std::vector<UploadItem>& items,
                                              const TransferOptions& options) {
  const uint64_t part_size = std::max<uint64_t>(options.part_size, 1);
  std::vector<FileState> files(items.size());
  auto close_all = [&] {
    for (auto& f : files) {
      if (f.fd >= 0) ::close(f.fd);
      f.fd = -1;
    }
  };
  uint64_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    FileState& f = files[i];
    f.fd = ::open(items[i].local_path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (f.fd < 0 || ::fstat(f.fd, &st) != 0) {
      Status s = Status::Error(Errno(items[i].local_path));
      close_all();
      return s;
    }
    f.size = static_cast<uint64_t>(st.st_size);
    total += f.size;
  }
  uint64_t threshold = part_size;
  if (store.ReadsFiles() && options.multipart_threshold > 0) {
    threshold = std::max(options.multipart_threshold, part_size);
  } else if (store.ReadsFiles()) {
    size_t large = 0;
    for (const auto& f : files) large += f.size > part_size ? 1 : 0;
    threshold = AutoMultipartThreshold(large, options.concurrency, part_size);
  }
  for (auto& f : files) {
    if (f.size > threshold) {
      f.parts = static_cast<int>((f.size + part_size - 1) / part_size);
      f.etags.resize(static_cast<size_t>(f.parts));
      f.md5s.resize(static_cast<size_t>(f.parts));
    }
  }

  Retrier retrier(options);
  auto where = [&](size_t i) {
    return items[i].local_path + " -> " + store.Describe() + "/" + items[i].key;
  };
  auto abort_all = [&] {
    for (size_t i = 0; i < files.size(); ++i) {
      if (files[i].upload_id.empty()) continue;
      // Best effort: a failed abort leaves an incomplete upload that the bucket's lifecycle rule
      // (or the next retention pass) removes; it never becomes a visible object.
      (void)store.AbortUpload(items[i].key, files[i].upload_id);
      files[i].upload_id.clear();
    }
  };
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].parts == 0) continue;
    Status s = retrier.Run([&] { return store.CreateUpload(items[i].key, &files[i].upload_id); });
    if (!s.ok()) {
      abort_all();
      close_all();
      return Status::Error(where(i) + ": starting multipart upload: " + s.message());
    }
  }

  struct Task {
    size_t file;
    int part;  // 0-based; single PUTs have part 0 and FileState::parts == 0
  };
  std::vector<Task> tasks;
  for (size_t i = 0; i < files.size(); ++i) {
    int n = std::max(1, files[i].parts);
    for (int p = 0; p < n; ++p) tasks.push_back({i, p});
  }

  FirstError error;
  Progress progress(options, total);
  std::atomic<bool> hashing_done{!options.compute_sha256};
  std::thread hasher;
  if (options.compute_sha256) {
    hasher = std::thread([&] {
      std::string buf(4 << 20, '\0');
      for (size_t i = 0; i < files.size() && !error.failed() && !Cancelled(options); ++i) {
        Sha256 h;
        uint64_t off = 0;
        while (off < files[i].size) {
          size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), files[i].size - off));
          if (!ReadFull(files[i].fd, buf.data(), n, off)) {
            error.Set(Status::Error(Errno(items[i].local_path)));
            return;
          }
          h.Update(buf.data(), n);
          off += n;
        }
        files[i].sha256 = h.FinishHex();
      }
      hashing_done = true;
    });
  }

  // One part buffer per worker, allocated on first use and never zero-filled: a fresh buffer per
  // part costs a page fault per 4 KiB (measured: more system time than the upload itself).
  std::vector<std::unique_ptr<char[]>> buffers(PoolSize(tasks.size(), options.concurrency));
  const bool reads_files = store.ReadsFiles();
  const bool use_md5 = store.UsesMd5() && !reads_files;  // a file-reading store hashes itself
  RunPool(
      tasks.size(), options.concurrency, [&] { return error.failed() || Cancelled(options); },
      [&](size_t t, size_t worker) {
        Retrier local(options);
        const Task& task = tasks[t];
        FileState& f = files[task.file];
        const std::string& key = items[task.file].key;
        uint64_t offset = static_cast<uint64_t>(task.part) * part_size;
        size_t len = static_cast<size_t>(
            f.parts == 0 ? f.size : std::min<uint64_t>(part_size, f.size - offset));
        Status s;
        if (reads_files) {
          if (f.parts == 0) {
            s = local.Run([&] { return store.PutObjectFromFile(key, f.fd, len); });
          } else {
            std::string etag;
            s = local.Run([&] {
              return store.UploadPartFromFile(key, f.upload_id, task.part + 1, offset, f.fd, len,
                                              &etag);
            });
            f.etags[static_cast<size_t>(task.part)] = etag;
          }
        } else {
          if (!buffers[worker]) {
            buffers[worker].reset(new char[static_cast<size_t>(std::min(part_size, total))]);
          }
          char* data = buffers[worker].get();
          if (!ReadFull(f.fd, data, len, offset)) {
            error.Set(Status::Error(Errno(items[task.file].local_path) +
                                    " (file changed while uploading?)"));
            return;
          }
          std::string_view buf(data, len);
          Md5Digest md5{};
          if (use_md5) md5 = Md5Of(buf);
          if (f.parts == 0) {
            s = local.Run([&] { return store.PutObject(key, buf, md5); });
          } else {
            std::string etag;
            s = local.Run([&] {
              return store.UploadPart(key, f.upload_id, task.part + 1, offset, buf, md5, &etag);
            });
            f.etags[static_cast<size_t>(task.part)] = etag;
            f.md5s[static_cast<size_t>(task.part)] = md5;
          }
        }
        if (!s.ok()) {
          std::string what = f.parts == 0 ? "" : "part " + std::to_string(task.part + 1) + ": ";
          error.Set(Status::Error(where(task.file) + ": " + what + s.message()));
          return;
        }
        progress.Add(len);
      });
  if (hasher.joinable()) hasher.join();

  if (!error.failed() && Cancelled(options)) error.Set(Status::Error("cancelled"));
  if (!error.failed() && !hashing_done) error.Set(Status::Error("cancelled"));
  if (error.failed()) {
    abort_all();
    close_all();
    return error.status();
  }

  std::vector<UploadResult> results(items.size());
  for (size_t i = 0; i < files.size(); ++i) {
    FileState& f = files[i];
    UploadResult& r = results[i];
    r.key = items[i].key;
    r.size = f.size;
    r.sha256 = f.sha256;
    r.parts = f.parts;
    if (f.parts > 0) {
      StoreStatus last;
      Status s = retrier.Run(
          [&] { return store.CompleteUpload(items[i].key, f.upload_id, f.etags, &r.etag); }, &last);
      if (!s.ok() && last.code == StoreStatus::Code::kNotFound) {
        // A retried Complete whose first try succeeded but whose answer was lost: the upload is
        // gone because the object exists. The Head below checks it.
        s = Status::Ok();
        r.etag.clear();
      }
      if (!s.ok()) {
        abort_all();
        close_all();
        return Status::Error(where(i) + ": completing multipart upload: " + s.message());
      }
      f.upload_id.clear();
      std::string expected = MultipartEtag(f.md5s);
      if (use_md5 && IsMultipartEtag(r.etag) && r.etag != expected) {
        abort_all();
        close_all();
        return Status::Error(where(i) + ": multipart ETag " + r.etag + " does not match the " +
                             "uploaded parts (" + expected + ")");
      }
    }
    ObjectInfo info;
    Status s = retrier.Run([&] { return store.Head(items[i].key, &info); });
    if (!s.ok()) {
      abort_all();
      close_all();
      return Status::Error(where(i) + ": checking the uploaded object: " + s.message());
    }
    if (info.size != f.size) {
      abort_all();
      close_all();
      return Status::Error(where(i) + ": uploaded object has " + std::to_string(info.size) +
                           " bytes, the file " + std::to_string(f.size));
    }
    if (r.etag.empty()) r.etag = info.etag;
  }
  close_all();
  return results;
}

Status DownloadFiles(ObjectStore& store, const std::vector<DownloadItem>& items,
                     const TransferOptions& options) {
  const uint64_t part_size = std::max<uint64_t>(options.part_size, 1);
  Retrier retrier(options);
  std::vector<int> fds(items.size(), -1);
  std::vector<std::string> temps(items.size());
  auto cleanup = [&] {
    for (size_t i = 0; i < items.size(); ++i) {
      if (fds[i] >= 0) ::close(fds[i]);
      fds[i] = -1;
      if (!temps[i].empty()) ::unlink(temps[i].c_str());
    }
  };
  auto name = [&](size_t i) { return store.Describe() + "/" + items[i].key; };
  uint64_t total = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    ObjectInfo info;
    StoreStatus last;
    Status s = retrier.Run([&] { return store.Head(items[i].key, &info); }, &last);
    if (!s.ok()) {
      cleanup();
      if (last.code == StoreStatus::Code::kNotFound)
        return Status::Error(name(i) + ": object not found");
      return Status::Error(name(i) + ": " + s.message());
    }
    if (info.size != items[i].size) {
      cleanup();
      return Status::Error(name(i) + ": size mismatch: the manifest says " +
                           std::to_string(items[i].size) + " bytes, storage has " +
                           std::to_string(info.size));
    }
    const mode_t mode = items[i].mode != 0 ? static_cast<mode_t>(items[i].mode & 0777) : 0644;
    const mode_t dir_mode = 0700 | ((mode & 0040) ? 0050 : 0) | ((mode & 0004) ? 0005 : 0);
    if (Status d = MakeDirs(ParentDir(items[i].local_path), dir_mode); !d.ok()) {
      cleanup();
      return d;
    }
    temps[i] = items[i].local_path + ".autopar-tmp";
    fds[i] = ::open(temps[i].c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
    // The saved mode exactly (open's mode passes through the umask).
    if (fds[i] >= 0) (void)::fchmod(fds[i], mode);
    if (fds[i] < 0 || ::ftruncate(fds[i], static_cast<off_t>(items[i].size)) != 0) {
      Status e = Status::Error(Errno(temps[i]));
      cleanup();
      return e;
    }
    total += items[i].size;
  }

  struct Task {
    size_t item;
    uint64_t offset;
    uint64_t length;
  };
  std::vector<Task> tasks;
  for (size_t i = 0; i < items.size(); ++i) {
    for (uint64_t off = 0; off < items[i].size; off += part_size) {
      tasks.push_back({i, off, std::min(part_size, items[i].size - off)});
    }
  }
  FirstError error;
  Progress progress(options, total);
  RunPool(
      tasks.size(), options.concurrency, [&] { return error.failed() || Cancelled(options); },
      [&](size_t t, size_t) {
        Retrier local(options);
        const Task& task = tasks[t];
        int fd = fds[task.item];
        bool write_failed = false;
        uint64_t received = 0;
        StoreStatus last;
        Status s = local.Run(
            [&] {
              received = 0;
              StoreStatus st = store.GetRange(items[task.item].key, task.offset, task.length,
                                              [&](uint64_t off, const char* data, size_t size) {
                                                if (off < task.offset ||
                                                    off + size > task.offset + task.length ||
                                                    !WriteFull(fd, data, size, off)) {
                                                  write_failed = true;
                                                  return false;
                                                }
                                                received += size;
                                                return true;
                                              });
              if (st.ok() && received != task.length) {
                return StoreStatus::Retryable("short read: got " + std::to_string(received) +
                                              " of " + std::to_string(task.length) + " bytes");
              }
              return st;
            },
            &last);
        if (write_failed) {
          error.Set(Status::Error(Errno(temps[task.item])));
        } else if (!s.ok()) {
          error.Set(Status::Error(
              name(task.item) + ": bytes " + std::to_string(task.offset) + "+" +
              std::to_string(task.length) + ": " +
              (last.code == StoreStatus::Code::kNotFound ? "object not found" : s.message())));
        } else {
          progress.Add(task.length);
        }
      });
  if (!error.failed() && Cancelled(options)) error.Set(Status::Error("cancelled"));
  if (error.failed()) {
    cleanup();
    return error.status();
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (::fsync(fds[i]) != 0) {
      Status e = Status::Error(Errno(temps[i]));
      cleanup();
      return e;
    }
    if (!items[i].sha256.empty()) {
      auto got = Sha256FileHex(temps[i]);
      if (!got.ok()) {
        cleanup();
        return got.status();
      }
      if (*got != items[i].sha256) {
        cleanup();
        return Status::Error(name(i) + ": SHA-256 mismatch: expected " + items[i].sha256 +
                             ", got " + *got);
      }
    }
  }
  for (size_t i = 0; i < items.size(); ++i) {
    ::close(fds[i]);
    fds[i] = -1;
    if (::rename(temps[i].c_str(), items[i].local_path.c_str()) != 0) {
      Status e = Status::Error(Errno(items[i].local_path));
      cleanup();
      return e;
    }
    temps[i].clear();
    int dfd = ::open(ParentDir(items[i].local_path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  return Status::Ok();
}

Status PutSmallObject(ObjectStore& store, const std::string& key, std::string_view data,
                      const TransferOptions& options) {
  Retrier retrier(options);
  Md5Digest md5 = Md5Of(data);
  Status s = retrier.Run([&] { return store.PutObject(key, data, md5); });
  if (!s.ok()) return Status::Error(store.Describe() + "/" + key + ": " + s.message());
  return s;
}

Result<std::string> GetSmallObject(ObjectStore& store, const std::string& key,
                                   const TransferOptions& options) {
  Retrier retrier(options);
  ObjectInfo info;
  std::string data;
  StoreStatus last;
  Status s = retrier.Run(
      [&] {
        StoreStatus h = store.Head(key, &info);
        if (!h.ok()) return h;
        // What storage reports is not trusted: a store's content is the user's (a sparse
        // terabyte "manifest" must not become an allocation).
        if (info.size > options.max_small_object) {
          return StoreStatus::Fatal(std::to_string(info.size) + " bytes, more than the " +
                                    std::to_string(options.max_small_object) +
                                    " a manifest or record may have");
        }
        data.clear();
        data.reserve(info.size);
        StoreStatus g = store.GetRange(key, 0, info.size, [&](uint64_t, const char* p, size_t n) {
          if (data.size() + n > info.size) return false;
          data.append(p, n);
          return true;
        });
        if (g.ok() && data.size() != info.size) {
          return StoreStatus::Retryable("short read: got " + std::to_string(data.size()) + " of " +
                                        std::to_string(info.size) + " bytes");
        }
        return g;
      },
      &last);
  if (!s.ok()) {
    if (last.code == StoreStatus::Code::kNotFound) {
      return Status::Error(store.Describe() + "/" + key + ": object not found");
    }
    return Status::Error(store.Describe() + "/" + key + ": " + s.message());
  }
  return data;
}

Result<bool> ObjectExists(ObjectStore& store, const std::string& key,
                          const TransferOptions& options) {
  Retrier retrier(options);
  ObjectInfo info;
  StoreStatus last;
  Status s = retrier.Run([&] { return store.Head(key, &info); }, &last);
  if (s.ok()) return true;
  if (last.code == StoreStatus::Code::kNotFound) return false;
  return Status::Error(store.Describe() + "/" + key + ": " + s.message());
}

Result<std::vector<ObjectInfo>> ListObjects(ObjectStore& store, const std::string& prefix,
                                            const TransferOptions& options) {
  Retrier retrier(options);
  std::vector<ObjectInfo> objects;
  Status s = retrier.Run([&] {
    objects.clear();
    return store.List(prefix, &objects);
  });
  if (!s.ok()) return Status::Error(store.Describe() + "/" + prefix + ": listing: " + s.message());
  return objects;
}

Result<size_t> DeletePrefix(ObjectStore& store, const std::string& prefix,
                            const TransferOptions& options) {
  auto listed = ListObjects(store, prefix, options);
  if (!listed.ok()) return listed.status();
  Retrier retrier(options);
  size_t deleted = 0;
  for (size_t start = 0; start < listed->size(); start += 1000) {
    std::vector<std::string> keys;
    for (size_t i = start; i < std::min(listed->size(), start + 1000); ++i) {
      keys.push_back((*listed)[i].key);
    }
    Status s = retrier.Run([&] { return store.Delete(keys); });
    if (!s.ok()) {
      return Status::Error(store.Describe() + "/" + prefix + ": deleting: " + s.message());
    }
    deleted += keys.size();
  }
  return deleted;
}

}  // namespace autopar
