#include "launcher/program_errors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace autopar {
namespace {

class ProgramErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/program-errors-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    env_ = {{"TMPDIR", dir_}, {"SLURM_JOB_ID", "7"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "3"}};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(path.substr(0, path.rfind('/')));
    std::ofstream(path) << text;
  }
  // The task's cgroups as Slurm's task/cgroup makes them (v1), and the file ProgramErrors reads
  // the OOM kills from, under dir_ as the cgroup root.
  static constexpr const char* kTaskCgroup = "4:memory:/slurm/uid_0/job_7/step_0/task_3\n0::/\n";
  std::string CounterFile() const {
    return dir_ + "/cg/memory/slurm/uid_0/job_7/step_0/task_3/memory.oom_control";
  }

  std::string dir_;
  EnvMap env_;
};

TEST_F(ProgramErrorsTest, TheProgramsOwnOutOfMemoryErrorFromItsErrorFile) {
  ProgramErrors e;
  e.Prepare(&env_, dir_ + "/cg");
  const std::string file = env_["TORCHELASTIC_ERROR_FILE"];
  ASSERT_EQ(file.rfind(dir_ + "/autopar-launch-7.", 0), 0u) << file;
  EXPECT_EQ(file.substr(file.rfind('/')), "/error-0-3.json");
  struct stat st {};
  ASSERT_EQ(stat(file.substr(0, file.rfind('/')).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);  // a directory no other user can enter
  Write(file, R"({"message": {"message": "torch.OutOfMemoryError: CUDA out of memory.\nTraceback"}})");
  EXPECT_EQ(e.OutOfMemory(1), "torch.OutOfMemoryError: CUDA out of memory.");
  EXPECT_NE(access(file.c_str(), F_OK), 0) << "read once, then removed";
  // Another error is not an OOM; a stale file is removed before the next program starts.
  Write(file, R"({"message": {"message": "ValueError: bad shape"}})");
  EXPECT_EQ(e.OutOfMemory(1), "");
  Write(file, R"({"message": "MemoryError"})");
  e.Prepare(&env_, dir_ + "/cg");
  EXPECT_EQ(e.OutOfMemory(1), "");
  EXPECT_EQ(e.OutOfMemory(0), "");
}

// Another user's file at the name the launcher once used (guessable, in a shared /tmp the
// launcher cannot clean) is never read: no false out-of-memory verdict. The private directory
// goes with the launcher.
TEST_F(ProgramErrorsTest, AFilePlantedAtAGuessableNameIsNeverRead) {
  Write(dir_ + "/autopar-error-7.0-3.json", R"({"message": {"message": "torch.OutOfMemoryError: planted"}})");
  std::string own_dir;
  {
    ProgramErrors e;
    e.Prepare(&env_, dir_ + "/cg");
    const std::string file = env_["TORCHELASTIC_ERROR_FILE"];
    own_dir = file.substr(0, file.rfind('/'));
    EXPECT_EQ(e.OutOfMemory(1), "");
    // A symlink in its place (the program's own doing) is not followed.
    ASSERT_EQ(symlink((dir_ + "/autopar-error-7.0-3.json").c_str(), file.c_str()), 0);
    EXPECT_EQ(e.OutOfMemory(1), "");
  }
  EXPECT_NE(access(own_dir.c_str(), F_OK), 0) << "the private directory is removed";
}

TEST_F(ProgramErrorsTest, TheJobsOwnErrorFileIsReadAndKept) {
  env_["TORCHELASTIC_ERROR_FILE"] = dir_ + "/mine.json";
  ProgramErrors e;
  e.Prepare(&env_, dir_ + "/cg");
  EXPECT_EQ(env_["TORCHELASTIC_ERROR_FILE"], dir_ + "/mine.json");
  Write(dir_ + "/mine.json", R"({"message": {"message": "MemoryError: "}})");
  EXPECT_EQ(e.OutOfMemory(1), "MemoryError: ");
  EXPECT_EQ(access((dir_ + "/mine.json").c_str(), F_OK), 0);
}

TEST_F(ProgramErrorsTest, TheKernelsOomKillCountedByTheMemoryCgroup) {
  const std::string counter = CounterFile();
  Write(counter, "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  ProgramErrors e;
  e.Prepare(&env_, dir_ + "/cg", kTaskCgroup);
  EXPECT_EQ(e.OutOfMemory(128 + SIGKILL), "") << "no kill since the start";
  Write(counter, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  EXPECT_EQ(e.OutOfMemory(1), "") << "not killed: another error";
  EXPECT_EQ(e.OutOfMemory(128 + SIGKILL), "killed by the kernel's OOM killer (memory cgroup)");
  e.Prepare(&env_, dir_ + "/cg", kTaskCgroup);  // the next program: counted from 3
  EXPECT_EQ(e.OutOfMemory(128 + SIGKILL), "");
}

TEST_F(ProgramErrorsTest, ACgroupSharedWithOtherJobsTellsNothing) {
  // No task/cgroup: the task is in slurmd's cgroup, whose count goes up for any job's OOM kill on
  // the node. A program SIGKILLed meanwhile (by a user, by a test) did not run out of memory.
  const std::string shared = "4:memory:/system.slice/slurmd.service\n0::/\n";
  const std::string counter = dir_ + "/cg/memory/system.slice/slurmd.service/memory.oom_control";
  Write(counter, "oom_kill 2\n");
  ProgramErrors e;
  e.Prepare(&env_, dir_ + "/cg", shared);
  Write(counter, "oom_kill 3\n");
  EXPECT_EQ(e.OutOfMemory(128 + SIGKILL), "");
}

}  // namespace
}  // namespace autopar
