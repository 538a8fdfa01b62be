/* dmodex.c — issue 16, direct modex (written for herd's tests, after the
 * idea of OpenPMIx's examples/dmodex.c): every rank puts a key and
 * commits, and with NO fence gets every other rank's key, each Get bounded
 * by PMIX_TIMEOUT; so every remote value travels by direct modex.
 *
 *   dmodex            as above, then a Get of a rank outside the job (must
 *                     fail at once), then a full fence before finalizing
 *   dmodex late       rank 0 commits only after 6 s; rank 2 asks for its
 *                     key with PMIX_TIMEOUT 2 (must fail with a timeout in
 *                     about 2 s), then again with 30 (must succeed)
 *
 * Lines: "rank R dmodex: got N of M", "rank R outside: STATUS MS",
 * "rank R late: STATUS MS", "rank R done". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static pmix_status_t get_str(const pmix_proc_t *me, pmix_rank_t rank,
			     int timeout, char *out, size_t outlen)
{
	pmix_proc_t p;
	pmix_info_t info;
	pmix_value_t *v = NULL;
	pmix_status_t rc;

	PMIX_PROC_LOAD(&p, me->nspace, rank);
	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout, PMIX_INT);
	rc = PMIx_Get(&p, "herd.dm", &info, 1, &v);
	PMIX_INFO_DESTRUCT(&info);
	if (rc == PMIX_SUCCESS && v) {
		if (v->type == PMIX_STRING)
			snprintf(out, outlen, "%s", v->data.string);
		else
			rc = PMIX_ERR_TYPE_MISMATCH;
	}
	if (v)
		PMIX_VALUE_RELEASE(v);
	return rc;
}

static int put_commit(const pmix_proc_t *me)
{
	char val[64];
	pmix_value_t v;
	pmix_status_t rc;

	snprintf(val, sizeof(val), "value of rank %u", me->rank);
	v.type = PMIX_STRING;
	v.data.string = val;
	if ((rc = PMIx_Put(PMIX_GLOBAL, "herd.dm", &v)) != PMIX_SUCCESS ||
	    (rc = PMIx_Commit()) != PMIX_SUCCESS) {
		fprintf(stderr, "rank %u put/commit: %s\n", me->rank,
			PMIx_Error_string(rc));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int late = argc > 1 && !strcmp(argv[1], "late");
	pmix_proc_t me, wild;
	pmix_value_t *v = NULL;
	pmix_status_t rc;
	uint32_t size;
	int ok = 1;
	char got[128], want[64];
	long t0;

	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	PMIX_PROC_LOAD(&wild, me.nspace, PMIX_RANK_WILDCARD);
	if (PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v) != PMIX_SUCCESS ||
	    !v) {
		fprintf(stderr, "rank %u: no job size\n", me.rank);
		return 1;
	}
	size = v->data.uint32;
	PMIX_VALUE_RELEASE(v);

	if (late) {
		if (me.rank == 0)
			sleep(6);
		if (put_commit(&me) < 0)
			return 1;
		if (me.rank == 2) {
			t0 = now_ms();
			rc = get_str(&me, 0, 2, got, sizeof(got));
			printf("rank %u late: %s %ld\n", me.rank,
			       PMIx_Error_string(rc), now_ms() - t0);
			t0 = now_ms();
			rc = get_str(&me, 0, 30, got, sizeof(got));
			printf("rank %u late: %s %ld\n", me.rank,
			       PMIx_Error_string(rc), now_ms() - t0);
			ok = rc == PMIX_SUCCESS &&
			     !strcmp(got, "value of rank 0");
		}
	} else {
		int n = 0;

		if (put_commit(&me) < 0)
			return 1;
		for (uint32_t r = 0; r < size; r++) {
			if (r == me.rank)
				continue;
			snprintf(want, sizeof(want), "value of rank %u", r);
			rc = get_str(&me, r, 30, got, sizeof(got));
			if (rc == PMIX_SUCCESS && !strcmp(got, want))
				n++;
			else
				fprintf(stderr, "rank %u get %u: %s\n", me.rank,
					r, PMIx_Error_string(rc));
		}
		printf("rank %u dmodex: got %d of %u\n", me.rank, n, size - 1);
		ok = n == (int)size - 1;
		t0 = now_ms();
		rc = get_str(&me, size + 3, 30, got, sizeof(got));
		printf("rank %u outside: %s %ld\n", me.rank,
		       PMIx_Error_string(rc), now_ms() - t0);
		if (rc == PMIX_SUCCESS)
			ok = 0;
	}
	fflush(stdout);
	/* Nobody leaves while another may still ask for its data. */
	if ((rc = PMIx_Fence(NULL, 0, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "rank %u fence: %s\n", me.rank,
			PMIx_Error_string(rc));
		ok = 0;
	}
	PMIx_Finalize(NULL, 0);
	printf("rank %u done\n", me.rank);
	return ok ? 0 : 1;
}
