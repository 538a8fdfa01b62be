#!/bin/sh

test_description='issue 16, fences over a subset of processes (4 nodes x 2): ranks 0-3 fence, collecting data, while 4-7 compute and then fence among themselves; 0-3 fence again; even and odd ranks fence at the same time, in another order on each node; then a full fence; after each collecting fence the members have each other'"'"'s keys with PMIX_IMMEDIATE (no direct modex); a subset fence one rank never joins times out naming its node only.  Before, herd waited for every node and the job failed at the fence timeout'

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
	cluster_up 4 &&
	N2=$(cluster_node 2)
'

# left: fence processes left in the cluster's node namespaces.
left() {
	for _l_ns in $(ip netns list | awk '{print $1}' |
		grep "^herd-$HERD_CLUSTER_ID-n[0-9]*$"); do
		for _l_p in $(ip netns pids "$_l_ns" 2>/dev/null); do
			test "$(cat "/proc/$_l_p/comm" 2>/dev/null)" = fence &&
				echo "$_l_ns $_l_p"
		done
	done
	return 0
}

# ok STEP N: N ranks said "STEP: ok", none said FAIL.
ok() {
	test "$(grep -c "^\[\([0-7]\)\] rank \1 $1: ok\$" out)" = "$2" || {
		grep " $1: " out >&2
		return 1
	}
}

test_expect_success 'subset, repeated, concurrent and full fences, with and without data: every step ok, herd exits 0' '
	pmix_job sub <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	health: {fence_timeout: 20s}
	restart: {max: 0}
	EOF
	timeout 120 herd run sub.yaml >out 2>err &&
	! grep FAIL out &&
	ok sub 8 && ok sub-get 4 && ok again 4 &&
	ok pair 8 && ok pair-get 8 && ok full 8 && ok full-get 8
'

test_expect_success 'a subset fence rank 3 never joins: the attempt fails after health.fence_timeout naming its node only' '
	pmix_job stall stall <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	health: {fence_timeout: 3s, grace: 1s}
	restart: {max: 0}
	EOF
	test_expect_code 1 timeout 60 herd run stall.yaml >out.stall 2>err.stall &&
	grep "^herd: PMIx fence 1 over ranks 0-3 timed out after 3s; never contributed: [^ ]*\$" err.stall >why &&
	test "$(sed "s/.*never contributed: //" why)" = "$N2" &&
	i=0 &&
	while test -n "$(left)"; do
		i=$((i + 1)) && test $i -lt 100 || { left; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done
'

test_done
