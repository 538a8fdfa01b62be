/* allreduce.c — a small MPI check for herd's PMIx mode: every rank prints
 * its rank, size and host, checks an allreduce sum and a ring exchange,
 * and exits non-zero when either is wrong.  `--abort RANK` makes that rank
 * call MPI_Abort(MPI_COMM_WORLD, 42) after the checks (for tests). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rank, size, sum = 0, want, left, right, got = -1, abort_rank = -1;
	char host[256] = "";

	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--abort"))
			abort_rank = (int)strtol(argv[i + 1], NULL, 10);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	gethostname(host, sizeof(host) - 1);

	/* allreduce: sum of 1..size */
	int mine = rank + 1;
	MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	want = size * (size + 1) / 2;

	/* ring: send my rank to the right, receive the left's */
	right = (rank + 1) % size;
	left = (rank + size - 1) % size;
	MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7,
		     MPI_COMM_WORLD, MPI_STATUS_IGNORE);

	printf("rank %d of %d on %s: allreduce %d (%s), ring got %d (%s)\n",
	       rank, size, host, sum, sum == want ? "ok" : "WRONG", got,
	       got == left ? "ok" : "WRONG");
	fflush(stdout);
	if (rank == abort_rank) {
		fprintf(stderr, "rank %d: calling MPI_Abort(42)\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 42);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return sum == want && got == left ? 0 : 1;
}
