#!/bin/sh

test_description='issue 16: PMIx_Connect and PMIx_Disconnect across namespaces: rank 0 of the job (4 nodes x 2) and the 4 processes it spawned connect (herd gathers from the nodes hosting them), each side then reads the other namespace'"'"'s job size through PMIx_Get, and disconnects'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

procs() {
	for _a_ns in $(ip netns list | awk '{print $1}' |
		grep "^herd-$HERD_CLUSTER_ID-n[0-9]*$"); do
		for _a_p in $(ip netns pids "$_a_ns" 2>/dev/null); do
			[ "$(cat "/proc/$_a_p/comm" 2>/dev/null)" = "$1" ] &&
				echo "$_a_ns $_a_p"
		done
	done
	return 0
}

none_left() {
	i=0
	while test -n "$(procs pspawn)$(procs herd-agent)"; do
		i=$((i + 1)) && test $i -lt 100 || {
			procs pspawn; procs herd-agent; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done
}

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
