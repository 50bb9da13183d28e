/* libautopar's C API (see autopar/nccl.h for the C++ API and the contract).
 *
 * Every function returns 0 on success and -1 on failure; the failure's message is then available
 * from autopar_job_error() until the next call on the same job (or, for a failed
 * autopar_job_init, written to `err`). A job handle is not thread-safe. Collective calls
 * (autopar_job_broadcast, autopar_nccl_comm_init) must be made by every rank in the same order
 * with the same tags. */
#ifndef AUTOPAR_AUTOPAR_C_H_
#define AUTOPAR_AUTOPAR_C_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct autopar_job autopar_job_t;
struct ncclComm; /* nccl.h: typedef struct ncclComm* ncclComm_t; */

/* Connects to the step's PMIx server as this rank. On failure *job is NULL and `err` (when not
 * NULL) holds a NUL-terminated message, truncated to errlen. */
int autopar_job_init(autopar_job_t** job, char* err, size_t errlen);
/* PMIx_Finalize and free; NULL is allowed. */
void autopar_job_finalize(autopar_job_t* job);

int autopar_job_rank(const autopar_job_t* job);
int autopar_job_size(const autopar_job_t* job);
int autopar_job_local_rank(const autopar_job_t* job);
int autopar_job_local_size(const autopar_job_t* job);
int autopar_job_node_rank(const autopar_job_t* job);
const char* autopar_job_host(const autopar_job_t* job);
/* The last failure's message ("" when none). */
const char* autopar_job_error(const autopar_job_t* job);

/* Collective: `len` bytes of `buf` on rank `root` are copied into `buf` on every rank. Fails when
 * the root's length differs from `len`. */
int autopar_job_broadcast(autopar_job_t* job, const char* tag, int root, void* buf, size_t len);

/* Collective: an NCCL communicator over the whole step on the current CUDA device (the unique id
 * comes from rank 0 through PMIx). Fails when libautopar was built without NCCL. */
int autopar_nccl_comm_init(autopar_job_t* job, const char* tag, struct ncclComm** comm);

#ifdef __cplusplus
}
#endif

#endif /* AUTOPAR_AUTOPAR_C_H_ */
