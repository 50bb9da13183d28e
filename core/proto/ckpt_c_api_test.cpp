// The checkpoint C API against environment variables (no daemon needed for these calls; the
// commit path is the protocol client's, tested in client_test.cpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "autopar/ckpt_c.h"

namespace {

TEST(CkptCApiTest, StepDirResumeStepAndErrors) {
  setenv("SLURM_JOB_ID", "42", 1);
  setenv("AUTOPAR_CKPT_DIR", "/ck/42", 1);
  setenv("AUTOPAR_SOCKET", "/nonexistent/autopard.sock", 1);
  setenv("AUTOPAR_DAEMON_RETRY_S", "0", 1);  // no autopard to wait for
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "4", 1);
  char buf[256];
  char err[256];
  ASSERT_EQ(autopar_ckpt_step_dir(7, buf, sizeof(buf), err, sizeof(err)), 0) << err;
  EXPECT_STREQ(buf, "/ck/42/step-7/rank-3");
  EXPECT_EQ(autopar_ckpt_step_dir(7, buf, 4, err, sizeof(err)), -1);
  EXPECT_NE(std::string(err).find("buffer too small"), std::string::npos);
  EXPECT_EQ(autopar_ckpt_commit(7, err, sizeof(err)), -1);
  EXPECT_NE(std::string(err).find("autopard (/nonexistent/autopard.sock): connect"), std::string::npos) << err;
  char tiny[8];
  EXPECT_EQ(autopar_ckpt_commit(7, tiny, sizeof(tiny)), -1);
  EXPECT_EQ(std::string(tiny).size(), 7u);  // truncated, NUL-terminated
  unsetenv("AUTOPAR_RESUME_STEP");
  EXPECT_EQ(autopar_ckpt_resume_step(), -1);
  setenv("AUTOPAR_RESUME_STEP", "120", 1);
  EXPECT_EQ(autopar_ckpt_resume_step(), 120);
  unsetenv("AUTOPAR_CKPT_DIR");
  EXPECT_EQ(autopar_ckpt_commit(7, err, sizeof(err)), -1);
  EXPECT_NE(std::string(err).find("AUTOPAR_CKPT_DIR is not set"), std::string::npos);
}

}  // namespace
