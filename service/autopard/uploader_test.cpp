// Timer retries of uploads that failed on storage: an Uploader on a real StateDb and real local
// files, an in-memory store with injected part failures (memory_store_for_test.h) standing in
// for the upload URI, and an injected clock.
#include "uploader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "memory_store_for_test.h"

namespace autopar {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(FailedUploadRetryDelayTest, DoublesCapsAndJitters) {
  struct Case {
    int initial_s, max_s, retry;
    double u;
    int64_t want_ms;
  } cases[] = {
      {30, 1800, 1, 0.0, 30000},     {30, 1800, 2, 0.0, 60000},   {30, 1800, 3, 0.0, 120000},
      {30, 1800, 6, 0.0, 960000},    {30, 1800, 7, 0.0, 1800000},  // 1920 s capped
      {30, 1800, 1000, 0.0, 1800000}, {30, 1800, 0, 0.0, 30000},
      {30, 1800, 1, 0.5, 26250},     {30, 1800, 1, 1.0, 22500},   {30, 100, 3, 0.0, 100000},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FailedUploadRetryDelay(seconds(c.initial_s), seconds(c.max_s), c.retry, c.u).count(),
              c.want_ms)
        << c.initial_s << " " << c.max_s << " " << c.retry << " " << c.u;
  }
}

// Fails every listing of job 7's whole prefix, as s3rver does (HTTP 500) once it was killed while
// writing an object of the job; counts them.
class FailJobListing : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;
  StoreStatus List(const std::string& prefix, std::vector<ObjectInfo>* objects) override {
    if (prefix == "job-7/") {
      ++failed;
      return StoreStatus::Retryable("HTTP 500 InternalError (ListObjectsV2)");
    }
    return ObjectStoreWrapper::List(prefix, objects);
  }
  std::atomic<int> failed{0};
};

// Counts the attempts at each part number (all uploads).
class CountParts : public ObjectStoreWrapper {
 public:
  using ObjectStoreWrapper::ObjectStoreWrapper;
  StoreStatus UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                         uint64_t offset, std::string_view data, const Md5Digest& md5,
                         std::string* etag) override {
    {
      std::lock_guard<std::mutex> l(mu);
      ++calls[part_number];
    }
    return ObjectStoreWrapper::UploadPart(key, upload_id, part_number, offset, data, md5, etag);
  }
  int Calls(int part) {
    std::lock_guard<std::mutex> l(mu);
    return calls[part];
  }
  std::mutex mu;
  std::map<int, int> calls;
};

class UploaderRetryTest : public ::testing::Test {
 protected:
  // `fail_part` fails `fail_times` times (negative: always); every attempt of an upload tries a
  // part twice (retry.max_attempts = 2).
  void Start(int fail_part, int fail_times, seconds max_delay = seconds(1800)) {
    char tmpl[] = "/tmp/uploader-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    config_.node = "nodeU";
    config_.part_size = 4096;  // 3 parts for the 10000-byte file, sent in order (concurrency 1)
    config_.concurrency = 1;
    config_.retry.max_attempts = 2;
    config_.retry.initial = milliseconds(1);
    config_.upload_retry_initial = seconds(30);
    config_.upload_retry_max = max_delay;
    auto db = StateDb::Open((root_ / "autopard.db").string(), CommitSync::kNormal);
    ASSERT_TRUE(db.ok()) << db.message();
    db_ = std::move(*db);
    fail_ = std::make_unique<FailPart>(&mem_, fail_part, fail_times, StoreStatus::Code::kRetryable);
    count_ = std::make_shared<CountParts>(fail_.get());
    upload_ = "file://" + (root_ / "store").string();
    stores_ = std::make_unique<StoreCache>(config_);
    ASSERT_TRUE(stores_->Set(upload_, count_).ok());
    uploader_ = std::make_unique<Uploader>(
        db_.get(), config_, stores_.get(),
        [this](const JournalEvent& e) {
          std::lock_guard<std::mutex> l(mu_);
          events_.push_back(e);
        },
        [this] { return base_ + milliseconds(now_ms_.load()); }, [] { return 0.0; });
  }
  void TearDown() override {
    uploader_.reset();
    if (!root_.empty()) fs::remove_all(root_);
  }
  // Writes and commits step 1 of rank 0: a 10000-byte file.
  void Commit() { Commit(1, 0); }
  // The same for `step`, keeping the newest `keep` complete steps (0: all).
  void Commit(int64_t step, int64_t keep) {
    file_ = root_ / ("ck/step-" + std::to_string(step) + "/rank-0/model.pt");
    fs::create_directories(file_.parent_path());
    data_.clear();
    for (int i = 0; i < 10000; ++i) data_.push_back(static_cast<char>('a' + i % 26));
    std::ofstream(file_) << data_;
    CommitRecord c;
    c.job_id = "7";
    c.step = step;
    c.keep = keep;
    c.uid = geteuid();
    c.gid = getegid();
    c.ckpt_dir = (root_ / "ck").string();
    c.upload = upload_;
    c.node = "nodeU";
    c.bytes = data_.size();
    FileRecord f;
    f.path = "model.pt";
    f.size = data_.size();
    bool dup = false;
    auto id = db_->AddCommit(c, {f}, &dup);
    ASSERT_TRUE(id.ok()) << id.message();
    id_ = *id;
    uploader_->Enqueue(id_);
    uploader_->WaitIdle();
  }
  void Advance(milliseconds by) { now_ms_ += by.count(); }
  // Queues the due retries and waits for them.
  void RetryDue() {
    uploader_->RetryDue();
    uploader_->WaitIdle();
  }
  std::vector<JournalEvent> Events(const std::string& kind) {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<JournalEvent> out;
    for (const auto& e : events_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  CommitRecord Row() {
    auto c = db_->GetCommit(id_);
    EXPECT_TRUE(c.ok()) << c.message();
    return c.ok() ? *c : CommitRecord{};
  }
  UploadInfo Info() {
    auto p = uploader_->Progress("7");
    EXPECT_EQ(p.size(), 1u);
    return p.empty() ? UploadInfo{} : p[0];
  }
  std::string StepState() {
    auto steps = db_->Steps(upload_);
    if (!steps.ok() || steps->empty()) return "";
    return (*steps)[0].state;
  }

  fs::path root_;
  DaemonConfig config_;
  std::unique_ptr<StateDb> db_;
  MemoryStore mem_;
  std::unique_ptr<FailPart> fail_;
  std::shared_ptr<CountParts> count_;
  std::unique_ptr<StoreCache> stores_;
  std::unique_ptr<Uploader> uploader_;
  std::string upload_;
  const std::chrono::steady_clock::time_point base_ = std::chrono::steady_clock::now();
  std::atomic<int64_t> now_ms_{0};
  std::mutex mu_;
  std::vector<JournalEvent> events_;
  fs::path file_;
  std::string data_;
  int64_t id_ = 0;
};

TEST_F(UploaderRetryTest, RetriedAfterTheBackoffNotBeforeAndResumesWhereItStopped) {
  Start(/*fail_part=*/3, /*fail_times=*/2);
  Commit();
  EXPECT_EQ(Row().state, "failed");
  EXPECT_TRUE(Row().retry);
  UploadInfo u = Info();
  EXPECT_EQ(u.state, "failed");
  EXPECT_DOUBLE_EQ(u.next_retry_s, 30.0);
  EXPECT_NE(u.error.find("injected"), std::string::npos) << u.error;
  ASSERT_EQ(Events("ckpt_failed").size(), 1u);
  EXPECT_EQ(count_->Calls(1), 1);
  EXPECT_EQ(count_->Calls(3), 2);

  // Not before the backoff.
  Advance(milliseconds(29999));
  RetryDue();
  EXPECT_EQ(Row().state, "failed");
  EXPECT_TRUE(Events("ckpt_upload_retry").empty());
  EXPECT_NEAR(Info().next_retry_s, 0.001, 1e-6);
  EXPECT_EQ(count_->Calls(3), 2);

  // Due: the timer thread retries it on its own (it checks at least every second).
  Advance(milliseconds(1));
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (Row().state != "uploaded" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  uploader_->WaitIdle();
  EXPECT_EQ(Row().state, "uploaded");
  EXPECT_EQ(StepState(), "COMPLETE");
  // Resumed: parts 1 and 2 were not sent again.
  EXPECT_EQ(count_->Calls(1), 1);
  EXPECT_EQ(count_->Calls(2), 1);
  EXPECT_EQ(count_->Calls(3), 3);
  EXPECT_EQ(mem_.objects["job-7/step-1/rank-0/model.pt"], data_);
  auto retries = Events("ckpt_upload_retry");
  ASSERT_EQ(retries.size(), 1u);
  EXPECT_NE(retries[0].detail.find("attempt 1: resuming the upload to " + upload_), std::string::npos)
      << retries[0].detail;
  EXPECT_NE(retries[0].detail.find("injected"), std::string::npos) << retries[0].detail;
  EXPECT_EQ(Events("ckpt_complete").size(), 1u);
  EXPECT_EQ(Events("ckpt_failed").size(), 1u);
  EXPECT_EQ(Info().next_retry_s, -1);
}

TEST_F(UploaderRetryTest, BackoffDoublesAndCaps) {
  // Down for the first try and two retries (two requests each), back for the third retry.
  Start(/*fail_part=*/1, /*fail_times=*/6, /*max_delay=*/seconds(100));
  Commit();
  const int64_t waits_s[] = {30, 60, 100};  // 120 s capped at 100
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("retry " + std::to_string(i + 1));
    EXPECT_EQ(Row().state, "failed");
    EXPECT_DOUBLE_EQ(Info().next_retry_s, static_cast<double>(waits_s[i]));
    Advance(seconds(waits_s[i]) - milliseconds(1));
    RetryDue();
    EXPECT_EQ(Events("ckpt_upload_retry").size(), static_cast<size_t>(i));
    Advance(milliseconds(1));
    RetryDue();
    auto retries = Events("ckpt_upload_retry");
    ASSERT_EQ(retries.size(), static_cast<size_t>(i + 1));
    EXPECT_EQ(retries.back().detail.rfind("attempt " + std::to_string(i + 1) + ":", 0), 0u)
        << retries.back().detail;
  }
  EXPECT_EQ(Row().state, "uploaded");
  EXPECT_EQ(StepState(), "COMPLETE");
  EXPECT_EQ(count_->Calls(1), 7);
  EXPECT_EQ(Events("ckpt_failed").size(), 1u);  // the first failure; retries report in ckpt_upload_retry
}

TEST_F(UploaderRetryTest, StopsWhenTheLocalFileIsGone) {
  Start(/*fail_part=*/1, /*fail_times=*/-1);
  Commit();
  EXPECT_EQ(Row().state, "failed");
  fs::remove(file_);
  Advance(seconds(30));
  RetryDue();
  EXPECT_EQ(Events("ckpt_upload_retry").size(), 1u);
  EXPECT_EQ(Row().state, "failed");
  EXPECT_FALSE(Row().retry);
  auto failed = Events("ckpt_failed");
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_NE(failed[1].detail.find("committed file missing or changed"), std::string::npos) << failed[1].detail;
  EXPECT_NE(failed[1].detail.find(file_.string()), std::string::npos) << failed[1].detail;
  EXPECT_EQ(Info().next_retry_s, -1);
  // No more retries.
  Advance(seconds(100000));
  RetryDue();
  EXPECT_EQ(Events("ckpt_upload_retry").size(), 1u);
  EXPECT_EQ(Events("ckpt_failed").size(), 2u);
}

// Retention that fails (the job's listing) rests for a minute: the steps committed meanwhile do not
// each retry it, holding an upload slot (bench/soak/soak.py: every job's uploads fell minutes
// behind while two jobs' listings failed).
TEST_F(UploaderRetryTest, RetentionThatFailedRestsBeforeTheNextTry) {
  Start(/*fail_part=*/0, /*fail_times=*/0);
  auto failing = std::make_shared<FailJobListing>(count_.get());
  ASSERT_TRUE(stores_->Set(upload_, failing).ok());
  Commit(1, 1);
  EXPECT_EQ(StepState(), "COMPLETE");
  auto failed = Events("ckpt_retention_failed");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].detail.find("HTTP 500"), std::string::npos) << failed[0].detail;
  EXPECT_NE(failed[0].detail.find("tried again for a step committed 60 s from now"), std::string::npos)
      << failed[0].detail;
  const int listings = failing->failed.load();  // the retry policy's attempts (2)
  EXPECT_EQ(listings, 2);
  Advance(seconds(59));
  Commit(2, 1);
  Commit(3, 1);
  EXPECT_EQ(failing->failed.load(), listings);
  EXPECT_EQ(Events("ckpt_retention_failed").size(), 1u);
  EXPECT_EQ(Events("ckpt_complete").size(), 3u);
  Advance(seconds(1));
  Commit(4, 1);
  EXPECT_EQ(failing->failed.load(), 2 * listings);
  EXPECT_EQ(Events("ckpt_retention_failed").size(), 2u);
}

}  // namespace
}  // namespace autopar

namespace autopar {
namespace {

TEST(StoreCacheTest, KeepsAStorePerUriAndIdentityAndEvictsTheLeastRecentlyUsed) {
  DaemonConfig config;
  StoreCache cache(config);
  auto uri = [](size_t i) { return "file:///tmp/store-cache-test/" + std::to_string(i); };
  const UserIdentity user{1001, 1001, {1001}};
  std::vector<std::shared_ptr<ObjectStore>> held;
  for (size_t i = 0; i < StoreCache::kMaxStores; ++i) {
    auto s = cache.Get(uri(i), user);
    ASSERT_TRUE(s.ok()) << s.message();
    held.push_back(*s);
  }
  EXPECT_EQ(cache.size(), StoreCache::kMaxStores);
  EXPECT_EQ(*cache.Get(uri(0), user), held[0]);  // a hit, and now the most recently used
  // One identity's store is not another's (a file:// store acts with its identity's rights).
  auto other = cache.Get(uri(5), UserIdentity{1002, 1002, {1002}});
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, held[5]);
  EXPECT_EQ(cache.size(), StoreCache::kMaxStores);  // bounded: uri(1), the oldest, made room
  EXPECT_EQ(*cache.Get(uri(0), user), held[0]);
  EXPECT_NE(*cache.Get(uri(1), user), held[1]);      // evicted: opened anew
  for (size_t i = 0; i < 1000; ++i) ASSERT_TRUE(cache.Get(uri(1000 + i), user).ok());
  EXPECT_EQ(cache.size(), StoreCache::kMaxStores);
}

}  // namespace
}  // namespace autopar
