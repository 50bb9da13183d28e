#include "core/proto/proto_client.h"

#include "autopar/ckpt_c.h"
#include "core/proto/temp_socket_for_test.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace autopar {
namespace {

// A one-connection server on a temporary socket; `answer` decides what it sends back.
class FakeDaemon {
 public:
  explicit FakeDaemon(std::function<std::string(const std::string&)> answer) {
    fd_ = socket_.Listen(4);
    EXPECT_GE(fd_, 0);
    thread_ = std::thread([this, answer] {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      while (in.find('\n') == std::string::npos) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      received_ = in.substr(0, in.find('\n'));
      std::string out = answer(received_);
      if (!out.empty()) (void)!write(c, out.data(), out.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      close(c);
    });
  }
  ~FakeDaemon() {
    socket_.Shutdown();
    thread_.join();
  }
  const std::string& path() const { return socket_.path(); }
  const std::string& received() const { return received_; }

 private:
  TempSocket socket_;
  std::string received_;
  int fd_ = -1;
  std::thread thread_;
};

TEST(ClientTest, CommitStepSendsTheJobsFieldsAndReadsTheReply) {
  FakeDaemon daemon([](const std::string&) {
    return std::string(R"({"ok":true,"commit_id":4,"files":2,"bytes":10,"duplicate":false})") + "\n";
  });
  std::map<std::string, std::string> env = {
      {"AUTOPAR_SOCKET", daemon.path()}, {"SLURM_JOB_ID", "42"}, {"AUTOPAR_CKPT_DIR", "/ck/42"},
      {"AUTOPAR_CKPT_UPLOAD", "file:///shared"}, {"RANK", "3"}, {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "2"}, {"AUTOPAR_CKPT_KEEP", "2"}, {"SLURMD_NODENAME", "node2"}};
  auto job = JobCkptEnvFrom([&](const char* k) -> const char* {
    auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  ASSERT_TRUE(job.ok()) << job.message();
  auto reply = CommitStep(*job, 7, 2000);
  ASSERT_TRUE(reply.ok()) << reply.message();
  EXPECT_EQ(reply->commit_id, 4);
  EXPECT_EQ(reply->files, 2);
  auto req = DecodeRequest(daemon.received());
  ASSERT_TRUE(req.ok()) << req.message();
  EXPECT_EQ(req->job_id, "42");
  EXPECT_EQ(req->step, 7);
  EXPECT_EQ(req->rank, 3);
  EXPECT_EQ(req->world_size, 4);
  EXPECT_EQ(req->local_world_size, 2);
  EXPECT_EQ(req->keep, 2);
  EXPECT_EQ(req->upload, "file:///shared");
  EXPECT_EQ(req->node, "node2");
}

// The C API's synchronous heartbeat passes the time-limit request on (reply field
// checkpoint_requested); the background one is tested in heartbeat_sender_test.cpp.
TEST(ClientTest, CApiHeartbeatReportsTheCheckpointRequest) {
  struct Case {
    const char* reply;
    int want;
  } cases[] = {{R"({"ok":true,"checkpoint_requested":true})", 1}, {R"({"ok":true})", 0}};
  for (const auto& c : cases) {
    FakeDaemon daemon([&c](const std::string&) { return std::string(c.reply) + "\n"; });
    setenv("AUTOPAR_SOCKET", daemon.path().c_str(), 1);
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("AUTOPAR_CKPT_DIR", "/ck/42", 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    int requested = -1;
    char err[256] = {};
    ASSERT_EQ(autopar_ckpt_heartbeat_sync(17, -1, -1, 0, 0.0, &requested, err, sizeof(err)), 0)
        << err;
    EXPECT_EQ(requested, c.want) << c.reply;
    auto req = DecodeRequest(daemon.received());
    ASSERT_TRUE(req.ok()) << req.message();
    EXPECT_EQ(req->op, Op::kHeartbeat);
    EXPECT_EQ(req->step, 17);
    EXPECT_EQ(req->rank, 1);
  }
  unsetenv("AUTOPAR_SOCKET");
}

TEST(ClientTest, RefusalIsAnErrorWithTheDaemonsMessage) {
  FakeDaemon daemon([](const std::string&) {
    return std::string(R"({"ok":false,"error":"commit: job 42 belongs to user alice"})") + "\n";
  });
  Request r;
  r.op = Op::kStatus;
  auto reply = CallDaemonOk(daemon.path(), r, 2000);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.message(), "commit: job 42 belongs to user alice");
}

TEST(ClientTest, SilentDaemonTimesOut) {
  FakeDaemon daemon([](const std::string&) { return std::string(); });
  Request r;
  r.op = Op::kStatus;
  auto start = std::chrono::steady_clock::now();
  auto reply = CallDaemon(daemon.path(), r, 100);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.message().find("no reply within 100 ms"), std::string::npos) << reply.message();
  EXPECT_LT(ms, 1000);
}

TEST(ClientTest, MissingDaemonAndEnvironmentAreNamed) {
  Request r;
  r.op = Op::kStatus;
  auto reply = CallDaemon("/nonexistent/autopard.sock", r, 100, /*retry_ms=*/0);
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.message().find("autopard (/nonexistent/autopard.sock): connect:"), std::string::npos);
  auto job = JobCkptEnvFrom([](const char* k) -> const char* {
    return std::string(k) == "SLURM_JOB_ID" ? "1" : nullptr;
  });
  ASSERT_FALSE(job.ok());
  EXPECT_NE(job.message().find("AUTOPAR_CKPT_DIR is not set"), std::string::npos);
  // A heartbeat needs no checkpoint directory, only the socket.
  auto task = JobTaskEnvFrom([](const char* k) -> const char* {
    return std::string(k) == "SLURM_JOB_ID" ? "1" : nullptr;
  });
  ASSERT_FALSE(task.ok());
  EXPECT_NE(task.message().find("AUTOPAR_SOCKET is not set"), std::string::npos) << task.message();
  EXPECT_EQ(RankStepDir("/ck/", 5, 2), "/ck/step-5/rank-2");
}

// A daemon that starts listening `delay` after the test begins (an autopard restarting), answers
// one request with `reply`, and records it.
class LateDaemon {
 public:
  LateDaemon(std::chrono::milliseconds delay, std::string reply) {
    thread_ = std::thread([this, delay, reply] {
      std::this_thread::sleep_for(delay);
      int fd = socket_.Listen(4);
      if (fd < 0) return;
      int c = accept(fd, nullptr, nullptr);
      char buf[4096];
      std::string in;
      while (c >= 0 && in.find('\n') == std::string::npos) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      (void)!write(c, reply.data(), reply.size());
      close(c);
    });
  }
  ~LateDaemon() { thread_.join(); }
  const std::string& path() const { return socket_.path(); }

 private:
  TempSocket socket_;
  std::thread thread_;
};

TEST(ClientTest, ARestartingDaemonIsWaitedForWithinTheRetryTime) {
  LateDaemon daemon(std::chrono::milliseconds(600), "{\"ok\":true,\"uploads\":[]}\n");
  Request r;
  r.op = Op::kStatus;
  const auto start = std::chrono::steady_clock::now();
  auto reply = CallDaemon(daemon.path(), r, 1000, /*retry_ms=*/10000);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(reply.ok()) << reply.message();
  EXPECT_TRUE(reply->status.ok());
  EXPECT_GE(ms, 550);
}

TEST(ClientTest, ADaemonThatStaysAwayIsAnErrorAfterTheRetryTime) {
  Request r;
  r.op = Op::kStatus;
  const auto start = std::chrono::steady_clock::now();
  auto reply = CallDaemon("/nonexistent/autopard.sock", r, 100, /*retry_ms=*/700);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.message().find("connect: No such file or directory"), std::string::npos) << reply.message();
  EXPECT_NE(reply.message().find("times over 0.7 s)"), std::string::npos) << reply.message();
  EXPECT_GE(ms, 300);
  EXPECT_LT(ms, 5000);
}

TEST(ClientTest, RetryTimeComesFromTheEnvironment) {
  auto env = [](const char* value) {
    return [value](const char* name) -> const char* {
      return std::string(name) == "AUTOPAR_DAEMON_RETRY_S" ? value : nullptr;
    };
  };
  EXPECT_EQ(DaemonRetryMs(env(nullptr)), kDefaultDaemonRetryMs);
  EXPECT_EQ(DaemonRetryMs(env("0")), 0);
  EXPECT_EQ(DaemonRetryMs(env("5")), 5000);
  EXPECT_EQ(DaemonRetryMs(env("-1")), kDefaultDaemonRetryMs);
  EXPECT_EQ(DaemonRetryMs(env("soon")), kDefaultDaemonRetryMs);
}

TEST(ClientTest, AnEventIsNotSentTwice) {
  // The daemon takes the request and closes without a reply (it stopped while serving it): a
  // heartbeat would be sent again, an event is not (it would be journalled twice).
  FakeDaemon daemon([](const std::string&) { return std::string(); });
  Request r;
  r.op = Op::kEvent;
  r.job_id = "7";
  r.kind = "note";
  r.rank = 0;
  r.step = 1;
  const auto start = std::chrono::steady_clock::now();
  auto reply = CallDaemon(daemon.path(), r, 2000, /*retry_ms=*/10000);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(reply.ok());
  EXPECT_NE(reply.message().find("connection closed before the reply"), std::string::npos) << reply.message();
  EXPECT_EQ(reply.message().find("tried"), std::string::npos) << reply.message();
  EXPECT_LT(ms, 1500);
}

// ---- the launcher's resume decision (DecideResume / RestoreDecided) ---------------------------

// One rank's node: the complete steps its autopard could restore for it, and those whose objects
// are corrupt for this rank (skipped with a reason, as autopard does).
struct FakeNode {
  explicit FakeNode(std::set<int64_t> u = {}, std::set<int64_t> c = {}, bool down = false)
      : usable(std::move(u)), corrupt(std::move(c)), unreachable(down) {}
  std::set<int64_t> usable;
  std::set<int64_t> corrupt;
  bool unreachable = false;
  std::vector<int64_t> asked;   // max_step of every restore request
  std::vector<int64_t> probed;  // max_step of every probe
};

// The node's answer for `rank` to a restore of the newest step <= max_step (-1: any). A probe reads
// the manifests only: it does not see a corrupt object, and fetches nothing (no dir).
Result<RestoreReply> Answer(const FakeNode& node, int rank, int64_t max_step, bool probe) {
  if (node.unreachable) return Status::Error("autopard (/run/x.sock): connect: No such file or directory");
  std::set<int64_t> all = node.usable;
  all.insert(node.corrupt.begin(), node.corrupt.end());
  RestoreReply r;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (max_step >= 0 && *it > max_step) continue;
    if (!probe && node.corrupt.count(*it)) {
      r.skipped.push_back("step " + std::to_string(*it) + ": SHA-256 mismatch");
      continue;
    }
    r.step = *it;
    r.source_job = "41";
    if (!probe) r.dir = "/ck/step-" + std::to_string(*it) + "/rank-" + std::to_string(rank);
    break;
  }
  return r;
}

RestoreFn FakeRestore(FakeNode* node, int rank) {
  return [node, rank](int64_t max_step) {
    node->asked.push_back(max_step);
    return Answer(*node, rank, max_step, false);
  };
}

// autopard's probe: the newest complete step, from the manifests only.
RestoreFn FakeProbe(FakeNode* node) {
  return [node](int64_t max_step) {
    node->probed.push_back(max_step);
    return Answer(*node, 0, max_step, true);
  };
}

// agree_min as a real collective between the ranks' threads (the launcher uses a PMIx fence).
class Collective {
 public:
  explicit Collective(int n) : n_(n) {}
  int64_t AgreeMin(int64_t mine) {
    std::unique_lock<std::mutex> lock(mu_);
    const int generation = generation_;
    least_ = std::min(least_, mine);
    if (++arrived_ == n_) {
      result_ = least_;
      least_ = std::numeric_limits<int64_t>::max();
      arrived_ = 0;
      ++generation_;
      ++rounds_;
      cv_.notify_all();
      return result_;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
    return result_;
  }
  int rounds() const { return rounds_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  int arrived_ = 0, generation_ = 0, rounds_ = 0;
  int64_t least_ = std::numeric_limits<int64_t>::max(), result_ = 0;
};

TEST(ResumeTest, DecideResumeTakesRankZerosProbeOrStartsFresh) {
  FakeNode node({11, 7}, {13});
  ResumeDecision d = DecideResume(FakeProbe(&node));
  EXPECT_TRUE(d.enabled);
  EXPECT_EQ(d.step, 13);  // the probe does not see the corrupt object: the restore will
  EXPECT_EQ(d.dir, "");
  EXPECT_EQ(d.source_job, "41");
  EXPECT_EQ(node.probed, std::vector<int64_t>{-1});
  EXPECT_TRUE(node.asked.empty());  // nothing restored before the rendezvous
  FakeNode down({11}, {}, true);
  d = DecideResume(FakeProbe(&down));
  EXPECT_EQ(d.step, -1);
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_NE(d.notes[0].find("warning: cannot restore a checkpoint: autopard (/run/x.sock)"), std::string::npos);
  // Without a rendezvous (--mpi=none) a rank decides with its restore.
  FakeNode alone({11, 7}, {13});
  d = DecideResume(FakeRestore(&alone, 2));
  EXPECT_EQ(d.step, 11);
  EXPECT_EQ(d.dir, "/ck/step-11/rank-2");
  ASSERT_EQ(d.notes.size(), 1u);
  EXPECT_EQ(d.notes[0], "checkpoint not usable: step 13: SHA-256 mismatch");
}

TEST(ResumeTest, RankZeroRestoresAfterTheDecisionAndKeepsItsProbeNotes) {
  FakeNode node({11, 7});
  ResumeDecision own;
  own.enabled = true;
  own.step = 11;
  own.notes = {"checkpoint not usable: step 12 of job 41: manifest.json: not found"};
  auto d = RestoreDecided(11, &own, FakeRestore(&node, 0), [](int64_t mine) { return mine; });
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->step, 11);
  EXPECT_EQ(d->dir, "/ck/step-11/rank-0");
  EXPECT_EQ(node.asked, std::vector<int64_t>{11});
  EXPECT_EQ(d->notes, own.notes);
}

TEST(ResumeTest, EveryRankEndsOnOneStep) {
  struct Case {
    const char* name;
    std::vector<FakeNode> nodes;  // one per rank; rank 0 first
    int64_t want_step;
    int want_rounds;              // agree_min collectives
    std::vector<std::string> rank_notes;  // a note expected in rank i's notes ("" = none)
  } cases[] = {
      {"rank 0 found nothing: a fresh start without asking anyone", {FakeNode(), FakeNode({9}), FakeNode({9})},
       -1, 0, {"", "", ""}},
      {"every rank holds the decided step: one round", {FakeNode({19, 15}), FakeNode({19, 15}), FakeNode({19, 15})},
       19, 1, {"", "", ""}},
      {"a newer step completed after rank 0 decided is ignored",
       {FakeNode({19}), FakeNode({23, 19}), FakeNode({23, 19})}, 19, 1, {"", "", ""}},
      {"a corrupt object of rank 2 moves everyone to the previous step",
       {FakeNode({19, 15}), FakeNode({19, 15}), FakeNode({15}, {19})}, 15, 2,
       {"", "", "checkpoint not usable: step 19: SHA-256 mismatch"}},
      {"a corrupt object of rank 0 (unseen by its probe) moves everyone to the previous step",
       {FakeNode({15}, {19}), FakeNode({19, 15}), FakeNode({19, 15})}, 15, 2,
       {"checkpoint not usable: step 19: SHA-256 mismatch", "", ""}},
      {"a rank without any usable step: everyone starts fresh",
       {FakeNode({19}), FakeNode({}, {19}), FakeNode({19})}, -1, 1,
       {"is not usable on every rank", "is not usable on every rank", "is not usable on every rank"}},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    const int n = static_cast<int>(c.nodes.size());
    ResumeDecision own = DecideResume(FakeProbe(&c.nodes[0]));
    Collective coll(n);
    std::vector<Result<ResumeDecision>> out(static_cast<size_t>(n), Status::Error("not run"));
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        out[static_cast<size_t>(r)] =
            RestoreDecided(own.step, r == 0 ? &own : nullptr, FakeRestore(&c.nodes[static_cast<size_t>(r)], r),
                           [&](int64_t mine) { return coll.AgreeMin(mine); });
      });
    }
    for (auto& t : ranks) t.join();
    EXPECT_EQ(coll.rounds(), c.want_rounds);
    for (int r = 0; r < n; ++r) {
      const auto& d = out[static_cast<size_t>(r)];
      ASSERT_TRUE(d.ok()) << "rank " << r << ": " << d.message();
      EXPECT_EQ(d->step, c.want_step) << "rank " << r;
      if (c.want_step >= 0) {
        EXPECT_EQ(d->dir, "/ck/step-" + std::to_string(c.want_step) + "/rank-" + std::to_string(r));
      } else {
        EXPECT_EQ(d->dir, "");
      }
      const std::string& want = c.rank_notes[static_cast<size_t>(r)];
      bool found = want.empty();
      for (const auto& note : d->notes) found = found || note.find(want) != std::string::npos;
      EXPECT_TRUE(found) << "rank " << r << " lacks a note with '" << want << "'";
      // Every rank, rank 0 included, first restores exactly rank 0's decision, then only older
      // steps; a fresh start asks nobody.
      const auto& asked = c.nodes[static_cast<size_t>(r)].asked;
      if (own.step < 0) {
        EXPECT_TRUE(asked.empty()) << "rank " << r;
      } else {
        ASSERT_FALSE(asked.empty()) << "rank " << r;
        EXPECT_EQ(asked[0], own.step) << "rank " << r;
      }
      for (int64_t a : asked) {
        EXPECT_GE(a, 0);
        EXPECT_LE(a, own.step);
      }
    }
    EXPECT_EQ(c.nodes[0].probed, std::vector<int64_t>{-1});
  }
}

TEST(ResumeTest, UnreachableAutopardAfterTheDecisionFailsTheLaunch) {
  FakeNode down({19}, {}, true);
  auto d = RestoreDecided(19, nullptr, FakeRestore(&down, 3), [](int64_t) -> int64_t {
    ADD_FAILURE() << "agree_min called after a failed restore";
    return -1;
  });
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.message(),
            "cannot restore checkpoint step 19 (decided by rank 0): autopard (/run/x.sock): connect: "
            "No such file or directory");
}

TEST(ResumeTest, RanksThatNeverAgreeFailAfterBoundedRounds) {
  FakeNode node;
  for (int64_t s = 0; s <= 40; ++s) node.usable.insert(s);
  int64_t next = 40;
  int calls = 0;
  // Another rank always holds one step less (an endless run of unusable steps).
  auto d = RestoreDecided(40, nullptr, FakeRestore(&node, 1), [&](int64_t) {
    ++calls;
    return --next;
  });
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("did not agree on a step within 16 rounds"), std::string::npos) << d.message();
  EXPECT_EQ(calls, 16);
}

}  // namespace
}  // namespace autopar
