#include "idle_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace autopar {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class IdlePoolTest : public ::testing::Test {
 protected:
  // Declared before the pool, which outlives none of them: its destructor still gives them back.
  std::vector<int> destroyed_;
  const std::chrono::steady_clock::time_point base_ = std::chrono::steady_clock::now();
  int64_t now_ms_ = 0;
  IdlePool<int> pool_{3, seconds(30), [this](int v) { destroyed_.push_back(v); },
                      [this] { return base_ + milliseconds(now_ms_); }};
};

TEST_F(IdlePoolTest, ReusesTheMostRecentlyReturnedFirst) {
  EXPECT_FALSE(pool_.Take().has_value());
  pool_.Give(1);
  pool_.Give(2);
  EXPECT_EQ(pool_.Take(), 2);
  EXPECT_EQ(pool_.Take(), 1);
  EXPECT_FALSE(pool_.Take().has_value());
  EXPECT_TRUE(destroyed_.empty());
}

TEST_F(IdlePoolTest, KeepsNoMoreThanItsLimitAfterABurst) {
  for (int i = 1; i <= 10; ++i) pool_.Give(i);  // ten requests at once, all done
  EXPECT_EQ(pool_.idle(), 3u);
  EXPECT_EQ(destroyed_, (std::vector<int>{1, 2, 3, 4, 5, 6, 7}));  // the oldest went
  EXPECT_EQ(pool_.Take(), 10);
}

TEST_F(IdlePoolTest, LetsGoOfWhatStayedIdleTooLong) {
  pool_.Give(1);
  pool_.Give(2);
  now_ms_ = 30000;
  pool_.Give(3);  // 1 and 2 were idle 30 s: kept (not longer than the limit)
  EXPECT_EQ(pool_.idle(), 3u);
  now_ms_ = 30001;
  pool_.Give(4);
  EXPECT_EQ(destroyed_, (std::vector<int>{1, 2}));
  EXPECT_EQ(pool_.idle(), 2u);
}

TEST_F(IdlePoolTest, DestroysWhatIsLeftWithThePool) {
  std::vector<int> gone;
  {
    IdlePool<int> p(4, seconds(30), [&gone](int v) { gone.push_back(v); });
    p.Give(7);
    p.Give(8);
  }
  EXPECT_EQ(gone, (std::vector<int>{7, 8}));
}

}  // namespace
}  // namespace autopar
