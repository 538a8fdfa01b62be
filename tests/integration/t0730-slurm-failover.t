#!/bin/sh

test_description='herd on real Slurm: herd sbatch --wait of the PyTorch example on 4 nodes (herd run inside the batch job, slurm transport, 2 ranks per node); a node killed mid-training inside salloc --no-kill: evicted, attempt 2 on the 3 remaining nodes of the same allocation, resumed from the newest complete checkpoint'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"
. "$HERD_TEST_DIR/data/slurm-failover/lib.sh"

fo_require
require_cmd sinfo salloc srun sbatch scontrol timeout pgrep
for c in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
	[ -x $c ] || error "prerequisite $c is missing (run 'make deps')"
done

# herd sbatch finds its template next to bin/herd: the copy own_binaries
# made needs ../templates too.
test_expect_success 'cluster of 4 nodes with Slurm' '
	own_binaries &&
	cp -R "$HERD_ROOT/templates" templates &&
	cluster_up 4 &&
	slurm_up
'

test_expect_success 'herd sbatch --wait: train.py --steps 10 on 4 nodes x 2 slots, herd run inside the batch job over the slurm transport' '
	cat >ddp.yaml <<-EOF &&
	name: ddp
	nodes: {slurm: true, slots: 2}
	health: {grace: 2s}
	launch:
	  command: /usr/bin/python3 $HERD_ROOT/examples/torch-ddp/train.py --steps 10
	  workdir: "$PWD"
	  env: {OMP_NUM_THREADS: "1"}
	log: {dir: "$PWD/runs/ddp"}
	slurm:
	  nodes: 4
	  partition: $HERD_SLURM_PARTITION
	  time: "0:10:00"
	  output: "$PWD/runs/ddp/slurm-%j.out"
	EOF
	timeout 120 herd sbatch --wait --parsable ddp.yaml >out 2>err &&
	id=$(cat out) &&
	# At once: slurmctld forgets a finished job MinJobAge (4 s) later,
	# at its next purge.
	{ timeout 5 scontrol show job "$id" >job.txt 2>&1 || :; } &&
	test_must_be_empty err &&
	grep -x "[0-9][0-9]*" out &&
	log=runs/ddp/slurm-$id.out &&
	grep -E "^\[0\] step 10/10 loss [0-9]+\.[0-9]+" "$log" &&
	n=0 &&
	for h in $HERD_CLUSTER_NODES; do
		for r in $n $((n + 1)); do
			grep -x "\[$r\] rank $r/8 on $h: done" "$log" &&
			grep -x "rank $r/8 on $h: done" runs/ddp/latest/attempt-1/rank-$r.log ||
				return 1
		done
		n=$((n + 2))
	done &&
	ev=runs/ddp/latest/events.jsonl &&
	ev_all $ev job_start ".transport == \"slurm\" and .nodes == 4" &&
	jq -r -n "[inputs | select(.event == \"node_up\") | .host] | sort | .[]" $ev >got &&
	echo "$HERD_CLUSTER_NODES" | tr " " "\n" | sort >expect &&
	test_cmp expect got &&
	ev_all $ev attempt_start ".attempt == 1 and .nodes == 4 and .world_size == 8" &&
	for h in $HERD_CLUSTER_NODES; do
		test $(jq -n "[inputs | select(.event == \"rank_start\" and .host == \"$h\")] | length" $ev) -eq 2 ||
			return 1
	done &&
	ev_all $ev job_end ".status == 0" &&
	cat job.txt &&
	if grep -q "Invalid job id" job.txt; then
		: # purged already: sbatch --wait said it ended with status 0
	else
		tr " " "\n" <job.txt | grep -E -x "JobState=COMPLET(ED|ING)" &&
		tr " " "\n" <job.txt | grep -x "ExitCode=0:0" &&
		tr " " "\n" <job.txt | grep -x "NumNodes=4"
	fi
'

test_expect_success 'a node killed at step 12 inside salloc --no-kill: evicted, attempt 2 on the other 3 nodes of the allocation resumes from the newest complete checkpoint' '
	sf_job crash 3 2 &&
	sf_salloc_bg crash.yaml out.crash err.crash &&
	fo_wait_step crash 1 12 &&
	victim=$(cluster_node 2) &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 150 &&
	fo_done crash 2 &&
	fo_has crash node_failed ".host == \"$victim\" and .attempt == 1" &&
	fo_has crash node_evicted ".host == \"$victim\"" &&
	fo_has crash attempt_start ".attempt == 1 and .nodes == 4 and .world_size == 4" &&
	fo_has crash attempt_start ".attempt == 2 and .nodes == 3 and .world_size == 3" &&
	fo_has crash checkpoint_found ".attempt == 2" &&
	! fo_has crash rank_start ".attempt == 2 and .host == \"$victim\"" &&
	for h in $HERD_CLUSTER_NODES; do
		test "$h" = "$victim" ||
		fo_has crash rank_start ".attempt == 2 and .host == \"$h\"" ||
			return 1
	done &&
	grep "continuing with 3 of 4 nodes" err.crash &&
	fo_resumed_well crash &&
	n=0 &&
	for h in $HERD_CLUSTER_NODES; do
		test "$h" = "$victim" ||
		{ grep -x "rank $n/3 on $h: done" runs/crash/latest/attempt-2/rank-$n.log &&
			n=$((n + 1)); } ||
			return 1
	done &&
	sf_steps_sane err.crash 3 &&
	fo_no_train_left
'

test_expect_success 'node 2 comes back: sshd and slurmd, idle again (ReturnToService=2)' '
	cluster_start_node 2 &&
	slurm_start_node 2 &&
	slurm_wait_state 2 idle 20
'

# Attempt 2 of the test above can end before Slurm even notices the
# node is gone (SlurmdTimeout 3 s).  Here attempt 2 runs long enough for
# Slurm to declare the node down and shrink the allocation under it:
# the first srun step (herd's agents on the other nodes) must outlive it.
test_expect_success 'Slurm declares the killed node down while attempt 2 runs: the allocation shrinks to 3 nodes, the agents of the first step go on, the job completes' '
	FO_STEPS=150 &&
	sf_job shrink 3 2 &&
	sf_salloc_bg shrink.yaml out.shrink err.shrink &&
	fo_wait_step shrink 1 12 &&
	job=$(sed -n "s/^salloc: Granted job allocation \([0-9]*\)\$/\1/p" err.shrink) &&
	test -n "$job" &&
	victim=$(cluster_node 3) &&
	cluster_kill_node 3 &&
	# Attempt 2 runs: a step past the last of attempt 1 (on a busy
	# machine attempt 1 may pass step 20 before the kill lands).
	fo_wait_event shrink attempt_start ".attempt == 2" 60 &&
	a1=$(grep "^step [0-9]*/" "$(fo_log shrink 1)" | tail -n 1 | sed "s|^step \([0-9]*\)/.*|\1|") &&
	fo_wait_step shrink 2 $((a1 + 1)) &&
	slurm_wait_state 3 "down*" 20 &&
	i=0 &&
	until test "$(sf_job_field $job NumNodes)" = 3; do
		i=$((i + 1)) && test $i -lt 100 || return 1
		sleep 0.1   # poll interval of a bounded wait
	done &&
	test "$(sf_job_field $job JobState)" = RUNNING &&
	kill -0 $HERD_PID &&
	at=$(grep "^step [0-9]*/" "$(fo_log shrink 2)" | tail -n 1 | sed "s|^step \([0-9]*\)/.*|\1|") &&
	echo "allocation $job shrank to 3 nodes at step $at of attempt 2" &&
	test "$at" -lt $((FO_STEPS - 10)) &&
	fo_wait_step shrink 2 $((at + 10)) &&
	wait_exit $HERD_PID 150 &&
	fo_done shrink 2 &&
	fo_has shrink node_evicted ".host == \"$victim\"" &&
	fo_has shrink attempt_start ".attempt == 2 and .nodes == 3 and .world_size == 3" &&
	! fo_has shrink node_failed ".host != \"$victim\"" &&
	fo_resumed_well shrink &&
	sf_steps_sane err.shrink 3 &&
	fo_no_train_left
'

test_done
