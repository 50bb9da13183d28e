// The transfer engine over ObjectStore (storage.h): policy lives here, single requests in the
// backends, local files and threads in the TransferEnv (transfer_env.h).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/ckpt/storage.h"
#include "core/ckpt/transfer_env.h"

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

// How many workers share `n` tasks at `concurrency`.
size_t PoolSize(size_t n, int concurrency) {
  return std::min<size_t>(n, static_cast<size_t>(std::max(1, concurrency)));
}

// Takes tasks 0..n-1 in turn for worker `id` (of the env's concurrent bodies) until they run out
// or `stop()` is true.
class TaskQueue {
 public:
  TaskQueue(size_t n, std::function<bool()> stop) : n_(n), stop_(std::move(stop)) {}
  void Work(size_t id, const std::function<void(size_t task, size_t worker)>& work) {
    for (;;) {
      if (stop_()) return;
      size_t i = next_.fetch_add(1);
      if (i >= n_) return;
      work(i, id);
    }
  }

 private:
  const size_t n_;
  const std::function<bool()> stop_;
  std::atomic<size_t> next_{0};
};

bool IsMultipartEtag(const std::string& etag) {
  size_t dash = etag.find('-');
  return dash == 32 && IsLowerHex(etag.substr(0, 32), 32) && dash + 1 < etag.size();
}

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

namespace {

// One UploadFiles call: its files, their parts and what each part's request answered. Whatever
// ends it early (an error, a cancellation) leaves no multipart upload open and no file open.
class Upload {
 public:
  Upload(ObjectStore& store, const std::vector<UploadItem>& items, const TransferOptions& o)
      : store_(store),
        items_(items),
        options_(o),
        env_(o.env ? o.env : DefaultTransferEnv()),
        part_size_(std::max<uint64_t>(o.part_size, 1)),
        files_(items.size()),
        retrier_(o) {}
  ~Upload() {
    AbortAll();
    for (auto& f : files_) {
      if (f.fd >= 0) env_->Close(f.fd);
    }
  }

  Result<std::vector<UploadResult>> Run() {
    if (Status s = Open(); !s.ok()) return s;
    PlanParts();
    if (Status s = StartMultiparts(); !s.ok()) return s;
    if (Status s = SendParts(); !s.ok()) return s;
    std::vector<UploadResult> results(items_.size());
    for (size_t i = 0; i < files_.size(); ++i) {
      if (Status s = Finish(i, &results[i]); !s.ok()) return s;
    }
    return results;
  }

 private:
  struct File {
    int fd = -1;
    uint64_t size = 0;
    int parts = 0;  // 0: single PUT
    std::string upload_id;
    std::vector<std::string> etags;
    std::vector<Md5Digest> md5s;
    std::string sha256;
  };
  struct Task {
    size_t file;
    int part;  // 0-based; single PUTs have part 0 and File::parts == 0
  };

  std::string Where(size_t i) const {
    return items_[i].local_path + " -> " + store_.Describe() + "/" + items_[i].key;
  }

  Status Open() {
    for (size_t i = 0; i < items_.size(); ++i) {
      if (Status s = env_->OpenForRead(items_[i].local_path, &files_[i].fd, &files_[i].size); !s.ok()) {
        return s;
      }
      total_ += files_[i].size;
    }
    return Status::Ok();
  }

  // Which files go as multipart uploads, and in how many parts.
  void PlanParts() {
    uint64_t threshold = part_size_;
    if (store_.ReadsFiles() && options_.multipart_threshold > 0) {
      threshold = std::max(options_.multipart_threshold, part_size_);
    } else if (store_.ReadsFiles()) {
      size_t large = 0;
      for (const auto& f : files_) large += f.size > part_size_ ? 1 : 0;
      threshold = AutoMultipartThreshold(large, options_.concurrency, part_size_);
    }
    for (auto& f : files_) {
      if (f.size > threshold) {
        f.parts = static_cast<int>((f.size + part_size_ - 1) / part_size_);
        f.etags.resize(static_cast<size_t>(f.parts));
        f.md5s.resize(static_cast<size_t>(f.parts));
      }
    }
  }

  Status StartMultiparts() {
    for (size_t i = 0; i < files_.size(); ++i) {
      if (files_[i].parts == 0) continue;
      Status s = retrier_.Run([&] { return store_.CreateUpload(items_[i].key, &files_[i].upload_id); });
      if (!s.ok()) return Status::Error(Where(i) + ": starting multipart upload: " + s.message());
    }
    return Status::Ok();
  }

  // Every part of every file on `concurrency` workers, with the SHA-256s read beside them.
  Status SendParts() {
    std::vector<Task> tasks;
    for (size_t i = 0; i < files_.size(); ++i) {
      for (int p = 0; p < std::max(1, files_[i].parts); ++p) tasks.push_back({i, p});
    }
    Progress progress(options_, total_);
    std::atomic<bool> hashing_done{!options_.compute_sha256};
    const size_t workers = PoolSize(tasks.size(), options_.concurrency);
    // One part buffer per worker, allocated on first use and never zero-filled: a fresh buffer per
    // part costs a page fault per 4 KiB (measured: more system time than the upload itself).
    buffers_.resize(workers);
    TaskQueue queue(tasks.size(), [&] { return error_.failed() || Cancelled(options_); });
    env_->RunConcurrently(workers + (options_.compute_sha256 ? 1 : 0), [&](size_t id) {
      if (id == workers) {
        hashing_done = HashFiles();
        return;
      }
      queue.Work(id, [&](size_t t, size_t worker) {
        if (SendPart(tasks[t], worker)) progress.Add(PartLength(tasks[t]));
      });
    });
    if (!error_.failed() && Cancelled(options_)) error_.Set(Status::Error("cancelled"));
    if (!error_.failed() && !hashing_done) error_.Set(Status::Error("cancelled"));
    return error_.failed() ? error_.status() : Status::Ok();
  }

  // Reads the files in order for their SHA-256 while the parts go out; false when stopped.
  bool HashFiles() {
    std::string buf(4 << 20, '\0');
    for (size_t i = 0; i < files_.size(); ++i) {
      if (error_.failed() || Cancelled(options_)) return false;
      Sha256 h;
      for (uint64_t off = 0; off < files_[i].size;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), files_[i].size - off));
        if (!env_->ReadAt(files_[i].fd, buf.data(), n, off)) {
          error_.Set(Status::Error(Errno(items_[i].local_path)));
          return false;
        }
        h.Update(buf.data(), n);
        off += n;
      }
      files_[i].sha256 = h.FinishHex();
    }
    return true;
  }

  size_t PartLength(const Task& task) const {
    const File& f = files_[task.file];
    const uint64_t offset = static_cast<uint64_t>(task.part) * part_size_;
    return static_cast<size_t>(f.parts == 0 ? f.size : std::min<uint64_t>(part_size_, f.size - offset));
  }

  // Sends one part (or a whole small file); false with error_ set when it failed for good.
  bool SendPart(const Task& task, size_t worker) {
    File& f = files_[task.file];
    bool unreadable = false;  // error_ set already
    Status s = store_.ReadsFiles() ? SendFromFile(task) : SendFromBuffer(task, worker, &unreadable);
    if (unreadable) return false;
    if (!s.ok()) {
      std::string what = f.parts == 0 ? "" : "part " + std::to_string(task.part + 1) + ": ";
      error_.Set(Status::Error(Where(task.file) + ": " + what + s.message()));
      return false;
    }
    return true;
  }

  // A store that reads the file itself (no user-space copy).
  Status SendFromFile(const Task& task) {
    Retrier local(options_);
    File& f = files_[task.file];
    const std::string& key = items_[task.file].key;
    const uint64_t offset = static_cast<uint64_t>(task.part) * part_size_;
    const size_t len = PartLength(task);
    if (f.parts == 0) return local.Run([&] { return store_.PutObjectFromFile(key, f.fd, len); });
    std::string etag;
    Status s = local.Run([&] {
      return store_.UploadPartFromFile(key, f.upload_id, task.part + 1, offset, f.fd, len, &etag);
    });
    f.etags[static_cast<size_t>(task.part)] = etag;
    return s;
  }

  // A store that takes the bytes: read into the worker's buffer, MD5 where the store checks it.
  // A file that cannot be read sets error_ and `*unreadable`.
  Status SendFromBuffer(const Task& task, size_t worker, bool* unreadable) {
    Retrier local(options_);
    File& f = files_[task.file];
    const std::string& key = items_[task.file].key;
    const uint64_t offset = static_cast<uint64_t>(task.part) * part_size_;
    const size_t len = PartLength(task);
    if (!buffers_[worker]) buffers_[worker].reset(new char[static_cast<size_t>(std::min(part_size_, total_))]);
    char* data = buffers_[worker].get();
    if (!env_->ReadAt(f.fd, data, len, offset)) {
      error_.Set(Status::Error(Errno(items_[task.file].local_path) + " (file changed while uploading?)"));
      *unreadable = true;
      return Status::Ok();
    }
    std::string_view buf(data, len);
    Md5Digest md5{};
    if (store_.UsesMd5()) md5 = Md5Of(buf);
    if (f.parts == 0) return local.Run([&] { return store_.PutObject(key, buf, md5); });
    std::string etag;
    Status s = local.Run([&] { return store_.UploadPart(key, f.upload_id, task.part + 1, offset, buf, md5, &etag); });
    f.etags[static_cast<size_t>(task.part)] = etag;
    f.md5s[static_cast<size_t>(task.part)] = md5;
    return s;
  }

  // Completes file i's multipart upload and checks the object storage now holds (its ETag where
  // it has S3's multipart form, its size).
  Status Finish(size_t i, UploadResult* r) {
    File& f = files_[i];
    r->key = items_[i].key;
    r->size = f.size;
    r->sha256 = f.sha256;
    r->parts = f.parts;
    if (f.parts > 0) {
      if (Status s = Complete(i, r); !s.ok()) return s;
    }
    ObjectInfo info;
    Status s = retrier_.Run([&] { return store_.Head(items_[i].key, &info); });
    if (!s.ok()) return Status::Error(Where(i) + ": checking the uploaded object: " + s.message());
    if (info.size != f.size) {
      return Status::Error(Where(i) + ": uploaded object has " + std::to_string(info.size) +
                           " bytes, the file " + std::to_string(f.size));
    }
    if (r->etag.empty()) r->etag = info.etag;
    return Status::Ok();
  }

  Status Complete(size_t i, UploadResult* r) {
    File& f = files_[i];
    StoreStatus last;
    Status s = retrier_.Run([&] { return store_.CompleteUpload(items_[i].key, f.upload_id, f.etags, &r->etag); },
                            &last);
    if (!s.ok() && last.code == StoreStatus::Code::kNotFound) {
      // A retried Complete whose first try succeeded but whose answer was lost: the upload is
      // gone because the object exists. The Head that follows checks it.
      s = Status::Ok();
      r->etag.clear();
    }
    if (!s.ok()) return Status::Error(Where(i) + ": completing multipart upload: " + s.message());
    f.upload_id.clear();
    const bool use_md5 = store_.UsesMd5() && !store_.ReadsFiles();  // a file-reading store hashes itself
    std::string expected = MultipartEtag(f.md5s);
    if (use_md5 && IsMultipartEtag(r->etag) && r->etag != expected) {
      return Status::Error(Where(i) + ": multipart ETag " + r->etag + " does not match the " +
                           "uploaded parts (" + expected + ")");
    }
    return Status::Ok();
  }

  void AbortAll() {
    for (size_t i = 0; i < files_.size(); ++i) {
      if (files_[i].upload_id.empty()) continue;
      // Best effort: a failed abort leaves an incomplete upload that the bucket's lifecycle rule
      // (or the next retention pass) removes; it never becomes a visible object.
      (void)store_.AbortUpload(items_[i].key, files_[i].upload_id);
      files_[i].upload_id.clear();
    }
  }

  ObjectStore& store_;
  const std::vector<UploadItem>& items_;
  const TransferOptions& options_;
  TransferEnv* const env_;
  const uint64_t part_size_;
  std::vector<File> files_;
  uint64_t total_ = 0;
  Retrier retrier_;
  FirstError error_;
  std::vector<std::unique_ptr<char[]>> buffers_;
};

// One DownloadFiles call: every object fetched into "<local_path>.autopar-tmp" with parallel
// ranged GETs, checked, then renamed over its path. Whatever ends it early leaves no temporary
// file behind and no file open.
class Download {
 public:
  Download(ObjectStore& store, const std::vector<DownloadItem>& items, const TransferOptions& o)
      : store_(store),
        items_(items),
        options_(o),
        env_(o.env ? o.env : DefaultTransferEnv()),
        part_size_(std::max<uint64_t>(o.part_size, 1)),
        fds_(items.size(), -1),
        temps_(items.size()) {}
  ~Download() {
    for (size_t i = 0; i < items_.size(); ++i) {
      if (fds_[i] >= 0) env_->Close(fds_[i]);
      if (!temps_[i].empty()) env_->Remove(temps_[i]);
    }
  }

  Status Run() {
    for (size_t i = 0; i < items_.size(); ++i) {
      if (Status s = Prepare(i); !s.ok()) return s;
    }
    if (Status s = Fetch(); !s.ok()) return s;
    for (size_t i = 0; i < items_.size(); ++i) {
      if (Status s = Verify(i); !s.ok()) return s;
    }
    for (size_t i = 0; i < items_.size(); ++i) {
      env_->Close(fds_[i]);
      fds_[i] = -1;
      if (!env_->Replace(temps_[i], items_[i].local_path)) return Status::Error(Errno(items_[i].local_path));
      temps_[i].clear();
    }
    return Status::Ok();
  }

 private:
  struct Task {
    size_t item;
    uint64_t offset;
    uint64_t length;
  };

  std::string Name(size_t i) const { return store_.Describe() + "/" + items_[i].key; }

  // Checks the object's size against the manifest and creates its temporary file at that size.
  Status Prepare(size_t i) {
    ObjectInfo info;
    StoreStatus last;
    Retrier retrier(options_);
    Status s = retrier.Run([&] { return store_.Head(items_[i].key, &info); }, &last);
    if (!s.ok()) {
      if (last.code == StoreStatus::Code::kNotFound) return Status::Error(Name(i) + ": object not found");
      return Status::Error(Name(i) + ": " + s.message());
    }
    if (info.size != items_[i].size) {
      return Status::Error(Name(i) + ": size mismatch: the manifest says " + std::to_string(items_[i].size) +
                           " bytes, storage has " + std::to_string(info.size));
    }
    const uint32_t mode = items_[i].mode != 0 ? (items_[i].mode & 0777) : 0644;
    const uint32_t dir_mode = 0700 | ((mode & 0040) ? 0050 : 0) | ((mode & 0004) ? 0005 : 0);
    temps_[i] = items_[i].local_path + ".autopar-tmp";
    if (Status c = env_->CreateSized(temps_[i], mode, dir_mode, items_[i].size, &fds_[i]); !c.ok()) return c;
    total_ += items_[i].size;
    return Status::Ok();
  }

  // Every range of every object on `concurrency` workers.
  Status Fetch() {
    std::vector<Task> tasks;
    for (size_t i = 0; i < items_.size(); ++i) {
      for (uint64_t off = 0; off < items_[i].size; off += part_size_) {
        tasks.push_back({i, off, std::min(part_size_, items_[i].size - off)});
      }
    }
    FirstError error;
    Progress progress(options_, total_);
    TaskQueue queue(tasks.size(), [&] { return error.failed() || Cancelled(options_); });
    env_->RunConcurrently(PoolSize(tasks.size(), options_.concurrency), [&](size_t id) {
      queue.Work(id, [&](size_t t, size_t) {
        Status s = FetchRange(tasks[t]);
        if (s.ok()) {
          progress.Add(tasks[t].length);
        } else {
          error.Set(std::move(s));
        }
      });
    });
    if (!error.failed() && Cancelled(options_)) error.Set(Status::Error("cancelled"));
    return error.failed() ? error.status() : Status::Ok();
  }

  Status FetchRange(const Task& task) {
    Retrier local(options_);
    const int fd = fds_[task.item];
    bool write_failed = false;
    uint64_t received = 0;
    StoreStatus last;
    Status s = local.Run(
        [&] {
          received = 0;
          StoreStatus st = store_.GetRange(
              items_[task.item].key, task.offset, task.length, [&](uint64_t off, const char* data, size_t size) {
                if (off < task.offset || off + size > task.offset + task.length ||
                    !env_->WriteAt(fd, data, size, off)) {
                  write_failed = true;
                  return false;
                }
                received += size;
                return true;
              });
          if (st.ok() && received != task.length) {
            return StoreStatus::Retryable("short read: got " + std::to_string(received) + " of " +
                                          std::to_string(task.length) + " bytes");
          }
          return st;
        },
        &last);
    if (write_failed) return Status::Error(Errno(temps_[task.item]));
    if (s.ok()) return s;
    return Status::Error(Name(task.item) + ": bytes " + std::to_string(task.offset) + "+" +
                         std::to_string(task.length) + ": " +
                         (last.code == StoreStatus::Code::kNotFound ? "object not found" : s.message()));
  }

  // Makes item i's temporary file durable and checks its SHA-256, read back from what was written.
  Status Verify(size_t i) {
    if (!env_->Sync(fds_[i])) return Status::Error(Errno(temps_[i]));
    if (items_[i].sha256.empty()) return Status::Ok();
    std::string buf(std::min<uint64_t>(items_[i].size, 4 << 20), '\0');
    Sha256 h;
    for (uint64_t off = 0; off < items_[i].size;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), items_[i].size - off));
      if (!env_->ReadAt(fds_[i], buf.data(), n, off)) return Status::Error(Errno(temps_[i]));
      h.Update(buf.data(), n);
      off += n;
    }
    const std::string got = h.FinishHex();
    if (got != items_[i].sha256) {
      return Status::Error(Name(i) + ": SHA-256 mismatch: expected " + items_[i].sha256 + ", got " + got);
    }
    return Status::Ok();
  }

  ObjectStore& store_;
  const std::vector<DownloadItem>& items_;
  const TransferOptions& options_;
  TransferEnv* const env_;
  const uint64_t part_size_;
  std::vector<int> fds_;
  std::vector<std::string> temps_;
  uint64_t total_ = 0;
};

}  // namespace

Result<std::vector<UploadResult>> UploadFiles(ObjectStore& store, const std::vector<UploadItem>& items,
                                              const TransferOptions& options) {
  return Upload(store, items, options).Run();
}

Status DownloadFiles(ObjectStore& store, const std::vector<DownloadItem>& items,
                     const TransferOptions& options) {
  return Download(store, items, options).Run();
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
