/* A tiny PMIx client for tests/cluster/selftest.sh: every rank puts a value, all ranks fence with
 * data collection, and every rank reads its right neighbour's value (on another node for most
 * ranks). Prints "pmix rank R of N ok" and exits 0, or names the failing call and exits 1. */
#include <pmix.h>
#include <stdbool.h>
#include <stdio.h>

static int fail(const char *what, pmix_status_t rc, const pmix_proc_t *me) {
  fprintf(stderr, "pmix_check: %s failed: %s (namespace %s, rank %u)\n", what, PMIx_Error_string(rc),
          me->nspace, me->rank);
  return 1;
}

int main(void) {
  pmix_proc_t me, wild, peer;
  pmix_value_t value, *got = NULL;
  pmix_info_t collect;
  bool yes = true;
  pmix_status_t rc;
  uint32_t size, want;

  if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) return fail("PMIx_Init", rc, &me);
  PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
  if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &got)) != PMIX_SUCCESS)
    return fail("PMIx_Get(PMIX_JOB_SIZE)", rc, &me);
  size = got->data.uint32;
  PMIX_VALUE_RELEASE(got);

  PMIX_VALUE_CONSTRUCT(&value);
  value.type = PMIX_UINT32;
  value.data.uint32 = 1000u + me.rank;
  if ((rc = PMIx_Put(PMIX_GLOBAL, "autopar.selftest", &value)) != PMIX_SUCCESS)
    return fail("PMIx_Put", rc, &me);
  if ((rc = PMIx_Commit()) != PMIX_SUCCESS) return fail("PMIx_Commit", rc, &me);
  PMIX_INFO_CONSTRUCT(&collect);
  PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
  if ((rc = PMIx_Fence(&wild, 1, &collect, 1)) != PMIX_SUCCESS) return fail("PMIx_Fence", rc, &me);
  PMIX_INFO_DESTRUCT(&collect);

  PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
  if ((rc = PMIx_Get(&peer, "autopar.selftest", NULL, 0, &got)) != PMIX_SUCCESS)
    return fail("PMIx_Get(peer)", rc, &me);
  want = 1000u + peer.rank;
  if (got->type != PMIX_UINT32 || got->data.uint32 != want) {
    fprintf(stderr, "pmix_check: rank %u read a wrong value from rank %u\n", me.rank, peer.rank);
    return 1;
  }
  PMIX_VALUE_RELEASE(got);
  printf("pmix rank %u of %u ok\n", me.rank, size);
  if ((rc = PMIx_Finalize(NULL, 0)) != PMIX_SUCCESS) return fail("PMIx_Finalize", rc, &me);
  return 0;
}
