// One daemon under concurrent load: many threads call Handle() at once, as autopard's
// connection threads do, while it serves its socket, flushes heartbeats, ticks the failure handler
// and uploads. Every commit must reach its final state exactly once and every event must be
// journalled exactly once. A real test in every build, and the workload of the ThreadSanitizer
// stage of scripts/test.sh (build-tsan, -DAUTOPAR_TSAN=ON).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/proto/proto_client.h"
#include "daemon.h"
#include "socket_client_for_test.h"
#include "service/slurm_actions/fake_slurm_for_test.h"

namespace autopar {
namespace {

namespace fs = std::filesystem;
using testing_socket::Connect;
using testing_socket::Roundtrip;
using testing_socket::Write;

// Every job of the test belongs to the user running it.
class OwnJobs : public JobOwnerLookup {
 public:
  Result<uid_t> Owner(const std::string&) override { return geteuid(); }
};

// Jobs 101 and 102 upload to a file:// store, 103 and 104 are local-only; each has two ranks on
// this node, and each rank is one thread (8 in all) committing kSteps steps. Between commits a
// rank heartbeats, sends an event, asks for the upload status and now and then lists its job's
// checkpoints and reads its journal; each commit of a step is sent a second time after the next
// step's (a retried request: it must be a duplicate and upload nothing).
constexpr int kSteps = 30;
constexpr int kWorld = 2;
const std::vector<std::string> kUploadJobs = {"101", "102"};
const std::vector<std::string> kLocalJobs = {"103", "104"};
constexpr const char* kProbeKind = "load_probe";

class DaemonLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/autopard-load-XXXXXX";
    root_ = mkdtemp(tmpl);
    config_.state_dir = (root_ / "state").string();
    config_.socket = (root_ / "s.sock").string();
    config_.node = "nodeL";
    config_.posix.fsync = false;
    config_.retry.max_attempts = 2;
    config_.retry.initial = std::chrono::milliseconds(1);
    fs::create_directories(root_ / "store");
    upload_ = "file://" + (root_ / "store").string();
    auto d = Daemon::Create(config_, std::make_unique<OwnJobs>());
    ASSERT_TRUE(d.ok()) << d.message();
    daemon_ = std::move(*d);
    daemon_->EnableFailureHandling(std::make_shared<FakeSlurm>());
  }
  void TearDown() override {
    daemon_.reset();
    fs::remove_all(root_);
  }
  bool Uploads(const std::string& job) const {
    return std::find(kUploadJobs.begin(), kUploadJobs.end(), job) != kUploadJobs.end();
  }
  // One rank's thread; failures are collected (gtest assertions are thread-safe, but a message
  // per failure would flood the output).
  void RunRank(const std::string& job, int rank) {
    const Peer peer{getpid(), 0, 0};
    const std::string dir = (root_ / "ck" / job).string();
    auto fail = [&](const std::string& what, const Reply& r) {
      std::lock_guard<std::mutex> l(mu_);
      failures_.push_back("job " + job + " rank " + std::to_string(rank) + ": " + what + ": " +
                          r.status.message());
    };
    auto commit = [&](int64_t step) {
      Request c;
      c.op = Op::kCommit;
      c.job_id = job;
      c.step = step;
      c.rank = rank;
      c.world_size = kWorld;
      c.local_world_size = kWorld;
      c.ckpt_dir = dir;
      c.upload = Uploads(job) ? upload_ : "";
      return daemon_->Handle(c, peer);
    };
    for (int64_t step = 1; step <= kSteps; ++step) {
      const std::string rank_dir = RankStepDir(dir, step, rank);
      Write(rank_dir + "/model.pt", "job " + job + " step " + std::to_string(step) + " rank " + std::to_string(rank));
      Write(rank_dir + "/opt/state.bin", std::string(4096 + static_cast<size_t>(step), static_cast<char>('a' + rank)));
      Reply c = commit(step);
      if (!c.status.ok() || c.commit.duplicate || c.commit.files != 2) fail("commit " + std::to_string(step), c);
      if (step > 1) {
        Reply again = commit(step - 1);
        if (!again.status.ok() || !again.commit.duplicate) fail("repeated commit " + std::to_string(step - 1), again);
      }
      for (int i = 0; i < 4; ++i) {
        Request hb;
        hb.op = Op::kHeartbeat;
        hb.job_id = job;
        hb.rank = rank;
        hb.step = step * 4 + i;
        hb.samples = hb.step * 8;
        hb.loss = 1.0 / static_cast<double>(hb.step);
        Reply r = daemon_->Handle(hb, peer);
        if (!r.status.ok()) fail("heartbeat", r);
      }
      Request ev;
      ev.op = Op::kEvent;
      ev.job_id = job;
      ev.kind = kProbeKind;
      ev.rank = rank;
      ev.step = step;
      ev.detail = "n=" + std::to_string(step);
      if (Reply r = daemon_->Handle(ev, peer); !r.status.ok()) fail("event", r);
      Request st;
      st.op = Op::kStatus;
      st.job_id = job;
      if (Reply r = daemon_->Handle(st, peer); !r.status.ok()) fail("status", r);
      if (step % 5 == 0) {
        // An uploading job's store by its URI (by job id it has nothing to show until a step is
        // uploaded), a local-only job by its id.
        Request ls;
        ls.op = Op::kLs;
        (Uploads(job) ? ls.upload : ls.job_id) = Uploads(job) ? upload_ : job;
        if (Reply r = daemon_->Handle(ls, peer); !r.status.ok()) fail("ls", r);
        Request evs;
        evs.op = Op::kEvents;
        evs.job_id = job;
        if (Reply r = daemon_->Handle(evs, peer); !r.status.ok()) fail("events", r);
      }
    }
  }

  fs::path root_;
  DaemonConfig config_;
  std::string upload_;
  std::unique_ptr<Daemon> daemon_;
  std::mutex mu_;
  std::vector<std::string> failures_;
};

TEST_F(DaemonLoadTest, ConcurrentRequestsLoseAndDuplicateNothing) {
  Status served = Status::Error("not returned");
  std::thread server([&] { served = daemon_->Serve(); });
  // A client on the socket asks for the status all along (the accepting threads, the heartbeat
  // flusher and the failure ticker run meanwhile).
  std::atomic<bool> done{false};
  std::atomic<int> socket_replies{0};
  std::thread socket_client([&] {
    int fd = -1;
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         fd < 0 && std::chrono::steady_clock::now() < deadline;) {
      fd = Connect(config_.socket);
      if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // not bound yet
    }
    if (fd < 0) return;
    Request r;
    r.op = Op::kStatus;
    while (!done) {
      if (!DecodeReply(Op::kStatus, Roundtrip(fd, r)).ok()) break;
      ++socket_replies;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    close(fd);
  });

  std::vector<std::thread> ranks;
  for (const auto* jobs : {&kUploadJobs, &kLocalJobs}) {
    for (const auto& job : *jobs) {
      for (int rank = 0; rank < kWorld; ++rank) ranks.emplace_back([this, job, rank] { RunRank(job, rank); });
    }
  }
  for (auto& t : ranks) t.join();
  daemon_->uploader().WaitIdle();
  done = true;
  socket_client.join();
  daemon_->Stop();
  server.join();
  EXPECT_TRUE(served.ok()) << served.message();
  EXPECT_GT(socket_replies.load(), 0);
  for (const auto& f : failures_) ADD_FAILURE() << f;
  ASSERT_TRUE(failures_.empty());

  auto db = StateDb::Open(config_.state_dir + "/autopard.db");
  ASSERT_TRUE(db.ok()) << db.message();
  const Peer peer{getpid(), 0, 0};
  for (const auto* jobs : {&kUploadJobs, &kLocalJobs}) {
    for (const auto& job : *jobs) {
      SCOPED_TRACE("job " + job);
      const bool uploads = Uploads(job);
      // Each (step, rank) committed once, in its final state.
      auto commits = (*db)->Commits(job, 100000);
      ASSERT_TRUE(commits.ok()) << commits.message();
      EXPECT_EQ(commits->size(), static_cast<size_t>(kSteps * kWorld));
      std::set<std::pair<int64_t, int>> seen;
      for (const auto& c : *commits) {
        EXPECT_TRUE(seen.emplace(c.step, c.rank).second) << "step " << c.step << " rank " << c.rank << " twice";
        EXPECT_EQ(c.state, uploads ? "uploaded" : "local") << "step " << c.step << " rank " << c.rank << ": " << c.error;
      }
      // Every step complete, with both ranks, in storage or on the node.
      Request ls;
      ls.op = Op::kLs;
      ls.job_id = job;
      Reply listed = daemon_->Handle(ls, peer);
      ASSERT_TRUE(listed.status.ok()) << listed.status.message();
      std::set<int64_t> steps;
      for (const auto& s : listed.steps) {
        EXPECT_TRUE(steps.insert(s.step).second) << "step " << s.step << " listed twice";
        EXPECT_EQ(s.state, uploads ? "COMPLETE" : "COMPLETE-LOCAL") << "step " << s.step;
        EXPECT_EQ(s.ranks, kWorld) << "step " << s.step;
      }
      EXPECT_EQ(steps.size(), static_cast<size_t>(kSteps));
      if (uploads) {
        for (int64_t step = 1; step <= kSteps; ++step) {
          EXPECT_TRUE(fs::exists(root_ / ("store/job-" + job + "/step-" + std::to_string(step) + "/manifest.json")))
              << "step " << step;
        }
      }
      // Every event of every rank journalled once.
      Request evs;
      evs.op = Op::kEvents;
      evs.job_id = job;
      Reply events = daemon_->Handle(evs, peer);
      ASSERT_TRUE(events.status.ok()) << events.status.message();
      std::map<std::pair<int, int64_t>, int> probes;
      for (const auto& e : events.events) {
        if (e.kind != kProbeKind) continue;
        EXPECT_EQ(e.detail, "n=" + std::to_string(e.step));
        ++probes[{e.rank, e.step}];
      }
      EXPECT_EQ(probes.size(), static_cast<size_t>(kSteps * kWorld));
      for (const auto& [key, n] : probes) {
        EXPECT_EQ(n, 1) << "rank " << key.first << " step " << key.second;
      }
    }
  }
}

}  // namespace
}  // namespace autopar
