// A job's timeline: the events its programs and launchers send (`event`), and the merged story
// a user reads back (`events`): this node's journal and every node's published one.
#include <algorithm>

#include "daemon.h"
#include "daemon_internal.h"

namespace autopar {

using daemon_detail::Error;
using daemon_detail::Now;

Reply Daemon::Event(const Request& r, const Peer& peer) {
  if (Status st = auth_->Check(peer, OpName(r.op), r.job_id); !st) return Error(st.message());
  JournalEvent e{Now(), r.node.empty() ? config_.node : r.node, r.job_id, r.kind, r.rank, r.step, r.detail};
  if (r.kind == event_kind::kUsageSample) {
    // A measurement, not a story: summarised per node by the failure handler, within the
    // job's ranks and at most one a second each (JobQuota::TakeSample).
    if (Status st = quota_->TakeSample(r.job_id, r.rank); !st) return Error("event: " + st.message());
    if (failure_) failure_->OnUsageSample(e, peer.pid);
    return Reply{};
  }
  // Charged before root asks Slurm anything on the event's behalf.
  if (Status st = quota_->TakeEvent(r.job_id, r.detail.size()); !st) return Error("event: " + st.message());
  if (r.kind == event_kind::kSubmitted && slurm_actions_) {
    // The launcher tells it when the first step starts; the story begins at submission.
    auto job = slurm_actions_->LoadJob(r.job_id);
    if (job.ok() && job->submit_time > 0 && job->submit_time < e.time) e.time = job->submit_time;
  }
  // Not counted in the metrics: a job's programs may send any kind and fields.
  if (Status st = Journal(e, peer.pid, false); !st) return Error(st.message());
  return Reply{};
}

Reply Daemon::Events(const Request& r, const Peer& peer) {
  Reply reply;
  std::vector<PublishedJournal> published;
  bool read = false;
  Status read_error = Status::Ok();
  auto read_published = [&] {
    if (read || !publisher_) return;
    read = true;
    // This node's own publication is read too, for the owner it recorded there.
    auto got = ReadPublishedJournals(publisher_->store(), r.job_id, "", publisher_->Transfer(),
                                     &reply.notes);
    if (got) {
      published = std::move(*got);
    } else {
      read_error = got.status();
    }
  };
  // Slurm names the owner while it knows the job; after it has forgotten the job, the owner
  // recorded with the journals decides (this node's and every published one).
  Status allowed = auth_->CheckRecorded(peer, "events", r.job_id, [&] {
    read_published();
    std::vector<int64_t> uids;
    auto recorded = db_->JobOwner(r.job_id);  // the owner this node recorded (publisher)
    if (recorded.ok()) uids.push_back(*recorded);
    for (const auto& j : published) uids.push_back(j.uid);
    return uids;
  });
  if (!allowed) return Error(allowed.message());
  read_published();
  // This node's own publication is the only record of its events once state retention pruned
  // the job.
  auto merged = JobTimeline(r.job_id, std::move(published));
  if (!merged) return Error("events: " + merged.message());
  reply.events = std::move(*merged);
  if (!auth_->IsPrivileged(peer.uid)) {
    // Kernel stacks (kernel addresses and symbols) are root's and SlurmUser's to see.
    reply.events.erase(std::remove_if(reply.events.begin(), reply.events.end(),
                                      [](const JournalEvent& e) { return e.kind == event_kind::kStackKernel; }),
                       reply.events.end());
  }
  // One protocol line (the newline and the notes added below fit in the margin).
  FitEventsReply(&reply, kMaxLineBytes - 4096);
  if (!publisher_) {
    reply.notes.push_back("only the events recorded on " + config_.node +
                          ": other nodes' events need journal_uri in autopard.conf");
  } else if (!read_error.ok()) {
    reply.notes.push_back("only the events recorded on " + config_.node + ": journal_uri: " +
                          read_error.message());
  }
  return reply;
}

Result<std::vector<JournalEvent>> Daemon::JobTimeline(const std::string& job_id,
                                                      std::vector<PublishedJournal> published) {
  auto local = db_->Events(job_id);
  if (!local) return local.status();
  std::vector<std::vector<JournalEvent>> journals{std::move(*local)};
  for (auto& j : published) journals.push_back(std::move(j.events));
  return MergeTimelines(journals);
}

}  // namespace autopar
