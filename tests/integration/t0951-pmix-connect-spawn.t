#!/bin/sh

test_description='issue 16: PMIx_Connect and PMIx_Disconnect across namespaces: rank 0 of the job (4 nodes x 2) and the 4 processes it spawned connect (herd gathers from the nodes hosting them), each side then reads the other namespace'"'"'s job size through PMIx_Get, and disconnects'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

# none_left: no pspawn and no herd-agent within 10 s.
none_left() { pmix_gone 10 pspawn herd-agent; }

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pspawn.c" -o pspawn $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/pspawn &&
	cluster_up 4
'

test_expect_success 'rank 0 and its 4 children connect, see each other'"'"'s size, disconnect; herd exits 0, nothing left' '
	pmix_job conn connect 4 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run conn.yaml >out 2>err &&
	grep -x "\[0\] rank 0 spawn: SUCCESS" out &&
	grep -x "\[0\] rank 0 connect: SUCCESS" out &&
	grep -x "\[0\] rank 0 peer size: 4 (SUCCESS)" out &&
	grep -x "\[0\] rank 0 disconnect: SUCCESS" out &&
	for r in 0 1 2 3; do
		grep -x "\[s1:$r\] child $r connect: SUCCESS" out &&
		grep -x "\[s1:$r\] child $r peer size: 8 (SUCCESS)" out &&
		grep -x "\[s1:$r\] child $r disconnect: SUCCESS" out &&
		grep -x "\[s1:$r\] child $r finalize: SUCCESS" out || return 1
	done &&
	none_left
'

test_done
