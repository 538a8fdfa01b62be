#!/bin/sh

test_description='a hung rank, with evidence (issue 14): before the attempt fails, every rank'"'"'s stack is collected (Python: SIGABRT and faulthandler'"'"'s traceback; native: gdb) and the culprit is named: a 4-rank PyTorch job (gloo on CPU) whose rank 2 is stuck in a function of its own while the others wait in all_reduce, and a native program stuck in a C function'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require
require_cmd cc gdb
HANG_DATA=$HERD_TEST_DIR/data/hang

# pids of processes named $1 (comm) in the nodes' namespaces.
node_pids() {
	for _np_i in 1 2 3 4; do
		for _np_p in $(ip netns pids "$(fo_ns $_np_i)" 2>/dev/null); do
			[ "$(cat "/proc/$_np_p/comm" 2>/dev/null)" = "$1" ] &&
				echo "$_np_p"
		done
	done
	return 0
}

# none_left NAME: no process named NAME is left on any node (bounded).
none_left() {
	_nl_i=0
	while [ -n "$(node_pids "$1")" ]; do
		_nl_i=$((_nl_i + 1))
		[ $_nl_i -lt 200 ] || {
			echo "$1 still running:" >&2
			ps -o pid=,stat=,args= -p "$(node_pids "$1" | tr '\n' ',')0" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

test_expect_success 'cluster of 4 nodes' '
	own_binaries &&
	cluster_up 4
'

test_expect_success 'rank 2 stuck in stuck_in_data_loader at step 5, ranks 0, 1, 3 in all_reduce: rank 2 is the culprit, its traceback is in its log, the job ends with no process left' '
	cat >torch.yaml <<-EOF &&
	name: torch
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {heartbeat: 500ms, timeout: 3s, grace: 2s, progress_timeout: 4s}
	restart: {max: 0}
	launch:
	  command: $(yaml_cmd /usr/bin/python3 "$HANG_DATA/hang-train.py" --hang-rank 2 --hang-step 5)
	  workdir: "$PWD"
	  env: {OMP_NUM_THREADS: "1"}
	EOF
	run_bg torch.yaml out err &&
	wait_exit $HERD_PID 180 &&
	test "$WAIT_RC" = 1 &&
	ev=runs/torch/latest/events.jsonl &&
	jq -c "select(.event == \"rank_hung\")" $ev &&
	fo_has torch rank_hung ".rank == 2 and .culprit == true and .method == \"python\" and .host == \"$(cluster_node 3)\" and (.frame | test(\"^stuck_in_data_loader \\\\(hang-train.py:[0-9]+\\\\)\$\"))" &&
	test $(jq -n "[inputs | select(.event == \"rank_hung\" and .culprit)] | length" $ev) = 1 &&
	fo_has torch attempt_end ".attempt == 1 and (.reason | startswith(\"rank 2 on $(cluster_node 3) hung in stuck_in_data_loader (hang-train.py:\"))" &&
	log2=runs/torch/latest/attempt-1/rank-2.log &&
	grep "^herd: stacks of rank 2 (pid [0-9]*, python): SIGABRT" $log2 &&
	grep "^Fatal Python error: Aborted" $log2 &&
	grep -E "^  File \".*/hang-train.py\", line [0-9]+ in stuck_in_data_loader\$" $log2 &&
	# The others wait in all_reduce; with both cores busy one may be
	# caught by the SIGABRT in Python'"'"'s garbage collector instead
	# (no frame to name), so at least one of them is named there.
	grep -E "^herd: rank 2 on $(cluster_node 3) hung in stuck_in_data_loader \(hang-train.py:[0-9]+\); (ranks [013](,[013])+ wait|rank [013] waits) in all_reduce\$" err &&
	fo_no_train_left
'

test_expect_success 'a native rank stuck in a C function: gdb'"'"'s backtrace is in its log, the frame names the function, no process left' '
	cc -g -O0 -o stuck "$HANG_DATA/stuck.c" &&
	cat >native.yaml <<-EOF &&
	name: native
	nodes: {hosts: "${HERD_CLUSTER_PREFIX}[1-2]", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {heartbeat: 500ms, timeout: 3s, grace: 2s, progress_timeout: 3s}
	restart: {max: 0}
	launch:
	  command: $(yaml_cmd "$PWD/stuck")
	  workdir: "$PWD"
	EOF
	run_bg native.yaml out.native err.native &&
	wait_exit $HERD_PID 120 &&
	test "$WAIT_RC" = 1 &&
	ev=runs/native/latest/events.jsonl &&
	jq -c "select(.event == \"rank_hung\")" $ev &&
	fo_has native rank_hung ".culprit == true and .method == \"gdb\" and (.frame | test(\"^stuck_in_native_loop \\\\(stuck.c:[0-9]+\\\\)\$\"))" &&
	for r in 0 1; do
		log=runs/native/latest/attempt-1/rank-$r.log &&
		grep "^herd: stacks of rank $r (pid [0-9]*, gdb):\$" $log &&
		grep -E "^#[0-9]+ .*stuck_in_native_loop \(.*\) at .*stuck.c:[0-9]+\$" $log || return 1
	done &&
	grep -E "^herd: rank [01] on ($(cluster_node 1)|$(cluster_node 2)) hung in stuck_in_native_loop \(stuck.c:[0-9]+\)" err.native &&
	none_left stuck &&
	none_left gdb
'

test_expect_success 'a forged traceback whose names hold escape sequences: herd'"'"'s lines, the attempt'"'"'s reason, events.jsonl and herd status show them as ? (issue 23)' '
	cat >forge.yaml <<-EOF &&
	name: forge
	nodes: {hosts: localhost, slots: 1}
	health: {heartbeat: 500ms, timeout: 3s, grace: 2s, progress_timeout: 2s}
	restart: {max: 0}
	log: {dir: "$PWD/runs/{{name}}"}
	launch:
	  command: $(yaml_cmd /usr/bin/python3 "$HANG_DATA/forge.py")
	EOF
	run_bg forge.yaml out.forge err.forge &&
	test_when_finished "kill \$HERD_PID 2>/dev/null || :" &&
	wait_exit $HERD_PID 60 &&
	test "$WAIT_RC" = 1 &&
	esc=$(printf "\033") && bel=$(printf "\007") &&
	grep -F "herd: rank 0 on localhost hung in innocent?[1A?[2K?herd: all fine (?]0;OWNED?evil.py:7)" err.forge &&
	# herd'"'"'s own lines (the rank'"'"'s, tagged [0], are its output as it is)
	grep -v "^\[0\] " err.forge >own &&
	# (one attempt: no summary repeats the reason, issue 22 item 14)
	test "$(grep -c -F "hung in innocent?[1A" own)" = 1 &&
	! grep -q "[$esc$bel]" own &&
	ev=runs/forge/latest/events.jsonl &&
	jq -e -s "any(.[]; .event == \"rank_hung\" and .frame == \"innocent?[1A?[2K?herd: all fine (?]0;OWNED?evil.py:7)\")" $ev &&
	jq -e -s "any(.[]; .event == \"attempt_end\" and (.reason | contains(\"innocent?[1A\")))" $ev &&
	! grep -q "[$esc$bel]" $ev &&
	# text planted in the files herd status and top read
	printf "%s\n" "{\"t\": 1, \"event\": \"node_failed\", \"host\": \"evil\\u001b]0;X\\u0007\", \"reason\": \"gone\\u001b[2K\\r\\u009b\"}" >>$ev &&
	printf "%s\n" "{\"t\": 2, \"job\": {\"slowest\": \"s\\u001b[2J\"}, \"nodes\": [{\"node\": \"m\\u001b[1A\", \"state\": \"up\", \"step\": 1}]}" >>runs/forge/latest/metrics.jsonl &&
	herd status runs/forge/latest >status &&
	cat status &&
	grep -F "evil?]0;X?" status &&
	grep -F "gone?[2K???" status &&
	grep -F "slowest node: s?[2J" status &&
	! grep -q "[$esc$bel]" status &&
	herd top --once runs/forge/latest >top &&
	cat top &&
	grep -F "m?[1A" top &&
	! grep -q "[$esc$bel]" top
'

test_done
