#include "job_events.h"

#include <cstdio>
#include <cstdlib>

#include "core/failure/timeline.h"
#include "core/proto/proto_client.h"
#include "core/site_config.h"

namespace autopar::cli {

std::string DefaultSocket() {
  const char* env = std::getenv("AUTOPAR_SOCKET");
  return env && *env ? env : SiteConfig().socket;
}

Result<std::vector<JournalEvent>> FetchJobEvents(const char* cmd, const std::string& job_id,
                                                 const std::string& socket) {
  Request r;
  r.op = Op::kEvents;
  r.job_id = job_id;
  auto reply = CallDaemonOk(socket, r);
  if (!reply) return reply.status();
  for (const auto& note : reply->notes) std::fprintf(stderr, "autopar: %s: %s\n", cmd, note.c_str());
  return MergeTimelines({reply->events});
}

}  // namespace autopar::cli
