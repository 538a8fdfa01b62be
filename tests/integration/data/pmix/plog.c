/* plog.c — issue 23 item 16 (OpenPMIx's log example): PMIx_Log to the
 * stderr and stdout channels.  Every rank logs, one call each,
 *   PMIX_LOG_STDERR  "err from rank R" ESC "[31m" TAB "red" CR LF "next"
 *   PMIX_LOG_STDOUT  "out from rank R"
 *   PMIX_LOG_STDOUT  5000 'x' (over herd's bound)
 * and prints "rank R log N: STATUS" after each.  Each call runs under a
 * watchdog ("HANG", exit 3, after 60 s). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;

static void on_alarm(int sig)
{
	static const char m[] = "HANG\n";

	(void)sig;
	(void)!write(1, m, sizeof(m) - 1);
	_exit(3);
}

static void log_one(int n, const char *key, const char *msg)
{
	pmix_info_t li;
	pmix_status_t rc;

	PMIX_INFO_LOAD(&li, key, msg, PMIX_STRING);
	alarm(60);
	rc = PMIx_Log(&li, 1, NULL, 0);
	alarm(0);
	PMIX_INFO_DESTRUCT(&li);
	printf("rank %u log %d: %s\n", me.rank, n, PMIx_Error_string(rc));
	fflush(stdout);
}

int main(void)
{
	static char big[5001];
	pmix_status_t rc;
	char msg[128];

	signal(SIGALRM, on_alarm);
	alarm(60);
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	alarm(0);
	snprintf(msg, sizeof(msg), "err from rank %u\033[31m\tred\r\nnext",
		 me.rank);
	log_one(1, PMIX_LOG_STDERR, msg);
	snprintf(msg, sizeof(msg), "out from rank %u", me.rank);
	log_one(2, PMIX_LOG_STDOUT, msg);
	memset(big, 'x', sizeof(big) - 1);
	log_one(3, PMIX_LOG_STDOUT, big);
	alarm(60);
	rc = PMIx_Finalize(NULL, 0);
	return rc == PMIX_SUCCESS ? 0 : 1;
}
