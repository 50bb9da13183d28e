#include "pmix_client.h"

#include <cstring>

namespace autopar {

namespace {

// Releases a pmix_value_t returned by PMIx_Get on every path.
struct ValueGuard {
  pmix_value_t* v = nullptr;
  ~ValueGuard() {
    if (v) PMIX_VALUE_RELEASE(v);
  }
};

}  // namespace

PmixClient::~PmixClient() { (void)Finalize(); }

bool PmixClient::ServerAdvertised(const EnvMap& env) {
  if (!env.count("PMIX_NAMESPACE")) return false;
  for (const char* k : {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                        "PMIX_SERVER_URI21", "PMIX_SERVER_URI2", "PMIX_SERVER_URI"}) {
    if (env.count(k)) return true;
  }
  return false;
}

Status PmixClient::Error(const char* call, pmix_status_t rc) const {
  return Status::Error(std::string("PMIx: ") + call + " failed: " + PMIx_Error_string(rc) +
                       " (namespace " + (nspace_.empty() ? "?" : nspace_) + ", rank " +
                       (initialized_ ? std::to_string(self_.rank) : std::string("?")) + ")");
}

Status PmixClient::Init() {
  pmix_status_t rc = PMIx_Init(&self_, nullptr, 0);
  if (rc != PMIX_SUCCESS) return Error("PMIx_Init", rc);
  initialized_ = true;
  nspace_ = self_.nspace;
  return Status::Ok();
}

Status PmixClient::Finalize() {
  if (!initialized_) return Status::Ok();
  initialized_ = false;
  pmix_status_t rc = PMIx_Finalize(nullptr, 0);
  if (rc != PMIX_SUCCESS) return Error("PMIx_Finalize", rc);
  return Status::Ok();
}

Result<uint32_t> PmixClient::GetU32(pmix_rank_t rank, const char* key) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, self_.nspace, rank);
  ValueGuard val;
  pmix_status_t rc = PMIx_Get(&proc, key, nullptr, 0, &val.v);
  if (rc != PMIX_SUCCESS) return Error((std::string("PMIx_Get(") + key + ")").c_str(), rc);
  switch (val.v->type) {
    case PMIX_UINT32: return val.v->data.uint32;
    case PMIX_UINT16: return static_cast<uint32_t>(val.v->data.uint16);
    case PMIX_UINT8: return static_cast<uint32_t>(val.v->data.uint8);
    case PMIX_INT: return static_cast<uint32_t>(val.v->data.integer);
    case PMIX_UINT: return static_cast<uint32_t>(val.v->data.uint);
    case PMIX_UINT64: return static_cast<uint32_t>(val.v->data.uint64);
    case PMIX_PROC_RANK: return static_cast<uint32_t>(val.v->data.rank);
    default:
      return Status::Error(std::string("PMIx: ") + key + " has unexpected type " +
                           PMIx_Data_type_string(val.v->type));
  }
}

Result<RankInfo> PmixClient::QueryRankInfo() {
  RankInfo info;
  info.rank = static_cast<int>(self_.rank);
  auto size = GetU32(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE);
  if (!size) return size.status();
  auto local_rank = GetU32(self_.rank, PMIX_LOCAL_RANK);
  if (!local_rank) return local_rank.status();
  auto local_size = GetU32(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE);
  if (!local_size) return local_size.status();
  auto node_id = GetU32(self_.rank, PMIX_NODEID);
  if (!node_id) return node_id.status();
  auto num_nodes = GetU32(PMIX_RANK_WILDCARD, PMIX_NUM_NODES);
  if (!num_nodes) return num_nodes.status();
  info.size = static_cast<int>(*size);
  info.local_rank = static_cast<int>(*local_rank);
  info.local_size = static_cast<int>(*local_size);
  info.node_rank = static_cast<int>(*node_id);
  info.num_nodes = static_cast<int>(*num_nodes);

  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, self_.nspace, self_.rank);
  ValueGuard host;
  pmix_status_t rc = PMIx_Get(&proc, PMIX_HOSTNAME, nullptr, 0, &host.v);
  if (rc == PMIX_SUCCESS && host.v->type == PMIX_STRING && host.v->data.string) {
    info.host = host.v->data.string;
  }
  Status st = ValidateRankInfo(info);
  if (!st) return Status::Error("PMIx: " + st.message());
  return info;
}

Status PmixClient::PutString(const std::string& key, const std::string& value) {
  pmix_value_t v;
  PMIX_VALUE_CONSTRUCT(&v);
  v.type = PMIX_STRING;
  v.data.string = const_cast<char*>(value.c_str());
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
  v.data.string = nullptr;  // not ours to free
  if (rc != PMIX_SUCCESS) return Error(("PMIx_Put(" + key + ")").c_str(), rc);
  return Status::Ok();
}

Status PmixClient::Commit() {
  pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) return Error("PMIx_Commit", rc);
  return Status::Ok();
}

Status PmixClient::Fence(bool collect, int timeout_s) {
  pmix_proc_t all;
  PMIX_LOAD_PROCID(&all, self_.nspace, PMIX_RANK_WILDCARD);
  pmix_info_t info[2];
  PMIX_INFO_CONSTRUCT(&info[0]);
  PMIX_INFO_CONSTRUCT(&info[1]);
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
  pmix_status_t rc = PMIx_Fence(&all, 1, info, timeout_s > 0 ? 2 : 1);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS) return Error("PMIx_Fence", rc);
  return Status::Ok();
}

Result<std::string> PmixClient::GetString(int rank, const std::string& key, int timeout_s) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, self_.nspace, static_cast<pmix_rank_t>(rank));
  pmix_info_t info;
  PMIX_INFO_CONSTRUCT(&info);
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_s, PMIX_INT);
  ValueGuard val;
  pmix_status_t rc = PMIx_Get(&proc, key.c_str(), timeout_s > 0 ? &info : nullptr,
                              timeout_s > 0 ? 1 : 0, &val.v);
  PMIX_INFO_DESTRUCT(&info);
  if (rc != PMIX_SUCCESS) {
    return Error(("PMIx_Get(" + key + " of rank " + std::to_string(rank) + ")").c_str(), rc);
  }
  if (val.v->type != PMIX_STRING || !val.v->data.string) {
    return Status::Error("PMIx: " + key + " of rank " + std::to_string(rank) +
                         " is not a string");
  }
  return std::string(val.v->data.string);
}

Status PmixClient::Abort(int status, const std::string& message) {
  if (!initialized_) return Status::Error("PMIx: PMIx_Abort without PMIx_Init");
  pmix_status_t rc = PMIx_Abort(status, message.c_str(), nullptr, 0);
  if (rc != PMIX_SUCCESS) return Error("PMIx_Abort", rc);
  return Status::Ok();
}

}  // namespace autopar
