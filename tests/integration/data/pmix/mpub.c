/* mpub.c — issue 16: MPI_Publish_name / MPI_Lookup_name /
 * MPI_Unpublish_name across the job (Open MPI over herd's PMIx).  Rank 0
 * publishes a service, every other rank looks it up and checks the port
 * name; rank 0 unpublishes it; rank 1 then fails to find it.  Prints
 * "rank R STEP: ok|..." lines; exits non-zero on a wrong answer. */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

int main(int argc, char **argv)
{
	char port[MPI_MAX_PORT_NAME] = "herd-port-of-rank-0";
	char got[MPI_MAX_PORT_NAME];
	int rank, rc, bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (rank == 0) {
		rc = MPI_Publish_name("herd-svc", MPI_INFO_NULL, port);
		printf("rank %d publish: %s\n", rank,
		       rc == MPI_SUCCESS ? "ok" : "FAILED");
		bad |= rc != MPI_SUCCESS;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank != 0) {
		memset(got, 0, sizeof(got));
		rc = MPI_Lookup_name("herd-svc", MPI_INFO_NULL, got);
		printf("rank %d lookup: %s %s\n", rank,
		       rc == MPI_SUCCESS && !strcmp(got, port) ? "ok" : "WRONG",
		       got);
		bad |= rc != MPI_SUCCESS || strcmp(got, port);
	}
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		rc = MPI_Unpublish_name("herd-svc", MPI_INFO_NULL, port);
		printf("rank %d unpublish: %s\n", rank,
		       rc == MPI_SUCCESS ? "ok" : "FAILED");
		bad |= rc != MPI_SUCCESS;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1) {
		rc = MPI_Lookup_name("herd-svc", MPI_INFO_NULL, got);
		printf("rank %d lookup after unpublish: %s\n", rank,
		       rc == MPI_SUCCESS ? "FOUND" : "not found");
		bad |= rc == MPI_SUCCESS;
	}
	fflush(stdout);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return bad;
}
