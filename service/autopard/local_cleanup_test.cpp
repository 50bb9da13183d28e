#include "local_cleanup.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace autopar {
namespace {

// A node's checkpoint directories and Slurm's view of their jobs, in memory.
struct FakeNode {
  std::vector<CheckpointDirRow> rows;
  std::map<std::string, JobEnd> ends;
  std::map<std::string, std::set<std::string>> dirs;  // dir -> step entries
  std::set<std::string> removed_if_empty;
  std::vector<std::string> journal;
  int asked = 0;

  LocalCleanupIo Io() {
    LocalCleanupIo io;
    io.dirs = [this] { return Result<std::vector<CheckpointDirRow>>(rows); };
    io.job_end = [this](const std::string& job) {
      ++asked;
      auto it = ends.find(job);
      return it == ends.end() ? JobEnd::kCannotTell : it->second;
    };
    io.steps = [this](const UserIdentity&, const std::string& dir) {
      auto it = dirs.find(dir);
      std::vector<std::string> out;
      if (it != dirs.end()) out.assign(it->second.begin(), it->second.end());
      return Result<std::vector<std::string>>(out);
    };
    io.remove_tree = [this](const UserIdentity&, const std::string& path) {
      const auto slash = path.rfind('/');
      dirs[path.substr(0, slash)].erase(path.substr(slash + 1));
      return Status::Ok();
    };
    io.remove_if_empty = [this](const UserIdentity&, const std::string& dir) {
      if (dirs[dir].empty()) removed_if_empty.insert(dir);
    };
    io.journal = [this](const std::string& job, const std::string& detail) {
      journal.push_back(job + ": " + detail);
    };
    return io;
  }
};

CheckpointDirRow Row(const std::string& job, const std::string& dir, bool uploads, int64_t unfinished) {
  CheckpointDirRow r;
  r.job_id = job;
  r.ckpt_dir = dir;
  r.owner = UserIdentity{1000, 1000};
  r.uploads = uploads;
  r.unfinished = unfinished;
  return r;
}

TEST(LocalCleanupTest, AnEndedJobsUploadedStepsGoAndTheRestStays) {
  FakeNode n;
  n.rows = {Row("1", "/tmp/a/1", true, 0), Row("2", "/tmp/a/2", true, 0), Row("3", "/tmp/a/3", true, 2)};
  n.ends = {{"1", JobEnd::kEnded}, {"2", JobEnd::kRunning}, {"3", JobEnd::kEnded}};
  n.dirs["/tmp/a/1"] = {"step-4", "step-8"};
  n.dirs["/tmp/a/2"] = {"step-4"};
  n.dirs["/tmp/a/3"] = {"step-4"};
  LocalCheckpointCleaner cleaner(LocalCleanup::kUploaded, n.Io());
  EXPECT_EQ(cleaner.Sweep(), 1);
  EXPECT_TRUE(n.dirs["/tmp/a/1"].empty());
  EXPECT_EQ(n.removed_if_empty, std::set<std::string>{"/tmp/a/1"});
  EXPECT_EQ(n.dirs["/tmp/a/2"].size(), 1u);  // still running
  EXPECT_EQ(n.dirs["/tmp/a/3"].size(), 1u);  // two uploads not done: the only copy of them
  EXPECT_EQ(n.journal, std::vector<std::string>{"1: dir=/tmp/a/1 steps=2"});
  // Job 2 ends and job 3's uploads finish: the next sweep takes them; job 1 is not asked again.
  n.ends["2"] = JobEnd::kEnded;
  n.rows[2].unfinished = 0;
  n.asked = 0;
  EXPECT_EQ(cleaner.Sweep(), 2);
  EXPECT_EQ(n.asked, 2);
  EXPECT_TRUE(n.dirs["/tmp/a/2"].empty());
  EXPECT_TRUE(n.dirs["/tmp/a/3"].empty());
  EXPECT_EQ(cleaner.Sweep(), 0);
}

TEST(LocalCleanupTest, SlurmIsAskedOnlyAboutDirectoriesThatHoldSteps) {
  FakeNode n;
  n.rows = {Row("1", "/tmp/a/1", true, 0), Row("2", "/tmp/a/2", true, 0)};
  n.ends = {{"1", JobEnd::kEnded}, {"2", JobEnd::kRunning}};
  n.dirs["/tmp/a/2"] = {};  // running, nothing written here yet
  LocalCheckpointCleaner cleaner(LocalCleanup::kUploaded, n.Io());
  EXPECT_EQ(cleaner.Sweep(), 0);
  EXPECT_EQ(n.asked, 0);
  n.dirs["/tmp/a/2"] = {"step-5"};  // job 2 writes a step later: still watched
  n.ends["2"] = JobEnd::kEnded;
  EXPECT_EQ(cleaner.Sweep(), 1);
  EXPECT_EQ(n.asked, 1);
  EXPECT_TRUE(n.dirs["/tmp/a/2"].empty());
}

TEST(LocalCleanupTest, LocalOnlyCheckpointsStayUnlessTheSiteSaysAll) {
  for (LocalCleanup policy : {LocalCleanup::kUploaded, LocalCleanup::kAll, LocalCleanup::kNone}) {
    FakeNode n;
    n.rows = {Row("1", "/ck/1", false, 0)};
    n.ends = {{"1", JobEnd::kEnded}};
    n.dirs["/ck/1"] = {"step-2"};
    LocalCheckpointCleaner cleaner(policy, n.Io());
    EXPECT_EQ(cleaner.Sweep(), policy == LocalCleanup::kAll ? 1 : 0);
    EXPECT_EQ(n.dirs["/ck/1"].empty(), policy == LocalCleanup::kAll);
    if (policy == LocalCleanup::kNone) {
      EXPECT_EQ(n.asked, 0);
    }
  }
}

TEST(LocalCleanupTest, AJobSlurmCannotBeAskedAboutIsKeptForTheNextSweep) {
  FakeNode n;
  n.rows = {Row("7", "/tmp/a/7", true, 0)};
  n.dirs["/tmp/a/7"] = {"step-1"};
  LocalCheckpointCleaner cleaner(LocalCleanup::kUploaded, n.Io());
  EXPECT_EQ(cleaner.Sweep(), 0);  // no answer: kCannotTell
  EXPECT_EQ(n.dirs["/tmp/a/7"].size(), 1u);
  n.ends["7"] = JobEnd::kEnded;
  EXPECT_EQ(cleaner.Sweep(), 1);
}

TEST(LocalCleanupTest, PolicyNamesParse) {
  EXPECT_EQ(*ParseLocalCleanup("uploaded"), LocalCleanup::kUploaded);
  EXPECT_EQ(*ParseLocalCleanup("all"), LocalCleanup::kAll);
  EXPECT_EQ(*ParseLocalCleanup("none"), LocalCleanup::kNone);
  EXPECT_EQ(ParseLocalCleanup("yes").message(), "must be uploaded, all or none, got 'yes'");
}

}  // namespace
}  // namespace autopar
