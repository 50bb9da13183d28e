// Publication of this node's journal: with `journal_uri` set in
// autopard.conf, every job's events recorded on this node are written to the site's journal store
// as append-only segments (timeline.h: PublishedSegmentKey), so that `autopar events JOBID` on any
// node can merge every node's journal, after the job has ended and after a node died (what it
// published before).
//
// The local SQLite journal (StateDb) stays the source of truth: each publication round of a job
// writes one new object holding only the job's events recorded since the last round (O(new
// events), never the whole journal), then records the segment in the state DB. When `fanout`
// segments of one level accumulate, they are compacted into one segment of the next level (its
// events read again from the journal), and the replaced objects are deleted: a job's journal on
// a node lies in at most (fanout - 1) * levels + 1 objects, levels = log_fanout(rounds), and each
// event is written 1 + levels times in all. An interrupted round or compaction is redone at the
// next round (same keys, so objects are overwritten, never duplicated; leftovers a compaction
// failed to delete are skipped by readers: CoveringSegments).
//
// Publications are batched: a job that changed is published by a background thread at once, then
// at most once per `interval`; Flush() (and the destructor) publish everything still pending,
// e.g. on shutdown. A failed publication stays pending and is tried again at the next round; its
// error is logged once per job until a publication succeeds.
//
// The job's owner is asked of `owner_of` (autopard: the bounded CachedJobOwners) and recorded in
// the state DB (StateDb::SetJobOwner: the one durable owner record, also what `events`
// authorizes with after Slurm forgot the job; once state retention pruned the job, the uid in its
// published segments is); nothing per job is kept in memory beyond the jobs with a publication
// pending.
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

#include "core/proto/protocol.h"
#include "autopar/status.h"
#include "core/ckpt/storage.h"
#include "core/failure/timeline.h"
#include "state_db.h"

namespace autopar {

class JournalPublisher {
 public:
  // The job's owner uid as Slurm knows it, or an error when it does not (anymore).
  using OwnerOf = std::function<Result<uid_t>(const std::string& job_id)>;

  // `db` (not owned) holds the journal, the owner records and the published segments.
  JournalPublisher(std::shared_ptr<ObjectStore> store, std::string node, StateDb* db,
                   OwnerOf owner_of, TransferOptions transfer,
                   std::chrono::milliseconds interval = std::chrono::seconds(1),
                   std::function<double()> now = nullptr, int fanout = 16);
  // Stops the thread and publishes what is still pending (Flush).
  ~JournalPublisher();

  // The job's journal changed: publish it soon. Never blocks on storage.
  void Changed(const std::string& job_id);
  // Publishes every pending job now, in the calling thread; the first error (naming the key).
  Status Flush();
  // Runs `fn` between publication rounds when no publication of the job is pending or failing
  // (state retention prunes a job's rows there); returns whether it ran.
  bool RunIfIdle(const std::string& job_id, const std::function<void()>& fn);

  // Journal retention (autopard.conf journal_keep_days): deletes this node's published journal of
  // every job it last published before `before` (epoch seconds), between publication rounds;
  // other nodes' objects are theirs to delete. Never touches the local journal.
  struct PruneSummary {
    int jobs = 0;         // jobs whose published journal (this node's part) was deleted
    int64_t objects = 0;  // objects deleted
    std::string error;    // the first failure (the job stays for the next pass)
  };
  PruneSummary PruneJournals(double before);

  ObjectStore& store() { return *store_; }
  const TransferOptions& Transfer() const { return transfer_; }
  const std::string& node() const { return node_; }

 private:
  void Loop();
  Status Publish(const std::string& job_id);
  // The recorded owner, else Slurm's answer (then recorded); -1 when neither knows.
  int64_t Owner(const std::string& job_id);
  // Writes the segment `seg` of the job (its events read from the journal).
  Status PutSegment(const std::string& job_id, const JournalSegment& seg, int64_t uid,
                    const std::vector<StateDb::EventRow>* rows);
  // Merges trailing runs of `fanout_` segments of one level while there are any.
  Status Compact(const std::string& job_id, int64_t uid, std::vector<JournalSegment>* segs);

  std::shared_ptr<ObjectStore> store_;
  std::string node_;
  StateDb* db_;
  OwnerOf owner_of_;
  TransferOptions transfer_;
  std::chrono::milliseconds interval_;
  std::function<double()> now_;
  size_t fanout_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> pending_;
  std::set<std::string> failing_;          // jobs whose last publication failed (logged)
  bool stop_ = false;
  std::mutex publish_mu_;  // one round of publications at a time (the thread and Flush)
  std::thread thread_;
};

// Every node's published journal of `job_id` in `store`, except `skip_node`'s when not empty: one
// entry per object read (a node's segments, CoveringSegments), by node then id range. Objects
// that are unreadable, malformed, or that only this process's user could not have written
// (ObjectStore::CheckWrittenOnlyByUs: file:// stores) are skipped with a line in `problems` naming
// the object; events of other jobs are dropped; a listing error is returned as an error. A
// segment deleted between the listing and its reading (a concurrent compaction) makes it list
// again (at most 3 times).
Result<std::vector<PublishedJournal>> ReadPublishedJournals(ObjectStore& store,
                                                            const std::string& job_id,
                                                            const std::string& skip_node,
                                                            const TransferOptions& transfer,
                                                            std::vector<std::string>* problems);

// Makes an `events` reply fit one protocol line: while EncodeReply(Op::kEvents, *reply) is longer
// than `max_bytes`, the longest details (stack dumps) are cut to a shrinking length (halved each
// time, down to 256 bytes), each ending with " [... N bytes cut to fit the reply]"; if that is
// not enough, the earliest events are left out. A note in reply->notes says what was cut.
// Returns whether anything was.
bool FitEventsReply(Reply* reply, size_t max_bytes);

}  // namespace autopar
