// What a node's autopard is doing: the uploads in flight (`autopar ckpt status`) and the
// Prometheus text of metrics_listen.
#include "daemon.h"
#include "daemon_internal.h"

namespace autopar {

using daemon_detail::Error;
using daemon_detail::Now;

std::string Daemon::RenderMetrics() {
  const Uploader::Counts c = uploader_->CurrentCounts();
  return metrics_->Render({c.queued, c.running, c.waiting_retry, c.steps_watched, c.bytes_sent}, Now());
}

Reply Daemon::UploadStatus(const Request& r, const Peer& peer) {
  if (!r.job_id.empty()) {
    if (Status st = auth_->Check(peer, "status", r.job_id); !st) return Error(st.message());
  }
  Reply reply;
  for (auto& u : uploader_->Progress(r.job_id)) {
    if (!auth_->IsPrivileged(peer.uid) && !auth_->Check(peer, "status", u.job_id).ok()) continue;
    reply.uploads.push_back(std::move(u));
  }
  return reply;
}

}  // namespace autopar
