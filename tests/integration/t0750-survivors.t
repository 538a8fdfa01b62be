#!/bin/sh

test_description='survivors keep training (restart.survivors: keep): a node of the PyTorch DDP example is killed mid-step; the other ranks keep their processes and their step count, the failed ranks start on the spare in generation 1 and get the state from a survivor, every rank ends with identical parameters; a rank that hangs in the rejoin falls back to the restart at health.rejoin_timeout; restart.survivors: restart and a script without the protocol restart as before; another user cannot reach HERD_CONTROL'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require
require_cmd setpriv timeout

# sv_job NAME SURVIVORS PYTHONPATH [SPARES]: train.py for SV_STEPS (60)
# steps on nodes 1-3, spare node 4, checkpoints every 10 steps.
sv_job() {
	mkdir -p "ckpt-$1" &&
	{
		echo "name: $1"
		printf 'nodes: {hosts: "%s", slots: 1' "${HERD_CLUSTER_PREFIX}[1-3]"
		[ "${4-x}" = "" ] || printf ', spares: "%s"' "$(cluster_node 4)"
		echo "}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 2s, rejoin_timeout: ${SV_REJOIN:-60s}}"
		echo "restart: {max: 2, backoff: 500ms, survivors: $2}"
		echo "checkpoint: {dir: \"$PWD/ckpt-$1\", pattern: \"step_*\", complete_marker: COMPLETE}"
		echo "launch:"
		printf '  command: %s\n' "$(yaml_cmd /usr/bin/python3 "$FO_TRAIN" --steps "${SV_STEPS:-60}" \
			--step-sleep 0.1 --ckpt "$PWD/ckpt-$1" --ckpt-every 10)"
		echo "  workdir: \"$PWD\""
		echo "  warm: ${SV_WARM:-auto}"
		if [ -n "$3" ]; then
			echo "  env: {OMP_NUM_THREADS: \"1\", PYTHONPATH: \"$3\"}"
		else
			echo '  env: {OMP_NUM_THREADS: "1"}'
		fi
	} >"$1.yaml"
}

# The parameters' checksums every rank printed at the end: one line.
sv_sums() {
	cat runs/$1/latest/attempt-$2/rank-*.log | sed -n "s/.*rank [0-9]* params //p" | sort -u
}

test_expect_success 'cluster of 4 nodes' '
	own_binaries &&
	cluster_up 4
'

test_expect_success 'node 2 killed mid-step: survivors keep their processes and steps, the replacement on node 4 joins, every rank ends with the same parameters' '
	# 150 steps: with 60, the job ended within a few seconds of the
	# rejoin on a loaded machine, before the survivors were counted
	# again (a full make check: none left to count).
	SV_STEPS=150 &&
	sv_job keep keep "" &&
	SV_STEPS= &&
	run_bg keep.yaml out.keep err.keep &&
	fo_wait_step keep 1 15 &&
	before="$(fo_train_pids 1 3 | sort)" &&
	echo "survivors before:" $before &&
	test $(echo "$before" | wc -w) -eq 2 &&
	test_when_finished "wait_exit \$HERD_PID 180; cluster_node_back 2" &&
	cluster_kill_node 2 &&
	fo_wait_event keep rejoin ".fell_back == false" 60 &&
	fo_same_pids "$before" 1 3 &&
	wait_exit $HERD_PID 120 &&
	wait $HERD_PID &&
	fo_has keep node_failed ".host == \"$(cluster_node 2)\"" &&
	fo_has keep rejoin ".generation == 1 and .survivors == 2 and .replacement == [\"$(cluster_node 4)\"] and (.ms | type) == \"number\"" &&
	fo_has keep rank_start ".rank == 1 and .host == \"$(cluster_node 4)\" and .attempt == 1 and .generation == 1" &&
	test $(jq -c "select(.event == \"attempt_start\")" runs/keep/latest/events.jsonl | wc -l) -eq 1 &&
	grep -q "rank 1: joined at step" runs/keep/latest/attempt-1/rank-1.log &&
	grep -q "rank 0: rejoined at step" runs/keep/latest/attempt-1/rank-0.log &&
	grep -q "^step 150/150" runs/keep/latest/attempt-1/rank-0.log &&
	! grep -q "resumed from" runs/keep/latest/attempt-1/rank-0.log &&
	test $(cat runs/keep/latest/attempt-1/rank-*.log | grep -c " params ") -eq 3 &&
	test $(sv_sums keep 1 | wc -l) -eq 1 &&
	jq -r "select(.event == \"rejoin\") | \"rejoin ms \\(.ms)\"" runs/keep/latest/events.jsonl &&
	fo_no_train_left
'

test_expect_success 'another user cannot connect to a rank'"'"'s HERD_CONTROL (nor so to the store); the rank'"'"'s own user sending what the channel does not carry is answered or hung up on, and the job goes on; the socket is gone at the end' '
	# Cold: a warm rank'"'"'s /proc/PID/environ is its interpreter'"'"'s.
	SV_WARM=off sv_job hostile keep "" &&
	run_bg hostile.yaml out.hostile err.hostile &&
	fo_wait_step hostile 1 5 &&
	pid=$(fo_train_pids 1 | head -n1) &&
	path=$(tr "\0" "\n" <"/proc/$pid/environ" | sed -n "s/^HERD_CONTROL=//p") &&
	test -S "$path" &&
	cat >probe.py <<-\EOF &&
	import json, socket, sys
	s = socket.socket(socket.AF_UNIX)
	s.connect(sys.argv[1])
	f = s.makefile("rwb")
	# a store request for a generation herd has no table for: an error
	f.write(b"{\"op\":\"store\",\"id\":7,\"gen\":9,\"cmd\":\"get\",\"key\":\"k\"}\n")
	f.flush()
	r = json.loads(f.readline())
	assert r["id"] == 7 and "error" in r, r
	# an op the channel does not carry: the agent hangs up
	f.write(b"{\"op\":\"evil\"}\n")
	f.flush()
	assert f.readline() == b""
	print("probe ok")
	EOF
	/usr/bin/python3 probe.py "$path" &&
	! timeout 20 setpriv --reuid=nobody --regid=nogroup --clear-groups \
		/usr/bin/python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])" "$path" 2>err.nobody &&
	grep -q "Permission denied" err.nobody &&
	wait_exit $HERD_PID 120 &&
	wait $HERD_PID &&
	! test -e "$path" &&
	fo_no_train_left
'

test_expect_success 'the herd init project'"'"'s train.py (plain DDP): node 2 killed mid-step, the survivors keep training, one attempt' '
	mkdir -p proj/ckpt &&
	cp "$HERD_ROOT/templates/init/common/train.py" "$HERD_ROOT/templates/init/common/tokenize_corpus.py" proj/ &&
	(cd proj && RANK=0 WORLD_SIZE=1 /usr/bin/python3 tokenize_corpus.py \
		--corpus "/usr/lib/python3.11/[a-c]*.py" --out "$PWD/data" \
		--vocab-size 512 --max-sentences 20000 >tok.out 2>&1) &&
	{
		echo "name: tpl"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-3]\", slots: 1, spares: \"$(cluster_node 4)\"}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 2s}"
		echo "restart: {max: 2, backoff: 500ms}"
		echo "checkpoint: {dir: \"$PWD/proj/ckpt\", pattern: \"step_*\", complete_marker: COMPLETE}"
		echo "launch:"
		printf "  command: %s\n" "$(yaml_cmd /usr/bin/python3 train.py --data "$PWD/proj/data" \
			--steps 100 --ckpt-dir "$PWD/proj/ckpt" --ckpt-every 25 --model-size tiny \
			--batch 4 --seq-len 64 --lr 3e-3 --seed 1 --log-every 10 --parallel ddp \
			--step-sleep 0.05)"
		echo "  workdir: \"$PWD/proj\""
		echo "  env: {OMP_NUM_THREADS: \"1\"}"
	} >tpl.yaml &&
	run_bg tpl.yaml out.tpl err.tpl &&
	fo_wait_step tpl 1 30 120 &&
	before="$(fo_train_pids 1 3 | sort)" &&
	test_when_finished "wait_exit \$HERD_PID 180; cluster_node_back 2" &&
	cluster_kill_node 2 &&
	fo_wait_event tpl rejoin ".fell_back == false" 60 &&
	test "$before" = "$(fo_train_pids 1 3 | sort)" &&
	wait_exit $HERD_PID 180 &&
	wait $HERD_PID &&
	test $(jq -c "select(.event == \"attempt_start\")" runs/tpl/latest/events.jsonl | wc -l) -eq 1 &&
	grep -q "rank 1: joined at step" runs/tpl/latest/attempt-1/rank-1.log &&
	grep -q "rank 0: rejoined at step" runs/tpl/latest/attempt-1/rank-0.log &&
	grep -q "^rank 0: done at step 100" runs/tpl/latest/attempt-1/rank-0.log &&
	jq -r "select(.event == \"rejoin\") | \"rejoin ms \\(.ms)\"" runs/tpl/latest/events.jsonl &&
	fo_no_train_left
'

# DDP's constructor broadcasts rank 0's model, and train.py's survivors
# rebuild DDP (Parallel.rewrap) before herd.elastic sends the state: when
# rank 0's node was the one lost, that was the replacement's new model,
# and every survivor trained on from it (its loss back where training
# began) while keeping the optimizer and the step.
test_expect_success 'the herd init project'"'"'s train.py: the node of rank 0 killed: the survivors keep their model (the replacement rank 0 goes on at the loss they had reached, not at a new model'"'"'s)' '
	{
		echo "name: tpl0"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-3]\", slots: 1, spares: \"$(cluster_node 4)\"}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 2s}"
		echo "restart: {max: 2, backoff: 500ms}"
		echo "launch:"
		printf "  command: %s\n" "$(yaml_cmd /usr/bin/python3 train.py --data "$PWD/proj/data" \
			--steps 100 --ckpt-dir "$PWD/proj/ckpt0" --ckpt-every 1000 --model-size tiny \
			--batch 4 --seq-len 64 --lr 3e-3 --seed 1 --log-every 10 --parallel ddp \
			--step-sleep 0.05)"
		echo "  workdir: \"$PWD/proj\""
		echo "  env: {OMP_NUM_THREADS: \"1\", HERD_ELASTIC_TRACE: \"1\"}"
	} >tpl0.yaml &&
	run_bg tpl0.yaml out.tpl0 err.tpl0 &&
	fo_wait_step tpl0 1 30 120 &&
	test_when_finished "wait_exit \$HERD_PID 180; cluster_node_back 1" &&
	cluster_kill_node 1 &&
	fo_wait_event tpl0 rejoin ".fell_back == false" 60 &&
	wait_exit $HERD_PID 180 &&
	wait $HERD_PID &&
	log=runs/tpl0/latest/attempt-1/rank-0.log &&
	grep "joined at step\|^step " $log &&
	first=$(sed -n "s|^step 1/100 loss \([0-9.]*\) .*|\1|p" $log) &&
	after=$(awk "/rank 0: joined at step/ { j = 1; next }
		j && /^step / { print \$4; exit }" $log) &&
	echo "loss at step 1: $first; first after the join: $after" &&
	test -n "$first" && test -n "$after" &&
	awk -v a="$after" -v f="$first" "BEGIN { exit !(a < f - 1) }" &&
	grep -q "^rank 0: done at step 100" $log &&
	fo_no_train_left
'

test_expect_success 'a survivor that hangs in the rejoin: the job falls back to the restart at health.rejoin_timeout' '
	SV_REJOIN=3s sv_job hang keep "" &&
	run_bg hang.yaml out.hang err.hang &&
	fo_wait_step hang 1 15 &&
	hung=$(fo_train_pids 3) &&
	kill -STOP $hung &&
	test_when_finished "wait_exit \$HERD_PID 180; cluster_node_back 2" &&
	cluster_kill_node 2 &&
	fo_wait_event hang rejoin ".fell_back == true" 30 &&
	fo_has hang rejoin ".reason | test(\"did not rejoin within health.rejoin_timeout\")" &&
	wait_exit $HERD_PID 180 &&
	wait $HERD_PID &&
	fo_has hang attempt_start ".attempt == 2" &&
	t_fail=$(jq -s "map(select(.event == \"node_failed\"))[0].t" runs/hang/latest/events.jsonl) &&
	t_back=$(jq -s "map(select(.event == \"rejoin\"))[0].t" runs/hang/latest/events.jsonl) &&
	test $((t_back - t_fail)) -ge 2900 &&
	grep -q "^step 60/60" runs/hang/latest/attempt-2/rank-0.log &&
	fo_no_train_left
'

test_expect_success 'restart.survivors: restart: the classic restart, no rejoin' '
	sv_job forced restart "" &&
	run_bg forced.yaml out.forced err.forced &&
	fo_wait_step forced 1 15 &&
	test_when_finished "wait_exit \$HERD_PID 180; cluster_node_back 2" &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 180 &&
	wait $HERD_PID &&
	fo_has forced attempt_start ".attempt == 2" &&
	! fo_has forced rejoin &&
	grep -q "resumed from" runs/forced/latest/attempt-2/rank-0.log &&
	fo_no_train_left
'

test_expect_success 'a script without the protocol (herd.elastic not importable): the classic restart' '
	# herd puts its package on every rank'"'"'s path: this copy of the
	# script does without herd.elastic.
	sed "s/^    from herd import elastic.*/    raise ImportError/" "$FO_TRAIN" >plain-train.py &&
	! grep -q "from herd import elastic" plain-train.py &&
	sv_train=$FO_TRAIN && FO_TRAIN=$PWD/plain-train.py &&
	sv_job plain keep "" &&
	FO_TRAIN=$sv_train &&
	run_bg plain.yaml out.plain err.plain &&
	fo_wait_step plain 1 15 &&
	test_when_finished "wait_exit \$HERD_PID 180; cluster_node_back 2" &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 180 &&
	wait $HERD_PID &&
	fo_has plain attempt_start ".attempt == 2" &&
	! fo_has plain rejoin &&
	fo_no_train_left
'

test_expect_success 'no spare: the survivors cannot keep training, the job falls back (and ends: nodes.min is every node)' '
	sv_job nospare keep "" "" &&
	run_bg nospare.yaml out.nospare err.nospare &&
	fo_wait_step nospare 1 15 &&
	test_when_finished "wait_exit \$HERD_PID 180; cluster_node_back 2" &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 120 &&
	fo_has nospare rejoin ".fell_back == true and (.reason | test(\"no spare\"))" &&
	fo_no_train_left
'

test_done
