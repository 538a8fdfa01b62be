/* pspawn.c — issue 16: PMIx_Spawn from rank 0 of the job, and what the
 * spawned processes can do.  Usage (every rank runs the same):
 *
 *   pspawn MODE NP [HOSTS]
 *
 * Rank 0 spawns NP copies of this program ("child MODE"), on HOSTS
 * (PMIX_HOST, comma-separated) when given, and prints
 *   "rank 0 spawn: STATUS" and, on success, "rank 0 spawned .sN"
 * (the new namespace's suffix) and "spawn_ms T" (call to return, for
 * bench/pmix).  MODE multiple spawns two apps, NP processes of "child
 * plain" and 1 of "child app1"; each child also prints "child R app A"
 * (its PMIX_APPNUM).  Every rank of the job then finalizes
 * ("rank R finalize: STATUS").  MODE says what happens next:
 *   plain    each child prints "child R of N, parent P, spawned B" and
 *            exits 0
 *   connect  rank 0 and the children PMIx_Connect (rank 0 of the job,
 *            every child); each prints "... connect: STATUS", then the
 *            job size of the other side as PMIx_Get gives it
 *            ("... peer size: N"), then PMIx_Disconnect ("... disconnect:
 *            STATUS")
 *   fail     child 1 exits 3 (the others 0)
 *   sleep    the children print "child R pid PID" and sleep (a test
 *            kills them)
 *   info     (issue 23 item 14, OpenPMIx's dynamic example) rank 0 asks
 *            the library, for every child R, its PMIX_LOCAL_RANK,
 *            PMIX_NODE_RANK, PMIX_APPNUM and PMIX_HOSTNAME, and prints
 *            "rank 0 child R: local L, node rank N, app A, on H
 *            (STATUS)" (the first failure's status); each child, as
 *            plain, and "itself child R: ..." the same of itself
 *
 *   pspawn loop NP ROUNDS DIR
 *
 * (issue 23) Rank 0 spawns NP processes of sh, ROUNDS times, each round
 * after the last one's children are over: each child creates
 * DIR/ROUND.RANK and exits 0; rank 0 prints "rank 0 loop R: STATUS" for a
 * spawn that fails and "rank 0 loop: N of ROUNDS" at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int get_u32(const char *nspace, const char *key, uint32_t *v)
{
	pmix_proc_t p;
	pmix_value_t *val = NULL;
	pmix_status_t rc;

	PMIX_PROC_LOAD(&p, nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&p, key, NULL, 0, &val);
	if (rc == PMIX_SUCCESS && val && val->type == PMIX_UINT32)
		*v = val->data.uint32;
	else if (rc == PMIX_SUCCESS)
		rc = PMIX_ERR_TYPE_MISMATCH;
	if (val)
		PMIX_VALUE_RELEASE(val);
	return rc;
}

/* connect: rank 0 of parent_ns and every process of child_ns. */
static void connect_pair(const char *who, const char *parent_ns,
			 const char *child_ns, const char *peer_ns)
{
	pmix_proc_t procs[2];
	pmix_status_t rc;
	uint32_t size = 0;

	PMIX_PROC_LOAD(&procs[0], parent_ns, 0);
	PMIX_PROC_LOAD(&procs[1], child_ns, PMIX_RANK_WILDCARD);
	rc = PMIx_Connect(procs, 2, NULL, 0);
	printf("%s connect: %s\n", who, PMIx_Error_string(rc));
	fflush(stdout);
	rc = get_u32(peer_ns, PMIX_JOB_SIZE, &size);
	printf("%s peer size: %u (%s)\n", who, size, PMIx_Error_string(rc));
	fflush(stdout);
	rc = PMIx_Disconnect(procs, 2, NULL, 0);
	printf("%s disconnect: %s\n", who, PMIx_Error_string(rc));
	fflush(stdout);
}

/* info: what rank 0 learns of child r of ns. */
static void child_info(const char *who, const char *ns, uint32_t r)
{
	const char *keys[] = {PMIX_LOCAL_RANK, PMIX_NODE_RANK, PMIX_APPNUM,
			      PMIX_HOSTNAME};
	pmix_status_t rc = PMIX_SUCCESS;
	unsigned v[3] = {99, 99, 99};
	char host[256] = "?";
	pmix_proc_t p;

	PMIX_PROC_LOAD(&p, ns, r);
	for (int i = 0; i < 4 && rc == PMIX_SUCCESS; i++) {
		pmix_value_t *val = NULL;

		rc = PMIx_Get(&p, keys[i], NULL, 0, &val);
		if (rc == PMIX_SUCCESS && val->type == PMIX_UINT16 && i < 2)
			v[i] = val->data.uint16;
		else if (rc == PMIX_SUCCESS && val->type == PMIX_UINT32 &&
			 i == 2)
			v[i] = val->data.uint32;
		else if (rc == PMIX_SUCCESS && val->type == PMIX_STRING &&
			 i == 3)
			snprintf(host, sizeof(host), "%s", val->data.string);
		else if (rc == PMIX_SUCCESS)
			rc = PMIX_ERR_TYPE_MISMATCH;
		if (val)
			PMIX_VALUE_RELEASE(val);
	}
	printf("%s child %u: local %u, node rank %u, app %u, on %s (%s)\n",
	       who, r, v[0], v[1], v[2], host, PMIx_Error_string(rc));
	fflush(stdout);
}

/* Rank 0's spawn loop (pspawn loop NP ROUNDS DIR). */
static int spawn_loop(int np, int rounds, const char *dir)
{
	int ok = 0;

	for (int r = 0; r < rounds; r++) {
		pmix_app_t app;
		pmix_nspace_t ns;
		pmix_status_t rc;
		char round[16], path[4096];

		snprintf(round, sizeof(round), "%d", r);
		PMIX_APP_CONSTRUCT(&app);
		app.cmd = strdup("sh");
		PMIX_ARGV_APPEND(rc, app.argv, "sh");
		PMIX_ARGV_APPEND(rc, app.argv, "-c");
		PMIX_ARGV_APPEND(rc, app.argv,
				 ": >\"$0/$1.$PMIX_RANK.tmp\" && "
				 "mv \"$0/$1.$PMIX_RANK.tmp\" \"$0/$1.$PMIX_RANK\"");
		PMIX_ARGV_APPEND(rc, app.argv, dir);
		PMIX_ARGV_APPEND(rc, app.argv, round);
		app.maxprocs = np;
		memset(ns, 0, sizeof(ns));
		rc = PMIx_Spawn(NULL, 0, &app, 1, ns);
		PMIX_APP_DESTRUCT(&app);
		if (rc != PMIX_SUCCESS) {
			printf("rank 0 loop %d: %s\n", r, PMIx_Error_string(rc));
			fflush(stdout);
			break;
		}
		/* The round's children are over once each made its file (a
		 * bounded wait: the test's timeout). */
		for (int c = 0; c < np; c++) {
			snprintf(path, sizeof(path), "%s/%d.%d", dir, r, c);
			while (access(path, F_OK) != 0)
				usleep(10000);
		}
		ok++;
	}
	printf("rank 0 loop: %d of %d\n", ok, rounds);
	fflush(stdout);
	return 0;
}

static int child(const char *mode)
{
	pmix_value_t *val = NULL;
	pmix_proc_t wild, parent;
	pmix_status_t rc;
	uint32_t size = 0;
	bool spawned = false;
	char who[64];

	PMIX_PROC_LOAD(&wild, me.nspace, PMIX_RANK_WILDCARD);
	get_u32(me.nspace, PMIX_JOB_SIZE, &size);
	memset(&parent, 0, sizeof(parent));
	parent.rank = PMIX_RANK_UNDEF;
	if (PMIx_Get(&wild, PMIX_PARENT_ID, NULL, 0, &val) == PMIX_SUCCESS &&
	    val->type == PMIX_PROC)
		parent = *val->data.proc;
	if (val)
		PMIX_VALUE_RELEASE(val);
	val = NULL;
	if (PMIx_Get(&wild, PMIX_SPAWNED, NULL, 0, &val) == PMIX_SUCCESS &&
	    val->type == PMIX_BOOL)
		spawned = val->data.flag;
	if (val)
		PMIX_VALUE_RELEASE(val);
	printf("child %u of %u, parent %u, spawned %d\n", me.rank, size,
	       parent.rank, (int)spawned);
	if (!strcmp(mode, "app1") || !strcmp(mode, "multiple")) {
		uint32_t app = 99;

		val = NULL;
		if (PMIx_Get(&me, PMIX_APPNUM, NULL, 0, &val) == PMIX_SUCCESS &&
		    val->type == PMIX_UINT32)
			app = val->data.uint32;
		if (val)
			PMIX_VALUE_RELEASE(val);
		printf("child %u app %u\n", me.rank, app);
	}
	fflush(stdout);
	if (!strcmp(mode, "info"))
		child_info("itself", me.nspace, me.rank);
	snprintf(who, sizeof(who), "child %u", me.rank);
	if (!strcmp(mode, "connect"))
		connect_pair(who, parent.nspace, me.nspace, parent.nspace);
	if (!strcmp(mode, "sleep")) {
		printf("child %u pid %ld\n", me.rank, (long)getpid());
		fflush(stdout);
		for (int i = 0; i < 600; i++)
			sleep(1);
	}
	rc = PMIx_Finalize(NULL, 0);
	printf("child %u finalize: %s\n", me.rank, PMIx_Error_string(rc));
	if (!strcmp(mode, "fail") && me.rank == 1)
		return 3;
	return rc == PMIX_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv)
{
	pmix_status_t rc;
	const char *mode;

	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	if (argc > 2 && !strcmp(argv[1], "child"))
		return child(argv[2]);
	if (argc < 3) {
		fprintf(stderr, "usage: pspawn MODE NP [HOSTS]\n");
		return 2;
	}
	mode = argv[1];
	if (me.rank == 0 && !strcmp(mode, "loop") && argc > 4) {
		spawn_loop(atoi(argv[2]), atoi(argv[3]), argv[4]);
	} else if (me.rank == 0) {
		bool multi = !strcmp(mode, "multiple");
		pmix_app_t app[2];
		pmix_info_t host;
		pmix_nspace_t ns;
		double t0;

		for (int i = 0; i < 2; i++) {
			PMIX_APP_CONSTRUCT(&app[i]);
			app[i].cmd = strdup(argv[0]);
			PMIX_ARGV_APPEND(rc, app[i].argv, argv[0]);
			PMIX_ARGV_APPEND(rc, app[i].argv, "child");
			PMIX_ARGV_APPEND(rc, app[i].argv,
					 i	 ? "app1"
					 : multi ? "multiple"
						 : mode);
		}
		app[0].maxprocs = atoi(argv[2]);
		app[1].maxprocs = 1;
		if (argc > 3) {
			PMIX_INFO_LOAD(&host, PMIX_HOST, argv[3], PMIX_STRING);
			app[0].info = &host;
			app[0].ninfo = 1;
		}
		memset(ns, 0, sizeof(ns));
		t0 = now_ms();
		rc = PMIx_Spawn(NULL, 0, app, multi ? 2 : 1, ns);
		printf("spawn_ms %.1f\n", now_ms() - t0);
		printf("rank 0 spawn: %s\n", PMIx_Error_string(rc));
		if (rc == PMIX_SUCCESS)
			printf("rank 0 spawned %s\n",
			       strrchr(ns, '.') ? strrchr(ns, '.') : ns);
		fflush(stdout);
		if (argc > 3) {
			app[0].info = NULL;
			app[0].ninfo = 0;
			PMIX_INFO_DESTRUCT(&host);
		}
		PMIX_APP_DESTRUCT(&app[0]);
		PMIX_APP_DESTRUCT(&app[1]);
		if (rc == PMIX_SUCCESS && !strcmp(mode, "connect"))
			connect_pair("rank 0", me.nspace, ns, ns);
		for (int r = 0; rc == PMIX_SUCCESS && !strcmp(mode, "info") &&
				r < atoi(argv[2]);
		     r++)
			child_info("rank 0", ns, (uint32_t)r);
	}
	rc = PMIx_Finalize(NULL, 0);
	printf("rank %u finalize: %s\n", me.rank, PMIx_Error_string(rc));
	return rc == PMIX_SUCCESS ? 0 : 1;
}
