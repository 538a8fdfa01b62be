#!/bin/sh

test_description='survivors keep training at 8 ranks (4 nodes x 2 slots, one spare): node 3 killed mid-step, its two ranks start on the spare in generation 1 and the 6 survivors keep their processes; the process group of 8 forms again over herd'"'"'s store (every rank'"'"'s rendezvous through its own HERD_CONTROL), every rank ends with the same parameters, one attempt'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require

# This was an intermittent breakage (2 runs of 7 on a loaded 2-core
# machine): one survivor never left its step of generation 0, and herd
# fell back to the restart at health.rejoin_timeout.  A survivor forked
# from a warm interpreter could be left at SCHED_IDLE (the interpreter
# idled itself after the keeper had unidled it for LAUNCH) and get no
# cpu beside 7 busy ranks; the keeper now idles the interpreter before
# it runs, and every run since, beside two cpu hogs too, has passed.
test_expect_success 'on 5 nodes, node 3 of 4 (ranks 4 and 5) killed mid-step: ranks 4-5 rejoin on node 5, 6 survivors keep their pids, 8 equal checksums' '
	own_binaries &&
	cluster_up 5 &&
	mkdir -p ckpt8 &&
	cat >wide.yaml <<-EOF &&
	name: wide
	nodes: {hosts: "${HERD_CLUSTER_PREFIX}[1-4]", slots: 2, spares: "$(cluster_node 5)"}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {heartbeat: 500ms, timeout: 3s, grace: 2s, rejoin_timeout: 60s}
	restart: {max: 1, backoff: 500ms}
	checkpoint: {dir: "$PWD/ckpt8", pattern: "step_*", complete_marker: COMPLETE}
	launch:
	  command: $(yaml_cmd /usr/bin/python3 "$FO_TRAIN" --steps 150 --step-sleep 0.1 --ckpt "$PWD/ckpt8" --ckpt-every 10)
	  workdir: "$PWD"
	  env: {OMP_NUM_THREADS: "1", HERD_ELASTIC_TRACE: "1"}
	EOF
	run_bg wide.yaml out.wide err.wide &&
	fo_wait_step wide 1 12 120 &&
	# 150 steps: on a loaded machine the kill meant for step 12 came at
	# step 45, and the job of 50 steps had ended before the survivors
	# were counted again.
	before="$(fo_train_pids 1 2 4 | sort)" &&
	echo "survivors before:" $before &&
	test $(echo "$before" | wc -w) -eq 6 &&
	cluster_kill_node 3 &&
	fo_wait_event wide rejoin ".fell_back == false" 90 &&
	fo_same_pids "$before" 1 2 4 &&
	wait_exit $HERD_PID 180 &&
	wait $HERD_PID &&
	ev=runs/wide/latest/events.jsonl &&
	fo_has wide rejoin ".generation == 1 and .survivors == 6 and .replacement == [\"$(cluster_node 5)\"]" &&
	test $(jq -c "select(.event == \"rank_start\" and .generation == 1 and .host == \"$(cluster_node 5)\")" $ev | wc -l) -eq 2 &&
	test $(jq -c "select(.event == \"attempt_start\")" $ev | wc -l) -eq 1 &&
	logs=runs/wide/latest/attempt-1 &&
	grep -q "rank 4: joined at step" $logs/rank-4.log &&
	grep -q "rank 5: joined at step" $logs/rank-5.log &&
	for r in 0 1 2 3 6 7; do
		grep -q "rank $r: rejoined at step" $logs/rank-$r.log || return 1
	done &&
	# The group of generation 1 formed on every rank, over herd'"'"'s store.
	test $(cat $logs/rank-*.log | grep -c "gen 1: process group formed") -eq 8 &&
	grep -q "^step 150/150" $logs/rank-0.log &&
	test $(cat $logs/rank-*.log | grep -c " params ") -eq 8 &&
	test $(cat $logs/rank-*.log | sed -n "s/.*rank [0-9]* params //p" | sort -u | wc -l) -eq 1 &&
	jq -r "select(.event == \"rejoin\") | \"rejoin ms \\(.ms)\"" $ev &&
	fo_no_train_left &&
	cluster_start_node 3
'

test_done
