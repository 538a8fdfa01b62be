#!/bin/sh

test_description='stragglers (issue 14): on a cluster of sshd nodes whose ranks each send 256 KiB a step to a TCP sink, the node whose link is rate-limited (tc tbf 8mbit in its namespace) is named a straggler (event and terminal line, no other node), from step_time, from the rate of step and from progress-file touches alone; with health.straggler: evict and a spare, it is replaced by the spare at the next checkpoint and the job completes'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip tc jq ssh python3
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"

D=$HERD_TEST_DIR/data/straggler

# sink_start: the TCP sink on the bridge (root namespace); SINK_PID,
# SINK_PORT.  sink_stop ends it by its pid.
sink_start() {
	rm -f sink.port &&
	/usr/bin/python3 "$D/sink.py" "$HERD_CLUSTER_GATEWAY" "$PWD/sink.port" &
	SINK_PID=$!
	wait_file sink.port &&
	SINK_PORT=$(cat sink.port)
}
sink_stop() {
	[ -z "${SINK_PID:-}" ] || { kill "$SINK_PID" 2>/dev/null; wait "$SINK_PID" 2>/dev/null; }
	SINK_PID=
	return 0
}

# limit I / unlimit I: node I's link at 8 Mbit/s, or back to normal.
limit() {
	ip netns exec "herd-$HERD_CLUSTER_ID-n$1" \
		tc qdisc add dev eth0 root tbf rate 8mbit burst 32kbit latency 400ms
}
unlimit() {
	ip netns exec "herd-$HERD_CLUSTER_ID-n$1" tc qdisc del dev eth0 root 2>/dev/null
	return 0
}

# job NAME MODE HOSTS [SPARES] [EXTRA-HEALTH] [SECONDS] [CKPT]: NAME.yaml
job() {
	_j_ck=
	[ -z "${7:-}" ] || _j_ck="$PWD/ckpt-$1"
	{
		echo "name: $1"
		printf 'nodes: {hosts: "%s", slots: 1' "$3"
		[ -z "${4:-}" ] || printf ', spares: "%s"' "$4"
		echo "}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 5s, grace: 2s, straggler_window: 3s${5:-}}"
		echo "restart: {max: 1, backoff: 200ms}"
		echo "metrics: {interval: 250ms}"
		echo "log: {dir: \"$PWD/runs/{{name}}\"}"
		[ -z "$_j_ck" ] || echo "checkpoint: {dir: \"$_j_ck\", pattern: \"step_*\", complete_marker: COMPLETE}"
		echo "launch:"
		printf '  command: %s\n' "$(yaml_cmd /usr/bin/python3 "$D/step.py" "$2" "${6:-12}" "$HERD_CLUSTER_GATEWAY" "$SINK_PORT" ${_j_ck:+"$_j_ck"})"
		echo "  workdir: \"$PWD\""
	} >"$1.yaml" &&
	if [ -n "$_j_ck" ]; then mkdir -p "$_j_ck"; fi
}

ev() { echo "runs/$1/latest/events.jsonl"; }
has() {
	jq -e -n --arg e "$2" "[inputs | select(.event == \$e) | select(${3:-true})] | length > 0" "$(ev "$1")" >/dev/null
}
count() {
	jq -n --arg e "$2" "[inputs | select(.event == \$e)] | length" "$(ev "$1")"
}

test_expect_success 'cluster of 4 nodes, the sink' '
	own_binaries &&
	cluster_up 4 &&
	N3=$(cluster_node 3) &&
	sink_start &&
	# The sink goes with the cluster, whatever the outcome.
	trap "_rc=\$?; sink_stop; (exit \$_rc); _herd_cluster_exit; die" EXIT
'

# One straggler check: NAME's only straggler event names node 3 with
# SOURCE, and the terminal line in ERR says so.
check_named() {
	has "$1" straggler ".host == \"$N3\" and .source == \"$2\" and .action == \"${3:-warn}\" and .attempt == 1 and .ranks == [2] and .ratio >= 1.3 and .node_ms > .median_ms and .window_ms == 3000" &&
	test "$(count "$1" straggler)" = 1 &&
	grep -E "^herd: node $N3 is a straggler: its ranks take [0-9.]+x the median step time \([0-9]+ ms vs [0-9]+ ms\) for 3s" "$4" &&
	test "$(grep -c "is a straggler" "$4")" = 1
}

# check_node3 NAME SOURCE ACTION ERRFILE: node 3 named once, as
# check_named says; another node may be named too.  The step rate and
# progress touches are read by the agents as they sample: with both cores
# busy (a CPU hog beside the suite) a starved node's reports lag for 3 s
# and it is named as well, which is what it looked like from herd.
check_node3() {
	has "$1" straggler ".host == \"$N3\" and .source == \"$2\" and .action == \"${3:-warn}\" and .attempt == 1 and .ranks == [2] and .ratio >= 1.3 and .node_ms > .median_ms and .window_ms == 3000" &&
	test "$(jq -n "[inputs | select(.event == \"straggler\" and .host == \"$N3\")] | length" "$(ev "$1")")" = 1 &&
	grep -E "^herd: node $N3 is a straggler: its ranks take [0-9.]+x the median step time \([0-9]+ ms vs [0-9]+ ms\) for 3s" "$4"
}

test_expect_success 'step_time: the rate-limited node 3 is the straggler, nobody else; the job completes' '
	limit 3 &&
	test_when_finished "unlimit 3" &&
	job full full "${HERD_CLUSTER_PREFIX}[1-3]" &&
	herd run full.yaml >out.full 2>err.full &&
	cat err.full &&
	check_named full step_time warn err.full &&
	jq -c "select(.event == \"straggler\")" "$(ev full)" &&
	! grep "will be replaced" err.full
'

test_expect_success 'the rate of step (no step_time): node 3 named' '
	limit 3 &&
	test_when_finished "unlimit 3" &&
	job steps step "${HERD_CLUSTER_PREFIX}[1-3]" &&
	herd run steps.yaml >out.steps 2>err.steps &&
	cat err.steps &&
	check_node3 steps step warn err.steps
'

test_expect_success 'progress-file touches only (nothing in HERD_METRICS): node 3 named' '
	limit 3 &&
	test_when_finished "unlimit 3" &&
	job touch progress "${HERD_CLUSTER_PREFIX}[1-3]" &&
	herd run touch.yaml >out.touch 2>err.touch &&
	cat err.touch &&
	check_node3 touch progress warn err.touch
'

# Equal nodes on a busy machine (the suite beside other work on 2 cores)
# are not equal for seconds at a time: one whose processes wait for a cpu
# is 1.3x the median (the default ratio) often enough for a 3 s window.
# Even 2x: in a full make check here (6 tests at once on 2 cores) one
# node ran 2.2x the median for 3 s.  The ratio here is 4: what this
# checks is that equal nodes are not named when a margin that no busy
# machine crossed is asked for.
test_expect_success 'no link limited: no straggler' '
	job none full "${HERD_CLUSTER_PREFIX}[1-3]" "" ", straggler_ratio: 4" 8 &&
	herd run none.yaml >out.none 2>err.none &&
	cat err.none &&
	test "$(count none straggler)" = 0 &&
	! grep "is a straggler" err.none
'

test_expect_success 'evict with a spare: node 3 is replaced by node 4 at the next checkpoint; the job completes' '
	limit 3 &&
	test_when_finished "unlimit 3" &&
	job ev full "${HERD_CLUSTER_PREFIX}[1-3]" "$(cluster_node 4)" ", straggler: evict" 10 ckpt &&
	herd run ev.yaml >out.ev 2>err.ev &&
	cat err.ev &&
	check_node3 ev step_time evict err.ev &&
	grep "is a straggler: .*; it will be replaced at the next checkpoint$" err.ev &&
	grep "evicting straggler node $N3" err.ev &&
	has ev node_evicted ".host == \"$N3\" and .reason == \"straggler\" and .attempt == 1" &&
	has ev attempt_end ".attempt == 1 and .reason == \"node $N3 evicted as a straggler\"" &&
	has ev spare_used ".host == \"$(cluster_node 4)\" and .attempt == 2" &&
	has ev rank_start ".attempt == 2 and .host == \"$(cluster_node 4)\"" &&
	! has ev rank_start ".attempt == 2 and .host == \"$N3\"" &&
	has ev job_end ".status == 0"
'

test_expect_success 'evict without a spare, nodes.min = all: warned only, the job is not killed' '
	limit 3 &&
	test_when_finished "unlimit 3" &&
	job nospare full "${HERD_CLUSTER_PREFIX}[1-3]" "" ", straggler: evict" 10 ckpt &&
	herd run nospare.yaml >out.nospare 2>err.nospare &&
	cat err.nospare &&
	check_named nospare step_time warn err.nospare &&
	grep "is a straggler: .*; herd cannot replace it (no spare, and nodes.min 3 needs all 3 nodes), so it stays: warning only$" err.nospare &&
	! has nospare node_evicted &&
	has nospare job_end ".status == 0"
'

test_expect_success 'the sink stops' '
	sink_stop
'

test_done
