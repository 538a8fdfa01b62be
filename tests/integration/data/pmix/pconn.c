/* pconn.c — issue 16: ranks 0-3 of 8 call PMIx_Connect (or, with the
 * argument "disconnect", PMIx_Disconnect) on procs 0..3 of their
 * namespace; every rank then finalizes.  herd's agents must answer
 * (SUCCESS: herd gathers the connect from the nodes hosting them), never
 * hang.  With "all", every rank calls PMIx_Connect over the whole
 * namespace (PMIX_RANK_WILDCARD) instead (issue 23: after it libpmix's
 * PMIx_server_finalize spun forever in every agent). */
#include <stdio.h>
#include <string.h>

#include <pmix.h>

int main(int argc, char **argv)
{
	int disconnect = argc > 1 && !strcmp(argv[1], "disconnect");
	int all = argc > 1 && !strcmp(argv[1], "all");
	pmix_proc_t me, procs[4];
	pmix_status_t rc;

	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
		fprintf(stderr, "PMIx_Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	if (all) {
		PMIX_PROC_LOAD(&procs[0], me.nspace, PMIX_RANK_WILDCARD);
		rc = PMIx_Connect(procs, 1, NULL, 0);
		printf("rank %u all: %s\n", me.rank, PMIx_Error_string(rc));
		fflush(stdout);
	} else if (me.rank < 4) {
		for (int i = 0; i < 4; i++)
			PMIX_PROC_LOAD(&procs[i], me.nspace, (pmix_rank_t)i);
		rc = disconnect ? PMIx_Disconnect(procs, 4, NULL, 0)
				: PMIx_Connect(procs, 4, NULL, 0);
		printf("rank %u %s: %s\n", me.rank,
		       disconnect ? "disconnect" : "connect",
		       PMIx_Error_string(rc));
		fflush(stdout);
	}
	rc = PMIx_Finalize(NULL, 0);
	printf("rank %u finalize: %s\n", me.rank, PMIx_Error_string(rc));
	return rc == PMIX_SUCCESS ? 0 : 1;
}
