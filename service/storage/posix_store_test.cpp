// The POSIX backend on a temporary directory standing in for a shared filesystem, driven through
// the transfer engine and the checkpoint operations.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "core/ckpt/ckpt_store.h"
#include "service/storage/storage_backends.h"

namespace autopar {
namespace {

class PosixStoreTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(std::system(("rm -rf '" + base_ + "'").c_str()), 0); }
  void SetUp() override {
    base_ = ::testing::TempDir() + "autopar_posix_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
            std::to_string(::getpid());
    std::string cmd =
        "rm -rf '" + base_ + "' && mkdir -p '" + base_ + "/local' '" + base_ + "/shared'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    auto uri = ParseCheckpointUri("file://" + base_ + "/shared/ckpt");
    ASSERT_TRUE(uri.ok());
    auto s = MakePosixStore(*uri, PosixConfig{});
    ASSERT_TRUE(s.ok()) << s.message();
    store_ = std::move(*s);
    opts_.part_size = 64 << 10;
    opts_.concurrency = 4;
  }
  std::string Write(const std::string& name, size_t size, uint32_t seed) {
    std::string data(size, '\0');
    std::mt19937 rng(seed);
    for (auto& c : data) c = static_cast<char>(rng());
    std::string path = base_ + "/local/" + name;
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }
  static std::string Read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  static bool Exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }
  std::string base_;
  std::unique_ptr<ObjectStore> store_;
  TransferOptions opts_;
};

TEST_F(PosixStoreTest, ParallelCopyListDownloadDelete) {
  std::string big = Write("big", (1 << 20) + 12345, 1);
  std::string small = Write("small", 100, 2);
  auto up = UploadFiles(
      *store_, {{big, "job-1/step-5/rank-0/big.pt"}, {small, "job-1/step-5/rank-0/small.pt"}},
      opts_);
  ASSERT_TRUE(up.ok()) << up.message();
  EXPECT_EQ((*up)[0].parts, 17);
  std::string shared = base_ + "/shared/ckpt/job-1/step-5/rank-0/";
  EXPECT_EQ(Read(shared + "big.pt"), Read(big));
  EXPECT_EQ(Read(shared + "small.pt"), Read(small));

  auto listed = ListObjects(*store_, "job-1/", opts_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, "job-1/step-5/rank-0/big.pt");
  EXPECT_EQ((*listed)[0].size, (1u << 20) + 12345u);
  EXPECT_TRUE(ListObjects(*store_, "job-2/", opts_)->empty());
  EXPECT_EQ(ListObjects(*store_, "job-1/step-5/rank-0/sm", opts_)->size(), 1u);

  Status s = DownloadFiles(
      *store_,
      {{"job-1/step-5/rank-0/big.pt", base_ + "/back/big", (*up)[0].size, (*up)[0].sha256}}, opts_);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Read(base_ + "/back/big"), Read(big));

  auto n = DeletePrefix(*store_, "job-1/", opts_);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  EXPECT_FALSE(Exists(base_ + "/shared/ckpt/job-1"));  // emptied directories are removed
  EXPECT_TRUE(Exists(base_ + "/shared/ckpt"));
}

TEST_F(PosixStoreTest, MultipartThresholdStreamsWholeFiles) {
  EXPECT_TRUE(store_->ReadsFiles());
  std::string big = Write("big", (1 << 20) + 1, 3);
  opts_.multipart_threshold = 2 << 20;
  auto up = UploadFiles(*store_, {{big, "t/big"}}, opts_);
  ASSERT_TRUE(up.ok()) << up.message();
  EXPECT_EQ((*up)[0].parts, 0);  // one PUT, copied in the kernel
  EXPECT_EQ(Read(base_ + "/shared/ckpt/t/big"), Read(big));
  opts_.multipart_threshold = 0;
  auto parts = UploadFiles(*store_, {{big, "t/big2"}}, opts_);
  ASSERT_TRUE(parts.ok()) << parts.message();
  EXPECT_EQ((*parts)[0].parts, 17);
  EXPECT_EQ(Read(base_ + "/shared/ckpt/t/big2"), Read(big));
  // "auto" (0) with at least `concurrency` large files: each goes whole, one stream per file.
  opts_.concurrency = 2;
  std::string big2 = Write("big2", (1 << 20) + 5, 4);
  auto whole = UploadFiles(*store_, {{big, "t/w1"}, {big2, "t/w2"}}, opts_);
  ASSERT_TRUE(whole.ok()) << whole.message();
  EXPECT_EQ((*whole)[0].parts, 0);
  EXPECT_EQ((*whole)[1].parts, 0);
  EXPECT_EQ(Read(base_ + "/shared/ckpt/t/w2"), Read(big2));
}

TEST(AutoMultipartThresholdTest, WholeFilesOnlyWhenTheyFillThePipe) {
  struct Case {
    size_t large_files;
    int concurrency;
    uint64_t part_size;
    uint64_t want;
  } cases[] = {
      {0, 8, 16 << 20, 16 << 20},
      {7, 8, 16 << 20, 16 << 20},
      {8, 8, 16 << 20, kAutoSinglePutMax},
      {64, 8, 16 << 20, kAutoSinglePutMax},
      {1, 1, 16 << 20, kAutoSinglePutMax},
      {8, 8, 2ull << 30, 2ull << 30},  // never below the part size
  };
  for (const auto& c : cases) {
    EXPECT_EQ(AutoMultipartThreshold(c.large_files, c.concurrency, c.part_size), c.want)
        << c.large_files << " files, concurrency " << c.concurrency;
  }
}

TEST_F(PosixStoreTest, AbortedUploadLeavesNothingAndTempsAreInvisible) {
  std::string id;
  ASSERT_TRUE(store_->CreateUpload("job-1/x", &id).ok());
  std::string etag;
  ASSERT_TRUE(store_->UploadPart("job-1/x", id, 1, 0, "abc", Md5Of("abc"), &etag).ok());
  auto listed = ListObjects(*store_, "", opts_);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());  // the temporary is not an object
  ObjectInfo info;
  EXPECT_EQ(store_->Head("job-1/x", &info).code, StoreStatus::Code::kNotFound);
  ASSERT_TRUE(store_->AbortUpload("job-1/x", id).ok());
  EXPECT_FALSE(Exists(base_ + "/shared/ckpt/job-1/x.autopar-tmp-" + id));
  EXPECT_EQ(store_->UploadPart("job-1/x", id, 1, 0, "abc", Md5Of("abc"), &etag).code,
            StoreStatus::Code::kNotFound);
}

TEST_F(PosixStoreTest, RejectsKeysThatEscapeTheRoot) {
  for (const char* key : {"../x", "a/../../x", "/abs", "a//b", "", "a/b.autopar-tmp-1"}) {
    StoreStatus s = store_->PutObject(key, "x", Md5Of("x"));
    EXPECT_EQ(s.code, StoreStatus::Code::kFatal) << key;
    EXPECT_NE(s.message.find("invalid object key"), std::string::npos) << s.message;
  }
}

TEST_F(PosixStoreTest, CheckpointRoundTripWithManifestLast) {
  std::string dir = base_ + "/local/rank";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/sub'").c_str()), 0);
  std::ofstream(dir + "/model.pt") << std::string(300000, 'm');
  std::ofstream(dir + "/sub/opt.pt") << "opt";
  for (int rank : {0, 1}) {
    auto r = UploadRank(*store_, {"9", 3, 2, rank, dir, {"model.pt", "sub/opt.pt"}}, opts_);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(r->step.complete, rank == 1);
  }
  EXPECT_TRUE(Exists(base_ + "/shared/ckpt/job-9/step-3/manifest.json"));
  auto restored = RestoreLatest(*store_,
                                {"9",
                                 {1},
                                 [&](const std::string&, int64_t, int rank) {
                                   return base_ + "/restored/" + std::to_string(rank);
                                 }},
                                opts_);
  ASSERT_TRUE(restored.ok()) << restored.message();
  EXPECT_EQ(restored->step, 3);
  EXPECT_EQ(Read(base_ + "/restored/1/sub/opt.pt"), "opt");
}

// A symlink below the store's root is never followed, wherever it is and whatever it points to:
// reads, listings and writes all refuse it.
TEST_F(PosixStoreTest, NeverFollowsASymlinkBelowTheRoot) {
  const std::string root = base_ + "/shared/ckpt";
  ASSERT_EQ(std::system(("mkdir -p '" + root + "/job-1/step-2' '" + base_ + "/outside' && echo secret > '" +
                         base_ + "/outside/secret' && ln -s '" + base_ + "/outside' '" + root +
                         "/job-1/step-2/rank-0' && ln -s ../../outside '" + root + "/job-1/rel' && ln -s '" +
                         base_ + "/outside/secret' '" + root + "/job-1/file'").c_str()),
            0);
  for (const char* key : {"job-1/step-2/rank-0/secret", "job-1/rel/secret", "job-1/file"}) {
    ObjectInfo info;
    EXPECT_FALSE(store_->Head(key, &info).ok()) << key;
    std::string got;
    StoreStatus g = store_->GetRange(key, 0, 7, [&](uint64_t, const char* p, size_t n) {
      got.append(p, n);
      return true;
    });
    EXPECT_FALSE(g.ok()) << key;
    EXPECT_EQ(got, "") << key;
  }
  auto listed = ListObjects(*store_, "job-1/", opts_);
  ASSERT_TRUE(listed.ok()) << listed.message();
  EXPECT_TRUE(listed->empty()) << (*listed)[0].key;
  // Writing through the symlinked directory is refused; nothing appears outside.
  StoreStatus w = store_->PutObject("job-1/step-2/rank-0/new", "x", Md5Of("x"));
  EXPECT_FALSE(w.ok());
  std::string id;
  EXPECT_FALSE(store_->CreateUpload("job-1/rel/new", &id).ok());
  EXPECT_FALSE(Exists(base_ + "/outside/new"));
  EXPECT_TRUE(store_->Delete({"job-1/step-2/rank-0/secret"}).ok());
  EXPECT_TRUE(Exists(base_ + "/outside/secret"));
}

// As root, a store acting for another user has exactly that user's rights, and what it writes
// is theirs.
TEST_F(PosixStoreTest, ActsWithTheIdentityItIsGiven) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (as autopard)";
  const std::string root = base_ + "/shared/user";
  ASSERT_EQ(std::system(("chmod 755 '" + base_ + "' '" + base_ + "/shared' && mkdir -p '" + root +
                         "' && chown 65534:65534 '" + root + "' && chmod 750 '" + root + "' && mkdir -p '" +
                         base_ + "/private' && chmod 700 '" + base_ + "/private' && echo secret > '" + base_ +
                         "/private/secret' && chmod 600 '" + base_ + "/private/secret'").c_str()),
            0);
  auto uri = ParseCheckpointUri("file://" + root);
  PosixConfig pc;
  pc.identity = UserIdentity{65534, 65534};
  auto s = MakePosixStore(*uri, pc);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->PutObject("job-1/owner.json", "{}", Md5Of("{}")).ok());
  struct stat st;
  ASSERT_EQ(::lstat((root + "/job-1/owner.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mode & 0777, 0640u);  // the root's 0750, less execute
  ASSERT_EQ(::lstat((root + "/job-1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u);
  EXPECT_TRUE((*s)->CheckWrittenOnlyByUs("job-1/owner.json").ok());
  // A hard link to a root-only file (root may make one; the user could not read it).
  ASSERT_EQ(::link((base_ + "/private/secret").c_str(), (root + "/job-1/secret").c_str()), 0);
  StoreStatus g = (*s)->GetRange("job-1/secret", 0, 7, [](uint64_t, const char*, size_t) { return true; });
  EXPECT_FALSE(g.ok());
  EXPECT_NE(g.message.find("Permission denied"), std::string::npos) << g.message;
  // Nor can it write where the user may not.
  auto other = ParseCheckpointUri("file://" + base_ + "/private/x");
  auto t = MakePosixStore(*other, pc);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)->PutObject("job-1/a", "x", Md5Of("x")).ok());
  EXPECT_FALSE(Exists(base_ + "/private/x"));
}

// A store shared by many users (a sticky, world-writable root as /tmp is): each one's objects
// and directories are theirs alone, never writable by the others.
TEST_F(PosixStoreTest, ASharedRootGivesEachWriterPrivateDirectories) {
  const std::string root = base_ + "/shared/team";
  ASSERT_EQ(std::system(("mkdir -p '" + root + "' && chmod 1777 '" + root + "'").c_str()), 0);
  auto uri = ParseCheckpointUri("file://" + root);
  auto s = MakePosixStore(*uri, PosixConfig{});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->PutObject("job-1/step-1/rank-0/a", "x", Md5Of("x")).ok());
  struct stat st;
  ASSERT_EQ(::lstat((root + "/job-1/step-1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(::lstat((root + "/job-1/step-1/rank-0/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_TRUE((*s)->CheckWrittenOnlyByUs("job-1/step-1/rank-0/a").ok());
}

TEST_F(PosixStoreTest, AFifoWhereAnObjectShouldBeIsRefusedWithoutBlocking) {
  const std::string root = base_ + "/shared/ckpt";
  ASSERT_EQ(std::system(("mkdir -p '" + root + "/job-1' && mkfifo '" + root + "/job-1/fifo'").c_str()), 0);
  StoreStatus g = store_->GetRange("job-1/fifo", 0, 7, [](uint64_t, const char*, size_t) { return true; });
  EXPECT_EQ(g.code, StoreStatus::Code::kNotFound) << g.message;
  auto listed = ListObjects(*store_, "job-1/", opts_);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(PosixStoreTest, WrongUriKind) {
  auto uri = ParseCheckpointUri("s3://bucket/x");
  auto s = MakePosixStore(*uri, PosixConfig{});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "--ckpt-upload: 's3://bucket/x' is not a file:// URI");
  S3Config bad;
  bad.endpoint = "ftp://x";
  auto s3 = MakeS3Store(*uri, bad);
  ASSERT_FALSE(s3.ok());
  EXPECT_EQ(s3.message(), "s3 endpoint: 'ftp://x' must start with http:// or https://");
  bad.endpoint = "http://127.0.0.1:1";
  auto nocreds = MakeS3Store(*uri, bad);
  ASSERT_FALSE(nocreds.ok());
  EXPECT_EQ(nocreds.message(),
            "s3 credentials: access key id and secret access key must both be set");
}

}  // namespace
}  // namespace autopar
