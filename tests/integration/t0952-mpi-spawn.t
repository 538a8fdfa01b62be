#!/bin/sh

test_description='issue 16: Open MPI 4.1 dynamic processes under herd (4 nodes x 2): MPI_Comm_spawn, MPI_Comm_spawn_multiple (MPI_APPNUM), MPI_Intercomm_merge + MPI_Intercomm_create across the namespaces; the children talk to the job over the intercommunicator; nothing left. Uses spawn, connect, publish/lookup (Open MPI 4.1 exchanges the port through PMIx_Publish/Lookup), fences over both namespaces and direct modex of either namespace'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd mpicc timeout

# none_left: no mpispawn and no herd-agent within 10 s.
none_left() { pmix_gone 10 mpispawn herd-agent; }

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	mpicc -O2 -Wall -Werror "$PMIX_DATA/mpispawn.c" -o mpispawn &&
	PMIX_PROG=$PWD/mpispawn &&
	cluster_up 4
'

test_expect_success 'MPI_Comm_spawn of 4: the children get the broadcast, the parents'"'"' root their sum; herd exits 0' '
	pmix_job spawn spawn 4 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run spawn.yaml >out 2>err &&
	grep -x "\[0\] parent 0: children 4, sum 10" out &&
	for r in 0 1 2 3; do
		grep -x "\[s1:$r\] child $r of 4 got 42" out || return 1
	done &&
	none_left
'

test_expect_success 'MPI_Comm_spawn_multiple (2 + 1): MPI_APPNUM 0, 0, 1' '
	pmix_job multi multiple <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run multi.yaml >out 2>err &&
	grep -x "\[0\] parent 0: children 3, sum 6" out &&
	grep -x "\[s1:0\] child 0 of 3 app 0" out &&
	grep -x "\[s1:1\] child 1 of 3 app 0" out &&
	grep -x "\[s1:2\] child 2 of 3 app 1" out &&
	none_left
'

test_expect_success 'MPI_Intercomm_merge and MPI_Intercomm_create between the job and its 2 children' '
	pmix_job icc intercomm 2 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run icc.yaml >out 2>err &&
	test "$(grep -c "^\[[0-9s:]*\] merged [0-9]*: size 10 sum 10\$" out)" = 10 &&
	test "$(grep -c "^\[[0-7]\] intercomm parent [0-7]: remote sum 2\$" out)" = 8 &&
	test "$(grep -c "^\[s1:[01]\] intercomm child [01]: remote sum 8\$" out)" = 2 &&
	none_left
'

test_done
