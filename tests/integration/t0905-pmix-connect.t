#!/bin/sh

test_description='issue 16: PMIx_Connect and PMIx_Disconnect from 4 of 8 ranks (4 nodes x 2) succeed (herd gathers them from the 2 nodes hosting ranks 0-3): every rank finalizes, the job ends, no agent is left; before, the agents never answered and hung, even after SIGTERM; issue 23: after PMIx_Connect over the whole namespace from every rank no agent is left either, looked for by its real name (agent-VERSION-HASH), within health.timeout'

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
	AGENT=$(pmix_agent_comm) &&
	case $AGENT in agent-?*) ;; *) false ;; esac &&
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
		pmix_gone 5 "$AGENT" pconn
	'
done

# Issue 23: after it libpmix 4.2 spun forever in PMIx_server_finalize; each
# agent outlived herd at 100 % of a core.  An agent whose herd is gone is
# gone within health.timeout (3 s), whatever the library does.
test_expect_success "PMIx_Connect over the whole namespace from every rank: herd exits 0, no agent left (by its real name)" '
	pmix_job all all <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 60 herd run all.yaml >out 2>err &&
	test "$(grep -c "^\[[0-7]\] rank [0-7] all: SUCCESS\$" out)" = 8 &&
	test "$(grep -c "^\[[0-7]\] rank [0-7] finalize: SUCCESS\$" out)" = 8 &&
	pmix_gone 8 "$AGENT" pconn
'

test_done
