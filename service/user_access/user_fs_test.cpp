#include "user_fs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace autopar {
namespace {

namespace fs = std::filesystem;

// Two ranks of a job on one node may apply retention to the same step directory at once: each
// removal must succeed whichever of them deletes an entry first.
TEST(UserFsTest, RemovingTheSameTreeConcurrentlySucceedsEverywhere) {
  char tmpl[] = "/tmp/autopar-userfs-XXXXXX";
  fs::path root = mkdtemp(tmpl);
  const UserIdentity me{geteuid(), getegid()};
  for (int round = 0; round < 5; ++round) {
    fs::path dir = root / ("step-" + std::to_string(round));
    for (int d = 0; d < 8; ++d) {
      fs::create_directories(dir / ("rank-" + std::to_string(d)));
      for (int f = 0; f < 40; ++f) {
        std::ofstream(dir / ("rank-" + std::to_string(d)) / ("f" + std::to_string(f))) << "x";
      }
    }
    Status results[4];
    std::vector<std::thread> threads;
    for (auto& r : results) {
      threads.emplace_back([&r, &dir, &me] { r = RemoveTreeAsUser(me, dir.string()); });
    }
    for (auto& t : threads) t.join();
    for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.message();
    EXPECT_FALSE(fs::exists(dir));
  }
  EXPECT_TRUE(RemoveTreeAsUser(me, (root / "missing").string()).ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace autopar
