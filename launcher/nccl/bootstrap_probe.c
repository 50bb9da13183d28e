/* autopar-bootstrap-probe: a C program using libautopar's C API without a GPU, for the
 * integration tests: every rank connects, rank 0 broadcasts 128 bytes derived from the job's
 * size, and each rank prints "probe RANK SIZE LOCAL NODE HOST HEX" and checks the bytes. */
#include <stdio.h>
#include <string.h>

#include "autopar/autopar_c.h"

int main(void) {
  char err[512];
  autopar_job_t* job = NULL;
  if (autopar_job_init(&job, err, sizeof(err)) != 0) {
    fprintf(stderr, "probe: %s\n", err);
    return 1;
  }
  unsigned char buf[128], want[128];
  for (int i = 0; i < 128; ++i) want[i] = (unsigned char)(i * 7 + autopar_job_size(job));
  if (autopar_job_rank(job) == 0) memcpy(buf, want, sizeof(buf));
  else memset(buf, 0, sizeof(buf));
  if (autopar_job_broadcast(job, "probe", 0, buf, sizeof(buf)) != 0) {
    fprintf(stderr, "probe: %s\n", autopar_job_error(job));
    autopar_job_finalize(job);
    return 1;
  }
  int ok = memcmp(buf, want, sizeof(buf)) == 0;
  printf("probe %d %d %d %d %s %s\n", autopar_job_rank(job), autopar_job_size(job),
         autopar_job_local_rank(job), autopar_job_node_rank(job), autopar_job_host(job),
         ok ? "bytes-ok" : "bytes-wrong");
  autopar_job_finalize(job);
  return ok ? 0 : 1;
}
