#include <cstdlib>
#include <cstring>

#include "../pmix_client.h"
#include "autopar/nccl.h"
#include "launcher/nccl_bootstrap.h"

extern char** environ;

namespace autopar {

struct JobBootstrap::Impl {
  PmixClient pmix;
  RankInfo info;
};

JobBootstrap::JobBootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JobBootstrap::~JobBootstrap() { (void)impl_->pmix.Finalize(); }

Result<std::unique_ptr<JobBootstrap>> JobBootstrap::Connect() {
  EnvMap env;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  }
  if (!PmixClient::ServerAdvertised(env)) {
    return Status::Error(
        "PMIx: no PMIx server in the environment (start the program with srun --mpi=pmix "
        "autopar-launch -- PROGRAM)");
  }
  auto impl = std::make_unique<Impl>();
  if (Status st = impl->pmix.Init(); !st) return st;
  // Under autopar-launch the program is a second PMIx client of its rank (the launcher is the
  // first). Slurm 22.05's PMIx server does not give such a client the process-level keys
  // (PMIx_Get(pmix.lrank) returns NOT-FOUND, seen on the local cluster), so the identity comes
  // from the variables the launcher derived from PMIx, checked against PMIx's own rank.
  auto from_launcher = LaunchedRankInfo(env);
  if (from_launcher && from_launcher->rank == impl->pmix.rank()) {
    impl->info = *from_launcher;
  } else {
    auto info = impl->pmix.QueryRankInfo();
    if (!info) return info.status();
    impl->info = *info;
  }
  return std::unique_ptr<JobBootstrap>(new JobBootstrap(std::move(impl)));
}

int JobBootstrap::rank() const { return impl_->info.rank; }
int JobBootstrap::size() const { return impl_->info.size; }
int JobBootstrap::local_rank() const { return impl_->info.local_rank; }
int JobBootstrap::local_size() const { return impl_->info.local_size; }
int JobBootstrap::node_rank() const { return impl_->info.node_rank; }
int JobBootstrap::num_nodes() const { return impl_->info.num_nodes; }
const std::string& JobBootstrap::host() const { return impl_->info.host; }

Result<std::vector<uint8_t>> JobBootstrap::Broadcast(const std::string& tag, int root,
                                                     const std::vector<uint8_t>& bytes) {
  auto key = BootstrapKey(tag);
  if (!key) return key.status();
  if (root < 0 || root >= size()) {
    return Status::Error("broadcast '" + tag + "': root " + std::to_string(root) +
                         " is not a rank of this job of " + std::to_string(size()));
  }
  PmixClient& p = impl_->pmix;
  if (rank() == root) {
    if (Status st = p.PutString(*key, EncodeBootstrapId(bytes)); !st) return st;
  }
  if (Status st = p.Commit(); !st) return st;
  // Without data collection the Fence is a barrier; the Get below fetches the one key from the
  // root's node (see PmixClient::Fence).
  if (Status st = p.Fence(/*collect=*/true, /*timeout_s=*/300); !st) return st;
  if (rank() == root) return bytes;
  auto text = p.GetString(root, *key, 300);
  if (!text) return text.status();
  auto decoded = DecodeBootstrapId(*text, 0);
  if (!decoded) return Status::Error("broadcast '" + tag + "': " + decoded.message());
  return decoded;
}

}  // namespace autopar
