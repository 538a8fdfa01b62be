#!/bin/sh

test_description='issue 16, direct modex under Open MPI: the MPI program with the modex skipped at start (pmix_base_async_modex=1, pmix_base_collect_data=0, mpi_add_procs_cutoff=0: no fence in MPI_Init, every peer'"'"'s endpoint fetched by PMIx_Get on first contact) passes under srun --mpi=pmix and under herd on the same 4 nodes x 2, with the same lines; before, herd refused the direct modex and the ranks failed'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd srun sinfo slurmctld slurmd munged timeout

ASYNC="OMPI_MCA_pmix_base_async_modex=1 OMPI_MCA_pmix_base_collect_data=0 OMPI_MCA_mpi_add_procs_cutoff=0"

test_expect_success 'cluster of 4 nodes with Slurm' '
	own_binaries &&
	pmix_prog &&
	cluster_up 4 &&
	slurm_up &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	N3=$(cluster_node 3) && N4=$(cluster_node 4) &&
	pmix_expect 8 $N1 $N1 $N2 $N2 $N3 $N3 $N4 $N4 | sed "s/^\[[0-9]*\] //" | sort >expect
'

test_expect_success 'srun --mpi=pmix with the modex skipped: 8 ranks, sums and ring right' '
	# pmix_srun: a second try, said, when Open MPI and Slurm alone fail.
	( export $ASYNC && pmix_srun 120 out.srun err.srun -N4 --ntasks-per-node=2 "$PMIX_PROG" ) ||
		{ cat err.srun >&2; false; } &&
	grep "^rank " out.srun | sort >got.srun &&
	test_cmp expect got.srun
'

test_expect_success 'herd with the modex skipped (launch.env): 8 ranks, sums and ring right, the same lines' '
	{
		echo "name: async" &&
		echo "nodes: {hosts: \"$HERD_SLURM_HOSTLIST\", slots: 2}" &&
		echo "restart: {max: 0}" &&
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}" &&
		echo "launch:" &&
		echo "  mode: pmix" &&
		printf "  command: '"'"'\"%s\"'"'"'\n" "$PMIX_PROG" &&
		echo "  workdir: \"$PWD\"" &&
		echo "  env:" &&
		for kv in $ASYNC; do
			echo "    ${kv%%=*}: \"${kv#*=}\"" || return 1
		done
	} >async.yaml &&
	timeout 120 herd run async.yaml >out.herd 2>err.herd &&
	sed -n "s/^\[\([0-9]*\)\] \(rank \1 of .*\)/\2/p" out.herd | sort >got.herd &&
	test_cmp expect got.herd &&
	test_cmp got.srun got.herd
'

test_done
