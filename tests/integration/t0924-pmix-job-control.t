#!/bin/sh

test_description='issue 23 item 15 (OpenPMIx'"'"'s jctrl example): PMIx_Job_control from the ranks of a job of 4 (2 nodes x 2): declarations (preemptible, checkpoint methods) taken; a checkpoint reaches every rank as PMIX_JCTRL_CHECKPOINT; a signal, kill or terminate reaches a rank of the same node; a rank of another node, another namespace, a pause are refused'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout jq

test_expect_success 'cluster of 2 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pjctrl.c" -o pjctrl $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/pjctrl &&
	cluster_up 2
'

jc_job() {
	pmix_job "$1" "$1" <<-EOF
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
}

test_expect_success 'the jctrl declaration (preemptible, checkpoint by SIGUSR2 or event): SUCCESS on every rank' '
	jc_job declare &&
	timeout 90 herd run declare.yaml >out 2>err &&
	for r in 0 1 2 3; do
		grep -x "\[$r\] rank $r declare: SUCCESS" out || return 1
	done
'

test_expect_success 'a checkpoint asked by rank 0: SUCCESS, and the event with its ID on every rank of both nodes' '
	jc_job ckpt &&
	timeout 90 herd run ckpt.yaml >out 2>err &&
	grep -x "\[0\] rank 0 checkpoint: SUCCESS" out &&
	for r in 0 1 2 3; do
		grep -x "\[$r\] rank $r checkpoint event: ck1" out &&
		grep -x "\[$r\] rank $r done" out || return 1
	done
'

test_expect_success 'SIGUSR1 to rank 1 (same node) and rank 2 (other node, through herd): both delivered; another namespace BAD-PARAM, a pause NOT-SUPPORTED; the job exits 0' '
	jc_job signal &&
	timeout 90 herd run signal.yaml >out 2>err &&
	grep -x "\[0\] rank 0 signal: SUCCESS" out &&
	grep -x "\[1\] rank 1 got SIGUSR1" out &&
	grep -x "\[0\] rank 0 remote signal: SUCCESS" out &&
	grep -x "\[2\] rank 2 got SIGUSR1" out &&
	grep -x "\[0\] rank 0 foreign: BAD-PARAM" out &&
	grep -x "\[0\] rank 0 pause: NOT-SUPPORTED" out &&
	! grep "only this node" err &&
	test "$(grep -c "^\[[0-3]\] rank [0-3] done\$" out)" = 4
'

test_expect_success 'PMIX_JOB_CTRL_TERMINATE of rank 3 on the other node: it gets SIGTERM through herd (and exits 0 here)' '
	jc_job rterm &&
	timeout 90 herd run rterm.yaml >out 2>err &&
	grep -x "\[0\] rank 0 rterm: SUCCESS" out &&
	grep -x "\[3\] rank 3 got SIGTERM" out &&
	! grep "rank [0-2] got" out
'

test_expect_success 'PMIX_JOB_CTRL_TERMINATE of rank 1: it gets SIGTERM (and exits 0 here)' '
	jc_job term &&
	timeout 90 herd run term.yaml >out 2>err &&
	grep -x "\[0\] rank 0 term: SUCCESS" out &&
	grep -x "\[1\] rank 1 got SIGTERM" out
'

test_expect_success 'PMIX_JOB_CTRL_KILL of rank 1: killed by SIGKILL, the job fails (137), nothing left' '
	jc_job kill &&
	test_expect_code 137 timeout 90 herd run kill.yaml >out 2>err &&
	grep -x "\[0\] rank 0 kill: SUCCESS" out &&
	! grep "rank 1 got" out &&
	grep "rank 1 .*signal 9\|rank 1 .*SIGKILL" err &&
	pmix_gone 10 pjctrl "$(pmix_agent_comm)"
'

test_done
