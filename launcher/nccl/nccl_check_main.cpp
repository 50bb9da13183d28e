// autopar-nccl-check: the preflight behind `autopar-launch --nccl-check`. autopar-launch runs it
// as each rank's first child, with the rank's environment (one GPU in CUDA_VISIBLE_DEVICES), so
// it is a PMIx client of the step like the program will be. It all-reduces growing messages over
// every GPU of the step (world communicator) and over each node's GPUs (ncclCommSplit by node),
// gathers each node's bus bandwidth, prints them on rank 0 and fails on every rank when a node
// is below AUTOPAR_NCCL_MIN_RATIO x the median of the nodes. Sizes: 1 MiB up to
// AUTOPAR_NCCL_CHECK_MAX_BYTES (default 256 MiB). With one GPU per node the node figure is the
// world figure (a single GPU has no intra-node traffic to measure).
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "launcher/launch.h"
#include "autopar/nccl.h"
#include "launcher/nccl_bootstrap.h"
#include "nccl_check.h"

namespace autopar {
namespace {

struct Measurement {
  size_t bytes = 0;
  double busbw_gbs = 0;
};

// Times `iters` all-reduces of `bytes` (after `warmup`) on `comm`; busbw per nccl-tests.
Result<Measurement> TimeAllReduce(JobBootstrap& job, ncclComm_t comm, int nranks, float* buf,
                                  size_t bytes, cudaStream_t stream, int warmup, int iters) {
  size_t count = bytes / sizeof(float);
  for (int i = 0; i < warmup; ++i) {
    NCCL_TRY(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream), job);
  }
  CUDA_TRY(cudaStreamSynchronize(stream), job);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    NCCL_TRY(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream), job);
  }
  CUDA_TRY(cudaStreamSynchronize(stream), job);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  return Measurement{bytes, AllReduceBusBandwidthGBs(bytes, s, nranks)};
}

// Each node's result as gathered on every rank.
struct NodeReport {
  double busbw_gbs;
  int node_rank;
  int local_rank;
  char host[64];
};

Status RunCheck(JobBootstrap& job, double min_ratio, size_t max_bytes, int* verdict) {
  int ndev = 0;
  CUDA_TRY(cudaGetDeviceCount(&ndev), job);
  if (ndev < 1) return Status::Error("CUDA: no GPU visible to this rank");
  CUDA_TRY(cudaSetDevice(0), job);
  auto world = CreateNcclComm(job, "nccl-check");
  if (!world) return world.status();
  ncclComm_t comm = *world;
  ncclComm_t node_comm = nullptr;
  NCCL_TRY(ncclCommSplit(comm, job.node_rank(), job.local_rank(), &node_comm, nullptr), job);
  cudaStream_t stream;
  CUDA_TRY(cudaStreamCreate(&stream), job);
  float* buf = nullptr;
  CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&buf), max_bytes), job);
  CUDA_TRY(cudaMemset(buf, 0, max_bytes), job);

  Measurement world_best;
  for (size_t bytes : PreflightSizes(1 << 20, max_bytes)) {
    auto m = TimeAllReduce(job, comm, job.size(), buf, bytes, stream, 2, 5);
    if (!m) return m.status();
    if (job.rank() == 0) {
      std::fprintf(stderr, "autopar-launch: nccl-check: all-reduce %8zu KiB over %d GPUs: %7.2f GB/s bus bandwidth\n",
                   bytes >> 10, job.size(), m->busbw_gbs);
    }
    world_best = *m;
  }
  Measurement node = world_best;
  if (job.local_size() > 1) {
    auto m = TimeAllReduce(job, node_comm, job.local_size(), buf, max_bytes, stream, 2, 5);
    if (!m) return m.status();
    node = *m;
  }

  NodeReport mine{};
  mine.busbw_gbs = node.busbw_gbs;
  mine.node_rank = job.node_rank();
  mine.local_rank = job.local_rank();
  std::snprintf(mine.host, sizeof(mine.host), "%s", job.host().c_str());
  NodeReport* dev_reports = nullptr;
  size_t report_bytes = sizeof(NodeReport) * static_cast<size_t>(job.size());
  CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&dev_reports), report_bytes), job);
  CUDA_TRY(cudaMemcpy(dev_reports + job.rank(), &mine, sizeof(mine), cudaMemcpyHostToDevice), job);
  NCCL_TRY(ncclAllGather(dev_reports + job.rank(), dev_reports, sizeof(NodeReport), ncclChar,
                         comm, stream),
           job);
  CUDA_TRY(cudaStreamSynchronize(stream), job);
  std::vector<NodeReport> reports(static_cast<size_t>(job.size()));
  CUDA_TRY(cudaMemcpy(reports.data(), dev_reports, report_bytes, cudaMemcpyDeviceToHost), job);

  std::vector<NodeBandwidth> nodes;
  for (const auto& r : reports) {
    if (r.local_rank == 0) nodes.push_back({r.host, r.busbw_gbs});
  }
  auto slow = SlowNodes(nodes, min_ratio);
  if (job.rank() == 0) {
    for (const auto& n : nodes) {
      std::fprintf(stderr, "autopar-launch: nccl-check: node %s: %.2f GB/s%s\n", n.host.c_str(),
                   n.busbw_gbs, job.local_size() > 1 ? " (intra-node all-reduce)" : "");
    }
    for (const auto& n : slow) {
      std::fprintf(stderr,
                   "autopar-launch: nccl-check: node %s is slow: %.2f GB/s is below %.2f x the "
                   "median of the nodes\n",
                   n.host.c_str(), n.busbw_gbs, min_ratio);
    }
  }
  *verdict = slow.empty() ? 0 : 1;
  cudaFree(dev_reports);
  cudaFree(buf);
  cudaStreamDestroy(stream);
  ncclCommDestroy(node_comm);
  ncclCommDestroy(comm);
  return Status::Ok();
}

}  // namespace
}  // namespace autopar

int main() {
  auto job = autopar::JobBootstrap::Connect();
  if (!job) {
    std::fprintf(stderr, "autopar-launch: nccl-check: %s\n", job.message().c_str());
    return 1;
  }
  double ratio = 0.5;
  if (const char* r = std::getenv("AUTOPAR_NCCL_MIN_RATIO")) ratio = std::atof(r);
  size_t max_bytes = size_t{256} << 20;
  if (const char* m = std::getenv("AUTOPAR_NCCL_CHECK_MAX_BYTES")) {
    max_bytes = static_cast<size_t>(std::strtoull(m, nullptr, 10));
  }
  if (max_bytes < (1 << 20)) max_bytes = 1 << 20;
  int verdict = 1;
  autopar::Status st = autopar::RunCheck(**job, ratio, max_bytes, &verdict);
  if (!st) {
    std::fprintf(stderr, "%s%s\n",
                 autopar::LaunchMessagePrefix((*job)->rank(), (*job)->host()).c_str(),
                 st.message().c_str());
    return 1;
  }
  return verdict;
}
