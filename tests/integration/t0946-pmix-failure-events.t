#!/bin/sh

test_description='issue 16: herd'"'"'s failures as PMIx events: with 4 nodes x 2 ranks waiting in a handler for PMIX_ERR_PROC_ABORTED, a node killed (SIGKILL to all in its namespace) reaches every surviving rank within milliseconds with the lost ranks as PMIX_EVENT_AFFECTED_PROCS, and herd stops the attempt health.notify_grace (3 s) later; the same for a rank that exits 1'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pev.c" -o pev $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/pev &&
	cluster_up 4
'

# wait_waiting FILE: every rank said it waits (bounded by the clock:
# 120 s, for 8 sanitized ranks starting on a loaded machine).
wait_waiting() {
	_ww_end=$(($(date +%s) + 120))
	until test "$(grep -c "^\[[0-7]\] rank [0-7] waiting\$" "$1")" = 8; do
		test "$(date +%s)" -lt $_ww_end ||
			{ echo "not every rank waits after 120 s:"; cat "$1" "err.${1#out.}" 2>/dev/null; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

# latency FILE T0: the largest handler time minus T0, over the ranks
# that got the event.
latency() {
	sed -n "s/^\[[0-9]*\] rank [0-9]* failure: .* at \([0-9]*\)\$/\1/p" "$1" |
		awk -v t0="$2" "BEGIN {m = -1} {d = \$1 - t0; if (d > m) m = d} END {print m}"
}

# stopped FILE: the earliest SIGTERM time of a rank.
stopped() {
	sed -n "s/^\[[0-9]*\] rank [0-9]* SIGTERM at \([0-9]*\)\$/\1/p" "$1" | sort -n | head -1
}

test_expect_success 'node 2 killed: ranks 0,1,4-7 get PROC-ABORTED for ranks 2,3 within ms; SIGTERM after notify_grace' '
	pmix_job node wait <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	health: {notify_grace: 3s, grace: 2s}
	restart: {max: 0}
	EOF
	run_bg node.yaml out.node err.node &&
	wait_waiting out.node &&
	t0=$(now_ms) &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 60 &&
	cat out.node err.node &&
	test "$(grep -c "^\[[014567]\] rank [014567] failure: PROC-ABORTED affected 2,3 at [0-9]*\$" out.node)" = 6 &&
	ms=$(latency out.node $t0) &&
	echo "node kill -> last surviving handler: $ms ms" &&
	nf=$(jq -r "select(.event == \"node_failed\") | .t" runs/node/latest/events.jsonl) &&
	echo "node kill -> herd noticed: $((nf - t0)) ms; noticed -> last handler: $(latency out.node $nf) ms" &&
	test "$ms" -ge 0 && test "$ms" -lt 2000 &&
	stop=$(stopped out.node) &&
	echo "node kill -> first SIGTERM: $((stop - t0)) ms (notify_grace 3 s)" &&
	test $((stop - t0)) -ge 2900 &&
	test $((stop - t0)) -lt 10000 &&
	ev_all runs/node/latest/events.jsonl ranks_notified ".kind == \"node\" and .ranks == [2,3] and .nodes == 3" &&
	cluster_start_node 2
'

test_expect_success 'rank 5 exits 1: the 7 others get PROC-ABORTED for rank 5 within ms; SIGTERM after notify_grace' '
	pmix_job rank wait 5 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	health: {notify_grace: 3s, grace: 2s}
	restart: {max: 0}
	EOF
	run_bg rank.yaml out.rank err.rank &&
	wait_exit $HERD_PID 60 &&
	cat out.rank &&
	test $WAIT_RC = 1 &&
	t0=$(sed -n "s/^\[5\] rank 5 exits 1 at \([0-9]*\)\$/\1/p" out.rank) &&
	test "$(grep -c "^\[[0-46-7]\] rank [0-46-7] failure: PROC-ABORTED affected 5 at [0-9]*\$" out.rank)" = 7 &&
	ms=$(latency out.rank $t0) &&
	echo "rank exit -> last handler: $ms ms" &&
	test "$ms" -ge 0 && test "$ms" -lt 2000 &&
	stop=$(stopped out.rank) &&
	echo "rank exit -> first SIGTERM: $((stop - t0)) ms (notify_grace 3 s)" &&
	test $((stop - t0)) -ge 2900 &&
	ev_all runs/rank/latest/events.jsonl ranks_notified ".kind == \"exit\" and .ranks == [5] and .nodes == 4" &&
	grep "herd: rank 5 on .* exited with status 1" err.rank
'

test_done
