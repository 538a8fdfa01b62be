/* ptool.c — issue 16: a PMIx tool (no rank of the job) that tries to
 * connect to herd's PMIx server at the URI in $HERD_TOOL_URI, as a
 * debugger or `pattach` would; with $HERD_TOOL_NSPACE, naming itself
 * rank 0 of that namespace (a tool that poses as a rank).  Prints "tool: STATUS" (PMIx_tool_init's,
 * bounded: "tool: HANG" after 30 s); exits 0 either way. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <pmix_tool.h>

static void on_alarm(int sig)
{
	(void)sig;
	if (write(1, "tool: HANG\n", 11) < 0)
		_exit(4);
	_exit(3);
}

int main(void)
{
	const char *uri = getenv("HERD_TOOL_URI");
	const char *ns = getenv("HERD_TOOL_NSPACE");
	pmix_info_t info[4];
	pmix_rank_t zero = 0;
	size_t n = 2;
	pmix_proc_t me;
	pmix_status_t rc;
	uint32_t tries = 1;

	if (!uri) {
		fprintf(stderr, "ptool: no HERD_TOOL_URI\n");
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(30);
	PMIX_INFO_LOAD(&info[0], PMIX_SERVER_URI, uri, PMIX_STRING);
	PMIX_INFO_LOAD(&info[1], PMIX_CONNECT_MAX_RETRIES, &tries,
		       PMIX_UINT32);
	if (ns) {
		PMIX_INFO_LOAD(&info[n], PMIX_TOOL_NSPACE, ns, PMIX_STRING);
		n++;
		PMIX_INFO_LOAD(&info[n], PMIX_TOOL_RANK, &zero, PMIX_PROC_RANK);
		n++;
	}
	rc = PMIx_tool_init(&me, info, n);
	alarm(0);
	printf("tool: %s\n", PMIx_Error_string(rc));
	fflush(stdout);
	if (rc == PMIX_SUCCESS)
		PMIx_tool_finalize();
	return 0;
}
