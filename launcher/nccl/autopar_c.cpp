// libautopar's C API over the C++ API; no exception crosses it.
#include "autopar/autopar_c.h"

#include <cstring>
#include <exception>

#include "autopar/nccl.h"

struct autopar_job {
  std::unique_ptr<autopar::JobBootstrap> job;
  std::string error;
};

namespace {

void CopyError(const std::string& msg, char* err, size_t errlen) {
  if (!err || errlen == 0) return;
  std::strncpy(err, msg.c_str(), errlen - 1);
  err[errlen - 1] = '\0';
}

}  // namespace

extern "C" {

int autopar_job_init(autopar_job_t** job, char* err, size_t errlen) {
  if (!job) return -1;
  *job = nullptr;
  try {
    auto b = autopar::JobBootstrap::Connect();
    if (!b) {
      CopyError(b.message(), err, errlen);
      return -1;
    }
    *job = new autopar_job{std::move(*b), ""};
    return 0;
  } catch (const std::exception& e) {
    CopyError(std::string("autopar_job_init: ") + e.what(), err, errlen);
    return -1;
  }
}

void autopar_job_finalize(autopar_job_t* job) { delete job; }

int autopar_job_rank(const autopar_job_t* job) { return job->job->rank(); }
int autopar_job_size(const autopar_job_t* job) { return job->job->size(); }
int autopar_job_local_rank(const autopar_job_t* job) { return job->job->local_rank(); }
int autopar_job_local_size(const autopar_job_t* job) { return job->job->local_size(); }
int autopar_job_node_rank(const autopar_job_t* job) { return job->job->node_rank(); }
const char* autopar_job_host(const autopar_job_t* job) { return job->job->host().c_str(); }
const char* autopar_job_error(const autopar_job_t* job) { return job->error.c_str(); }

int autopar_job_broadcast(autopar_job_t* job, const char* tag, int root, void* buf, size_t len) {
  try {
    job->error.clear();
    const auto* p = static_cast<const uint8_t*>(buf);
    std::vector<uint8_t> bytes;
    if (job->job->rank() == root) bytes.assign(p, p + len);
    auto out = job->job->Broadcast(tag ? tag : "", root, bytes);
    if (!out) {
      job->error = out.message();
      return -1;
    }
    if (out->size() != len) {
      job->error = "broadcast '" + std::string(tag) + "': root sent " +
                   std::to_string(out->size()) + " bytes, this rank expects " +
                   std::to_string(len);
      return -1;
    }
    if (len) std::memcpy(buf, out->data(), len);
    return 0;
  } catch (const std::exception& e) {
    job->error = std::string("autopar_job_broadcast: ") + e.what();
    return -1;
  }
}

int autopar_nccl_comm_init(autopar_job_t* job, const char* tag, struct ncclComm** comm) {
  try {
    job->error.clear();
    auto c = autopar::CreateNcclComm(*job->job, tag ? tag : "world");
    if (!c) {
      job->error = c.message();
      return -1;
    }
    *comm = *c;
    return 0;
  } catch (const std::exception& e) {
    job->error = std::string("autopar_nccl_comm_init: ") + e.what();
    return -1;
  }
}

}  // extern "C"
