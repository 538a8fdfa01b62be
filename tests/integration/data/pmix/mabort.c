/* mabort.c — rank 1 calls MPI_Abort(MPI_COMM_WORLD, atoi(argv[1])); the
 * others wait in a barrier (ended by the abort). */
#include <stdlib.h>

#include <mpi.h>

int main(int argc, char **argv)
{
	int rank;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 1)
		MPI_Abort(MPI_COMM_WORLD, argc > 1 ? atoi(argv[1]) : 1);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
