/* ppub.c — issue 16: PMIx_Publish / PMIx_Lookup / PMIx_Unpublish across
 * the job's nodes (8 ranks; written fresh, in the spirit of OpenPMIx's
 * examples/pub.c).  Each step ends with a fence so that the next sees
 * what the last did:
 *   1. rank 0 publishes "svc-a" (a string), "svc-bytes" (256 bytes, every
 *      byte value) and "svc-b" (an int); every other rank looks them up
 *      and checks the values and the publisher;
 *   2. rank 2 publishes "svc-a" again: PMIX_ERR_DUPLICATE_KEY; rank 5
 *      unpublishes "svc-b" (not its own): nothing goes;
 *   3. rank 1 looks up "late" with PMIX_WAIT and PMIX_TIMEOUT 60 s while
 *      rank 7 publishes it 1 s later; rank 3 looks up "never" with
 *      PMIX_WAIT and PMIX_TIMEOUT 1 s: PMIX_ERR_TIMEOUT;
 *   4. rank 0 unpublishes "svc-a"; rank 6 finds it gone and "svc-b"
 *      still there.
 * Prints "rank R STEP: STATUS [detail]" lines; exits non-zero on a
 * wrong value. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <pmix.h>

static pmix_proc_t me;
static int bad;

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void fence(void)
{
	pmix_status_t rc = PMIx_Fence(NULL, 0, NULL, 0);

	if (rc != PMIX_SUCCESS) {
		printf("rank %u fence: %s\n", me.rank, PMIx_Error_string(rc));
		bad = 1;
	}
}

static void say(const char *step, pmix_status_t rc, const char *detail)
{
	printf("rank %u %s: %s%s%s\n", me.rank, step, PMIx_Error_string(rc),
	       detail ? " " : "", detail ? detail : "");
	fflush(stdout);
}

static pmix_status_t lookup(const char *key, pmix_pdata_t *pd, int wait_s,
			    int timeout_s)
{
	pmix_info_t info[2];
	size_t n = 0;
	bool yes = true;

	PMIX_PDATA_CONSTRUCT(pd);
	PMIX_LOAD_KEY(pd->key, key);
	if (wait_s) {
		PMIX_INFO_LOAD(&info[n], PMIX_WAIT, &yes, PMIX_BOOL);
		n++;
		PMIX_INFO_LOAD(&info[n], PMIX_TIMEOUT, &timeout_s, PMIX_INT);
		n++;
	}
	return PMIx_Lookup(pd, 1, n ? info : NULL, n);
}

int main(void)
{
	unsigned char bytes[256];
	pmix_status_t rc;
	pmix_pdata_t pd;
	char detail[256];

	for (int i = 0; i < 256; i++)
		bytes[i] = (unsigned char)i;
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	/* 1. publish, look up everywhere */
	if (me.rank == 0) {
		pmix_info_t info[3];
		pmix_byte_object_t bo = {(char *)bytes, sizeof(bytes)};
		int v = 4242;

		PMIX_INFO_LOAD(&info[0], "svc-a", "port-of-rank-0", PMIX_STRING);
		PMIX_INFO_LOAD(&info[1], "svc-bytes", &bo, PMIX_BYTE_OBJECT);
		PMIX_INFO_LOAD(&info[2], "svc-b", &v, PMIX_INT);
		rc = PMIx_Publish(info, 3);
		say("publish", rc, NULL);
		bad |= rc != PMIX_SUCCESS;
	}
	fence();
	if (me.rank != 0) {
		rc = lookup("svc-a", &pd, 0, 0);
		snprintf(detail, sizeof(detail), "%s from rank %u",
			 rc == PMIX_SUCCESS && pd.value.type == PMIX_STRING
				 ? pd.value.data.string
				 : "?",
			 pd.proc.rank);
		say("lookup svc-a", rc, detail);
		bad |= rc != PMIX_SUCCESS || pd.proc.rank != 0;
		PMIX_PDATA_DESTRUCT(&pd);
		rc = lookup("svc-bytes", &pd, 0, 0);
		bad |= rc != PMIX_SUCCESS ||
		       pd.value.type != PMIX_BYTE_OBJECT ||
		       pd.value.data.bo.size != sizeof(bytes) ||
		       memcmp(pd.value.data.bo.bytes, bytes, sizeof(bytes));
		say("lookup svc-bytes", rc,
		    rc == PMIX_SUCCESS && pd.value.type == PMIX_BYTE_OBJECT &&
				    pd.value.data.bo.size == sizeof(bytes) &&
				    !memcmp(pd.value.data.bo.bytes, bytes,
					    sizeof(bytes))
			    ? "256 bytes intact"
			    : "WRONG");
		PMIX_PDATA_DESTRUCT(&pd);
	}
	fence();
	/* 2. a duplicate; an unpublish of another rank's key */
	if (me.rank == 2) {
		pmix_info_t info;

		PMIX_INFO_LOAD(&info, "svc-a", "port-of-rank-2", PMIX_STRING);
		rc = PMIx_Publish(&info, 1);
		say("publish svc-a again", rc, NULL);
		bad |= rc != PMIX_ERR_DUPLICATE_KEY;
	}
	if (me.rank == 5) {
		char *keys[] = {"svc-b", NULL};

		rc = PMIx_Unpublish(keys, NULL, 0);
		say("unpublish svc-b of rank 0", rc, NULL);
	}
	fence();
	/* 3. a lookup that waits for a late publisher; one that times out */
	if (me.rank == 1) {
		long t0 = now_ms();

		rc = lookup("late", &pd, 1, 60);
		snprintf(detail, sizeof(detail), "%s from rank %u after %ld ms",
			 rc == PMIX_SUCCESS && pd.value.type == PMIX_STRING
				 ? pd.value.data.string
				 : "?",
			 pd.proc.rank, now_ms() - t0);
		say("lookup late (wait)", rc, detail);
		bad |= rc != PMIX_SUCCESS || pd.proc.rank != 7;
		PMIX_PDATA_DESTRUCT(&pd);
	}
	if (me.rank == 7) {
		struct timespec s = {1, 0};
		pmix_info_t info;

		nanosleep(&s, NULL);
		PMIX_INFO_LOAD(&info, "late", "published-late-by-7",
			       PMIX_STRING);
		rc = PMIx_Publish(&info, 1);
		say("publish late", rc, NULL);
		bad |= rc != PMIX_SUCCESS;
	}
	if (me.rank == 3) {
		long t0 = now_ms();

		rc = lookup("never", &pd, 1, 1);
		snprintf(detail, sizeof(detail), "after %ld ms", now_ms() - t0);
		say("lookup never (wait 1 s)", rc, detail);
		bad |= rc == PMIX_SUCCESS;
		PMIX_PDATA_DESTRUCT(&pd);
	}
	fence();
	/* 4. unpublish by the owner, then the key is gone */
	if (me.rank == 0) {
		char *keys[] = {"svc-a", NULL};

		rc = PMIx_Unpublish(keys, NULL, 0);
		say("unpublish svc-a", rc, NULL);
		bad |= rc != PMIX_SUCCESS;
	}
	fence();
	if (me.rank == 6) {
		rc = lookup("svc-a", &pd, 0, 0);
		say("lookup svc-a after unpublish", rc, NULL);
		bad |= rc == PMIX_SUCCESS;
		PMIX_PDATA_DESTRUCT(&pd);
		rc = lookup("svc-b", &pd, 0, 0);
		snprintf(detail, sizeof(detail), "%d",
			 pd.value.type == PMIX_INT ? pd.value.data.integer : -1);
		say("lookup svc-b", rc, detail);
		bad |= rc != PMIX_SUCCESS;
		PMIX_PDATA_DESTRUCT(&pd);
	}
	fence();
	rc = PMIx_Finalize(NULL, 0);
	say("finalize", rc, bad ? "BAD" : "good");
	return bad || rc != PMIX_SUCCESS;
}
