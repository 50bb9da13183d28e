// The transfer engine over ObjectStore (storage.h): policy lives here, single requests in the
// backends, local files and threads in the TransferEnv (transfer_env.h).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "core/ckpt/storage.h"
#include "core/ckpt/transfer_env.h"

namespace autopar {
namespace {

std::string Errno(const std::string& path) { return path + ": " + std::strerror(errno); }

// Retries one request with the options' backoff. One per thread (Backoff is thread-compatible).
class Retrier {
 public:
  explicit Retrier(const TransferOptions& o) : Retrier(o, o.backoff) {}
  Retrier(const TransferOptions& o, const BackoffPolicy& policy)
      : options_(o), backoff_(policy, o.uniform ? o.uniform : DefaultUniform()) {
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

// Serialised progress reporting across workers. With `done` (what earlier runs did), it is told
// at once.
class Progress {
 public:
  Progress(const TransferOptions& o, uint64_t total, std::optional<uint64_t> done = std::nullopt)
      : fn_(o.progress), total_(total), done_(done.value_or(0)) {
    if (fn_ && done) fn_(done_, total_);
  }
  void Add(uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = std::min(total_, done_ + bytes);  // a part sent again (its upload lost) counts once
    if (fn_) fn_(done_, total_);
  }

 private:
  std::mutex mu_;
  const std::function<void(uint64_t, uint64_t)>& fn_;
  uint64_t total_;
  uint64_t done_ = 0;
};

// The first error wins; later ones are dropped. A local one (a file missing, changed or
// unreadable) is told apart from the rest.
class FirstError {
 public:
  void Set(Status s, bool local = false) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.load()) {
      status_ = std::move(s);
      local_ = local;
      failed_ = true;
    }
  }
  void SetLocal(Status s) { Set(std::move(s), true); }
  // Set, then the first error (this one, or one before it).
  Status Fail(Status s, bool local = false) {
    Set(std::move(s), local);
    return status();
  }
  Status FailLocal(Status s) { return Fail(std::move(s), true); }
  bool failed() const { return failed_.load(); }
  bool local() {
    std::lock_guard<std::mutex> lock(mu_);
    return local_;
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

 private:
  std::mutex mu_;
  std::atomic<bool> failed_{false};
  bool local_ = false;
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

// The parts' MD5s when every part's is known (the multipart ETag can be checked then).
std::optional<std::vector<Md5Digest>> PartMd5s(const std::vector<std::string>& hex) {
  std::vector<Md5Digest> md5s;
  for (const auto& h : hex) {
    if (!IsLowerHex(h, 32)) return std::nullopt;
    Md5Digest d{};
    for (size_t b = 0; b < d.size(); ++b) {
      d[b] = static_cast<uint8_t>(std::stoi(h.substr(2 * b, 2), nullptr, 16));
    }
    md5s.push_back(d);
  }
  return md5s;
}

// A completion of an upload that earlier runs recorded: a few attempts only, then the file
// starts over (its upload id may be unusable: some stores answer a completed or expired upload
// with errors other than NoSuchUpload).
BackoffPolicy FewAttempts(int first_ms, int max_ms, int attempts) {
  return BackoffPolicy{std::chrono::milliseconds(first_ms), std::chrono::milliseconds(max_ms), 2.0,
                       attempts, std::chrono::milliseconds(10 * max_ms)};
}

// One UploadFiles call: its files, their parts and what each part's request answered, resumed
// from what earlier runs recorded (UploadItem::resume) and recorded as it goes (options.log).
// Whatever ends it leaves no file open, and no multipart upload open unless it is kept for the
// next run (a log, and a storage failure or a cancellation).
class Upload {
 public:
  Upload(ObjectStore& store, const std::vector<UploadItem>& items, const TransferOptions& o)
      : store_(store),
        items_(items),
        options_(o),
        env_(o.env ? o.env : DefaultTransferEnv()),
        part_size_(std::max<uint64_t>(o.part_size, 1)),
        files_(items.size()),
        retrier_(o) {
    // Held from the start: a run that fails before planning its parts aborts or keeps them too.
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].resume.uploaded) files_[i].upload_id = items[i].resume.upload_id;
    }
  }
  ~Upload() {
    if (!keep_uploads_) AbortAll();
    for (auto& f : files_) {
      if (f.fd >= 0) env_->Close(f.fd);
    }
  }

  Result<std::vector<UploadResult>> Run(UploadFailure* failure) {
    Status s = Passes();
    if (!s.ok()) {
      const bool local = error_.local();
      if (failure) failure->local = local;
      keep_uploads_ = options_.log != nullptr && !local;
      return s;
    }
    std::vector<UploadResult> results(items_.size());
    for (size_t i = 0; i < files_.size(); ++i) {
      const File& f = files_[i];
      results[i] = {items_[i].key, f.size, f.sha256, f.etag, f.parts, f.mode};
    }
    return results;
  }

 private:
  struct File {
    int fd = -1;
    uint64_t size = 0;
    uint32_t mode = 0;
    int parts = 0;      // 0: single PUT
    bool done = false;  // the object is complete (sent by this run or an earlier one)
    std::string upload_id;
    std::vector<std::string> etags;  // by part; "" until sent
    std::vector<std::string> md5s;   // by part, hex; "" when unknown
    bool resumed_all = false;        // an earlier run sent every part
    std::string lost;                // why its multipart upload must start over ("" if not)
    std::string sha256;
    std::string etag;
  };
  struct Task {
    size_t file;
    int part;  // 0-based; single PUTs have part 0 and File::parts == 0
  };

  std::string Where(size_t i) const {
    return items_[i].local_path + " -> " + store_.Describe() + "/" + items_[i].key;
  }

  Status Passes() {
    if (Status s = Open(); !s.ok()) return s;
    PlanParts();
    progress_ = std::make_unique<Progress>(options_, total_, AlreadySent());
    // A second pass only starts over the files whose multipart upload the store lost.
    for (int pass = 0; pass < 2; ++pass) {
      if (Status s = StartMultiparts(); !s.ok()) return s;
      if (Status s = SendParts(pass == 0); !s.ok()) return s;
      bool again = false;
      for (size_t i = 0; i < files_.size(); ++i) {
        if (files_[i].done || files_[i].parts == 0) continue;
        if (Status s = Complete(i, pass, &again); !s.ok()) return s;
      }
      if (!again) break;
    }
    return Status::Ok();
  }

  Status Open() {
    for (size_t i = 0; i < items_.size(); ++i) {
      File& f = files_[i];
      if (Status s = env_->OpenForRead(items_[i].local_path, &f.fd, &f.size, &f.mode); !s.ok()) {
        return error_.FailLocal(std::move(s));
      }
      if (items_[i].size >= 0 && f.size != static_cast<uint64_t>(items_[i].size)) {
        return error_.FailLocal(Status::Error(items_[i].local_path + ": " + std::to_string(f.size) +
                                             " bytes, expected " + std::to_string(items_[i].size) +
                                             " (changed after the commit?)"));
      }
      total_ += f.size;
    }
    return Status::Ok();
  }

  // Which files go as multipart uploads, in how many parts, and what earlier runs sent.
  void PlanParts() {
    uint64_t threshold = part_size_;
    if (store_.ReadsFiles() && options_.multipart_threshold > 0) {
      threshold = std::max(options_.multipart_threshold, part_size_);
    } else if (store_.ReadsFiles()) {
      size_t large = 0;
      for (const auto& f : files_) large += f.size > part_size_ ? 1 : 0;
      threshold = AutoMultipartThreshold(large, options_.concurrency, part_size_);
    }
    for (size_t i = 0; i < files_.size(); ++i) {
      File& f = files_[i];
      const UploadProgress& r = items_[i].resume;
      f.sha256 = r.sha256;
      if (r.uploaded) {
        f.done = true;
        f.etag = r.etag;
        continue;
      }
      if (f.size <= threshold && r.upload_id.empty()) continue;
      f.parts = std::max(1, static_cast<int>((f.size + part_size_ - 1) / part_size_));
      f.etags.assign(static_cast<size_t>(f.parts), "");
      f.md5s.assign(static_cast<size_t>(f.parts), "");
      f.upload_id = r.upload_id;
      if (f.upload_id.empty()) continue;
      int sent = 0;
      for (const auto& p : r.parts) {
        if (p.part < 1 || p.part > f.parts || p.etag.empty()) continue;
        sent += f.etags[static_cast<size_t>(p.part - 1)].empty() ? 1 : 0;
        f.etags[static_cast<size_t>(p.part - 1)] = p.etag;
        f.md5s[static_cast<size_t>(p.part - 1)] = p.md5_hex;
      }
      f.resumed_all = sent == f.parts;
    }
  }

  uint64_t AlreadySent() const {
    uint64_t sent = 0;
    for (const auto& f : files_) {
      if (f.done) {
        sent += f.size;
        continue;
      }
      for (int p = 0; p < f.parts; ++p) {
        if (!f.etags[static_cast<size_t>(p)].empty()) sent += PartLength({0, p}, f);
      }
    }
    return sent;
  }

  Status StartMultiparts() {
    for (size_t i = 0; i < files_.size(); ++i) {
      File& f = files_[i];
      if (f.done || f.parts == 0 || !f.upload_id.empty()) continue;
      std::string id;
      Status s = retrier_.Run([&] { return store_.CreateUpload(items_[i].key, &id); });
      if (!s.ok()) return error_.Fail(Status::Error(Where(i) + ": starting multipart upload: " + s.message()));
      f.upload_id = id;
      if (Status l = Record([&](UploadLog& log) { return log.MultipartStarted(i, id); }); !l.ok()) return l;
    }
    return Status::Ok();
  }

  // What is left to send of every file on `concurrency` workers, with the SHA-256s read beside
  // them (`hash`: the first pass).
  Status SendParts(bool hash) {
    std::vector<Task> tasks;
    for (size_t i = 0; i < files_.size(); ++i) {
      const File& f = files_[i];
      if (f.done) continue;
      if (f.parts == 0) tasks.push_back({i, 0});
      for (int p = 0; p < f.parts; ++p) {
        if (f.etags[static_cast<size_t>(p)].empty()) tasks.push_back({i, p});
      }
    }
    hash = hash && options_.compute_sha256;
    std::atomic<bool> hashing_done{!hash};
    const size_t workers = PoolSize(tasks.size(), options_.concurrency);
    // One part buffer per worker, allocated on first use and never zero-filled: a fresh buffer per
    // part costs a page fault per 4 KiB (measured: more system time than the upload itself).
    buffers_.resize(std::max(buffers_.size(), workers));
    TaskQueue queue(tasks.size(), [&] { return error_.failed() || Cancelled(options_); });
    auto send = [&](size_t id) {
      queue.Work(id, [&](size_t t, size_t worker) {
        if (SendPart(tasks[t], worker)) progress_->Add(PartLength(tasks[t], files_[tasks[t].file]));
      });
    };
    if (hash) {
      env_->RunConcurrently(2, [&](size_t id) {
        if (id == 0) {
          env_->RunWorkers(workers, send);
        } else {
          hashing_done = HashFiles();
        }
      });
    } else {
      env_->RunWorkers(workers, send);
    }
    if (!error_.failed() && (Cancelled(options_) || !hashing_done)) error_.Set(Status::Error("cancelled"));
    return error_.failed() ? error_.status() : Status::Ok();
  }

  // Reads the files not hashed yet, in order, while the parts go out; false when stopped.
  bool HashFiles() {
    std::string buf(4 << 20, '\0');
    for (size_t i = 0; i < files_.size(); ++i) {
      if (error_.failed() || Cancelled(options_)) return false;
      if (!files_[i].sha256.empty()) continue;
      Sha256 h;
      for (uint64_t off = 0; off < files_[i].size;) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), files_[i].size - off));
        if (!env_->ReadAt(files_[i].fd, buf.data(), n, off)) {
          error_.SetLocal(Status::Error(Errno(items_[i].local_path)));
          return false;
        }
        h.Update(buf.data(), n);
        off += n;
      }
      files_[i].sha256 = h.FinishHex();
      const std::string sha = files_[i].sha256;
      if (!Record([&](UploadLog& log) { return log.Hashed(i, sha); }).ok()) return false;
    }
    return true;
  }

  size_t PartLength(const Task& task, const File& f) const {
    const uint64_t offset = static_cast<uint64_t>(task.part) * part_size_;
    return static_cast<size_t>(f.parts == 0 ? f.size : std::min<uint64_t>(part_size_, f.size - offset));
  }

  // Sends one part (or a whole small file); false when it was not sent (error_ set, or its
  // multipart upload lost: the file starts over in the next pass).
  bool SendPart(const Task& task, size_t worker) {
    File& f = files_[task.file];
    if (f.parts > 0 && Lost(f)) return false;
    Retrier local(options_);
    StoreStatus last;
    std::string etag, md5_hex;
    bool unreadable = false;  // error_ set already
    Status s = store_.ReadsFiles() ? SendFromFile(task, local, &last, &etag, &md5_hex)
                                   : SendFromBuffer(task, worker, local, &last, &etag, &md5_hex, &unreadable);
    if (unreadable) return false;
    if (!s.ok() && f.parts > 0 && last.code == StoreStatus::Code::kNotFound) {
      std::lock_guard<std::mutex> lock(lost_mu_);
      if (f.lost.empty()) f.lost = s.message();
      return false;
    }
    if (!s.ok()) {
      std::string what = f.parts == 0 ? "" : "part " + std::to_string(task.part + 1) + ": ";
      error_.Set(Status::Error(Where(task.file) + ": " + what + s.message()));
      return false;
    }
    if (f.parts == 0) return FinishSingle(task.file, md5_hex);
    f.etags[static_cast<size_t>(task.part)] = etag;
    f.md5s[static_cast<size_t>(task.part)] = md5_hex;
    const SentPart sent{task.part + 1, etag, md5_hex};
    return Record([&](UploadLog& log) { return log.PartSent(task.file, sent); }).ok();
  }

  bool Lost(File& f) {
    std::lock_guard<std::mutex> lock(lost_mu_);
    return !f.lost.empty();
  }

  // A store that reads the file itself (no user-space copy). It checks each part's MD5 against
  // its ETag, which S3 makes that MD5: kept for the multipart ETag check.
  Status SendFromFile(const Task& task, Retrier& retrier, StoreStatus* last, std::string* etag,
                      std::string* md5_hex) {
    File& f = files_[task.file];
    const std::string& key = items_[task.file].key;
    const uint64_t offset = static_cast<uint64_t>(task.part) * part_size_;
    const size_t len = PartLength(task, f);
    if (f.parts == 0) return retrier.Run([&] { return store_.PutObjectFromFile(key, f.fd, len); }, last);
    Status s = retrier.Run(
        [&] { return store_.UploadPartFromFile(key, f.upload_id, task.part + 1, offset, f.fd, len, etag); },
        last);
    if (IsLowerHex(*etag, 32)) *md5_hex = *etag;
    return s;
  }

  // A store that takes the bytes: read into the worker's buffer, MD5 where the store checks it.
  // A file that cannot be read sets error_ (a local failure) and `*unreadable`.
  Status SendFromBuffer(const Task& task, size_t worker, Retrier& retrier, StoreStatus* last,
                        std::string* etag, std::string* md5_hex, bool* unreadable) {
    File& f = files_[task.file];
    const std::string& key = items_[task.file].key;
    const uint64_t offset = static_cast<uint64_t>(task.part) * part_size_;
    const size_t len = PartLength(task, f);
    if (!buffers_[worker]) buffers_[worker].reset(new char[static_cast<size_t>(std::min(part_size_, total_))]);
    char* data = buffers_[worker].get();
    if (!env_->ReadAt(f.fd, data, len, offset)) {
      error_.SetLocal(Status::Error(Errno(items_[task.file].local_path) + " (file changed while uploading?)"));
      *unreadable = true;
      return Status::Ok();
    }
    std::string_view buf(data, len);
    Md5Digest md5{};
    if (store_.UsesMd5()) {
      md5 = Md5Of(buf);
      *md5_hex = HexEncode(md5);
    }
    if (f.parts == 0) return retrier.Run([&] { return store_.PutObject(key, buf, md5); }, last);
    return retrier.Run([&] { return store_.UploadPart(key, f.upload_id, task.part + 1, offset, buf, md5, etag); },
                       last);
  }

  // A whole file sent in one PUT: checks what storage holds (its size; its ETag against the MD5
  // sent, where the store makes one from the other) and records it.
  bool FinishSingle(size_t i, const std::string& md5_hex) {
    File& f = files_[i];
    Retrier local(options_);
    ObjectInfo info;
    Status s = local.Run([&] { return store_.Head(items_[i].key, &info); });
    if (!s.ok()) {
      error_.Set(Status::Error(Where(i) + ": checking the uploaded object: " + s.message()));
      return false;
    }
    if (Status c = CheckSize(i, info); !c.ok()) {
      error_.Set(std::move(c));
      return false;
    }
    if (!store_.ReadsFiles() && !md5_hex.empty() && IsLowerHex(info.etag, 32) && info.etag != md5_hex) {
      error_.Set(Status::Error(Where(i) + ": ETag " + info.etag + " does not match the file's MD5 " + md5_hex));
      return false;
    }
    f.etag = info.etag;
    f.done = true;
    return Record([&](UploadLog& log) { return log.Uploaded(i, info.etag); }).ok();
  }

  Status CheckSize(size_t i, const ObjectInfo& info) const {
    if (info.size == files_[i].size) return Status::Ok();
    return Status::Error(Where(i) + ": uploaded object has " + std::to_string(info.size) +
                         " bytes, the file " + std::to_string(files_[i].size));
  }

  // Completes file i's multipart upload, or finds it completed by an earlier run, and checks the
  // object storage now holds; an upload the store lost starts over (`*again`), once.
  Status Complete(size_t i, int pass, bool* again) {
    File& f = files_[i];
    const std::optional<std::vector<Md5Digest>> md5s = PartMd5s(f.md5s);
    const std::optional<std::string> expected =
        md5s ? std::optional<std::string>(MultipartEtag(*md5s)) : std::nullopt;
    std::string etag;
    bool complete = f.lost.empty() && f.resumed_all && SameObject(i, expected, FewAttempts(100, 1000, 3), &etag);
    if (!complete && f.lost.empty()) {
      StoreStatus last;
      Retrier retrier = f.resumed_all ? Retrier(options_, FewAttempts(200, 2000, 4)) : Retrier(options_);
      Status s = retrier.Run([&] { return store_.CompleteUpload(items_[i].key, f.upload_id, f.etags, &etag); },
                             &last);
      if (s.ok()) {
        complete = true;
      } else if (last.code == StoreStatus::Code::kNotFound) {
        // A retried Complete whose first try succeeded but whose answer was lost, or a run
        // killed after completing it: the upload is gone because the object exists. Taken only
        // if it is this file's object.
        complete = SameObject(i, expected, options_.backoff, &etag);
        if (!complete) f.lost = s.message();
      } else if (f.resumed_all && !Cancelled(options_)) {
        f.lost = s.message();  // the recorded upload id is unusable
      } else {
        return error_.Fail(Status::Error(Where(i) + ": completing multipart upload: " + s.message()));
      }
    }
    if (!complete) {
      if (pass > 0) return error_.Fail(Status::Error(Where(i) + ": multipart upload lost twice: " + f.lost));
      if (Status s = StartOver(i); !s.ok()) return s;
      *again = true;
      return Status::Ok();
    }
    f.upload_id.clear();
    if (expected && IsMultipartEtag(etag) && etag != *expected) {
      return error_.Fail(Status::Error(Where(i) + ": multipart ETag " + etag + " does not match the " +
                                      "uploaded parts (" + *expected + ")"));
    }
    ObjectInfo info;
    Status s = retrier_.Run([&] { return store_.Head(items_[i].key, &info); });
    if (!s.ok()) return error_.Fail(Status::Error(Where(i) + ": checking the uploaded object: " + s.message()));
    if (Status c = CheckSize(i, info); !c.ok()) return error_.Fail(std::move(c));
    f.etag = etag.empty() ? info.etag : etag;
    f.done = true;
    const std::string recorded = f.etag;
    return Record([&](UploadLog& log) { return log.Uploaded(i, recorded); });
  }

  // Whether storage holds file i's object already: its size, and its ETag where the parts' MD5s
  // tell what it must be.
  bool SameObject(size_t i, const std::optional<std::string>& expected, const BackoffPolicy& policy,
                  std::string* etag) {
    ObjectInfo info;
    Retrier retrier(options_, policy);
    if (!retrier.Run([&] { return store_.Head(items_[i].key, &info); }).ok()) return false;
    if (info.size != files_[i].size || (expected && IsMultipartEtag(info.etag) && info.etag != *expected)) {
      return false;
    }
    *etag = info.etag;
    return true;
  }

  // File i's multipart upload is gone: sent again from its first part in the next pass.
  Status StartOver(size_t i) {
    File& f = files_[i];
    f.upload_id.clear();
    f.etags.assign(f.etags.size(), "");
    f.md5s.assign(f.md5s.size(), "");
    f.resumed_all = false;
    f.lost.clear();
    return Record([&](UploadLog& log) { return log.MultipartDropped(i); });
  }

  // Records through the options' log, if any; a failure fails the upload.
  Status Record(const std::function<Status(UploadLog&)>& write) {
    if (!options_.log) return Status::Ok();
    Status s = write(*options_.log);
    if (!s.ok()) error_.Set(s);
    return s;
  }

  void AbortAll() {
    for (size_t i = 0; i < files_.size(); ++i) {
      if (files_[i].upload_id.empty() || files_[i].done) continue;
      // Best effort: a failed abort leaves an incomplete upload that the bucket's lifecycle rule
      // (or the next retention pass) removes; it never becomes a visible object.
      (void)store_.AbortUpload(items_[i].key, files_[i].upload_id);
      files_[i].upload_id.clear();
      if (options_.log) (void)options_.log->MultipartDropped(i);
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
  std::unique_ptr<Progress> progress_;
  std::mutex lost_mu_;
  bool keep_uploads_ = false;
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
                                              const TransferOptions& options, UploadFailure* failure) {
  return Upload(store, items, options).Run(failure);
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
