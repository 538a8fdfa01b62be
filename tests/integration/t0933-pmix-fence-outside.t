#!/bin/sh

test_description='PMIx fences over processes outside the caller'"'"'s node (4 nodes x 2): {nspace, 9999}, {"no-such-ns", 0} and a rank of another node alone, and the caller with {nspace, 9999}: each fails at once with PMIX_ERR_BAD_PARAM; the caller with {"no-such-ns", 0} with PMIX_ERR_NOT_FOUND; then a full fence completes and herd exits 0.  Before, libpmix held the first three forever (none of their processes on the node, so its local count was never reached and herd was never asked)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/fence.c" -o fence $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/fence &&
	cluster_up 4
'

# ok STEP: all 8 ranks said "STEP: ok".
ok() {
	test "$(grep -c "^\[\([0-7]\)\] rank \1 $1: ok\$" out)" = 8 || {
		grep " $1: " out >&2
		return 1
	}
}

test_expect_success 'every fence outside the node is answered at once (BAD_PARAM, NOT_FOUND); a full fence then completes' '
	pmix_job outside outside <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	health: {fence_timeout: 60s}
	restart: {max: 0}
	EOF
	timeout 120 herd run outside.yaml >out 2>err || {
		cat out err >&2
		return 1
	} &&
	! grep -e FAIL -e HANG out &&
	ok out-rank && ok out-ns && ok out-other &&
	ok me-rank && ok me-ns && ok full
'

test_expect_success 'no fence process is left on the nodes' '
	pmix_gone 10 fence
'

test_done
