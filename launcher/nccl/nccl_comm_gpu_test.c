/* autopar-nccl-comm-test: libautopar's C API on GPUs (run by tests/gpu/run-nccl-checks.sh under
 * srun --mpi=pmix autopar-launch). Every rank creates the NCCL communicator from rank 0's unique
 * id shared through PMIx, all-reduces its rank number (sum over a 1 Mi-element float buffer) and
 * checks the result is size*(size-1)/2 everywhere. Prints "nccl-comm RANK SIZE ok" or fails. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "autopar/autopar_c.h"

#define COUNT (1u << 20)

int main(void) {
  char err[512];
  autopar_job_t* job = NULL;
  if (autopar_job_init(&job, err, sizeof(err)) != 0) {
    fprintf(stderr, "nccl-comm: %s\n", err);
    return 1;
  }
  int rank = autopar_job_rank(job), size = autopar_job_size(job), rc = 1;
  if (cudaSetDevice(0) != cudaSuccess) {
    fprintf(stderr, "nccl-comm: rank %d: cudaSetDevice(0) failed\n", rank);
    goto out;
  }
  ncclComm_t comm;
  if (autopar_nccl_comm_init(job, "gpu-test", &comm) != 0) {
    fprintf(stderr, "nccl-comm: rank %d: %s\n", rank, autopar_job_error(job));
    goto out;
  }
  float* host = malloc(COUNT * sizeof(float));
  float* dev = NULL;
  for (unsigned i = 0; i < COUNT; ++i) host[i] = (float)rank;
  cudaMalloc((void**)&dev, COUNT * sizeof(float));
  cudaMemcpy(dev, host, COUNT * sizeof(float), cudaMemcpyHostToDevice);
  ncclResult_t nr = ncclAllReduce(dev, dev, COUNT, ncclFloat, ncclSum, comm, 0);
  cudaError_t cr = cudaStreamSynchronize(0);
  cudaMemcpy(host, dev, COUNT * sizeof(float), cudaMemcpyDeviceToHost);
  float want = (float)size * (float)(size - 1) / 2.0f;
  int bad = 0;
  for (unsigned i = 0; i < COUNT; ++i) bad += host[i] != want;
  if (nr != ncclSuccess || cr != cudaSuccess || bad) {
    fprintf(stderr, "nccl-comm: rank %d: all-reduce wrong (%s, %s, %d bad elements)\n", rank,
            ncclGetErrorString(nr), cudaGetErrorString(cr), bad);
  } else {
    printf("nccl-comm %d %d ok\n", rank, size);
    rc = 0;
  }
  cudaFree(dev);
  free(host);
  ncclCommDestroy(comm);
out:
  autopar_job_finalize(job);
  return rc;
}
