#include "core/private_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace autopar {
namespace {

// Runs as root (as the whole unit suite does in CI); another user's uid needs no account.
constexpr DirOwner kAlice{54321, 54321};
constexpr uid_t kMallory = 54322;

class PrivateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (it switches fsuid and chowns)";
    char tmpl[] = "/tmp/private_dir_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    ASSERT_EQ(chmod(base_.c_str(), 01777), 0);  // like /tmp
  }
  void TearDown() override {
    if (!base_.empty()) std::filesystem::remove_all(base_);
  }
  struct stat Stat(const std::string& p) {
    struct stat st {};
    EXPECT_EQ(lstat(p.c_str(), &st), 0) << p;
    return st;
  }
  std::string base_;
};

TEST(StaticPrefixTest, ComponentsBeforeThePlaceholders) {
  EXPECT_EQ(StaticPrefix("/tmp/autopar/%u/%j"), "/tmp/autopar");
  EXPECT_EQ(StaticPrefix("/scratch/run-%j/%n"), "/scratch");
  EXPECT_EQ(StaticPrefix("/%u/x"), "");
  EXPECT_EQ(StaticPrefix("/data/ckpt"), "/data/ckpt");
}

TEST_F(PrivateDirTest, SharedRootIsRootsAndTheJobsPartTheOwners) {
  const std::string root = base_ + "/autopar";
  const std::string dir = root + "/alice/42";
  ASSERT_TRUE(MakePrivateDir("--ckpt-dir", dir, kAlice, {root}).ok());
  struct stat r = Stat(root), u = Stat(root + "/alice"), j = Stat(dir);
  EXPECT_EQ(r.st_uid, 0u);
  EXPECT_EQ(r.st_mode & 07777, 0755u);
  EXPECT_EQ(u.st_uid, kAlice.uid);
  EXPECT_EQ(u.st_mode & 07777, 0700u);
  EXPECT_EQ(j.st_uid, kAlice.uid);
  EXPECT_EQ(j.st_gid, kAlice.gid);
  EXPECT_EQ(j.st_mode & 07777, 0700u);
  // Again (the job's other tasks, a restart): it holds as it is.
  EXPECT_TRUE(MakePrivateDir("--ckpt-dir", dir, kAlice, {root}).ok());
}

TEST_F(PrivateDirTest, TheUmaskDoesNotOpenIt) {
  const mode_t old = umask(0);
  Status s = MakePrivateDir("--ckpt-dir", base_ + "/run/1", kAlice, {});
  umask(old);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(Stat(base_ + "/run").st_mode & 07777, 0700u);
  EXPECT_EQ(Stat(base_ + "/run/1").st_mode & 07777, 0700u);
  EXPECT_EQ(Stat(base_ + "/run/1").st_uid, kAlice.uid);
}

TEST_F(PrivateDirTest, AComponentAnotherUserMadeFirstIsRefused) {
  const std::string root = base_ + "/autopar";
  ASSERT_EQ(mkdir(root.c_str(), 0777), 0);
  ASSERT_EQ(chown(root.c_str(), kMallory, kMallory), 0);
  Status s = MakePrivateDir("--ckpt-dir", root + "/alice/42", kAlice, {root});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--ckpt-dir: " + root + ": is owned by uid 54322, not by root or the job's owner"),
            std::string::npos)
      << s.message();
  struct stat st {};
  EXPECT_NE(lstat((root + "/alice").c_str(), &st), 0);  // nothing made inside
  // The user's own directory made there by another user: refused too.
  const std::string mine = base_ + "/mine";
  ASSERT_EQ(mkdir(mine.c_str(), 0700), 0);
  ASSERT_EQ(chown(mine.c_str(), kMallory, kMallory), 0);
  s = MakePrivateDir("--ckpt-dir", mine, kAlice, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("not by the job's owner (uid 54321)"), std::string::npos) << s.message();
}

TEST_F(PrivateDirTest, SymlinksAreNeverFollowed) {
  const std::string target = base_ + "/target";
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  ASSERT_EQ(chown(target.c_str(), kAlice.uid, kAlice.gid), 0);
  ASSERT_EQ(symlink(target.c_str(), (base_ + "/link").c_str()), 0);
  Status s = MakePrivateDir("--ckpt-dir", base_ + "/link/42", kAlice, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is a symlink or not a directory"), std::string::npos) << s.message();
  s = MakePrivateDir("--ckpt-dir", base_ + "/link", kAlice, {});
  EXPECT_FALSE(s.ok());
}

TEST_F(PrivateDirTest, WritableAncestorsAndLeavesAreRefused) {
  const std::string open_dir = base_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);  // root's, writable by all, not sticky
  Status s = MakePrivateDir("--ckpt-dir", open_dir + "/x", kAlice, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("writable by group or others and not sticky (mode 0777)"), std::string::npos)
      << s.message();
  const std::string leaf = base_ + "/leaf";
  ASSERT_EQ(mkdir(leaf.c_str(), 0700), 0);
  ASSERT_EQ(chown(leaf.c_str(), kAlice.uid, kAlice.gid), 0);
  ASSERT_EQ(chmod(leaf.c_str(), 0770), 0);
  s = MakePrivateDir("--ckpt-dir", leaf, kAlice, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("writable by group or others (mode 0770)"), std::string::npos) << s.message();
  // The owner's existing directory readable by others is theirs to share.
  ASSERT_EQ(chmod(leaf.c_str(), 0755), 0);
  EXPECT_TRUE(MakePrivateDir("--ckpt-dir", leaf, kAlice, {}).ok());
}

TEST_F(PrivateDirTest, RootMakesNothingWhereTheOwnerCouldNot) {
  const std::string sys = base_ + "/sys";  // root's, 0755: like /etc
  ASSERT_EQ(mkdir(sys.c_str(), 0755), 0);
  Status s = MakePrivateDir("--ckpt-dir", sys + "/42", kAlice, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot make " + sys + "/42 as uid 54321: Permission denied"), std::string::npos)
      << s.message();
  struct stat st {};
  EXPECT_NE(lstat((sys + "/42").c_str(), &st), 0);
}

TEST_F(PrivateDirTest, PathsMustBeAbsoluteWithoutDots) {
  EXPECT_FALSE(MakePrivateDir("--ckpt-dir", "tmp/x", kAlice, {}).ok());
  EXPECT_FALSE(MakePrivateDir("--ckpt-dir", base_ + "/../x", kAlice, {}).ok());
  EXPECT_FALSE(MakePrivateDir("--ckpt-dir", "/", kAlice, {}).ok());
}

}  // namespace
}  // namespace autopar
