// What failure handling hears from the ranks: their heartbeats (progress, health and the
// checkpoint a time limit asks for in the reply) and a launcher's `recover` request after a rank
// ended (what to do: restart in place, requeue, stop).
#include "daemon.h"
#include "daemon_internal.h"

namespace autopar {

using daemon_detail::Error;
using daemon_detail::Now;

Reply Daemon::Heartbeat(const Request& r, const Peer& peer) {
  if (Status st = auth_->Check(peer, OpName(r.op), r.job_id); !st) return Error(st.message());
  if (Status st = quota_->TakeRank(r.job_id, r.rank); !st) return Error("heartbeat: " + st.message());
  const double now = Now();
  metrics_->CountHeartbeat();
  Reply reply;
  if (r.finishing) {
    // Not progress: the rank's program is ending (protocol.h).
    if (failure_) failure_->OnFinishing(r.job_id, peer.pid);
    return reply;
  }
  pid_t rank_process = 0;
  if (failure_) {
    reply.checkpoint_requested = failure_->OnHeartbeat(r.job_id, r.rank, r.step, peer.pid, r.short_lived,
                                                       r.samples, r.tokens, r.loss,
                                                       {r.rank_compute_s, r.rank_nodes, r.leads});
    rank_process = failure_->RankProcessOf(r.job_id, r.rank);
  }
  if (Status st = db_->Heartbeat(r.job_id, r.rank, r.step, now, rank_process); !st) return Error(st.message());
  return reply;
}

Reply Daemon::Recover(const Request& r, const Peer& peer) {
  if (Status st = auth_->Check(peer, OpName(r.op), r.job_id); !st) return Error(st.message());
  Reply reply;
  if (!failure_) {
    reply.recover.action = "none";
    reply.recover.reason = "this node's autopard has no failure handling";
    return reply;
  }
  auto d = failure_->Recover(r.job_id, r.rank, r.detail, peer.pid);
  if (!d) return Error(d.message());
  if (publisher_) publisher_->Changed(r.job_id);
  reply.recover = *d;
  return reply;
}

}  // namespace autopar
