#!/bin/sh

test_description='nodes.transport: local: a stand-in for a cluster on one machine. Every named node gets its own local herd-agent that reports the node'"'"'s name: events name the nodes, a killed node is replaced by a named spare, job_end carries herd'"'"'s CPU time and peak RSS, and 200 nodes stay cheap'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq pgrep python3

# job NAME HOSTS SLOTS [SPARES]: NAME.yaml on local named nodes; the
# launch: section (indented by two) comes from stdin.  health.timeout is
# generous: heartbeats of dozens of agents on a loaded 2-core machine
# under ASan must not evict anyone; the failures below are seen by the
# broken connection, at once.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"$2\", slots: $3, transport: local${4:+, spares: \"$4\"}}"
		echo "health: {heartbeat: 1s, timeout: 30s, grace: 1s}"
		echo "restart: {max: 1, backoff: 0s}"
		echo "launch:"
		sed 's/^/  /'
	} >"$1.yaml"
}

test_expect_success 'validate: nodes.transport prints, and is checked with its position' '
	own_binaries &&
	job twenty "sim[1-20]" 2 <<-EOF &&
	command: "true"
	EOF
	herd validate twenty.yaml --print >print &&
	grep -x "  transport: local" print &&
	herd validate print &&
	cat >slurm.yaml <<-EOF &&
	nodes:
	  slurm: true
	  transport: local
	launch: {command: "true"}
	EOF
	test_expect_code 2 herd validate slurm.yaml 2>err &&
	grep "^slurm.yaml:3:14: nodes.transport: local starts every node.s agent on this machine, but nodes.slurm" err &&
	printf "nodes: {transport: remote}\nlaunch: {command: \"true\"}\n" >bad.yaml &&
	test_expect_code 2 herd validate bad.yaml 2>err &&
	grep "^bad.yaml:1:20: unknown value .remote. for nodes.transport (expected one of: auto, local)" err
'

test_expect_success 'the plan names the nodes (--dry-run)' '
	herd run --dry-run twenty.yaml >plan &&
	grep "^job twenty: 20 nodes, 40 ranks, transport local," plan &&
	grep -x "node 0: sim1 (2 ranks)" plan &&
	grep -x "node 19: sim20 (2 ranks)" plan
'

test_expect_success '20 named nodes x 2 ranks: the job completes, each agent reports its node name' '
	job named "sim[1-20]" 2 <<-EOF &&
	command: "echo \$RANK \$NODE_RANK"
	EOF
	herd run named.yaml >out 2>err &&
	test $(wc -l <out) = 40 &&
	ev=runs/named/latest/events.jsonl &&
	ev_all $ev job_start ".transport == \"local\" and .nodes == 20" &&
	jq -r "select(.event == \"node_up\") | .host" $ev | sort >up &&
	for i in $(seq 1 20); do echo sim$i; done | sort >expect &&
	test_cmp expect up &&
	ev_all $ev node_up ".hostname == .host" &&
	# rank r runs on node r/2: sim(r/2 + 1)
	ev_all $ev rank_start ".host == \"sim\(.rank / 2 | floor + 1)\" and .node_rank == (.rank / 2 | floor)" &&
	test $(jq -n "[inputs | select(.event == \"rank_exit\" and .status == 0)] | length" $ev) = 40 &&
	ev_all $ev job_end ".status == 0" &&
	! grep . err | grep -v "^herd: logs in"
'

# Every warm argument at once on named local nodes (an interpreter named
# by its path, nodes.slots, restart.max 0 and so --warm-once): the
# agent's argv holds all of them and its closing NULL.
test_expect_success 'named local nodes with every warm argument (python by its path, slots, restart.max 0): the ranks start warm' '
	cat >hi.py <<-\EOF &&
	import os
	print("rank", os.environ["RANK"], "hi", flush=True)
	EOF
	job py "py[1-2]" 1 <<-EOF &&
	preload: [json]
	workdir: "$PWD"
	command: /usr/bin/python3 hi.py
	EOF
	sed "s/restart: {max: 1, backoff: 0s}/restart: {max: 0}/" py.yaml >py0.yaml &&
	sed -i "s/^name: py\$/name: py0/" py0.yaml &&
	herd run py0.yaml >out 2>err &&
	grep -x "\[0\] rank 0 hi" out &&
	grep -x "\[1\] rank 1 hi" out &&
	ev_all runs/py0/latest/events.jsonl rank_start ".warm == true"
'

test_expect_success 'job_end carries herd'"'"'s own CPU time (ms) and peak RSS (KiB)' '
	ev_all runs/named/latest/events.jsonl job_end \
		"(.cpu_ms | type == \"number\") and .cpu_ms >= 0 and
		 (.children_cpu_ms | type == \"number\") and .children_cpu_ms >= 0 and
		 .peak_rss_kib > 1000 and .peak_rss_kib < 1048576"
'

# Attempt 1 waits until the node is killed; attempt 2 ends at once.
test_expect_success 'a killed node (its agent) is failed and evicted, and a named spare takes its place' '
	nap=nap-t0555-$$ &&
	cp "$(command -v sleep)" $nap &&
	cat >rank.sh <<-EOF &&
	#!/bin/sh
	[ "\$HERD_ATTEMPT" = 1 ] && exec "$PWD/$nap" 300
	exit 0
	EOF
	chmod +x rank.sh &&
	job spare "sim[1-20]" 2 "sim[21-22]" <<-EOF &&
	command: $(yaml_cmd "$PWD/rank.sh")
	EOF
	run_bg spare.yaml out.spare err.spare &&
	ev=runs/spare/latest/events.jsonl &&
	i=0 &&
	while [ "$(jq -n "[inputs | select(.event == \"rank_start\")] | length" $ev 2>/dev/null)" != 40 ]; do
		i=$((i + 1)) && test $i -lt 600 || return 1
		sleep 0.1   # poll interval of a bounded wait (60 s)
	done &&
	agent=$(pgrep -P $HERD_PID -f -- "--node sim7\$") &&
	test -n "$agent" &&
	kill -9 $agent &&
	wait_exit $HERD_PID 60 &&
	test $WAIT_RC = 0 &&
	ev_all $ev node_failed ".host == \"sim7\" and .attempt == 1" &&
	ev_all $ev node_evicted ".host == \"sim7\"" &&
	ev_all $ev spare_used ".host == \"sim21\" and .attempt == 2" &&
	jq -e -n "[inputs | select(.event == \"attempt_start\" and .attempt == 2)] | .[0].nodes == 20 and .[0].world_size == 40" $ev &&
	jq -e -n "[inputs | select(.event == \"rank_start\" and .attempt == 2 and .host == \"sim21\")] | length == 2" $ev &&
	! jq -e -n "[inputs | select(.event == \"rank_start\" and .attempt == 2 and .host == \"sim7\")] | length > 0" $ev &&
	ev_all $ev job_end ".status == 0 and .attempts == 2" &&
	# No rank of attempt 1 is left, the killed node'"'"'s included.
	i=0 &&
	while pgrep -f "$nap 300" >/dev/null; do
		i=$((i + 1)) && test $i -lt 100 || return 1
		sleep 0.1   # poll interval of a bounded wait (10 s)
	done
'

test_expect_success '200 nodes x 1 rank of true: completes, and herd'"'"'s own CPU stays bounded' '
	job many "sim[1-200]" 1 <<-EOF &&
	command: "true"
	EOF
	herd run many.yaml >out 2>err &&
	ev=runs/many/latest/events.jsonl &&
	test $(jq -n "[inputs | select(.event == \"node_up\")] | length" $ev) = 200 &&
	test $(jq -n "[inputs | select(.event == \"rank_exit\" and .status == 0)] | length" $ev) = 200 &&
	jq -c "select(.event == \"job_end\")" $ev &&
	# About 0.3 s in a plain build; ASan and a loaded machine get 50x.
	ev_all $ev job_end ".status == 0 and .cpu_ms < 15000"
'

test_expect_success 'bench/scale runs on simulated nodes (short idle window, no sshd part)' '
	SCALE_NODES="5 10" SCALE_RUNS=1 SCALE_IDLE=2 SCALE_IDLE_NODES=10 \
		SCALE_SSH_NODES=0 "$HERD_ROOT/bench/scale" >scale.out 2>scale.err &&
	cat scale.out &&
	grep -E "^\| +5 \| +[0-9]+ \| +[0-9]+ \| +[0-9]+ \| .* \| 1/1 \|\$" scale.out &&
	grep -E "^\| +10 \| +[0-9]+ \| +[0-9]+ \| +[0-9]+ \| .* \| +2x \| .* \| 1/1 \|\$" scale.out &&
	# the idle table: 10 nodes, a 2 s window at each heartbeat, no node failed
	grep -E "^\| +500ms \| +10 \| +2\.[0-9] \| +[0-9]+ \| +[0-9.]+ \| +[0-9.]+ \| +(-|1\.00x) \| +0 \|\$" scale.out &&
	grep -E "^\| +1s \| +10 \| +2\.[0-9] \| +[0-9]+ \| +[0-9.]+ \| +[0-9.]+ \| +(-|[0-9.]+x) \| +0 \|\$" scale.out &&
	grep "^  idle 10 nodes, heartbeat 500ms: [0-9.]* % of one core <= 5 %: " scale.out
'


# Issue 22: on a loaded machine a sanitized herd went unscheduled for
# longer than the agents' silence limit (health.timeout 3 s: 4.4 s) and
# its local agents stopped a healthy job (t0906, two local nodes).  herd
# on this machine is never cut off, and its exit is EOF to its agents at
# once: a silent herd is a stalled one.  SIGSTOP stands in for the load.
test_expect_success 'herd stopped 5 s (past the agents'"'"' 4.4 s limit, default health): the ranks go on, the job ends 0' '
	cat >stall.yaml <<-EOF &&
	name: stall
	nodes: {hosts: "st[1-2]", slots: 1, transport: local}
	restart: {max: 0}
	launch:
	  workdir: "$PWD"
	  command: i=0; while [ \$i -lt 20 ]; do i=\$((i + 1)); echo tick \$i; sleep 0.5; done
	EOF
	herd run stall.yaml >out.stall 2>err.stall &
	pid=$! &&
	i=0 &&
	until [ "$(grep -c "^\[[01]\] tick 2$" out.stall)" = 2 ]; do
		i=$((i + 1)) && test $i -lt 600 || { cat err.stall; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done &&
	kill -STOP $pid &&
	sleep 5 &&   # the stall under test, not a synchronisation
	kill -CONT $pid &&
	wait_exit $pid 60 &&
	cat err.stall &&
	test "$WAIT_RC" = 0 &&
	grep "herd runs on this machine and its socket is open" err.stall &&
	test "$(grep -c "^\[[01]\] tick 20$" out.stall)" = 2
'

test_done
