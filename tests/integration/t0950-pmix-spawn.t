#!/bin/sh

test_description='issue 16: PMIx_Spawn from rank 0 of 8 (4 nodes x 2): the children run in a new namespace (herd.JOB.1.s1) with PMIX_PARENT_ID and PMIX_SPAWNED, spread over the job'"'"'s nodes, tagged [s1:R], logged, counted in the job'"'"'s status; PMIX_HOST outside the job is refused; a child that fails fails the job'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

# none_left: no pspawn and no agent (by its real name) within 10 s.
none_left() { pmix_gone 10 pspawn "$AGENT"; }

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pspawn.c" -o pspawn $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/pspawn &&
	AGENT=$(pmix_agent_comm) &&
	case $AGENT in agent-?*) ;; *) false ;; esac &&
	cluster_up 4
'

test_expect_success 'rank 0 spawns 4 children: each has its rank, the size, its parent, PMIX_SPAWNED; every process ends, herd exits 0' '
	pmix_job spawn plain 4 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 90 herd run spawn.yaml >out 2>err &&
	grep -x "\[0\] rank 0 spawn: SUCCESS" out &&
	grep -x "\[0\] rank 0 spawned .s1" out &&
	for r in 0 1 2 3; do
		grep -x "\[s1:$r\] child $r of 4, parent 0, spawned 1" out &&
		grep -x "\[s1:$r\] child $r finalize: SUCCESS" out || return 1
	done &&
	test "$(grep -c "^\[[0-7]\] rank [0-7] finalize: SUCCESS\$" out)" = 8 &&
	none_left
'

# Issue 23 item 14 (OpenPMIx's dynamic example): the parent asked for a
# child's PMIX_LOCAL_RANK and got NOT-FOUND, each node registering only
# its own children's data.
test_expect_success 'rank 0 learns every child'"'"'s local rank, node rank, app and host, as the child itself does' '
	pmix_job info info 6 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 90 herd run info.yaml >out 2>err &&
	for r in 0 1 2 3 4 5; do
		grep "^\[0\] rank 0 child $r: .* (SUCCESS)\$" out >parent.$r &&
		grep "^\[s1:$r\] itself child $r: .* (SUCCESS)\$" out >self.$r &&
		test "$(sed "s/^.*child $r: //" parent.$r)" = "$(sed "s/^.*child $r: //" self.$r)" || return 1
	done &&
	grep "^\[0\] rank 0 child [0-5]: local 1, node rank 1, app 0, on " out &&
	none_left
'

test_expect_success 'the spawn is in the events and each child has its log' '
	run=runs/spawn/latest &&
	jq -n -e "[inputs | select(.event == \"spawn\" and .size == 4 and .spawn == 1)] | length == 1" "$run/events.jsonl" &&
	test "$(jq -c "select(.event == \"spawn\") | [.procs[].host] | unique | length" "$run/events.jsonl")" = 4 &&
	test "$(jq -c "select(.event == \"spawn_exit\" and .status == 0)" "$run/events.jsonl" | wc -l)" = 4 &&
	grep -x "child 2 of 4, parent 0, spawned 1" "$run/attempt-1/spawn-1-rank-2.log"
'

test_expect_success 'spawn of two apps (PMIx spawn_multiple: 2 + 1): one namespace of 3, PMIX_APPNUM 0, 0, 1' '
	pmix_job multi multiple 2 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 90 herd run multi.yaml >out 2>err &&
	grep -x "\[0\] rank 0 spawn: SUCCESS" out &&
	grep -x "\[s1:0\] child 0 app 0" out &&
	grep -x "\[s1:1\] child 1 app 0" out &&
	grep -x "\[s1:2\] child 2 app 1" out &&
	test "$(grep -c "^\[s1:[0-2]\] child [0-2] of 3, parent 0, spawned 1\$" out)" = 3 &&
	none_left
'

test_expect_success 'PMIX_HOST naming one node of the job: every child there' '
	host=$(cluster_node 3) &&
	pmix_job onhost plain 3 "$host" <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 90 herd run onhost.yaml >out 2>err &&
	grep -x "\[0\] rank 0 spawn: SUCCESS" out &&
	run=runs/onhost/latest &&
	test "$(jq -r "select(.event == \"spawn\") | [.procs[].host] | unique | .[]" "$run/events.jsonl")" = "$host" &&
	test "$(grep -c "^\[s1:[0-2]\] child [0-2] finalize: SUCCESS\$" out)" = 3 &&
	none_left
'

test_expect_success 'PMIX_HOST outside the job: refused (BAD-PARAM), nothing started, the job goes on and exits 0' '
	pmix_job badhost plain 2 nosuchnode <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 90 herd run badhost.yaml >out 2>err &&
	grep -x "\[0\] rank 0 spawn: BAD-PARAM" out &&
	grep "host nosuchnode is not a node of the job" err &&
	! grep "^\[s1" out &&
	test "$(grep -c "^\[[0-7]\] rank [0-7] finalize: SUCCESS\$" out)" = 8 &&
	none_left
'

test_expect_success 'more than 256 processes: refused (OUT-OF-RESOURCE)' '
	pmix_job many plain 300 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 90 herd run many.yaml >out 2>err &&
	grep -x "\[0\] rank 0 spawn: OUT-OF-RESOURCE" out &&
	none_left
'

# Issue 23: the bounds counted every process ever spawned, so loops that
# spawn and reap children (mpi4py's test_spawn) were refused after 256.
test_expect_success '9 spawns of 32 processes that exit, one after the other (288 in all): every spawn runs, the job exits 0' '
	mkdir loopd &&
	pmix_job loop loop 32 9 "\"$PWD/loopd\"" <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	{ timeout 150 herd run loop.yaml >out 2>err || { cat out err; false; }; } &&
	{ grep -x "\[0\] rank 0 loop: 9 of 9" out || { cat out err; false; }; } &&
	! grep "loop [0-9]*: " out &&
	test "$(ls loopd | grep -c "^[0-8]\.[0-9]*\$")" = 288 &&
	test "$(grep -c "^\[[0-7]\] rank [0-7] finalize: SUCCESS\$" out)" = 8 &&
	none_left
'

test_expect_success 'a child that exits 3: the job fails with status 3, named; nothing left' '
	pmix_job fail fail 2 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	test_expect_code 3 timeout 90 herd run fail.yaml >out 2>err &&
	grep "spawned process s1:1 on .* exited with status 3" err &&
	none_left
'

test_expect_success 'a child killed by SIGKILL: the job ends with 137, every process of both namespaces is gone' '
	pmix_job kill sleep 2 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	{ timeout 120 herd run kill.yaml >out 2>err; echo $? >rc; } &
	i=0 &&
	while ! grep -q "^\[s1:1\] child 1 pid " out; do
		i=$((i + 1)) && test $i -lt 600 || { cat out err; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done &&
	pid=$(sed -n "s/^\[s1:1\] child 1 pid //p" out) &&
	pmix_procs pspawn | grep " $pid pspawn$" &&
	kill -9 "$pid" &&
	i=0 &&
	while ! test -s rc; do
		i=$((i + 1)) && test $i -lt 600 || return 1
		sleep 0.1   # poll interval of a bounded wait
	done &&
	test "$(cat rc)" = 137 &&
	grep "spawned process s1:1 on .* was killed by signal 9" err &&
	none_left
'

test_expect_success 'with a restart: each attempt spawns anew (s1 of attempt 2), a failing child fails both, the job exits 3' '
	pmix_job again fail 2 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 1, backoff: 0s}
	EOF
	test_expect_code 3 timeout 120 herd run again.yaml >again.out 2>again.err &&
	test "$(grep -c "^\[0\] rank 0 spawn: SUCCESS\$" again.out)" = 2 &&
	test "$(jq -c "select(.event == \"spawn\") | .attempt" runs/again/latest/events.jsonl | tr "\n" " ")" = "1 2 " &&
	test "$(grep -c "spawned process s1:1 on .* exited with status 3; stopping the attempt" again.err)" = 2 &&
	none_left
'

test_expect_success 'herd killed (SIGKILL) while children run: every agent, rank and child is gone' '
	# Nothing of an earlier test that failed is counted here.
	none_left &&
	pmix_job orphan sleep 4 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	herd run orphan.yaml >out 2>err &
	hpid=$! &&
	i=0 &&
	while test "$(grep -c "^\[s1:[0-3]\] child [0-3] pid " out)" != 4; do
		i=$((i + 1)) && test $i -lt 600 || { kill $hpid; cat out err; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done &&
	test "$(pmix_procs pspawn | wc -l)" = 4 &&
	kill -9 $hpid &&
	none_left
'

test_done
