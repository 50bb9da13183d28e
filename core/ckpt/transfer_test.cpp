// The transfer engine against an in-memory ObjectStore and in-memory local files (MemoryEnv: no
// filesystem, no threads), with failures injected by wrappers; one round trip through the real
// POSIX files and threads at the end.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <algorithm>
#include <atomic>
#include <functional>

#include "core/ckpt/storage.h"
#include "core/ckpt/transfer_env.h"
#include "memory_env_for_test.h"
#include "memory_store_for_test.h"

namespace autopar {
namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 1;
  for (auto& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

class TransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/mem/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    opts_.env = &env_;
    opts_.part_size = 1000;
    mem_.expected_part_size = 1000;
    opts_.concurrency = 4;
    opts_.uniform = [] { return 0.0; };
    opts_.clock.now = [] { return std::chrono::steady_clock::now(); };
    opts_.clock.sleep = [this](std::chrono::milliseconds) { ++sleeps_; };
  }
  std::string Write(const std::string& name, const std::string& data) {
    std::string path = dir_ + "/" + name;
    env_.files[path] = data;
    return path;
  }
  std::string Read(const std::string& path) { return env_.files[path]; }
  bool Exists(const std::string& path) const { return env_.files.count(path) > 0; }
  void TearDown() override { EXPECT_EQ(env_.open_files(), 0u); }
  std::string dir_;
  MemoryEnv env_;
  TransferOptions opts_;
  int sleeps_ = 0;
  MemoryStore mem_;
};

TEST_F(TransferTest, UploadsSinglesAndMultiparts) {
  std::vector<std::string> data = {Pattern(10, 1), Pattern(1000, 2), Pattern(3500, 3), ""};
  std::vector<UploadItem> items;
  for (size_t i = 0; i < data.size(); ++i) {
    items.push_back({Write("f" + std::to_string(i), data[i]), "k/f" + std::to_string(i)});
  }
  uint64_t last_done = 0, last_total = 0;
  int calls = 0;
  opts_.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_GE(done, last_done);
    last_done = done;
    last_total = total;
    ++calls;
  };
  auto r = UploadFiles(mem_, items, opts_);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->size(), 4u);
  for (size_t i = 0; i < data.size(); ++i) {
    EXPECT_EQ(mem_.objects["k/f" + std::to_string(i)], data[i]) << i;
    EXPECT_EQ((*r)[i].sha256, Sha256Hex(data[i])) << i;
    EXPECT_EQ((*r)[i].size, data[i].size());
  }
  EXPECT_EQ((*r)[0].parts, 0);
  EXPECT_EQ((*r)[1].parts, 0);  // exactly one part: a single PUT
  EXPECT_EQ((*r)[2].parts, 4);
  EXPECT_EQ((*r)[2].etag.substr(32), "-4");
  EXPECT_EQ(last_done, 4510u);
  EXPECT_EQ(last_total, 4510u);
  EXPECT_EQ(calls, 8);  // once at the start, then after each of the 7 requests
  EXPECT_TRUE(mem_.uploads.empty());
  EXPECT_EQ(sleeps_, 0);
  EXPECT_EQ(env_.most_workers, 4u);     // 4 part workers
  EXPECT_EQ(env_.most_concurrent, 2u);  // and the SHA-256 reader beside them
}

TEST_F(TransferTest, ThresholdIgnoredForStoresThatNeedBuffers) {
  opts_.multipart_threshold = 1 << 20;  // MemoryStore does not read files: parts stay <= part_size
  std::string data = Pattern(2500, 13);
  auto r = UploadFiles(mem_, {{Write("f", data), "f"}}, opts_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ((*r)[0].parts, 3);
  EXPECT_EQ(mem_.objects["f"], data);
}

TEST_F(TransferTest, AFailedThirdPartIsRetried) {
  FailPart store(&mem_, 3, 2, StoreStatus::Code::kRetryable);
  std::string data = Pattern(5500, 4);
  auto r = UploadFiles(store, {{Write("big", data), "big"}}, opts_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(mem_.objects["big"], data);
  EXPECT_EQ(store.attempts, 3);
  EXPECT_EQ(sleeps_, 2);
  EXPECT_TRUE(mem_.aborted.empty());
}

TEST_F(TransferTest, AFatalPartErrorAbortsTheUpload) {
  FailPart store(&mem_, 3, -1, StoreStatus::Code::kFatal);
  std::string path = Write("big", Pattern(5500, 5));
  auto r = UploadFiles(store, {{path, "job-1/big"}}, opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            path + " -> mem://test/job-1/big: part 3: HTTP 500 InternalError (injected)");
  EXPECT_EQ(store.attempts, 1);
  EXPECT_EQ(mem_.aborted.size(), 1u);
  EXPECT_TRUE(mem_.uploads.empty());
  EXPECT_EQ(mem_.objects.count("job-1/big"), 0u);
}

TEST_F(TransferTest, RetriesRunOutAndAbort) {
  FailPart store(&mem_, 2, -1, StoreStatus::Code::kRetryable);
  opts_.backoff.max_attempts = 3;
  auto r = UploadFiles(store, {{Write("big", Pattern(2500, 6)), "big"}}, opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.message().find("part 2: HTTP 500 InternalError (injected) (gave up after 3 attempts)"),
      std::string::npos)
      << r.message();
  EXPECT_EQ(store.attempts, 3);
  EXPECT_EQ(mem_.aborted.size(), 1u);
  EXPECT_TRUE(mem_.objects.empty());
}

TEST_F(TransferTest, CancelAbortsMultipartUploads) {
  std::atomic<bool> cancel{false};
  opts_.cancel = &cancel;
  opts_.concurrency = 1;
  opts_.progress = [&](uint64_t done, uint64_t) { cancel = done > 0; };  // after the first part
  auto r = UploadFiles(mem_, {{Write("big", Pattern(5000, 7)), "big"}}, opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), "cancelled");
  EXPECT_EQ(mem_.aborted.size(), 1u);
  EXPECT_TRUE(mem_.objects.empty());
}

TEST_F(TransferTest, MissingLocalFileIsNamed) {
  auto r = UploadFiles(mem_, {{dir_ + "/nope", "k"}}, opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), dir_ + "/nope: No such file or directory");
}

class WrongEtag : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;
  StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                             const std::vector<std::string>& part_etags,
                             std::string* etag) override {
    StoreStatus s = ObjectStoreWrapper::CompleteUpload(key, upload_id, part_etags, etag);
    *etag = std::string(32, 'a') + "-2";
    return s;
  }
};

TEST_F(TransferTest, MultipartEtagMismatchIsAnError) {
  WrongEtag store(&mem_);
  auto r = UploadFiles(store, {{Write("big", Pattern(2000, 8)), "big"}}, opts_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("multipart ETag aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-2 does not match"),
            std::string::npos)
      << r.message();
}

// The first Complete succeeds but its answer is "lost" (reported retryable); the retry then gets
// NoSuchUpload, which must be accepted once Head shows the object.
class LostCompleteReply : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;
  StoreStatus CompleteUpload(const std::string& key, const std::string& upload_id,
                             const std::vector<std::string>& part_etags,
                             std::string* etag) override {
    StoreStatus s = ObjectStoreWrapper::CompleteUpload(key, upload_id, part_etags, etag);
    if (++calls == 1) return StoreStatus::Retryable("connection reset");
    return s;
  }
  int calls = 0;
};

TEST_F(TransferTest, LostCompleteReplyIsRecognised) {
  LostCompleteReply store(&mem_);
  std::string data = Pattern(2500, 9);
  auto r = UploadFiles(store, {{Write("big", data), "big"}}, opts_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(store.calls, 2);
  EXPECT_EQ(mem_.objects["big"], data);
}

TEST_F(TransferTest, DownloadsAndVerifies) {
  std::string a = Pattern(4321, 10), b = Pattern(7, 11);
  mem_.objects["s/a"] = a;
  mem_.objects["s/b"] = b;
  mem_.objects["s/empty"] = "";
  uint64_t done = 0;
  opts_.progress = [&](uint64_t d, uint64_t) { done = d; };
  Status s = DownloadFiles(mem_,
                           {{"s/a", dir_ + "/out/deep/a", a.size(), Sha256Hex(a)},
                            {"s/b", dir_ + "/out/b", b.size(), Sha256Hex(b)},
                            {"s/empty", dir_ + "/out/empty", 0, Sha256Hex("")}},
                           opts_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Read(dir_ + "/out/deep/a"), a);
  EXPECT_EQ(Read(dir_ + "/out/b"), b);
  EXPECT_EQ(Read(dir_ + "/out/empty"), "");
  EXPECT_EQ(done, a.size() + b.size());
  EXPECT_FALSE(Exists(dir_ + "/out/deep/a.autopar-tmp"));
  EXPECT_EQ(env_.modes[dir_ + "/out/deep/a"], 0644u);
}

TEST_F(TransferTest, DownloadFailuresNameTheObjectAndLeaveNoFile) {
  std::string a = Pattern(3000, 12);
  mem_.objects["s/a"] = a;
  Write("old", "previous content");
  struct Case {
    DownloadItem item;
    std::string expect;
  } cases[] = {
      {{"s/a", dir_ + "/old", a.size(), Sha256Hex("something else")},
       "mem://test/s/a: SHA-256 mismatch: expected " + Sha256Hex("something else") + ", got " +
           Sha256Hex(a)},
      {{"s/missing", dir_ + "/old", 5, ""}, "mem://test/s/missing: object not found"},
      {{"s/a", dir_ + "/old", 10, ""},
       "mem://test/s/a: size mismatch: the manifest says 10 bytes, storage has 3000"},
  };
  for (const auto& c : cases) {
    Status s = DownloadFiles(mem_, {c.item}, opts_);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message(), c.expect);
    EXPECT_EQ(Read(dir_ + "/old"), "previous content");
    EXPECT_FALSE(Exists(dir_ + "/old.autopar-tmp"));
  }
}

TEST_F(TransferTest, SmallObjectsListAndDeletePrefix) {
  ASSERT_TRUE(PutSmallObject(mem_, "j/manifest.json", "{}", opts_).ok());
  auto got = GetSmallObject(mem_, "j/manifest.json", opts_);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "{}");
  auto missing = GetSmallObject(mem_, "j/none", opts_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), "mem://test/j/none: object not found");
  EXPECT_EQ(*ObjectExists(mem_, "j/manifest.json", opts_), true);
  EXPECT_EQ(*ObjectExists(mem_, "j/none", opts_), false);

  for (int i = 0; i < 2500; ++i) mem_.objects["del/" + std::to_string(i)] = "x";
  mem_.objects["keep/1"] = "y";
  auto listed = ListObjects(mem_, "del/", opts_);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2500u);
  auto n = DeletePrefix(mem_, "del/", opts_);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2500u);
  EXPECT_EQ(mem_.max_delete_batch, 1000u);
  EXPECT_EQ(mem_.objects.count("keep/1"), 1u);
  EXPECT_EQ(mem_.objects.size(), 2u);
}

TEST_F(TransferTest, AFailedLocalWriteNamesTheFileAndLeavesNothing) {
  std::string a = Pattern(2500, 14);
  mem_.objects["s/a"] = a;
  Write("a", "previous content");
  env_.fail_writes.insert(dir_ + "/a.autopar-tmp");
  Status s = DownloadFiles(mem_, {{"s/a", dir_ + "/a", a.size(), Sha256Hex(a)}}, opts_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), dir_ + "/a.autopar-tmp: " + std::strerror(ENOSPC));
  EXPECT_EQ(Read(dir_ + "/a"), "previous content");
  EXPECT_FALSE(Exists(dir_ + "/a.autopar-tmp"));
}

TEST_F(TransferTest, DownloadKeepsTheSavedMode) {
  mem_.objects["s/x"] = "exec";
  ASSERT_TRUE(DownloadFiles(mem_, {{"s/x", dir_ + "/bin/x", 4, Sha256Hex("exec"), 0750}}, opts_).ok());
  EXPECT_EQ(env_.modes[dir_ + "/bin/x"], 0750u);
}

// What an UploadLog records, kept per file as the next run is given it (UploadItem::resume), with
// the order of the calls.
class RecordingLog : public UploadLog {
 public:
  explicit RecordingLog(size_t n) : state(n) {}
  Status Hashed(size_t i, const std::string& sha256) override {
    return Note(i, "hashed", [&](UploadProgress& p) { p.sha256 = sha256; });
  }
  Status MultipartStarted(size_t i, const std::string& id) override {
    return Note(i, "started " + id, [&](UploadProgress& p) { p.upload_id = id; });
  }
  Status PartSent(size_t i, const SentPart& part) override {
    return Note(i, "part " + std::to_string(part.part), [&](UploadProgress& p) { p.parts.push_back(part); });
  }
  Status MultipartDropped(size_t i) override {
    return Note(i, "dropped", [&](UploadProgress& p) {
      p.upload_id.clear();
      p.parts.clear();
    });
  }
  Status Uploaded(size_t i, const std::string& etag) override {
    return Note(i, "uploaded", [&](UploadProgress& p) {
      p.uploaded = true;
      p.etag = etag;
    });
  }
  // The items again, resuming from what was recorded.
  std::vector<UploadItem> Resume(std::vector<UploadItem> items) const {
    for (size_t i = 0; i < items.size(); ++i) items[i].resume = state[i];
    return items;
  }
  std::vector<UploadProgress> state;
  std::vector<std::string> calls;

 private:
  Status Note(size_t i, const std::string& what, const std::function<void(UploadProgress&)>& f) {
    std::lock_guard<std::mutex> l(mu_);
    calls.push_back(std::to_string(i) + " " + what);
    f(state[i]);
    return Status::Ok();
  }
  std::mutex mu_;
};

// Counts the requests that send something.
class CountingStore : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;
  StoreStatus PutObject(const std::string& key, std::string_view data, const Md5Digest& md5) override {
    ++puts;
    return ObjectStoreWrapper::PutObject(key, data, md5);
  }
  StoreStatus CreateUpload(const std::string& key, std::string* id) override {
    ++creates;
    return ObjectStoreWrapper::CreateUpload(key, id);
  }
  StoreStatus UploadPart(const std::string& key, const std::string& id, int part, uint64_t offset,
                         std::string_view data, const Md5Digest& md5, std::string* etag) override {
    std::lock_guard<std::mutex> l(mu_);
    parts.push_back(part);
    return ObjectStoreWrapper::UploadPart(key, id, part, offset, data, md5, etag);
  }
  StoreStatus CompleteUpload(const std::string& key, const std::string& id,
                             const std::vector<std::string>& etags, std::string* etag) override {
    ++completes;
    return ObjectStoreWrapper::CompleteUpload(key, id, etags, etag);
  }
  std::atomic<int> puts{0}, creates{0}, completes{0};
  std::vector<int> parts;

 private:
  std::mutex mu_;
};

// autopard's case: the daemon is stopped (or killed) mid-upload, and the next one resumes from
// what its log recorded, sending no recorded part again and no file twice.
TEST_F(TransferTest, AnUploadStoppedMidwayResumesWhereItsLogStopped) {
  const std::string big = Pattern(5500, 20), small = Pattern(300, 21);
  std::vector<UploadItem> items(2);
  items[0].local_path = Write("small", small);
  items[0].key = "k/small";
  items[1].local_path = Write("big", big);
  items[1].key = "k/big";
  items[1].size = static_cast<int64_t>(big.size());
  RecordingLog log(items.size());
  opts_.log = &log;
  opts_.concurrency = 1;
  std::atomic<bool> stop{false};
  opts_.cancel = &stop;
  int sent = 0;
  opts_.progress = [&](uint64_t, uint64_t) {
    if (++sent == 4) stop = true;  // told at the start, then the small file and two parts
  };
  UploadFailure failure;
  auto first = UploadFiles(mem_, items, opts_, &failure);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.message(), "cancelled");
  EXPECT_FALSE(failure.local);
  EXPECT_TRUE(mem_.aborted.empty());  // kept open for the next run
  ASSERT_EQ(mem_.uploads.size(), 1u);
  EXPECT_EQ(log.calls, (std::vector<std::string>{"1 started u1", "0 uploaded", "1 part 1", "1 part 2"}));

  stop = false;
  opts_.cancel = nullptr;
  CountingStore counting(&mem_);
  std::vector<uint64_t> progress;
  opts_.progress = [&](uint64_t done, uint64_t) { progress.push_back(done); };
  auto second = UploadFiles(counting, log.Resume(items), opts_, &failure);
  ASSERT_TRUE(second.ok()) << second.message();
  EXPECT_EQ(mem_.objects["k/big"], big);
  EXPECT_EQ(mem_.objects["k/small"], small);
  EXPECT_EQ(counting.puts, 0);
  EXPECT_EQ(counting.creates, 0);
  EXPECT_EQ(counting.parts, (std::vector<int>{3, 4, 5, 6}));
  EXPECT_EQ(counting.completes, 1);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.front(), 2300u);  // what the first run sent, told first
  EXPECT_EQ(progress.back(), 5800u);
  EXPECT_EQ((*second)[1].sha256, Sha256Hex(big));
  EXPECT_EQ((*second)[0].sha256, Sha256Hex(small));
  EXPECT_TRUE(log.state[1].uploaded);
  EXPECT_TRUE(mem_.uploads.empty());
}

// Killed inside CompleteMultipartUpload: every part was recorded, the object exists, and its
// completion was never recorded. The next run takes the object, completing nothing again.
TEST_F(TransferTest, AnUploadCompletedButNotRecordedIsFoundNotSentAgain) {
  const std::string big = Pattern(2500, 22);
  std::vector<UploadItem> items(1);
  items[0].local_path = Write("big", big);
  items[0].key = "k/big";
  RecordingLog log(1);
  opts_.log = &log;
  ASSERT_TRUE(UploadFiles(mem_, items, opts_).ok());
  UploadProgress& p = log.state[0];
  ASSERT_TRUE(p.uploaded);
  p.uploaded = false;  // the completion's record lost
  p.upload_id = "u1";
  ASSERT_EQ(p.parts.size(), 3u);
  CountingStore counting(&mem_);
  auto again = UploadFiles(counting, log.Resume(items), opts_);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(counting.completes, 0);
  EXPECT_TRUE(counting.parts.empty());
  EXPECT_EQ(mem_.objects["k/big"], big);
}

// The store lost the recorded multipart upload (expired, or aborted by a lifecycle rule): the
// file starts over under a new upload, once, and the log says so.
TEST_F(TransferTest, AMultipartUploadTheStoreLostStartsOver) {
  const std::string big = Pattern(3500, 23);
  std::vector<UploadItem> items(1);
  items[0].local_path = Write("big", big);
  items[0].key = "k/big";
  items[0].resume.upload_id = "gone";
  items[0].resume.parts = {{1, HexEncode(Md5Of(big.substr(0, 1000))), HexEncode(Md5Of(big.substr(0, 1000)))}};
  RecordingLog log(1);
  opts_.log = &log;
  auto r = UploadFiles(mem_, items, opts_);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(mem_.objects["k/big"], big);
  EXPECT_EQ(log.calls.front(), "0 hashed");
  EXPECT_NE(std::find(log.calls.begin(), log.calls.end(), "0 dropped"), log.calls.end());
  EXPECT_NE(std::find(log.calls.begin(), log.calls.end(), "0 started u1"), log.calls.end());
  EXPECT_EQ(log.calls.back(), "0 uploaded");
}

// A file that is not what was committed fails as a local failure (not cured by retrying): its
// multipart upload is aborted and the log told.
TEST_F(TransferTest, AChangedFileIsALocalFailureAndAbortsItsUpload) {
  std::vector<UploadItem> items(1);
  items[0].local_path = Write("big", Pattern(2500, 24));
  items[0].key = "k/big";
  items[0].size = 3000;
  items[0].resume.upload_id = "u7";
  mem_.uploads["u7"].key = "k/big";
  RecordingLog log(1);
  opts_.log = &log;
  UploadFailure failure;
  auto r = UploadFiles(mem_, items, opts_, &failure);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), items[0].local_path + ": 2500 bytes, expected 3000 (changed after the commit?)");
  EXPECT_TRUE(failure.local);
  EXPECT_EQ(mem_.aborted, (std::set<std::string>{"u7"}));
  EXPECT_EQ(log.calls, (std::vector<std::string>{"0 dropped"}));
}

// A storage failure with a log keeps the multipart upload and its recorded parts for a retry.
TEST_F(TransferTest, AStorageFailureWithALogKeepsTheUpload) {
  FailPart store(&mem_, 2, -1, StoreStatus::Code::kRetryable);
  opts_.backoff.max_attempts = 2;
  opts_.concurrency = 1;
  std::vector<UploadItem> items(1);
  items[0].local_path = Write("big", Pattern(2500, 25));
  items[0].key = "k/big";
  RecordingLog log(1);
  opts_.log = &log;
  UploadFailure failure;
  auto r = UploadFiles(store, items, opts_, &failure);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(failure.local);
  EXPECT_EQ(store.aborts, 0);
  EXPECT_EQ(log.state[0].upload_id, "u1");
  ASSERT_EQ(log.state[0].parts.size(), 1u);
  EXPECT_EQ(log.state[0].parts[0].part, 1);
}

// The real env: POSIX files, std::thread workers, a multipart file and a directory to create.
TEST(TransferRealEnvTest, RoundTripThroughFilesAndThreads) {
  const std::string dir = ::testing::TempDir() + "autopar_transfer_real";
  ::mkdir(dir.c_str(), 0755);
  const std::string data = Pattern(5500, 15);
  std::ofstream(dir + "/in", std::ios::binary) << data;
  MemoryStore mem;
  mem.expected_part_size = 1000;
  TransferOptions o;
  o.part_size = 1000;
  o.concurrency = 4;
  auto up = UploadFiles(mem, {{dir + "/in", "k/in"}}, o);
  ASSERT_TRUE(up.ok()) << up.message();
  EXPECT_EQ((*up)[0].parts, 6);
  EXPECT_EQ((*up)[0].sha256, Sha256Hex(data));
  Status down = DownloadFiles(mem, {{"k/in", dir + "/out/sub/in", data.size(), Sha256Hex(data)}}, o);
  ASSERT_TRUE(down.ok()) << down.message();
  std::ifstream f(dir + "/out/sub/in", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(f), {}), data);
  struct stat st;
  EXPECT_NE(::stat((dir + "/out/sub/in.autopar-tmp").c_str(), &st), 0);
  ASSERT_EQ(::stat((dir + "/out/sub/in").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(MultipartEtagTest, KnownValue) {
  // Two parts "a" and "b": md5(md5("a") || md5("b")) + "-2".
  std::string concat;
  for (const char* p : {"a", "b"}) {
    auto d = Md5Of(p);
    concat.append(reinterpret_cast<const char*>(d.data()), d.size());
  }
  EXPECT_EQ(MultipartEtag({Md5Of("a"), Md5Of("b")}), HexEncode(Md5Of(concat)) + "-2");
  EXPECT_EQ(MultipartEtag({Md5Of("a"), Md5Of("b")}).size(), 34u);
}

}  // namespace
}  // namespace autopar
