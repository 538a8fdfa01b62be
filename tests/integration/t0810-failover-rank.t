#!/bin/sh

test_description='herd run recovers from rank faults: the PyTorch example on 3 nodes of the test cluster after a rank is SIGKILLed (an incomplete newer checkpoint is skipped) or hangs under SIGSTOP (health.progress_timeout); a node loss below nodes.min and a spent restart.max end the job with a clear message'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require

test_expect_success 'cluster of 3 nodes' '
	own_binaries &&
	cluster_up 3 &&
	THREE="${HERD_CLUSTER_PREFIX}[1-3]"
'

test_expect_success 'SIGKILL of rank 2 at step 12: step_000999 without COMPLETE is skipped, training resumes from the newest complete checkpoint' '
	fo_job kill "$THREE" &&
	mkdir ckpt-kill/step_000999 &&
	echo partial >ckpt-kill/step_000999/model.pt &&
	run_bg kill.yaml out.kill err.kill &&
	fo_wait_step kill 1 12 &&
	pid=$(fo_train_pids 3) && test -n "$pid" &&
	kill -KILL $pid &&
	wait_exit $HERD_PID 120 &&
	fo_done kill 2 &&
	fo_has kill rank_exit ".attempt == 1 and .rank == 2 and .status == 137" &&
	# The shell around train.py (sh -c) reports the kill as status 137.
	fo_has kill attempt_end ".attempt == 1 and .status == 137 and (.reason | test(\"^rank 2 on $(cluster_node 3) \"))" &&
	fo_has kill checkpoint_skipped ".attempt == 2 and (.path | endswith(\"/step_000999\"))" &&
	! fo_has kill checkpoint_found "(.path | endswith(\"/step_000999\"))" &&
	grep "skipping checkpoint .*step_000999" err.kill &&
	fo_resumed_well kill &&
	fo_no_train_left
'

test_expect_success 'SIGSTOP of rank 1 at step 12: the attempt hangs (health.progress_timeout 5s), its ranks are stopped (SIGKILL after grace), training resumes' '
	FO_HEALTH_EXTRA=", progress_timeout: 5s" &&
	fo_job hang "$THREE" "" "" 3 /usr/bin/python3 "$FO_DATA/progress-train.py" "$FO_TRAIN" &&
	FO_HEALTH_EXTRA= &&
	run_bg hang.yaml out.hang err.hang &&
	fo_wait_step hang 1 12 &&
	pid=$(fo_train_pids 2) && test -n "$pid" &&
	kill -STOP $pid &&
	wait_exit $HERD_PID 120 &&
	fo_done hang 2 &&
	# Rank 1 stopped, the others wait for it in a collective: all are
	# silent, and whichever is reported first ends the attempt.
	fo_has hang rank_hung ".attempt == 1 and .silent_ms >= 5000" &&
	# The stopped rank can give no stack, the others wait in DDP'"'"'s
	# backward or a barrier: it is the culprit (issue 14).
	fo_has hang rank_hung ".attempt == 1 and .culprit and .rank == 1 and .method == \"none\" and (.error | test(\"stopped\"))" &&
	! fo_has hang rank_hung ".attempt == 2" &&
	fo_has hang attempt_end ".attempt == 1 and (.reason | test(\"hung\"))" &&
	! kill -0 $pid 2>/dev/null &&
	fo_resumed_well hang &&
	fo_no_train_left
'

test_expect_success 'restart.max 1: rank 1 SIGKILLed in attempts 1 and 2; the limit ends the job with a summary' '
	fo_job limit "$THREE" "" "" 1 &&
	run_bg limit.yaml out.limit err.limit &&
	fo_wait_step limit 1 12 &&
	kill -KILL $(fo_train_pids 2) &&
	# Attempt 2 resumes where attempt 1 saved last: on a busy machine
	# that was past step 17 (the kill came at step 21), so the second
	# kill waits for two steps of attempt 2, not for a step number.
	fo_wait_steps limit 2 2 &&
	kill -KILL $(fo_train_pids 2) &&
	wait_exit $HERD_PID 120 &&
	test "$WAIT_RC" = 137 &&
	grep "restart limit reached (restart.max 1)" err.limit &&
	grep "job limit ended after 2 attempts:" err.limit &&
	grep -E "attempt 1: rank 1 on $(cluster_node 2) (was killed by signal 9|exited with status 137)" err.limit &&
	grep -E "attempt 2: rank 1 on $(cluster_node 2) (was killed by signal 9|exited with status 137)" err.limit &&
	fo_has limit job_end ".status == 137 and .attempts == 2" &&
	! fo_has limit attempt_start ".attempt == 3" &&
	fo_no_train_left
'

test_expect_success 'nodes.min 3: node 3 crashes; 2 nodes left is too few, the job fails with a clear message' '
	fo_job min "$THREE" "" 3 &&
	run_bg min.yaml out.min err.min &&
	fo_wait_step min 1 12 &&
	cluster_kill_node 3 &&
	wait_exit $HERD_PID 60 &&
	test "$WAIT_RC" != 0 &&
	grep "^herd: only 2 nodes left, nodes.min is 3; giving up: set nodes.min lower in min.yaml to go on with fewer nodes, or add nodes.spares$" err.min &&
	fo_has min job_end ".status != 0 and .attempts == 1" &&
	fo_has min node_failed ".host == \"$(cluster_node 3)\"" &&
	fo_no_train_left &&
	cluster_start_node 3
'

test_expect_success 'no nodes.min, no spares: the first lost node ends the job, and the message says nodes.min is every node by default and names the keys to change (issue 22)' '
	cluster_wait_ssh 3 60 &&
	fo_job all "$THREE" &&
	run_bg all.yaml out.all err.all &&
	fo_wait_step all 1 12 &&
	cluster_kill_node 3 &&
	wait_exit $HERD_PID 60 &&
	test "$WAIT_RC" != 0 &&
	grep "^herd: only 2 nodes left, nodes.min is 3 (every node: the default); giving up: set nodes.min lower in all.yaml to go on with fewer nodes, or add nodes.spares$" err.all &&
	fo_no_train_left &&
	cluster_start_node 3
'

test_done
