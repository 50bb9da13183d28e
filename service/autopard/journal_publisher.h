// Publication of this node's journal (issue 6, "one timeline"): with `journal_uri` set in
// autopard.conf, every job's events recorded on this node are written to the site's journal store
// as <job>/<node>.json (timeline.h: PublishedJournal), whole and atomically (the storage layer's
// write-then-rename / single PUT), so that `autopar events JOBID` on any node can merge every
// node's journal, after the job has ended and after a node died (what it published before).
//
// The local SQLite journal stays the source of truth: a publication is a copy of a job's events
// read from it (`source`). Publications are batched: a job that changed is published by a
// background thread at once, then at most once per `interval`; Flush() (and the destructor)
// publish everything still pending, e.g. on shutdown. A failed publication stays pending and is
// tried again at the next round; its error is logged once per job until a publication succeeds.
//
// Thread safety: every public member may be called from several threads at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "autopar/status.h"
#include "autopar/storage.h"
#include "autopar/timeline.h"

namespace autopar {

class JournalPublisher {
 public:
  // Every event of the job recorded on this node, in order.
  using Source = std::function<Result<std::vector<JournalEvent>>(const std::string& job_id)>;
  // The job's owner uid as Slurm knows it, or an error when it does not (anymore).
  using OwnerOf = std::function<Result<uid_t>(const std::string& job_id)>;

  JournalPublisher(std::shared_ptr<ObjectStore> store, std::string node, Source source,
                   OwnerOf owner_of, TransferOptions transfer,
                   std::chrono::milliseconds interval = std::chrono::seconds(1),
                   std::function<double()> now = nullptr);
  // Stops the thread and publishes what is still pending (Flush).
  ~JournalPublisher();

  // The job's journal changed: publish it soon. Never blocks on storage.
  void Changed(const std::string& job_id);
  // Publishes every pending job now, in the calling thread; the first error (naming the key).
  Status Flush();
  // The owner uid this node last recorded for the job (-1: none), for authorization when Slurm
  // has forgotten the job.
  int64_t RecordedOwner(const std::string& job_id);

  ObjectStore& store() { return *store_; }
  const TransferOptions& Transfer() const { return transfer_; }
  const std::string& node() const { return node_; }

 private:
  void Loop();
  Status Publish(const std::string& job_id);

  std::shared_ptr<ObjectStore> store_;
  std::string node_;
  Source source_;
  OwnerOf owner_of_;
  TransferOptions transfer_;
  std::chrono::milliseconds interval_;
  std::function<double()> now_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> pending_;
  std::map<std::string, int64_t> owners_;  // last known owner per job
  std::set<std::string> failing_;          // jobs whose last publication failed (logged)
  bool stop_ = false;
  std::mutex publish_mu_;  // one round of publications at a time (the thread and Flush)
  std::thread thread_;
};

// Every node's published journal of `job_id` in `store`, except `skip_node`'s when not empty.
// Unreadable or malformed objects are skipped with a line in `problems` naming the object; events
// of other jobs are dropped; a listing error is returned as an error.
Result<std::vector<PublishedJournal>> ReadPublishedJournals(ObjectStore& store,
                                                            const std::string& job_id,
                                                            const std::string& skip_node,
                                                            const TransferOptions& transfer,
                                                            std::vector<std::string>* problems);

}  // namespace autopar
