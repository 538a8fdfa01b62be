/* fence.c — issue 16, fences over a subset of processes (written for
 * herd's tests; 8 ranks on 4 nodes x 2).  Every rank puts "herd.f" and
 * commits; then, each step checked and printed as "rank R STEP: ok" or
 * "rank R STEP: FAIL why":
 *
 *   sub     ranks 0-3 (nodes 1 and 2) fence with PMIX_COLLECT_DATA while
 *           4-7 compute (sleep 3 s): done in under 2 s, and each of 0-3
 *           then has the others' keys with PMIX_IMMEDIATE (no direct
 *           modex); 4-7 then fence among themselves without collecting
 *   again   ranks 0-3 fence again (the same procs, a second time)
 *   pair    even and odd ranks fence at the same time (every node in
 *           both, in a different order on different nodes), both
 *           collecting; each then has its group's keys (IMMEDIATE)
 *   full    every rank fences (NULL procs: the whole namespace) with
 *           PMIX_COLLECT_DATA and then has every key (IMMEDIATE)
 *
 *   fence stall   ranks 0-3 fence, but rank 3 never joins (it sleeps):
 *                 herd's fence timeout names its node only
 *
 *   fence outside   fences over processes that are not the caller's
 *                   node's, each of which must fail with BAD_PARAM (me-ns:
 *                   NOT_FOUND, a namespace herd does not know) within 10 s
 *                   ("HANG" when no answer came: the rank then exits 3):
 *       out-rank    {nspace, 9999} alone
 *       out-ns      {"no-such-ns", 0} alone
 *       out-other   a rank of the next node alone (the caller not in it)
 *       me-rank     the caller and {nspace, 9999}
 *       me-ns       the caller and {"no-such-ns", 0}
 *                   then every rank fences (full) and finalizes: the
 *                   servers still serve */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void say(const char *step, const char *why)
{
	if (why)
		printf("rank %u %s: FAIL %s\n", me.rank, step, why);
	else
		printf("rank %u %s: ok\n", me.rank, step);
	fflush(stdout);
}

/* Fences over ranks lo, lo+step, ... hi; lo < 0: every rank (NULL
 * procs, the wildcard). */
static pmix_status_t fence(int lo, int hi, int step, int collect)
{
	pmix_proc_t procs[16];
	pmix_info_t info;
	bool flag = collect != 0;
	size_t n = 0;
	pmix_status_t rc;

	for (int r = lo; lo >= 0 && r <= hi; r += step) {
		/* the macro names its first argument more than once */
		PMIX_PROC_LOAD(&procs[n], me.nspace, (pmix_rank_t)r);
		n++;
	}
	PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &flag, PMIX_BOOL);
	rc = PMIx_Fence(n ? procs : NULL, n, &info, 1);
	PMIX_INFO_DESTRUCT(&info);
	return rc;
}

/* How many of ranks lo, lo+step.. hi (not me) have their key here. */
static int have(int lo, int hi, int step, int *asked)
{
	int n = 0;

	*asked = 0;
	for (int r = lo; r <= hi; r += step) {
		pmix_proc_t p;
		pmix_info_t info;
		pmix_value_t *v = NULL;
		bool t = true;
		char want[64];

		if ((pmix_rank_t)r == me.rank)
			continue;
		(*asked)++;
		PMIX_PROC_LOAD(&p, me.nspace, (pmix_rank_t)r);
		PMIX_INFO_LOAD(&info, PMIX_IMMEDIATE, &t, PMIX_BOOL);
		snprintf(want, sizeof(want), "value of rank %d", r);
		if (PMIx_Get(&p, "herd.f", &info, 1, &v) == PMIX_SUCCESS &&
		    v && v->type == PMIX_STRING && !strcmp(v->data.string, want))
			n++;
		if (v)
			PMIX_VALUE_RELEASE(v);
		PMIX_INFO_DESTRUCT(&info);
	}
	return n;
}

static void check_have(const char *step, int lo, int hi, int stp)
{
	char why[64];
	int asked, n = have(lo, hi, stp, &asked);

	snprintf(why, sizeof(why), "has %d of %d keys", n, asked);
	say(step, n == asked ? NULL : why);
}

struct answer {
	volatile int done;
	volatile pmix_status_t rc;
};

static void answered(pmix_status_t status, void *cbdata)
{
	struct answer *a = cbdata;

	a->rc = status;
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
}

/* A fence over procs that must fail with want within 10 s. */
static void outside(const char *step, const pmix_proc_t *procs, size_t n,
		    pmix_status_t want)
{
	struct answer a = {0, PMIX_SUCCESS};
	char why[128];
	pmix_status_t rc;
	long t0 = now_ms();

	rc = PMIx_Fence_nb(procs, n, NULL, 0, answered, &a);
	if (rc == PMIX_SUCCESS) {
		while (!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE) &&
		       now_ms() - t0 < 10000)
			usleep(10 * 1000);
		if (!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE)) {
			printf("rank %u %s: HANG\n", me.rank, step);
			fflush(stdout);
			_exit(3);
		}
		rc = a.rc;
	}
	snprintf(why, sizeof(why), "%s (want %s)", PMIx_Error_string(rc),
		 PMIx_Error_string(want));
	say(step, rc == want ? NULL : why);
}

static int run_outside(void)
{
	pmix_proc_t p[2];
	pmix_status_t rc;

	PMIX_PROC_LOAD(&p[0], me.nspace, 9999);
	outside("out-rank", p, 1, PMIX_ERR_BAD_PARAM);
	PMIX_PROC_LOAD(&p[0], "no-such-ns", 0);
	outside("out-ns", p, 1, PMIX_ERR_BAD_PARAM);
	PMIX_PROC_LOAD(&p[0], me.nspace, (me.rank + 2) % 8);
	outside("out-other", p, 1, PMIX_ERR_BAD_PARAM);
	PMIX_PROC_LOAD(&p[0], me.nspace, me.rank);
	PMIX_PROC_LOAD(&p[1], me.nspace, 9999);
	outside("me-rank", p, 2, PMIX_ERR_BAD_PARAM);
	PMIX_PROC_LOAD(&p[1], "no-such-ns", 0);
	outside("me-ns", p, 2, PMIX_ERR_NOT_FOUND);
	rc = fence(-1, 0, 1, 1);
	say("full", rc == PMIX_SUCCESS ? NULL : PMIx_Error_string(rc));
	PMIx_Finalize(NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	int stall = argc > 1 && !strcmp(argv[1], "stall");
	int r;
	char val[64], why[128];
	pmix_value_t v;
	pmix_status_t rc;
	long t0;

	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	r = (int)me.rank;
	snprintf(val, sizeof(val), "value of rank %d", r);
	v.type = PMIX_STRING;
	v.data.string = val;
	if (PMIx_Put(PMIX_GLOBAL, "herd.f", &v) != PMIX_SUCCESS ||
	    PMIx_Commit() != PMIX_SUCCESS) {
		say("put", "put/commit failed");
		return 1;
	}
	if (argc > 1 && !strcmp(argv[1], "outside"))
		return run_outside();
	if (stall) {
		if (r == 3) {
			sleep(60);	/* never joins; herd ends the attempt */
			return 0;
		}
		if (r < 4) {
			rc = fence(0, 3, 1, 1);
			say("stall", rc == PMIX_SUCCESS ? "fence completed"
							: PMIx_Error_string(rc));
		} else
			sleep(60);
		PMIx_Finalize(NULL, 0);
		return 0;
	}

	/* sub: 0-3 while 4-7 compute. */
	if (r < 4) {
		t0 = now_ms();
		rc = fence(0, 3, 1, 1);
		t0 = now_ms() - t0;
		snprintf(why, sizeof(why), "%s after %ld ms",
			 PMIx_Error_string(rc), t0);
		say("sub", rc == PMIX_SUCCESS && t0 < 2000 ? NULL : why);
		check_have("sub-get", 0, 3, 1);
	} else {
		sleep(3);
		rc = fence(4, 7, 1, 0);
		say("sub", rc == PMIX_SUCCESS ? NULL : PMIx_Error_string(rc));
	}
	/* again: the same procs a second time. */
	if (r < 4) {
		rc = fence(0, 3, 1, 0);
		say("again", rc == PMIX_SUCCESS ? NULL : PMIx_Error_string(rc));
	}
	/* pair: even and odd at once, in another order on each node (the
	 * odd rank of nodes 2 and 4 goes first). */
	if ((r % 4) == 2)
		usleep(300 * 1000);
	if ((r % 4) == 1)
		usleep(300 * 1000);
	rc = fence(r % 2, 7, 2, 1);
	say("pair", rc == PMIX_SUCCESS ? NULL : PMIx_Error_string(rc));
	check_have("pair-get", r % 2, 7, 2);
	/* full (NULL procs), collecting. */
	rc = fence(-1, 0, 1, 1);
	say("full", rc == PMIX_SUCCESS ? NULL : PMIx_Error_string(rc));
	check_have("full-get", 0, 7, 1);
	PMIx_Finalize(NULL, 0);
	return 0;
}
