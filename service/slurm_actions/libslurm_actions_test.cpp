// The slurm.conf check in front of libslurm (which ends the process without a configuration).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "service/slurm_actions/slurm_actions.h"

namespace autopar {
namespace {

TEST(SlurmConfTest, PathFromTheSettingThenSlurmConfThenTheDefault) {
  struct Case {
    const char* setting;
    const char* env;  // nullptr: unset
    const char* want;
  } cases[] = {
      {"/site/slurm.conf", "/env/slurm.conf", "/site/slurm.conf"},
      {"", "/env/slurm.conf", "/env/slurm.conf"},
      {"", "", "/etc/slurm/slurm.conf"},
      {"", nullptr, "/etc/slurm/slurm.conf"},
  };
  for (const auto& c : cases) {
    if (c.env) {
      setenv("SLURM_CONF", c.env, 1);
    } else {
      unsetenv("SLURM_CONF");
    }
    EXPECT_EQ(SlurmConfPath(c.setting), c.want) << c.setting << " / " << (c.env ? c.env : "unset");
  }
  unsetenv("SLURM_CONF");
}

TEST(SlurmConfTest, UnreadableConfIsAnErrorNamingTheFile) {
  auto slurm = OpenLibSlurmActions("/nonexistent/autopar-test/slurm.conf");
  ASSERT_FALSE(slurm.ok());
  EXPECT_EQ(slurm.message(),
            "slurm.conf /nonexistent/autopar-test/slurm.conf: not readable (No such file or "
            "directory)");
}

}  // namespace
}  // namespace autopar
