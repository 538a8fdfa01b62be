/* allreduce.c — a small MPI check for herd's PMIx mode: every rank prints
 * its rank, size and host, checks an allreduce sum and a ring exchange,
 * and exits non-zero when either is wrong.  `--abort RANK` makes that rank
 * call MPI_Abort(MPI_COMM_WORLD, 42) after the checks (for tests);
 * `--sleep SECONDS` makes every rank sleep that long after the checks,
 * before the last barrier (a run long enough to kill a node under it);
 * `--timing` makes rank 0 print "init_done_ms T": the latest wall-clock
 * time (CLOCK_REALTIME, ms since the epoch) at which a rank returned from
 * MPI_Init (for bench/pmix). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rank, size, sum = 0, want, left, right, got = -1, abort_rank = -1;
	int timing = 0;
	double sleep_s = 0;
	long long init_ms, init_max = 0;
	struct timespec ts;
	char host[256] = "";

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--timing"))
			timing = 1;
		else if (i + 1 < argc && !strcmp(argv[i], "--abort"))
			abort_rank = (int)strtol(argv[++i], NULL, 10);
		else if (i + 1 < argc && !strcmp(argv[i], "--sleep"))
			sleep_s = strtod(argv[++i], NULL);
	}
	MPI_Init(&argc, &argv);
	clock_gettime(CLOCK_REALTIME, &ts);
	init_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	gethostname(host, sizeof(host) - 1);
	if (timing) {
		MPI_Allreduce(&init_ms, &init_max, 1, MPI_LONG_LONG, MPI_MAX,
			      MPI_COMM_WORLD);
		if (rank == 0)
			printf("init_done_ms %lld\n", init_max);
	}

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
	if (sleep_s > 0) {
		struct timespec d = { (time_t)sleep_s,
				      (long)((sleep_s - (double)(time_t)sleep_s) *
					     1e9) };

		while (nanosleep(&d, &d) < 0)
			;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return sum == want && got == left ? 0 : 1;
}
