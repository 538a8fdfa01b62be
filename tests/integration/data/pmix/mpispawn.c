/* mpispawn.c — issue 16: dynamic processes under herd (Open MPI 4.1).
 * Every rank of the job runs "mpispawn MODE [NP]"; the processes it
 * spawns run "mpispawn child MODE" (found by MPI_Comm_get_parent).
 *
 *   spawn      MPI_Comm_spawn of NP children (default 2) by the whole
 *              world, root 0; rank 0 broadcasts 42 over the
 *              intercommunicator, each child answers its rank + 1 and the
 *              parents' root sums them (MPI_Reduce over the intercomm):
 *              "parent 0: children NP, sum S"; each child "child R of N
 *              got 42".  Both sides disconnect.
 *   multiple   MPI_Comm_spawn_multiple: app 0 with 2 processes, app 1 with
 *              1; each child prints "child R of 3 app A" (MPI_APPNUM).
 *   intercomm  after the spawn: MPI_Intercomm_merge, then
 *              MPI_Intercomm_create between the job's ranks and the
 *              children over the merged communicator, an allreduce of 1
 *              over the merged one ("merged R: size S sum S") and one over
 *              the new intercommunicator.
 *   accept     rank 0 MPI_Open_port and MPI_Publish_name("herd-t0953"),
 *              then MPI_Comm_spawn of NP children with no
 *              intercommunicator use; the children MPI_Lookup_name and
 *              MPI_Comm_connect, rank 0 (alone) MPI_Comm_accept; one int
 *              each way ("accept: got 7", "connect: got 9").
 * The spawn's time (call to return, rank 0, ms) is printed as
 * "spawn_ms T" (bench/pmix).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int child(const char *mode, MPI_Comm parent)
{
	int rank, size, v = 0, *appnum, flag = 0;

	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (!strcmp(mode, "accept")) {
		char port[MPI_MAX_PORT_NAME];
		MPI_Comm ic;

		MPI_Lookup_name("herd-t0953", MPI_INFO_NULL, port);
		MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic);
		if (rank == 0) {
			v = 7;
			MPI_Send(&v, 1, MPI_INT, 0, 1, ic);
			MPI_Recv(&v, 1, MPI_INT, 0, 2, ic, MPI_STATUS_IGNORE);
			printf("connect: got %d\n", v);
		}
		MPI_Comm_disconnect(&ic);
		MPI_Comm_disconnect(&parent);
		MPI_Finalize();
		return 0;
	}
	if (!strcmp(mode, "multiple")) {
		MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
		printf("child %d of %d app %d\n", rank, size,
		       flag ? *appnum : -1);
		fflush(stdout);
	}
	MPI_Bcast(&v, 1, MPI_INT, 0, parent);
	printf("child %d of %d got %d\n", rank, size, v);
	fflush(stdout);
	v = rank + 1;
	MPI_Reduce(&v, NULL, 1, MPI_INT, MPI_SUM, 0, parent);
	if (!strcmp(mode, "intercomm")) {
		MPI_Comm merged, half, ic;
		int mrank, msize, one = 1, sum = 0;

		MPI_Intercomm_merge(parent, 1, &merged);
		MPI_Comm_rank(merged, &mrank);
		MPI_Comm_size(merged, &msize);
		MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
		printf("merged %d: size %d sum %d\n", mrank, msize, sum);
		MPI_Comm_split(merged, 1, mrank, &half);
		MPI_Intercomm_create(half, 0, merged, 0, 5, &ic);
		MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, ic);
		printf("intercomm child %d: remote sum %d\n", rank, sum);
		MPI_Comm_free(&ic);
		MPI_Comm_free(&half);
		MPI_Comm_free(&merged);
	}
	MPI_Comm_disconnect(&parent);
	MPI_Finalize();
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "spawn";
	int np = argc > 2 ? atoi(argv[2]) : 2;
	int rank, size, v = 0, sum = 0, errs[64];
	char port[MPI_MAX_PORT_NAME] = "";
	MPI_Comm parent, inter;
	double t0;

	MPI_Init(&argc, &argv);
	MPI_Comm_get_parent(&parent);
	if (parent != MPI_COMM_NULL)
		return child(argc > 2 ? argv[2] : "spawn", parent);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (np < 1 || np > 64)
		np = 2;
	if (!strcmp(mode, "accept") && rank == 0) {
		MPI_Open_port(MPI_INFO_NULL, port);
		MPI_Publish_name("herd-t0953", MPI_INFO_NULL, port);
	}
	t0 = now_ms();
	if (!strcmp(mode, "multiple")) {
		char *cmds[2] = {argv[0], argv[0]};
		char *a0[] = {"child", "multiple", NULL};
		char **args[2] = {a0, a0};
		int nps[2] = {2, 1};
		MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};

		MPI_Comm_spawn_multiple(2, cmds, args, nps, infos, 0,
					MPI_COMM_WORLD, &inter, errs);
		np = 3;
	} else {
		char *a[] = {"child", (char *)mode, NULL};

		MPI_Comm_spawn(argv[0], a, np, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
			       &inter, errs);
	}
	if (rank == 0) {
		printf("spawn_ms %.1f\n", now_ms() - t0);
		fflush(stdout);
	}
	if (!strcmp(mode, "accept")) {
		MPI_Comm ic;

		if (rank == 0) {
			MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF,
					&ic);
			MPI_Recv(&v, 1, MPI_INT, 0, 1, ic, MPI_STATUS_IGNORE);
			printf("accept: got %d\n", v);
			v = 9;
			MPI_Send(&v, 1, MPI_INT, 0, 2, ic);
			MPI_Comm_disconnect(&ic);
			MPI_Unpublish_name("herd-t0953", MPI_INFO_NULL, port);
			MPI_Close_port(port);
		}
		MPI_Comm_disconnect(&inter);
		MPI_Finalize();
		return 0;
	}
	v = 42;
	MPI_Bcast(&v, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
	MPI_Reduce(NULL, &sum, 1, MPI_INT, MPI_SUM,
		   rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
	if (rank == 0) {
		printf("parent 0: children %d, sum %d\n", np, sum);
		fflush(stdout);
	}
	if (!strcmp(mode, "intercomm")) {
		MPI_Comm merged, half, ic;
		int mrank, msize, one = 1;

		MPI_Intercomm_merge(inter, 0, &merged);
		MPI_Comm_rank(merged, &mrank);
		MPI_Comm_size(merged, &msize);
		MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
		printf("merged %d: size %d sum %d\n", mrank, msize, sum);
		MPI_Comm_split(merged, 0, mrank, &half);
		MPI_Intercomm_create(half, 0, merged, size, 5, &ic);
		MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, ic);
		printf("intercomm parent %d: remote sum %d\n", rank, sum);
		MPI_Comm_free(&ic);
		MPI_Comm_free(&half);
		MPI_Comm_free(&merged);
	}
	MPI_Comm_disconnect(&inter);
	MPI_Finalize();
	return 0;
}
