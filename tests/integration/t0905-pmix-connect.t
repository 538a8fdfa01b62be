#!/bin/sh

test_description='issue 16: PMIx_Connect and PMIx_Disconnect from 4 of 8 ranks (4 nodes x 2) succeed (herd gathers them from the 2 nodes hosting ranks 0-3): every rank finalizes, the job ends, no agent is left; before, the agents never answered and hung, even after SIGTERM'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout


test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pconn.c" -o pconn $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/pconn &&
	cluster_up 4
'

for op in connect disconnect; do
	test_expect_success "PMIx $op from ranks 0-3 of 8: SUCCESS, every rank finalizes, herd exits 0, no agent left" '
		pmix_job $op $op <<-EOF &&
		nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
		restart: {max: 0}
		EOF
		timeout 60 herd run $op.yaml >out 2>err &&
		test "$(grep -c "^\[[0-3]\] rank [0-3] $op: SUCCESS\$" out)" = 4 &&
		test "$(grep -c "^\[[0-7]\] rank [0-7] finalize: SUCCESS\$" out)" = 8 &&
		pmix_gone 5 herd-agent pconn
	'
done

test_done
