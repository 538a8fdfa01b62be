#!/bin/sh

test_description='issue 16: MPI_Comm_connect / MPI_Comm_accept under herd (4 nodes x 2, Open MPI 4.1): rank 0 opens a port and publishes it (MPI_Publish_name), spawns 2 children that look it up (MPI_Lookup_name) and connect while rank 0 alone accepts; one int each way. Uses spawn, connect, publish/lookup and direct modex of either namespace'

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

test_expect_success 'the children connect to the port rank 0 published and accepts on: 7 one way, 9 the other; herd exits 0' '
	pmix_job accept accept 2 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run accept.yaml >out 2>err &&
	grep -x "\[0\] accept: got 7" out &&
	grep -x "\[s1:0\] connect: got 9" out &&
	none_left
'

test_done
