// The checkpoint C API (autopar/ckpt_c.h) over the protocol client (proto_client.h). Built into
// libautopar (launcher/nccl/CMakeLists.txt adds this file to its sources).
#include "autopar/ckpt_c.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/proto/heartbeat_sender.h"
#include "core/proto/proto_client.h"

namespace {

int Fail(const std::string& message, char* err, size_t errlen) {
  if (err && errlen > 0) {
    size_t n = std::min(message.size(), errlen - 1);
    std::memcpy(err, message.data(), n);
    err[n] = '\0';
  }
  return -1;
}

autopar::Result<autopar::JobCkptEnv> Job() {
  return autopar::JobCkptEnvFrom([](const char* k) { return std::getenv(k); });
}

}  // namespace

extern "C" int autopar_ckpt_step_dir(long long step, char* buf, size_t len, char* err, size_t errlen) {
  if (step < 0) return Fail("step must be >= 0", err, errlen);
  auto job = Job();
  if (!job) return Fail(job.message(), err, errlen);
  std::string dir = autopar::RankStepDir(job->ckpt_dir, step, job->rank);
  if (!buf || dir.size() + 1 > len) return Fail("buffer too small for " + dir, err, errlen);
  std::memcpy(buf, dir.c_str(), dir.size() + 1);
  return 0;
}

extern "C" int autopar_ckpt_commit(long long step, char* err, size_t errlen) {
  auto job = Job();
  if (!job) return Fail(job.message(), err, errlen);
  auto reply = autopar::CommitStep(*job, step);
  if (!reply) return Fail(reply.message(), err, errlen);
  return 0;
}

namespace {

autopar::HeartbeatSender::Beat MakeBeat(long long step, long long samples, long long tokens,
                                        int has_loss, double loss) {
  autopar::HeartbeatSender::Beat beat;
  beat.step = step;
  beat.progress.samples = samples < 0 ? -1 : samples;
  beat.progress.tokens = tokens < 0 ? -1 : tokens;
  if (has_loss) beat.progress.loss = loss;
  return beat;
}

}  // namespace

extern "C" int autopar_ckpt_heartbeat_progress(long long step, long long samples,
                                               long long tokens, int has_loss, double loss,
                                               int* checkpoint_requested, char* err,
                                               size_t errlen) {
  if (checkpoint_requested) *checkpoint_requested = 0;
  auto sender = autopar::ProcessHeartbeatSender();  // the task's variables, read once
  if (!sender) return Fail(sender.message(), err, errlen);
  auto posted = (*sender)->Post(MakeBeat(step, samples, tokens, has_loss, loss));
  if (checkpoint_requested) *checkpoint_requested = posted.checkpoint_requested ? 1 : 0;
  if (!posted.error.empty()) return Fail(posted.error, err, errlen);
  return 0;
}

extern "C" int autopar_ckpt_heartbeat_sync(long long step, long long samples, long long tokens,
                                           int has_loss, double loss, int* checkpoint_requested,
                                           char* err, size_t errlen) {
  if (checkpoint_requested) *checkpoint_requested = 0;
  auto job = autopar::JobTaskEnvFrom([](const char* k) { return std::getenv(k); });
  if (!job) return Fail(job.message(), err, errlen);
  auto sender = autopar::ProcessHeartbeatSender();
  if (!sender) return Fail(sender.message(), err, errlen);
  auto requested = (*sender)->Send(*job, MakeBeat(step, samples, tokens, has_loss, loss));
  if (!requested) return Fail(requested.message(), err, errlen);
  if (checkpoint_requested) *checkpoint_requested = *requested ? 1 : 0;
  return 0;
}

extern "C" int autopar_ckpt_heartbeat_flush(int timeout_ms, char* err, size_t errlen) {
  autopar::HeartbeatSender* sender = autopar::ExistingProcessHeartbeatSender();
  if (!sender || sender->Flush(timeout_ms < 0 ? 0 : timeout_ms)) return 0;
  return Fail("heartbeats still unsent after " + std::to_string(timeout_ms) + " ms", err, errlen);
}

extern "C" int autopar_ckpt_heartbeat_check(long long step, int* checkpoint_requested, char* err,
                                            size_t errlen) {
  return autopar_ckpt_heartbeat_progress(step, -1, -1, 0, 0.0, checkpoint_requested, err, errlen);
}

extern "C" int autopar_ckpt_heartbeat(long long step, char* err, size_t errlen) {
  return autopar_ckpt_heartbeat_check(step, nullptr, err, errlen);
}

extern "C" long long autopar_ckpt_resume_step(void) {
  const char* v = std::getenv("AUTOPAR_RESUME_STEP");
  if (!v || !*v) return -1;
  char* end = nullptr;
  long long s = std::strtoll(v, &end, 10);
  return (*end == '\0' && s >= 0) ? s : -1;
}
