#!/bin/sh

test_description='issue 16: PMIx_Connect and PMIx_Disconnect from 4 of 8 ranks (4 nodes x 2) succeed (herd gathers them from the 2 nodes hosting ranks 0-3): every rank finalizes, the job ends, no agent is left; before, the agents never answered and hung, even after SIGTERM'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

# agents: herd-agent processes left in the cluster's node namespaces.
agents() {
	for _a_ns in $(ip netns list | awk '{print $1}' |
		grep "^herd-$HERD_CLUSTER_ID-n[0-9]*$"); do
		for _a_p in $(ip netns pids "$_a_ns" 2>/dev/null); do
			case "$(cat "/proc/$_a_p/comm" 2>/dev/null)" in
			herd-agent | pconn) echo "$_a_ns $_a_p" ;;
			esac
		done
	done
}

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
		i=0 &&
		while test -n "$(agents)"; do
			i=$((i + 1)) && test $i -lt 50 || { agents; return 1; }
			sleep 0.1   # poll interval of a bounded wait
		done
	'
done

test_done
