// Journal publication (journal_uri) and `events` across nodes: the publisher over an in-memory
// store, and two daemons ("nodes") sharing a file:// journal directory, with authorization by the
// owner Slurm names or, after Slurm has forgotten the job, the owner recorded with the journals.
#include "journal_publisher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>

#include "daemon.h"
#include "memory_store_for_test.h"

namespace autopar {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

JournalEvent Ev(double t, const std::string& node, const std::string& job, const std::string& kind,
                const std::string& detail = "") {
  return JournalEvent{t, node, job, kind, -1, -1, detail};
}

// Counts publications and their bytes (and can fail them) so tests wait for an event, not for
// time.
class Recording : public ObjectStoreWrapper {
 public:
  explicit Recording(ObjectStore* t) : ObjectStoreWrapper(t) {}
  StoreStatus PutObject(const std::string& key, std::string_view data,
                        const Md5Digest& md5) override {
    if (fail) return StoreStatus::Fatal(key + ": AccessDenied");
    StoreStatus st = ObjectStoreWrapper::PutObject(key, data, md5);
    std::lock_guard<std::mutex> l(mu);
    ++puts;
    bytes += data.size();
    last_put = data.size();
    cv.notify_all();
    return st;
  }
  StoreStatus Delete(const std::vector<std::string>& keys) override {
    if (fail_delete) return StoreStatus::Retryable("Delete: SlowDown");
    return ObjectStoreWrapper::Delete(keys);
  }
  void WaitPuts(int n) {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, 30s, [&] { return puts >= n; })) << "publications: " << puts;
  }
  std::atomic<bool> fail{false};
  std::atomic<bool> fail_delete{false};
  std::mutex mu;
  std::condition_variable cv;
  int puts = 0;
  uint64_t bytes = 0;
  uint64_t last_put = 0;
};

TransferOptions Quick() {
  TransferOptions t;
  t.backoff.max_attempts = 2;
  t.backoff.initial = 1ms;
  return t;
}

struct Fixture {
  Fixture() {
    char tmpl[] = "/tmp/autopard-publisher-test-XXXXXX";
    dir = mkdtemp(tmpl);
    auto opened = StateDb::Open(dir + "/autopard.db", CommitSync::kNormal);
    EXPECT_TRUE(opened.ok()) << opened.message();
    if (opened.ok()) db = std::move(*opened);
  }
  ~Fixture() { fs::remove_all(dir); }

  std::string dir;
  std::unique_ptr<StateDb> db;  // the node's journal
  MemoryStore mem;
  std::shared_ptr<Recording> store = std::make_shared<Recording>(&mem);
  std::mutex mu;
  Result<uid_t> owner = uid_t{1001};

  std::unique_ptr<JournalPublisher> Make(std::chrono::milliseconds interval, int fanout = 16) {
    return std::make_unique<JournalPublisher>(
        store, "node2", db.get(),
        [this](const std::string&) -> Result<uid_t> {
          std::lock_guard<std::mutex> l(mu);
          return owner;
        },
        Quick(), interval, [] { return 1000.0; }, fanout);
  }
  void Add(const JournalEvent& e) { ASSERT_TRUE(db->AddEvent(e).ok()); }
  PublishedJournal Published(const std::string& key) {
    std::lock_guard<std::mutex> l(mem.mu);
    auto j = DecodePublishedJournal(mem.objects.at(key));
    EXPECT_TRUE(j.ok()) << j.message();
    return j.ok() ? *j : PublishedJournal{};
  }
  // What a reader on another node gets of node2's journal of `job`: every object it reads.
  std::vector<PublishedJournal> Read(const std::string& job) {
    std::vector<std::string> problems;
    auto got = ReadPublishedJournals(mem, job, "node1", Quick(), &problems);
    EXPECT_TRUE(got.ok()) << got.message();
    EXPECT_TRUE(problems.empty()) << problems[0];
    return got.ok() ? *got : std::vector<PublishedJournal>{};
  }
  std::vector<std::string> Kinds(const std::string& job) {
    std::vector<std::string> out;
    for (const auto& j : Read(job)) {
      for (const auto& e : j.events) out.push_back(e.kind);
    }
    return out;
  }
  size_t Objects(const std::string& prefix) {
    std::lock_guard<std::mutex> l(mem.mu);
    size_t n = 0;
    for (const auto& [k, v] : mem.objects) n += k.rfind(prefix, 0) == 0;
    return n;
  }
};

TEST(JournalPublisherTest, PublishesAtOnceThenBatchesAndFlushesOnShutdown) {
  Fixture f;
  auto pub = f.Make(1h);  // the second round would come only after an hour
  f.Add(Ev(1, "node2", "42", "step_started"));
  pub->Changed("42");
  f.store->WaitPuts(1);
  PublishedJournal j = f.Published("42/node2/000000000001-000000000001.json");
  EXPECT_EQ(j.node, "node2");
  EXPECT_EQ(j.uid, 1001);
  EXPECT_EQ(j.updated, 1000.0);
  ASSERT_EQ(j.events.size(), 1u);
  // Two more events inside the batching interval: published together, by the shutdown flush,
  // in a segment of their own.
  f.Add(Ev(2, "node2", "42", "failure", "class=rank-crash signal=9"));
  pub->Changed("42");
  f.Add(Ev(4, "node2", "43", "step_started"));  // another job, not changed: not published
  f.Add(Ev(3, "node2", "42", "requeue", "attempt=1 of=3"));
  pub->Changed("42");
  pub.reset();
  EXPECT_EQ(f.store->puts, 2);
  j = f.Published("42/node2/000000000002-000000000004.json");
  ASSERT_EQ(j.events.size(), 2u);
  EXPECT_EQ(j.events[1].kind, "requeue");
  EXPECT_EQ(f.Objects("43/"), 0u);
  EXPECT_EQ(f.Kinds("42"), (std::vector<std::string>{"step_started", "failure", "requeue"}));
}

TEST(JournalPublisherTest, RetentionDeletesThisNodesOldJournalsOnly) {
  Fixture f;
  double now = 1000;
  auto pub = std::make_unique<JournalPublisher>(
      f.store, "node2", f.db.get(), [](const std::string&) -> Result<uid_t> { return uid_t{1001}; },
      Quick(), std::chrono::milliseconds(1), [&now] { return now; });
  f.Add(Ev(1, "node2", "42", "step_started"));
  ASSERT_TRUE(pub->Flush().ok());
  pub->Changed("42");
  ASSERT_TRUE(pub->Flush().ok());
  now = 5000;
  f.Add(Ev(2, "node2", "43", "step_started"));
  pub->Changed("43");
  ASSERT_TRUE(pub->Flush().ok());
  // Another node's part of job 42, in the same store.
  ASSERT_TRUE(f.mem.PutObject("42/node1/000000000001-000000000001.json", "{}", Md5Of("{}")).ok());
  ASSERT_EQ(f.Objects("42/node2/"), 1u);
  JournalPublisher::PruneSummary sum = pub->PruneJournals(2000);  // 42 last published at 1000
  EXPECT_TRUE(sum.error.empty()) << sum.error;
  EXPECT_EQ(sum.jobs, 1);
  EXPECT_EQ(sum.objects, 1);
  EXPECT_EQ(f.Objects("42/node2/"), 0u);
  EXPECT_EQ(f.Objects("42/node1/"), 1u);  // node1's to delete
  EXPECT_EQ(f.Objects("43/node2/"), 1u);  // published later
  EXPECT_EQ(pub->PruneJournals(2000).jobs, 0);  // forgotten: nothing more to do
  // The local journal stays: a later event of job 42 is published again, from scratch.
  f.Add(Ev(3, "node2", "42", "note"));
  pub->Changed("42");
  ASSERT_TRUE(pub->Flush().ok());
  EXPECT_EQ(f.Objects("42/node2/"), 1u);
}

TEST(JournalPublisherTest, ARoundWritesOnlyTheNewEvents) {
  Fixture f;
  auto pub = f.Make(0ms);
  const std::string stack(200, 's');
  for (int i = 0; i < 2000; ++i) f.Add(Ev(i, "node2", "42", "ckpt_committed", stack));
  pub->Changed("42");
  ASSERT_TRUE(pub->Flush().ok());
  const uint64_t whole = f.store->last_put;
  EXPECT_GT(whole, 2000u * 200u);
  for (int round = 0; round < 3; ++round) {
    f.Add(Ev(3000 + round, "node2", "42", "ckpt_complete", "step=7"));
    pub->Changed("42");
    ASSERT_TRUE(pub->Flush().ok());
    // O(new events), not O(journal): one event is a few hundred bytes.
    EXPECT_LT(f.store->last_put, 1024u) << "round " << round;
  }
  EXPECT_EQ(f.Kinds("42").size(), 2003u);
  // Nothing new: nothing written.
  const int puts = f.store->puts;
  pub->Changed("42");
  ASSERT_TRUE(pub->Flush().ok());
  EXPECT_EQ(f.store->puts, puts);
}

TEST(JournalPublisherTest, CompactionKeepsFewSegmentsAndBoundedRewrites) {
  Fixture f;
  const int kFanout = 4, kRounds = 100;
  auto pub = f.Make(0ms, kFanout);
  std::vector<std::string> want;
  for (int i = 0; i < kRounds; ++i) {
    f.Add(Ev(i, "node2", "42", "e" + std::to_string(i)));
    want.push_back("e" + std::to_string(i));
    pub->Changed("42");
    ASSERT_TRUE(pub->Flush().ok());
    // At most (fanout - 1) per level, levels = ceil(log4(100)) = 4.
    ASSERT_LE(f.Objects("42/node2/"), 3u * 4u + 1u) << "round " << i;
  }
  EXPECT_EQ(f.Kinds("42"), want);  // every event once, in order
  auto segs = f.db->JournalSegments("42");
  ASSERT_TRUE(segs.ok());
  EXPECT_EQ(segs->size(), f.Objects("42/node2/"));
  // 100 rounds of 1 event: 100 = 1*64 + 2*16 + 1*4 + 0*1 (base 4).
  std::vector<int> levels;
  for (const auto& g : *segs) levels.push_back(g.level);
  EXPECT_EQ(levels, (std::vector<int>{3, 2, 2, 1}));
  // Each event written at most 1 + levels times: far from the 100 * 101 / 2 event copies of
  // rewriting the whole journal every round.
  PublishedJournal full{"42", "node2", 1001, 1000.0, *f.db->Events("42")};
  const uint64_t journal = EncodePublishedJournal(full).size();
  EXPECT_LT(f.store->bytes, (1u + 4u) * journal + 200u * kRounds)
      << "a whole journal: " << journal << " bytes";
}

TEST(JournalPublisherTest, LeftoversOfAnInterruptedCompactionAreReadOnce) {
  Fixture f;
  auto pub = f.Make(0ms, 2);
  f.store->fail_delete = true;  // compactions cannot delete what they replaced
  for (int i = 0; i < 8; ++i) {
    f.Add(Ev(i, "node2", "42", "e" + std::to_string(i)));
    pub->Changed("42");
    ASSERT_TRUE(pub->Flush().ok());
  }
  EXPECT_GT(f.Objects("42/node2/"), 1u);  // 8 rounds, fanout 2: one segment, plus leftovers
  auto read = f.Read("42");
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read[0].events.size(), 8u);
}

TEST(JournalPublisherTest, KeepsTheOwnerAfterSlurmForgetsTheJob) {
  Fixture f;
  auto pub = f.Make(0ms);
  f.Add(Ev(1, "node2", "42", "step_started"));
  pub->Changed("42");
  ASSERT_TRUE(pub->Flush().ok());
  EXPECT_EQ(*f.db->JobOwner("42"), 1001);  // the one owner record: the state DB
  f.owner = Status::Error("job 42: Slurm does not know it");
  f.Add(Ev(2, "node2", "42", "finished"));
  pub->Changed("42");
  ASSERT_TRUE(pub->Flush().ok());
  for (const auto& j : f.Read("42")) EXPECT_EQ(j.uid, 1001);
  // A restarted daemon (nothing in memory, the same state DB) keeps the owner.
  pub.reset();
  auto again = f.Make(0ms);
  f.Add(Ev(3, "node2", "42", "note"));
  again->Changed("42");
  ASSERT_TRUE(again->Flush().ok());
  auto read = f.Read("42");
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[2].uid, 1001);
  EXPECT_EQ(f.Kinds("42"), (std::vector<std::string>{"step_started", "finished", "note"}));
  EXPECT_EQ(*f.db->JobOwner("7"), -1);
}

TEST(JournalPublisherTest, AFailedPublicationStaysPending) {
  Fixture f;
  auto pub = f.Make(1h);
  f.store->fail = true;
  f.Add(Ev(1, "node2", "42", "step_started"));
  pub->Changed("42");
  // Whether the thread's round came first (this Flush waits for it and retries what it left
  // pending) or this one did, the publication fails here.
  Status st = pub->Flush();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("42/node2/000000000001-000000000001.json"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("AccessDenied"), std::string::npos) << st.message();
  f.store->fail = false;
  ASSERT_TRUE(pub->Flush().ok());
  EXPECT_EQ(f.Kinds("42"), (std::vector<std::string>{"step_started"}));
}

TEST(JournalPublisherTest, ReadsEveryOtherNodesJournalOfTheJob) {
  MemoryStore mem;
  auto put = [&](const std::string& key, const std::string& text) {
    ASSERT_TRUE(PutSmallObject(mem, key, text, Quick()).ok());
  };
  PublishedJournal j1{"42", "node1", 1001, 5, {Ev(1, "node1", "42", "step_started")}};
  PublishedJournal j3{
      "42", "node3", 1001, 5, {Ev(2, "node3", "42", "failure"), Ev(2.5, "node3", "41", "stray")}};
  PublishedJournal j3b{"42", "node3", 1001, 5, {Ev(3, "node3", "42", "requeue")}};
  PublishedJournal other{"4", "node1", 7, 5, {Ev(1, "node1", "4", "step_started")}};
  put("42/node1.json", EncodePublishedJournal(j1));  // an earlier version's whole journal
  put("42/node2/1-1.json", EncodePublishedJournal({"42", "node2", 1001, 5, {}}));  // own
  put("42/node3/000000000003-000000000007.json", EncodePublishedJournal(j3));
  put("42/node3/000000000009-000000000009.json", EncodePublishedJournal(j3b));
  put("42/node4/1-1.json", "{truncated");
  put("42/node5/1-1.json", EncodePublishedJournal({"43", "node5", 1001, 5, {}}));
  put("42/node6/1-1.json.autopar-tmp-1", "x");
  put("42/sub/node7/1-1.json", EncodePublishedJournal(j1));
  put("4/node1/1-1.json", EncodePublishedJournal(other));
  std::vector<std::string> problems;
  auto got = ReadPublishedJournals(mem, "42", "node2", Quick(), &problems);
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].node, "node1");
  EXPECT_EQ((*got)[1].node, "node3");
  ASSERT_EQ((*got)[1].events.size(), 1u);  // the other job's event is dropped
  EXPECT_EQ((*got)[2].events.at(0).kind, "requeue");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("mem://test/42/node4/1-1.json: published journal: "),
            std::string::npos)
      << problems[0];
  EXPECT_NE(problems[1].find("42/node5/1-1.json: holds job 43, not 42"), std::string::npos)
      << problems[1];
  std::vector<std::string> none;
  auto empty = ReadPublishedJournals(mem, "99", "node2", Quick(), &none);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty() && none.empty());
}

TEST(FitEventsReplyTest, CutsStackDumpsThenLeavesOutTheEarliestEvents) {
  struct Case {
    const char* name;
    size_t events;
    size_t detail;  // bytes of each odd event's detail ("stack dump"); even ones are short
    size_t max_bytes;
    bool cut;
    bool dropped;
  } cases[] = {
      {"fits", 10, 1000, kMaxLineBytes - 4096, false, false},
      {"two big stacks", 4, 900 << 10, kMaxLineBytes - 4096, true, false},
      {"many stacks", 400, 20 << 10, kMaxLineBytes - 4096, true, false},
      {"too many events", 3000, 300, 64 << 10, true, true},
  };
  for (const auto& c : cases) {
    Reply r;
    std::string stack;
    while (stack.size() < c.detail) stack += "x\xc3\xa9";  // "xé": cuts land inside characters
    for (size_t i = 0; i < c.events; ++i) {
      r.events.push_back(Ev(static_cast<double>(i), "node1", "42", i % 2 ? "stack" : "failure",
                            i % 2 ? stack : "class=hang"));
    }
    const Reply before = r;
    EXPECT_EQ(FitEventsReply(&r, c.max_bytes), c.cut) << c.name;
    EXPECT_LE(EncodeReply(Op::kEvents, r).size(), c.max_bytes) << c.name;
    EXPECT_EQ(r.notes.size(), (c.cut ? 1u : 0u) + (c.dropped ? 1u : 0u)) << c.name;
    if (!c.cut) {
      EXPECT_EQ(r.events.size(), before.events.size()) << c.name;
      continue;
    }
    EXPECT_NE(r.notes[0].find("event details (stack dumps) cut to fit"), std::string::npos)
        << r.notes[0];
    EXPECT_EQ(r.events.back().time, before.events.back().time) << c.name;  // the newest kept
    EXPECT_EQ(r.events.size() < before.events.size(), c.dropped) << c.name;
    if (c.dropped) {
      EXPECT_NE(r.notes[1].find("events left out to fit the reply"), std::string::npos)
          << r.notes[1];
    }
    for (const auto& e : r.events) {
      if (e.kind == "failure") {
        EXPECT_EQ(e.detail, "class=hang") << c.name;  // short: whole
      } else {
        EXPECT_NE(e.detail.find(" bytes cut to fit the reply]"), std::string::npos) << c.name;
        EXPECT_GE(e.detail.size(), 256u) << c.name;
      }
    }
    // Still valid on the wire (no UTF-8 sequence cut in half).
    auto back = DecodeReply(Op::kEvents, EncodeReply(Op::kEvents, r));
    ASSERT_TRUE(back.ok()) << c.name << ": " << back.message();
  }
}

// ---- two daemons sharing a file:// journal directory ------------------------------------------

class Owners : public JobOwnerLookup {
 public:
  Result<uid_t> Owner(const std::string& job_id) override {
    std::lock_guard<std::mutex> l(mu);
    auto it = owners.find(job_id);
    if (it == owners.end()) return Status::Error("job " + job_id + ": Slurm does not know it");
    return it->second;
  }
  static std::map<std::string, uid_t> owners;
  static std::mutex mu;
};
std::map<std::string, uid_t> Owners::owners;
std::mutex Owners::mu;

class EventsAcrossNodesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/autopard-journal-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    fs::create_directories(root_ / "journal");
    fs::permissions(root_ / "journal", fs::perms::owner_all);  // autopard refuses one open to others
    std::lock_guard<std::mutex> l(Owners::mu);
    Owners::owners = {{"42", 1001}};
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    fs::remove_all(root_);
  }
  std::unique_ptr<Daemon> Make(const std::string& node, bool journal = true) {
    DaemonConfig c;
    c.state_dir = (root_ / node).string();
    c.socket = (root_ / (node + ".sock")).string();
    c.node = node;
    c.posix.fsync = false;
    if (journal) c.journal_uri = "file://" + (root_ / "journal").string();
    auto d = Daemon::Create(c, std::make_unique<Owners>());
    EXPECT_TRUE(d.ok()) << d.message();
    return d.ok() ? std::move(*d) : nullptr;
  }
  static Request Event(const std::string& job, const std::string& kind, int rank = -1) {
    Request r;
    r.op = Op::kEvent;
    r.job_id = job;
    r.kind = kind;
    r.rank = rank;
    return r;
  }
  static Request Events(const std::string& job) {
    Request r;
    r.op = Op::kEvents;
    r.job_id = job;
    return r;
  }
  static std::vector<std::string> Kinds(const Reply& r) {
    std::vector<std::string> out;
    for (const auto& e : r.events) out.push_back(e.node + ":" + e.kind);
    return out;
  }

  fs::path root_;
  std::unique_ptr<Daemon> a_, b_;
  const Peer owner_{1, 1001, 1001}, other_{1, 1002, 1002}, root_peer_{1, 0, 0};
};

TEST_F(EventsAcrossNodesTest, MergesEveryNodesJournalAndAuthorizes) {
  a_ = Make("nodeA");
  b_ = Make("nodeB");
  ASSERT_TRUE(a_ && b_);
  ASSERT_TRUE(a_->Handle(Event("42", "step_started", 0), owner_).status.ok());
  ASSERT_TRUE(b_->Handle(Event("42", "failure", 1), owner_).status.ok());
  ASSERT_TRUE(a_->Handle(Event("42", "requeue"), owner_).status.ok());
  b_.reset();  // nodeB goes away: what it published stays (its shutdown flushed the rest)
  Reply r = a_->Handle(Events("42"), owner_);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(Kinds(r),
            (std::vector<std::string>{"nodeA:step_started", "nodeB:failure", "nodeA:requeue"}));
  EXPECT_TRUE(r.notes.empty());
  for (size_t i = 1; i < r.events.size(); ++i) EXPECT_LE(r.events[i - 1].time, r.events[i].time);
  // A third node that never ran the job answers the same from the published journals.
  ASSERT_TRUE(a_->FlushJournal().ok());
  auto c = Make("nodeC");
  ASSERT_TRUE(c);
  EXPECT_EQ(Kinds(c->Handle(Events("42"), root_peer_)), Kinds(r));

  Reply refused = a_->Handle(Events("42"), other_);
  ASSERT_FALSE(refused.status.ok());
  EXPECT_EQ(refused.status.message(),
            "events: permission denied: job 42 belongs to uid 1001, not to you (uid 1002)");
  // After Slurm has forgotten the job, the owner recorded with the journals decides.
  {
    std::lock_guard<std::mutex> l(Owners::mu);
    Owners::owners.clear();
  }
  EXPECT_EQ(Kinds(c->Handle(Events("42"), owner_)), Kinds(r));
  refused = c->Handle(Events("42"), other_);
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.message().find("permission denied: job 42 belongs to uid 1001"),
            std::string::npos)
      << refused.status.message();
  Reply unknown = c->Handle(Events("77"), owner_);
  ASSERT_FALSE(unknown.status.ok());
  EXPECT_EQ(unknown.status.message(), "events: job 77: Slurm does not know it");
}

TEST_F(EventsAcrossNodesTest, ARestartedNodeKnowsTheOwnerOfAForgottenJob) {
  {
    std::lock_guard<std::mutex> l(Owners::mu);
    Owners::owners["43"] = 1001;
  }
  a_ = Make("nodeA");
  ASSERT_TRUE(a_);
  ASSERT_TRUE(a_->Handle(Event("43", "step_started", 0), owner_).status.ok());
  a_.reset();  // the shutdown publishes with the owner
  {
    std::lock_guard<std::mutex> l(Owners::mu);
    Owners::owners.clear();
  }
  a_ = Make("nodeA");
  ASSERT_TRUE(a_);
  Reply r = a_->Handle(Events("43"), owner_);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(Kinds(r), (std::vector<std::string>{"nodeA:step_started"}));  // once, not twice
  EXPECT_FALSE(a_->Handle(Events("43"), other_).status.ok());
}

TEST_F(EventsAcrossNodesTest, APrunedJobsEventsComeFromItsPublishedJournal) {
  {
    std::lock_guard<std::mutex> l(Owners::mu);
    Owners::owners["44"] = 1001;
    Owners::owners["45"] = 1001;
  }
  a_ = Make("nodeA");  // state_keep_days 14 (the default)
  ASSERT_TRUE(a_);
  ASSERT_TRUE(a_->Handle(Event("44", "step_started", 0), owner_).status.ok());
  ASSERT_TRUE(a_->Handle(Event("44", "failure", 0), owner_).status.ok());
  ASSERT_TRUE(a_->FlushJournal().ok());
  const Reply before = a_->Handle(Events("44"), owner_);
  ASSERT_TRUE(before.status.ok()) << before.status.message();
  ASSERT_EQ(Kinds(before), (std::vector<std::string>{"nodeA:step_started", "nodeA:failure"}));
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Daemon::PruneSummary s = a_->PruneState(now + 15 * 86400.0);  // the injected clock
  EXPECT_EQ(s.jobs_pruned, 1);
  EXPECT_EQ(s.jobs_kept, 0);
  {
    auto db = StateDb::Open((root_ / "nodeA" / "autopard.db").string(), CommitSync::kNormal);
    ASSERT_TRUE(db.ok()) << db.message();
    EXPECT_TRUE((*db)->Events("44")->empty());
    EXPECT_EQ(*(*db)->JobOwner("44"), -1);
    EXPECT_TRUE((*db)->JournalSegments("44")->empty());
    // A job with an unpublished event is never pruned (the publication would lose it).
    ASSERT_TRUE(
        (*db)->AddEvent({now - 20 * 86400.0, "nodeA", "45", "step_started", 0, -1, ""}).ok());
  }
  s = a_->PruneState(now + 15 * 86400.0);
  EXPECT_EQ(s.jobs_pruned, 0);
  EXPECT_EQ(s.jobs_kept, 1);
  // Slurm forgets job 44: its owner still reads this node's events (from the publication, whose
  // owner uid authorizes), others still cannot, and nothing is shown twice.
  {
    std::lock_guard<std::mutex> l(Owners::mu);
    Owners::owners.clear();
  }
  Reply after = a_->Handle(Events("44"), owner_);
  ASSERT_TRUE(after.status.ok()) << after.status.message();
  EXPECT_EQ(Kinds(after), Kinds(before));
  EXPECT_EQ(after.events.front().time, before.events.front().time);
  Reply refused = a_->Handle(Events("44"), other_);
  ASSERT_FALSE(refused.status.ok());
  EXPECT_NE(refused.status.message().find("permission denied: job 44 belongs to uid 1001"),
            std::string::npos)
      << refused.status.message();
  EXPECT_EQ(Kinds(a_->Handle(Events("44"), root_peer_)), Kinds(before));
}

TEST_F(EventsAcrossNodesTest, ASegmentOthersCouldHaveWrittenIsIgnored) {
  a_ = Make("nodeA");
  b_ = Make("nodeB");
  ASSERT_TRUE(a_ && b_);
  ASSERT_TRUE(a_->Handle(Event("42", "step_started", 0), owner_).status.ok());
  ASSERT_TRUE(b_->Handle(Event("42", "failure", 1), owner_).status.ok());
  ASSERT_TRUE(b_->FlushJournal().ok());
  // nodeB's segment made writable by others (as if planted or replaced by a user).
  fs::path seg = root_ / "journal" / PublishedSegmentKey("42", "nodeB", 1, 1);
  ASSERT_TRUE(fs::exists(seg)) << seg;
  fs::permissions(seg, fs::perms::others_write, fs::perm_options::add);
  Reply r = a_->Handle(Events("42"), owner_);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(Kinds(r), (std::vector<std::string>{"nodeA:step_started"}));
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("42/nodeB/000000000001-000000000001.json: ignored: "),
            std::string::npos)
      << r.notes[0];
}

TEST_F(EventsAcrossNodesTest, WithoutJournalUriOnlyThisNodeWithANote) {
  a_ = Make("nodeA", false);
  ASSERT_TRUE(a_);
  ASSERT_TRUE(a_->Handle(Event("42", "step_started", 0), owner_).status.ok());
  Reply r = a_->Handle(Events("42"), owner_);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(Kinds(r), (std::vector<std::string>{"nodeA:step_started"}));
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0],
            "only the events recorded on nodeA: other nodes' events need journal_uri in "
            "autopard.conf");
  EXPECT_FALSE(a_->Handle(Events("42"), other_).status.ok());
}

}  // namespace
}  // namespace autopar
