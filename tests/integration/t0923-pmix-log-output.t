#!/bin/sh

test_description='issue 23 item 16 (OpenPMIx'"'"'s log example): PMIx_Log to the stderr and stdout channels reaches the rank'"'"'s tagged output and its log, as under mpirun, control characters blank, bounded (1024 bytes); the event log keeps every entry'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout jq

test_expect_success 'cluster of 2 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/plog.c" -o plog $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/plog &&
	cluster_up 2
'

test_expect_success 'herd run: every rank logs to stderr and stdout, each PMIx_Log SUCCESS' '
	pmix_job lg <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 1}
	restart: {max: 0}
	EOF
	timeout 90 herd run lg.yaml >out 2>err ||
		{ cat err >&2; false; } &&
	for r in 0 1; do
		for n in 1 2 3; do
			grep -x "\[$r\] rank $r log $n: SUCCESS" out || return 1
		done
	done
'

test_expect_success 'the stderr entry is a line of the rank'"'"'s stderr, control characters blank' '
	for r in 0 1; do
		grep -x "\[$r\] err from rank $r \[31m red  next" err &&
		! grep "err from rank $r" out || return 1
	done &&
	! grep -q "$(printf "\033")" err
'

test_expect_success 'the stdout entries are lines of the rank'"'"'s stdout, the long one cut at 1024 bytes' '
	x=$(printf "%01024d" 0 | tr 0 x) &&
	for r in 0 1; do
		grep -x "\[$r\] out from rank $r" out &&
		grep -x "\[$r\] $x" out || return 1
	done
'

test_expect_success 'the lines are in each rank'"'"'s log too, and every entry in the event log' '
	run=runs/lg/latest &&
	for r in 0 1; do
		grep -x "out from rank $r" "$run/attempt-1/rank-$r.log" &&
		grep -x "err from rank $r \[31m red  next" "$run/attempt-1/rank-$r.log" || return 1
	done &&
	test "$(jq -c "select(.event == \"pmix_log\")" "$run/events.jsonl" | wc -l)" = 6
'

test_done
