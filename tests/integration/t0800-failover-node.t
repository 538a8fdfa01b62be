#!/bin/sh

test_description='herd run survives node failures: the PyTorch example on the test cluster resumes from its newest complete checkpoint after a node crash (a spare takes over), a partition (the job shrinks within nodes.min; the cut-off agent stops its ranks by itself) and the loss of rank 0'"'"'s node (MASTER_ADDR moves)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require

test_expect_success 'cluster of 5 nodes' '
	own_binaries &&
	cluster_up 5 &&
	FOUR="${HERD_CLUSTER_PREFIX}[1-4]"
'

test_expect_success 'crash of node 2 at step 12: spare node 5 takes its place, training resumes from the newest complete checkpoint' '
	fo_job crash "$FOUR" "$(cluster_node 5)" &&
	run_bg crash.yaml out.crash err.crash &&
	fo_wait_step crash 1 12 &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 120 &&
	fo_done crash 2 &&
	fo_has crash node_failed ".host == \"$(cluster_node 2)\" and .attempt == 1" &&
	fo_has crash spare_used ".host == \"$(cluster_node 5)\" and .attempt == 2" &&
	ev_all runs/crash/latest/events.jsonl attempt_start ".world_size == 4" &&
	fo_has crash rank_start ".attempt == 2 and .host == \"$(cluster_node 5)\"" &&
	! fo_has crash rank_start ".attempt == 2 and .host == \"$(cluster_node 2)\"" &&
	fo_resumed_well crash &&
	grep "spare $(cluster_node 5) joins the job" err.crash &&
	fo_no_train_left
'

test_expect_success 'node 2 comes back' '
	cluster_start_node 2
'

test_expect_success 'partition of node 4 at step 12: its agent stops its ranks by itself before the link heals; heartbeat timeout; the job shrinks to 3 nodes (nodes.min 3)' '
	fo_job part "$FOUR" "" 3 &&
	run_bg part.yaml out.part err.part &&
	fo_wait_step part 1 12 &&
	test -n "$(fo_train_pids 4)" &&
	t0=$(date +%s%3N) &&
	cluster_partition 4 &&
	fo_wait_event part node_failed ".host == \"$(cluster_node 4)\"" 10 &&
	fo_has part node_failed ".reason | test(\"no heartbeat\")" &&
	# The watchdog: health.timeout (3 s) of silence, then SIGTERM and
	# SIGKILL after health.grace (2 s).
	fo_wait_gone 4 8 &&
	echo "node 4: ranks gone $(( $(date +%s%3N) - t0 )) ms after the partition, link still down" &&
	ip -n "$(fo_ns 4)" link show eth0 | grep -q "state DOWN\|NO-CARRIER\|,DOWN\|state LOWERLAYERDOWN" &&
	wait_exit $HERD_PID 120 &&
	cluster_heal 4 &&
	fo_done part 2 &&
	fo_has part attempt_start ".attempt == 2 and .world_size == 3 and .nodes == 3" &&
	! fo_has part rank_start ".attempt == 2 and .host == \"$(cluster_node 4)\"" &&
	grep "continuing with 3 of 4 nodes" err.part &&
	fo_resumed_well part &&
	fo_no_train_left
'

test_expect_success 'crash of node 1 (rank 0, MASTER_ADDR) at step 12: MASTER_ADDR moves to node 2' '
	fo_job master "$FOUR" "" 3 &&
	run_bg master.yaml out.master err.master &&
	fo_wait_step master 1 12 &&
	cluster_kill_node 1 &&
	wait_exit $HERD_PID 120 &&
	fo_done master 2 &&
	fo_has master attempt_start ".attempt == 1 and .master_addr == \"$(cluster_addr 1)\"" &&
	fo_has master attempt_start ".attempt == 2 and .master_addr == \"$(cluster_addr 2)\" and .world_size == 3" &&
	fo_has master rank_start ".attempt == 2 and .rank == 0 and .host == \"$(cluster_node 2)\"" &&
	fo_resumed_well master &&
	fo_no_train_left &&
	cluster_start_node 1
'

test_done
