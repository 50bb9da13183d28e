#include "journal_publisher.h"

#include <cstdio>

namespace autopar {

JournalPublisher::JournalPublisher(std::shared_ptr<ObjectStore> store, std::string node,
                                   Source source, OwnerOf owner_of, TransferOptions transfer,
                                   std::chrono::milliseconds interval, std::function<double()> now)
    : store_(std::move(store)),
      node_(std::move(node)),
      source_(std::move(source)),
      owner_of_(std::move(owner_of)),
      transfer_(std::move(transfer)),
      interval_(interval),
      now_(std::move(now)) {
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

int64_t JournalPublisher::RecordedOwner(const std::string& job_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = owners_.find(job_id);
  return it == owners_.end() ? -1 : it->second;
}

Status JournalPublisher::Publish(const std::string& job_id) {
  PublishedJournal j;
  j.job_id = job_id;
  j.node = node_;
  j.uid = RecordedOwner(job_id);  // a job's owner never changes: Slurm is asked once
  if (j.uid < 0 && owner_of_) {
    auto owner = owner_of_(job_id);
    if (owner.ok()) {
      j.uid = *owner;
      std::lock_guard<std::mutex> l(mu_);
      owners_[job_id] = j.uid;
    }
  }
  if (j.uid < 0) {  // e.g. restarted after Slurm forgot the job: keep what was published
    const std::string own = PublishedJournalKey(job_id, node_);
    auto exists = ObjectExists(*store_, own, transfer_);
    if (exists.ok() && *exists) {
      auto text = GetSmallObject(*store_, own, transfer_);
      if (text.ok()) {
        auto old = DecodePublishedJournal(*text);
        if (old.ok()) j.uid = old->uid;
      }
    }
  }
  auto events = source_(job_id);
  if (!events) return Status::Error("journal of job " + job_id + ": " + events.message());
  j.events = std::move(*events);
  j.updated = now_();
  const std::string key = PublishedJournalKey(job_id, node_);
  return PutSmallObject(*store_, key, EncodePublishedJournal(j), transfer_);  // names the key
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
      std::fprintf(stderr, "autopard: journal_uri: cannot publish: %s (retrying)\n",
                   st.message().c_str());
    }
    if (first.ok()) first = st;
  }
  return first;
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

Result<std::vector<PublishedJournal>> ReadPublishedJournals(ObjectStore& store,
                                                            const std::string& job_id,
                                                            const std::string& skip_node,
                                                            const TransferOptions& transfer,
                                                            std::vector<std::string>* problems) {
  auto objects = ListObjects(store, PublishedJournalPrefix(job_id), transfer);
  if (!objects) return Status::Error(store.Describe() + ": " + objects.message());
  const std::string own = skip_node.empty() ? "" : PublishedJournalKey(job_id, skip_node);
  std::vector<PublishedJournal> out;
  for (const auto& o : *objects) {
    const std::string& key = o.key;
    if (key == own || key.size() < 5 || key.compare(key.size() - 5, 5, ".json") != 0 ||
        key.find('/', PublishedJournalPrefix(job_id).size()) != std::string::npos) {
      continue;
    }
    auto text = GetSmallObject(store, key, transfer);
    if (!text) {
      problems->push_back(text.message());  // names the object
      continue;
    }
    auto j = DecodePublishedJournal(*text);
    if (!j) {
      problems->push_back(store.Describe() + "/" + key + ": " + j.message());
      continue;
    }
    if (j->job_id != job_id) {
      problems->push_back(store.Describe() + "/" + key + ": holds job " + j->job_id + ", not " +
                          job_id);
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

}  // namespace autopar
