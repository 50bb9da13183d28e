// Paths below a directory never go through a symlink, and files are read with the user's rights.
#include "service/user_access/beneath.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "service/user_access/user_fs.h"

namespace autopar {
namespace {

namespace fs = std::filesystem;

class BeneathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/autopar-beneath-XXXXXX";
    base_ = mkdtemp(tmpl);
    fs::create_directories(base_ / "root/a/b");
    fs::create_directories(base_ / "outside");
    std::ofstream(base_ / "outside/secret") << "secret";
    std::ofstream(base_ / "root/a/b/file") << "data";
    root_ = UniqueFd(::open((base_ / "root").c_str(), O_RDONLY | O_DIRECTORY));
    ASSERT_TRUE(root_.ok());
  }
  void TearDown() override { fs::remove_all(base_); }
  fs::path base_;
  UniqueFd root_;
};

TEST_F(BeneathTest, OpensPlainPathsAndCreatesParents) {
  UniqueFd f(OpenBeneath(root_.get(), "a/b/file", O_RDONLY));
  ASSERT_TRUE(f.ok()) << std::strerror(errno);
  UniqueFd n(OpenBeneath(root_.get(), "x/y/new", O_CREAT | O_EXCL | O_WRONLY, 0600, true, 0750));
  ASSERT_TRUE(n.ok()) << std::strerror(errno);
  EXPECT_TRUE(fs::is_regular_file(base_ / "root/x/y/new"));
  EXPECT_EQ(fs::status(base_ / "root/x/y").permissions() & fs::perms::all,
            fs::perms(0750));
}

TEST_F(BeneathTest, RefusesASymlinkAtEveryComponentAbsoluteOrRelative) {
  const struct {
    const char* link;    // below root
    const char* target;  // what it points to
    const char* open;    // the path then opened below root
  } cases[] = {
      {"l1", "/", "l1/etc/passwd"},                          // absolute, first component
      {"a/l2", "../../outside", "a/l2/secret"},              // relative, middle component
      {"a/b/l3", "../../../outside/secret", "a/b/l3"},       // the file itself
      {"a/b/l4", "/tmp", "a/b/l4/x"},                        // last directory
  };
  for (const auto& c : cases) {
    fs::create_symlink(c.target, base_ / "root" / c.link);
    errno = 0;
    UniqueFd f(OpenBeneath(root_.get(), c.open, O_RDONLY));
    EXPECT_FALSE(f.ok()) << c.open;
    EXPECT_TRUE(errno == ELOOP || errno == ENOTDIR) << c.open << ": " << std::strerror(errno);
    // Nor does creation go through it.
    std::string created = std::string(c.open) + "-new/f";
    UniqueFd w(OpenBeneath(root_.get(), created, O_CREAT | O_WRONLY, 0600, true));
    EXPECT_FALSE(w.ok() && std::string(c.open).find('/') == std::string::npos) << created;
  }
  EXPECT_FALSE(fs::exists(base_ / "outside/secret-new"));
}

TEST_F(BeneathTest, RefusesDotDotAndAbsolutePaths) {
  for (const char* bad : {"../outside/secret", "a/../../outside/secret", "/etc/passwd", "a//b", "a/./b", ""}) {
    errno = 0;
    EXPECT_LT(OpenBeneath(root_.get(), bad, O_RDONLY), 0) << bad;
    EXPECT_EQ(errno, EINVAL) << bad;
  }
}

TEST_F(BeneathTest, ReadUserFileRefusesFifosAndSymlinksWithoutBlockingAndCapsTheSize) {
  const UserIdentity me{geteuid(), getegid()};
  const fs::path fifo = base_ / "root/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto r = ReadUserFile(me, fifo.string(), 1024);  // would block for ever without O_NONBLOCK
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("not a regular file"), std::string::npos) << r.message();
  fs::create_symlink(base_ / "outside/secret", base_ / "root/link");
  r = ReadUserFile(me, (base_ / "root/link").string(), 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message().find("secret\n"), std::string::npos);
  r = ReadUserFile(me, "/dev/zero", 1024);
  EXPECT_FALSE(r.ok());
  std::ofstream(base_ / "root/big") << std::string(5000, 'x');
  r = ReadUserFile(me, (base_ / "root/big").string(), 1000);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->substr(0, 1000), std::string(1000, 'x'));
  EXPECT_NE(r->find("truncated at 1000 bytes"), std::string::npos);
}

// Root only: another user's rights are what apply, and nested switches come back to where they were.
TEST_F(BeneathTest, AsUserAppliesTheUsersRightsAndNests) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (as autopard)";
  const UserIdentity nobody{65534, 65534};
  fs::permissions(base_ / "outside", fs::perms(0700));
  fs::permissions(base_ / "outside/secret", fs::perms(0600));
  auto r = ReadUserFile(nobody, (base_ / "outside/secret").string(), 1024);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("Permission denied"), std::string::npos) << r.message();
  {
    AsUser outer(nobody);
    EXPECT_EQ(setfsuid(static_cast<uid_t>(-1)), 65534);
    {
      AsUser same(nobody);  // nested, the same user: changes nothing
      AsUser back(UserIdentity{0, 0});
      EXPECT_EQ(setfsuid(static_cast<uid_t>(-1)), 0);
    }
    EXPECT_EQ(setfsuid(static_cast<uid_t>(-1)), 65534);
  }
  EXPECT_EQ(setfsuid(static_cast<uid_t>(-1)), 0);
  EXPECT_TRUE(ReadUserFile(UserIdentity{0, 0}, (base_ / "outside/secret").string(), 1024).ok());
}

}  // namespace
}  // namespace autopar
