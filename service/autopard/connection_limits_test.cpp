#include "connection_limits.h"

#include <gtest/gtest.h>

namespace autopar {
namespace {

TEST(ConnectionLimitsTest, OneUserCannotTakeAnotherUsersConnections) {
  ConnectionLimits limits(5, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limits.Admit(1000), "");
  EXPECT_EQ(limits.Admit(1000), "busy: uid 1000 already has 3 connections open (max_connections_per_uid)");
  EXPECT_EQ(limits.of(1000), 3);
  // Another user still gets in, up to the total.
  EXPECT_EQ(limits.Admit(1001), "");
  EXPECT_EQ(limits.Admit(1001), "");
  EXPECT_EQ(limits.Admit(1002), "busy: 5 connections open (max_connections)");
  EXPECT_EQ(limits.of(1002), 0);
  EXPECT_EQ(limits.total(), 5);
  limits.Release(1000);
  EXPECT_EQ(limits.Admit(1002), "");
  EXPECT_EQ(limits.total(), 5);
}

TEST(ConnectionLimitsTest, ReleaseGivesBackAndIgnoresUnknownUsers) {
  ConnectionLimits limits(2, 2);
  EXPECT_EQ(limits.Admit(7), "");
  limits.Release(7);
  limits.Release(7);  // more releases than admissions change nothing
  limits.Release(8);
  EXPECT_EQ(limits.total(), 0);
  EXPECT_EQ(limits.Admit(7), "");
  EXPECT_EQ(limits.Admit(7), "");
  EXPECT_EQ(limits.total(), 2);
}

}  // namespace
}  // namespace autopar
