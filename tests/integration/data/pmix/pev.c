/* pev.c — issue 16: PMIx events between ranks, and herd's failures as
 * events (written fresh).
 *
 *   pev notify RANGE   every rank registers a handler for a custom code;
 *                      rank 2 notifies it with a payload in RANGE
 *                      (namespace, session, global, local, custom: ranks
 *                      0 and 5); every rank says within 3 s whether its
 *                      handler got it ("rank R event: got PAYLOAD from
 *                      rank 2" or "rank R event: none").
 *   pev wait [EXIT]    every rank registers for PMIX_ERR_PROC_ABORTED and
 *                      _BY_SIG, says "rank R waiting", then waits (sleeps)
 *                      for the event; the handler prints "rank R failure:
 *                      CODE affected A,B at WALLMS".  With EXIT = N, rank
 *                      N exits 1 after saying "rank N exits 1 at WALLMS".
 *                      The ranks wait until herd stops them; one that gets
 *                      SIGTERM says "rank R SIGTERM at WALLMS".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

#define HERD_TEST_CODE (PMIX_EXTERNAL_ERR_BASE - 16)

static pmix_proc_t me;
static volatile int got;
static char payload[128];
static pmix_rank_t from;

static long long wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void on_event(size_t id, pmix_status_t status,
		     const pmix_proc_t *source, pmix_info_t info[],
		     size_t ninfo, pmix_info_t results[], size_t nresults,
		     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	(void)id;
	(void)status;
	(void)results;
	(void)nresults;
	for (size_t i = 0; i < ninfo; i++)
		if (PMIX_CHECK_KEY(&info[i], "herd.payload") &&
		    info[i].value.type == PMIX_STRING)
			snprintf(payload, sizeof(payload), "%s",
				 info[i].value.data.string);
	from = source->rank;
	got = 1;
	if (cbfunc)
		cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void on_failure(size_t id, pmix_status_t status,
		       const pmix_proc_t *source, pmix_info_t info[],
		       size_t ninfo, pmix_info_t results[], size_t nresults,
		       pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	long long t = wall_ms();
	char list[512] = "";
	size_t len = 0;

	(void)id;
	(void)source;
	(void)results;
	(void)nresults;
	for (size_t i = 0; i < ninfo; i++) {
		const pmix_data_array_t *d = info[i].value.data.darray;

		if (!PMIX_CHECK_KEY(&info[i], PMIX_EVENT_AFFECTED_PROCS) ||
		    info[i].value.type != PMIX_DATA_ARRAY || !d ||
		    d->type != PMIX_PROC)
			continue;
		for (size_t k = 0; k < d->size && len < sizeof(list) - 16; k++)
			len += (size_t)snprintf(
				list + len, sizeof(list) - len, "%s%u",
				k ? "," : "",
				((pmix_proc_t *)d->array)[k].rank);
	}
	printf("rank %u failure: %s affected %s at %lld\n", me.rank,
	       PMIx_Error_string(status), list, t);
	fflush(stdout);
	got = 1;
	if (cbfunc)
		cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL, cbdata);
}

static void on_reg(pmix_status_t status, size_t ref, void *cbdata)
{
	(void)ref;
	*(volatile int *)cbdata = status == PMIX_SUCCESS ? 1 : -1;
}

static void on_term(int sig)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "rank %u SIGTERM at %lld\n",
			 me.rank, wall_ms());

	(void)sig;
	if (write(1, line, (size_t)n) < 0)
		_exit(2);
	_exit(143);
}

static void sleep_ms(long ms)
{
	struct timespec s = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&s, NULL);
}

static int reg(pmix_status_t *codes, size_t n,
	       pmix_notification_fn_t fn)
{
	volatile int done = 0;

	PMIx_Register_event_handler(codes, n, NULL, 0, fn, on_reg,
				    (void *)&done);
	for (int i = 0; !done && i < 1000; i++)
		sleep_ms(10);
	return done == 1 ? 0 : -1;
}

static pmix_data_range_t range_of(const char *s)
{
	if (!strcmp(s, "local"))
		return PMIX_RANGE_LOCAL;
	if (!strcmp(s, "session"))
		return PMIX_RANGE_SESSION;
	if (!strcmp(s, "global"))
		return PMIX_RANGE_GLOBAL;
	if (!strcmp(s, "custom"))
		return PMIX_RANGE_CUSTOM;
	return PMIX_RANGE_NAMESPACE;
}

static int notify(const char *range)
{
	pmix_status_t code = HERD_TEST_CODE, rc;

	if (reg(&code, 1, on_event) < 0) {
		printf("rank %u register: failed\n", me.rank);
		return 1;
	}
	PMIx_Fence(NULL, 0, NULL, 0);
	if (me.rank == 2) {
		pmix_info_t info[2];
		pmix_data_array_t darray;
		pmix_proc_t procs[2];
		size_t n = 1;

		PMIX_INFO_LOAD(&info[0], "herd.payload", "hello from rank 2",
			       PMIX_STRING);
		if (range_of(range) == PMIX_RANGE_CUSTOM) {
			PMIX_PROC_LOAD(&procs[0], me.nspace, 0);
			PMIX_PROC_LOAD(&procs[1], me.nspace, 5);
			darray.type = PMIX_PROC;
			darray.size = 2;
			darray.array = procs;
			PMIX_INFO_LOAD(&info[1], PMIX_EVENT_CUSTOM_RANGE,
				       &darray, PMIX_DATA_ARRAY);
			n = 2;
		}
		rc = PMIx_Notify_event(code, &me, range_of(range), info, n,
				       NULL, NULL);
		printf("rank 2 notify %s: %s\n", range, PMIx_Error_string(rc));
	} else {
		for (int i = 0; !got && i < 300; i++)
			sleep_ms(10);
		if (got)
			printf("rank %u event: got %s from rank %u\n", me.rank,
			       payload, from);
		else
			printf("rank %u event: none\n", me.rank);
	}
	fflush(stdout);
	PMIx_Fence(NULL, 0, NULL, 0);
	return 0;
}

static int wait_failure(int exit_rank)
{
	pmix_status_t codes[] = {PMIX_ERR_PROC_ABORTED,
				 PMIX_ERR_PROC_ABORTED_BY_SIG};

	signal(SIGTERM, on_term);
	if (reg(codes, 2, on_failure) < 0) {
		printf("rank %u register: failed\n", me.rank);
		return 1;
	}
	PMIx_Fence(NULL, 0, NULL, 0);
	printf("rank %u waiting\n", me.rank);
	fflush(stdout);
	if ((int)me.rank == exit_rank) {
		sleep_ms(500);
		printf("rank %u exits 1 at %lld\n", me.rank, wall_ms());
		fflush(stdout);
		_exit(1);
	}
	for (;;)
		sleep_ms(1000);
}

int main(int argc, char **argv)
{
	pmix_status_t rc;
	int ret;

	if (argc < 2)
		return 2;
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	if (!strcmp(argv[1], "notify"))
		ret = notify(argc > 2 ? argv[2] : "namespace");
	else
		ret = wait_failure(argc > 2 ? (int)strtol(argv[2], NULL, 10) : -1);
	PMIx_Finalize(NULL, 0);
	return ret;
}
