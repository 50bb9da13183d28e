#include "journal_publisher.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "log.h"

namespace autopar {

JournalPublisher::JournalPublisher(std::shared_ptr<ObjectStore> store, std::string node,
                                   StateDb* db, OwnerOf owner_of, TransferOptions transfer,
                                   std::chrono::milliseconds interval, std::function<double()> now,
                                   int fanout)
    : store_(std::move(store)),
      node_(std::move(node)),
      db_(db),
      owner_of_(std::move(owner_of)),
      transfer_(std::move(transfer)),
      interval_(interval),
      now_(std::move(now)),
      fanout_(static_cast<size_t>(std::max(2, fanout))) {
  if (!now_) {
    now_ = [] {
      return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  thread_ = std::thread([this] { Loop(); });
}

JournalPublisher::~JournalPublisher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  (void)Flush();
}

void JournalPublisher::Changed(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> l(mu_);
    pending_.insert(job_id);
  }
  cv_.notify_all();
}

int64_t JournalPublisher::Owner(const std::string& job_id) {
  auto recorded = db_->JobOwner(job_id);  // a job's owner never changes: Slurm is asked once
  if (recorded.ok() && *recorded >= 0) return *recorded;
  if (!owner_of_) return -1;
  auto owner = owner_of_(job_id);
  if (!owner.ok()) return -1;  // e.g. Slurm forgot the job before this node published
  if (Status st = db_->SetJobOwner(job_id, *owner); !st) {
    Log(LogLevel::kWarning, "job %s: %s", job_id.c_str(), st.message().c_str());
  }
  return *owner;
}

Status JournalPublisher::PutSegment(const std::string& job_id, const JournalSegment& seg,
                                    int64_t uid, const std::vector<StateDb::EventRow>* rows) {
  std::vector<StateDb::EventRow> read;
  if (!rows) {
    auto got = db_->EventsBetween(job_id, seg.first_id, seg.last_id);
    if (!got) return Status::Error("journal of job " + job_id + ": " + got.message());
    read = std::move(*got);
    rows = &read;
  }
  PublishedJournal j;
  j.job_id = job_id;
  j.node = node_;
  j.uid = uid;
  j.updated = now_();
  j.events.reserve(rows->size());
  for (const auto& r : *rows) j.events.push_back(r.event);
  const std::string key = PublishedSegmentKey(job_id, node_, seg.first_id, seg.last_id);
  return PutSmallObject(*store_, key, EncodePublishedJournal(j), transfer_);  // names the key
}

Status JournalPublisher::Compact(const std::string& job_id, int64_t uid,
                                 std::vector<JournalSegment>* segs) {
  for (;;) {
    const size_t n = segs->size();
    if (n < fanout_) return Status::Ok();
    const int level = segs->back().level;
    size_t run = 0;
    while (run < n && (*segs)[n - 1 - run].level == level) ++run;
    if (run < fanout_) return Status::Ok();
    const size_t from = n - run;
    JournalSegment merged{(*segs)[from].first_id, segs->back().last_id, level + 1};
    // Written first, recorded next, the inputs deleted last: a crash in between leaves inputs
    // that readers skip (contained in `merged`) or a compaction that is redone.
    if (Status st = PutSegment(job_id, merged, uid, nullptr); !st) return st;
    std::vector<std::string> replaced;
    for (size_t i = from; i < n; ++i) {
      replaced.push_back(PublishedSegmentKey(job_id, node_, (*segs)[i].first_id,
                                             (*segs)[i].last_id));
    }
    segs->resize(from);
    segs->push_back(merged);
    if (Status st = db_->SetJournalSegments(job_id, *segs); !st) return st;
    StoreStatus del = store_->Delete(replaced);
    if (!del.ok()) {
      Log(LogLevel::kWarning, "journal_uri: compacted segments of job %s left behind: %s",
          job_id.c_str(), del.message.c_str());
    }
  }
}

Status JournalPublisher::Publish(const std::string& job_id) {
  auto segs = db_->JournalSegments(job_id);
  if (!segs) return Status::Error("journal of job " + job_id + ": " + segs.message());
  const int64_t uid = Owner(job_id);
  const int64_t after = segs->empty() ? 0 : segs->back().last_id;
  auto rows = db_->EventsBetween(job_id, after + 1, INT64_MAX);
  if (!rows) return Status::Error("journal of job " + job_id + ": " + rows.message());
  if (!rows->empty()) {
    // Only the events since the last round. A crash before the segment is recorded redoes this
    // round with the same first id: the same key, overwritten with at least the same events.
    JournalSegment seg{rows->front().id, rows->back().id, 0};
    if (Status st = PutSegment(job_id, seg, uid, &*rows); !st) return st;
    segs->push_back(seg);
    if (Status st = db_->SetJournalSegments(job_id, *segs); !st) return st;
    if (Status st = db_->MarkPublished(job_id, now_()); !st) return st;
  }
  return Compact(job_id, uid, &*segs);
}

Status JournalPublisher::Flush() {
  // One round at a time: a Flush during the thread's round waits for it, then takes what it
  // left pending.
  std::lock_guard<std::mutex> one(publish_mu_);
  std::set<std::string> jobs;
  {
    std::lock_guard<std::mutex> l(mu_);
    jobs.swap(pending_);
  }
  Status first = Status::Ok();
  for (const auto& job : jobs) {
    Status st = Publish(job);
    std::lock_guard<std::mutex> l(mu_);
    if (st.ok()) {
      failing_.erase(job);
      continue;
    }
    pending_.insert(job);  // tried again at the next round
    if (failing_.insert(job).second) {
      Log(LogLevel::kWarning, "journal_uri: cannot publish: %s (retrying)", st.message().c_str());
    }
    if (first.ok()) first = st;
  }
  return first;
}

bool JournalPublisher::RunIfIdle(const std::string& job_id, const std::function<void()>& fn) {
  std::lock_guard<std::mutex> one(publish_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (pending_.count(job_id) || failing_.count(job_id)) return false;
  }
  fn();
  return true;
}

void JournalPublisher::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stop_ || !pending_.empty(); });
    if (stop_) return;
    l.unlock();
    (void)Flush();
    l.lock();
    // Batching: what changes now waits for the next round (the destructor flushes it).
    cv_.wait_for(l, interval_, [this] { return stop_; });
    if (stop_) return;
  }
}

namespace {

// One listing and reading of the job's journals; *vanished is set when a listed segment was gone
// (deleted by a compaction since the listing).
Result<std::vector<PublishedJournal>> ReadOnce(ObjectStore& store, const std::string& job_id,
                                               const std::string& skip_node,
                                               const TransferOptions& transfer,
                                               std::vector<std::string>* problems,
                                               bool* vanished) {
  auto objects = ListObjects(store, PublishedJournalPrefix(job_id), transfer);
  if (!objects) return Status::Error(store.Describe() + ": " + objects.message());
  std::vector<PublishedKey> keys;
  for (const auto& o : *objects) {
    PublishedKey k;
    if (ParsePublishedKey(job_id, o.key, &k)) keys.push_back(std::move(k));
  }
  // The reader's own node as it appears in keys (PublishedJournalKey's sanitized form).
  PublishedKey own;
  const bool skip = !skip_node.empty() &&
                    ParsePublishedKey(job_id, PublishedJournalKey(job_id, skip_node), &own);
  std::vector<PublishedJournal> out;
  for (const auto& k : CoveringSegments(std::move(keys))) {
    if (skip && k.node == own.node) continue;
    // Trusted only as autopard wrote it (file://: root's files in root's directories): a
    // journal someone else could have written or replaced could claim any owner.
    if (Status st = store.CheckWrittenOnlyByUs(k.key); !st) {
      problems->push_back(store.Describe() + "/" + k.key + ": ignored: " + st.message());
      continue;
    }
    auto text = GetSmallObject(store, k.key, transfer);
    if (!text) {
      if (!k.whole && text.message().find(": object not found") != std::string::npos) {
        *vanished = true;
        return out;
      }
      problems->push_back(text.message());  // names the object
      continue;
    }
    auto j = DecodePublishedJournal(*text);
    if (!j) {
      problems->push_back(store.Describe() + "/" + k.key + ": " + j.message());
      continue;
    }
    if (j->job_id != job_id) {
      problems->push_back(store.Describe() + "/" + k.key + ": holds job " + j->job_id +
                          ", not " + job_id);
      continue;
    }
    std::vector<JournalEvent> kept;
    for (auto& e : j->events) {
      if (e.job_id == job_id) kept.push_back(std::move(e));
    }
    j->events = std::move(kept);
    out.push_back(std::move(*j));
  }
  return out;
}

}  // namespace

Result<std::vector<PublishedJournal>> ReadPublishedJournals(ObjectStore& store,
                                                            const std::string& job_id,
                                                            const std::string& skip_node,
                                                            const TransferOptions& transfer,
                                                            std::vector<std::string>* problems) {
  for (int attempt = 1;; ++attempt) {
    std::vector<std::string> found;
    bool vanished = false;
    auto got = ReadOnce(store, job_id, skip_node, transfer, &found, &vanished);
    if (!got || !vanished || attempt == 3) {
      if (vanished) found.push_back(store.Describe() + "/" + PublishedJournalPrefix(job_id) +
                                    ": segments kept changing while read (compactions); "
                                    "some events may be missing");
      problems->insert(problems->end(), found.begin(), found.end());
      return got;
    }
  }
}

bool FitEventsReply(Reply* reply, size_t max_bytes) {
  auto fits = [&] { return EncodeReply(Op::kEvents, *reply).size() <= max_bytes; };
  if (fits()) return false;
  constexpr size_t kMinDetail = 256;
  std::vector<std::string> originals;
  size_t longest = 0;
  for (const auto& e : reply->events) {
    originals.push_back(e.detail);
    longest = std::max(longest, e.detail.size());
  }
  size_t cut_events = 0;
  for (size_t cap = longest / 2; longest > kMinDetail; cap /= 2) {
    cap = std::max(cap, kMinDetail);
    cut_events = 0;
    for (size_t i = 0; i < originals.size(); ++i) {
      const std::string& d = originals[i];
      if (d.size() <= cap) continue;
      size_t keep = cap;
      while (keep > 0 && (static_cast<unsigned char>(d[keep]) & 0xC0) == 0x80) --keep;  // UTF-8
      reply->events[i].detail = d.substr(0, keep) + " [... " + std::to_string(d.size() - keep) +
                                " bytes cut to fit the reply]";
      ++cut_events;
    }
    if (fits() || cap == kMinDetail) break;
  }
  if (cut_events) {
    reply->notes.push_back(std::to_string(cut_events) + " event details (stack dumps) cut to fit "
                           "the reply's " + std::to_string(max_bytes) + " bytes; each node's own "
                           "journal keeps them whole");
  }
  if (fits()) return true;
  // Still too long: the earliest events go (the least number that fits, by bisection).
  std::vector<JournalEvent> all = std::move(reply->events);
  reply->notes.emplace_back();
  auto drop = [&](size_t n) {  // the events but the first n, with the note saying so
    reply->events.assign(all.begin() + static_cast<std::ptrdiff_t>(n), all.end());
    reply->notes.back() = "the earliest " + std::to_string(n) + " of " +
                          std::to_string(all.size()) + " events left out to fit the reply's " +
                          std::to_string(max_bytes) + " bytes";
  };
  size_t lo = 1, hi = all.size();  // dropping every event is the last resort
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    drop(mid);
    if (fits()) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  drop(lo);
  return true;
}

JournalPublisher::PruneSummary JournalPublisher::PruneJournals(double before) {
  PruneSummary sum;
  auto jobs = db_->PublishedBefore(before);
  if (!jobs) {
    sum.error = jobs.message();
    return sum;
  }
  // This node's part of each job's journal: the key form of its name, as a segment key has it.
  PublishedKey own;
  const std::string probe = PublishedJournalKey("0", node_);
  const bool known = ParsePublishedKey("0", probe, &own);
  for (const std::string& job : *jobs) {
    bool ran = RunIfIdle(job, [&] {
      std::vector<ObjectInfo> objects;
      StoreStatus listed = store_->List(PublishedJournalPrefix(job), &objects);
      if (!listed.ok()) {
        if (sum.error.empty()) sum.error = "job " + job + ": " + listed.message;
        return;
      }
      std::vector<std::string> keys;
      for (const auto& o : objects) {
        PublishedKey k;
        if (known && ParsePublishedKey(job, o.key, &k) && k.node == own.node) keys.push_back(o.key);
      }
      for (size_t i = 0; i < keys.size(); i += 1000) {
        std::vector<std::string> batch(keys.begin() + i, keys.begin() + std::min(keys.size(), i + 1000));
        StoreStatus del = store_->Delete(batch);
        if (!del.ok()) {
          if (sum.error.empty()) sum.error = "job " + job + ": " + del.message;
          return;
        }
      }
      if (Status st = db_->ForgetPublished(job); !st) {
        if (sum.error.empty()) sum.error = st.message();
        return;
      }
      ++sum.jobs;
      sum.objects += static_cast<int64_t>(keys.size());
    });
    (void)ran;  // a job published again meanwhile is not old: the next pass sees its new time
  }
  return sum;
}

}  // namespace autopar
