/* pdata.c — issue 16, "complete job and process data": every rank reads
 * the job's keys and, for EVERY rank of the job (remote ones too), the
 * per-process keys, and prints one line per rank it asked about:
 *
 *   rank R me host=H
 *   rank R job size=.. napps=.. nnodes=.. lsize=.. nsize=.. spawned=..
 *              wdir=.. tmpdir=.. nsdir=..
 *              (wdir=cwd: PMIX_WDIR is the rank's working directory;
 *              tmpdir, nsdir=abs: an absolute path)
 *   rank R of Q lr=.. nr=.. app=.. nid=.. gr=.. ar=.. host=H hnid=..
 *   (hnid: PMIX_NODEID asked with the qualifier PMIX_HOSTNAME=H)
 *
 * A key the server does not give prints "-".  Gets are local only
 * (PMIX_OPTIONAL) and bounded (PMIX_TIMEOUT): nothing waits on a peer. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

static pmix_proc_t me;
static size_t ninfo = 2;	/* "server": 1, no PMIX_OPTIONAL */

/* VALUE of KEY for rank R (PMIX_RANK_WILDCARD: the job), as text. */
static void getq(pmix_rank_t r, const char *key, const char *host,
		 char *out, size_t len)
{
	pmix_info_t info[3];
	pmix_value_t *v = NULL;
	pmix_proc_t p;
	bool yes = true;
	int tmo = 10;

	PMIX_PROC_LOAD(&p, me.nspace, r);
	PMIX_INFO_LOAD(&info[0], PMIX_TIMEOUT, &tmo, PMIX_INT);
	PMIX_INFO_LOAD(&info[1], PMIX_OPTIONAL, &yes, PMIX_BOOL);
	snprintf(out, len, "-");
	if (host) {
		PMIX_INFO_LOAD(&info[ninfo], PMIX_HOSTNAME, host, PMIX_STRING);
		PMIX_INFO_SET_QUALIFIER(&info[ninfo]);
	}
	if (PMIx_Get(&p, key, info, ninfo + !!host, &v) != PMIX_SUCCESS ||
	    !v)
		return;
	switch (v->type) {
	case PMIX_STRING:
		snprintf(out, len, "%s", v->data.string);
		break;
	case PMIX_UINT32:
		snprintf(out, len, "%u", v->data.uint32);
		break;
	case PMIX_UINT16:
		snprintf(out, len, "%u", v->data.uint16);
		break;
	case PMIX_INT:
		snprintf(out, len, "%d", v->data.integer);
		break;
	case PMIX_PROC_RANK:
		snprintf(out, len, "%u", v->data.rank);
		break;
	case PMIX_BOOL:
		snprintf(out, len, "%s", v->data.flag ? "true" : "false");
		break;
	default:
		snprintf(out, len, "type%d", (int)v->type);
	}
	PMIX_VALUE_RELEASE(v);
}

static void get(pmix_rank_t r, const char *key, char *out, size_t len)
{
	getq(r, key, NULL, out, len);
}

int main(int argc, char **argv)
{
	char host[256], sz[32], a[8][512], cwd[512];
	pmix_status_t rc;
	unsigned size;

	if (argc > 1 && !strcmp(argv[1], "server"))
		ninfo = 1;
	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	gethostname(host, sizeof(host));
	printf("rank %u me host=%s\n", me.rank, host);
	get(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, sz, sizeof(sz));
	get(PMIX_RANK_WILDCARD, PMIX_JOB_NUM_APPS, a[0], sizeof(a[0]));
	get(PMIX_RANK_WILDCARD, PMIX_NUM_NODES, a[1], sizeof(a[1]));
	get(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, a[2], sizeof(a[2]));
	get(PMIX_RANK_WILDCARD, PMIX_NODE_SIZE, a[3], sizeof(a[3]));
	get(PMIX_RANK_WILDCARD, PMIX_SPAWNED, a[4], sizeof(a[4]));
	get(PMIX_RANK_WILDCARD, PMIX_WDIR, a[5], sizeof(a[5]));
	get(PMIX_RANK_WILDCARD, PMIX_TMPDIR, a[6], sizeof(a[6]));
	get(PMIX_RANK_WILDCARD, PMIX_NSDIR, a[7], sizeof(a[7]));
	printf("rank %u job size=%s napps=%s nnodes=%s lsize=%s nsize=%s "
	       "spawned=%s wdir=%s tmpdir=%s nsdir=%s\n",
	       me.rank, sz, a[0], a[1], a[2], a[3], a[4],
	       getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, a[5]) ? "cwd" : a[5],
	       a[6][0] == '/' ? "abs" : a[6], a[7][0] == '/' ? "abs" : a[7]);
	if (sscanf(sz, "%u", &size) != 1)
		size = 0;
	for (unsigned q = 0; q < size && q < 4096; q++) {
		get(q, PMIX_LOCAL_RANK, a[0], sizeof(a[0]));
		get(q, PMIX_NODE_RANK, a[1], sizeof(a[1]));
		get(q, PMIX_APPNUM, a[2], sizeof(a[2]));
		get(q, PMIX_NODEID, a[3], sizeof(a[3]));
		get(q, PMIX_GLOBAL_RANK, a[4], sizeof(a[4]));
		get(q, PMIX_APP_RANK, a[5], sizeof(a[5]));
		get(q, PMIX_HOSTNAME, a[6], sizeof(a[6]));
		/* The node's id by its name (PMIx 4's way to a node's). */
		getq(PMIX_RANK_WILDCARD, PMIX_NODEID, a[6], a[7],
		     sizeof(a[7]));
		printf("rank %u of %u lr=%s nr=%s app=%s nid=%s gr=%s ar=%s "
		       "host=%s hnid=%s\n",
		       me.rank, q, a[0], a[1], a[2], a[3], a[4], a[5], a[6],
		       a[7]);
	}
	fflush(stdout);
	rc = PMIx_Finalize(NULL, 0);
	return rc == PMIX_SUCCESS ? 0 : 1;
}
