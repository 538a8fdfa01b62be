#!/bin/sh

test_description='the same MPI program under Slurm'"'"'s own PMIx (srun --mpi=pmix -N4 --ntasks-per-node=2) and under herd'"'"'s (launch.mode pmix, the same 4 nodes): same size, same sums, same ring values, same rank placement'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd srun sinfo slurmctld slurmd munged timeout

test_expect_success 'cluster of 4 nodes with Slurm' '
	own_binaries &&
	pmix_prog &&
	cluster_up 4 &&
	slurm_up &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	N3=$(cluster_node 3) && N4=$(cluster_node 4) &&
	pmix_expect 8 $N1 $N1 $N2 $N2 $N3 $N3 $N4 $N4 | sed "s/^\[[0-9]*\] //" | sort >expect
'

test_expect_success 'srun --mpi=pmix -N4 --ntasks-per-node=2: 8 ranks, sums and ring right' '
	pmix_srun 60 out.srun err.srun -N4 --ntasks-per-node=2 "$PMIX_PROG" ||
		{ cat err.srun >&2; false; } &&
	grep "^rank " out.srun | sort >got.srun &&
	test_cmp expect got.srun
'

test_expect_success 'herd on the same nodes: 8 ranks, sums and ring right' '
	pmix_job same <<-EOF &&
	nodes: {hosts: "$HERD_SLURM_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	herd run same.yaml >out.herd 2>err.herd &&
	sed -n "s/^\[\([0-9]*\)\] \(rank \1 of .*\)/\2/p" out.herd | sort >got.herd &&
	test_cmp expect got.herd
'

test_expect_success 'srun and herd print the same lines' '
	test_cmp got.srun got.herd &&
	test $(wc -l <got.herd) = 8
'

test_done
