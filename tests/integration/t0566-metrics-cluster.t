#!/bin/sh

test_description='the metrics of a 4-node job flow from the agents to herd: live step, loss and tokens/s on the terminal, in metrics.jsonl and on the Prometheus endpoint; a node whose ranks are slowed, and a node whose link is rate-limited (tc tbf in its namespace), is named the slowest on the status line, in metrics.jsonl, herd top and herd status; examples/torch-ddp on 4 nodes shows live step and loss (issue 12)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter tc ssh ssh-keygen jq python3 curl promtool

M=$HERD_TEST_DIR/data/metrics

# job NAME LISTEN: NAME.yaml, 4 nodes, 1 rank each; launch: from stdin.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-4]\", slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {grace: 2s}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$PWD/runs/{{name}}\"}"
		echo "metrics: {listen: \"127.0.0.1:$2\", interval: 250ms}"
		echo "launch:"
		echo "  workdir: $PWD"
		sed 's/^/  /'
	} >"$1.yaml"
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# pty_bg ROWS COLS RAW CMD...: CMD on a terminal in the background (its
# bytes to RAW); sets PTY_PID.
pty_bg() {
	python3 "$M/pty-run.py" "$@" >/dev/null 2>&1 &
	PTY_PID=$!
}

# slowest FILE: the node metrics.jsonl names slowest most often in its
# second half (the step-rate window has filled by then).
slowest() {
	jq -r -s '.[length / 2 | floor:] | map(.job.slowest // empty) | group_by(.) | max_by(length) | .[0] // empty' "$1"
}

test_expect_success 'cluster of 4 nodes' '
	own_binaries &&
	cluster_up 4 &&
	N3=$(cluster_node 3) && N2=$(cluster_node 2)
'

test_expect_success 'ranks slowed on one node: live values on the terminal, metrics.jsonl and Prometheus; that node is the slowest' '
	port=$(free_port) &&
	job slow $port <<-EOF &&
	command: /usr/bin/python3 $M/steps.py 8 0.05 2 0.2
	EOF
	pty_bg 12 200 raw herd run slow.yaml &&
	# scraped while the job runs: every rank reports
	i=0 &&
	until curl -s "http://127.0.0.1:$port/metrics" >scrape &&
		test "$(grep -c "^herd_node_steps_per_second{" scrape)" = 4; do
		i=$((i + 1)) && test $i -lt 200 || { echo "no 4 nodes in scrape: $(cat scrape)" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done &&
	promtool check metrics <scrape &&
	grep "^herd_train_loss " scrape &&
	grep "^herd_train_tokens_per_second " scrape &&
	grep "^herd_network_receive_bytes_total{node=\"$N3\",device=\"eth0\"} " scrape &&
	grep "^herd_rank_cpu_seconds_total{node=\"$N3\",rank=\"2\"} " scrape &&
	wait_exit $PTY_PID 30 &&
	test "$WAIT_RC" = 0 &&
	f=runs/slow/latest/metrics.jsonl &&
	test "$(slowest $f)" = "$N3" &&
	jq -e -s "map(select(.job.step and .job.loss and .job.tokens_per_s > 0)) | length > 5" $f &&
	tail -n 1 $f | jq -e ".nodes | length == 4 and all(.[]; .step > 0 and .rx_bytes > 0)" &&
	# the terminal showed the values live and named the node
	grep -a -o "attempt 1 | nodes 4 up | step [0-9]* | loss [0-9.e+-]* | tok/s [0-9.]*k\? | GPU - | net rx [^|]* | drops [0-9]* | slowest $N3" raw | tail -n 1 &&
	# and herd top (m3) reads it from metrics.jsonl
	herd top runs/slow/latest --once >top &&
	grep "^slowest: $N3 " top &&
	grep "^\*$N3 " top
'

test_expect_success 'a rate-limited link (tc tbf on one node): that node is the slowest' '
	port=$(free_port) && sink=$(free_port) &&
	cluster_exec 2 tc qdisc add dev eth0 root tbf rate 2mbit burst 16kb latency 500ms &&
	job tbf $port <<-EOF &&
	command: /usr/bin/python3 $M/steps.py 8 0.05 --send 65536 $sink
	EOF
	herd run tbf.yaml >out 2>err &&
	cluster_exec 2 tc qdisc del dev eth0 root &&
	test "$(slowest runs/tbf/latest/metrics.jsonl)" = "$N2" &&
	herd status runs/tbf/latest >status &&
	grep -x "slowest node: $N2" status
'

# Steps of 0.5 s, twice the sampling interval (issue 22 item 10: tokens/s
# was a count per interval, 0 at every sample that saw no step end).
test_expect_success 'examples/torch-ddp on 4 nodes, steps longer than the interval: live step, loss and tokens/s (never 0 nor - once known) on the terminal, on the endpoint and in metrics.jsonl' '
	port=$(free_port) &&
	cat >torch.yaml <<-EOF &&
	name: torch
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {grace: 2s}
	log: {dir: "$PWD/runs/{{name}}"}
	metrics: {listen: "127.0.0.1:$port", interval: 250ms}
	launch:
	  command: /usr/bin/python3 train.py --steps 24 --step-sleep 0.5
	  workdir: $HERD_ROOT/examples/torch-ddp
	  env: {OMP_NUM_THREADS: "1"}
	EOF
	pty_bg 12 200 rawt herd run torch.yaml &&
	i=0 &&
	until curl -s "http://127.0.0.1:$port/metrics" >scrape &&
		grep "^herd_train_loss " scrape; do
		i=$((i + 1)) && test $i -lt 600 || return 1
		sleep 0.05   # poll interval of a bounded wait
	done &&
	promtool check metrics <scrape &&
	grep "^herd_train_step [0-9]" scrape &&
	wait_exit $PTY_PID 60 &&
	test "$WAIT_RC" = 0 &&
	grep -a -o "attempt 1 | nodes 4 up | step [0-9]* | loss [0-9.e+-]* | tok/s [^|]* | GPU [^|]* | net [^|]* | drops [0-9]* | slowest [^ ]*" rawt | tail -n 1 &&
	grep -a -o "tok/s [0-9][0-9.]*[kM]* |" rawt &&
	# once known, tokens/s is never 0 nor - while the job trains
	grep -a -o "| step [0-9][^|]*| loss [^|]*| tok/s [^ ]* |" rawt |
		sed -n "s/^| step \([0-9]*\)[^|]*| loss [^|]*| tok\/s \([^ ]*\) |\$/\1 \2/p" >toks &&
	cat toks &&
	awk "\$2 != \"-\" && \$2 != \"0\" { known = 1 } known && \$1 < 24 && (\$2 == \"-\" || \$2 == \"0\") { bad = 1; print \"read \" \$2 \" at step \" \$1 } END { exit bad || !known }" toks &&
	grep "^herd_train_tokens_total [1-9]" scrape &&
	# the last line (the ranks have ended) keeps the rates the job ran at
	tail -n 1 runs/torch/latest/metrics.jsonl | jq -e ".job.step == 24 and (.job.loss | type) == \"number\" and (.nodes | length) == 4 and .job.tokens_per_s > 0 and .job.steps_per_s > 0" &&
	# the same run in herd top and in the report
	herd top torch.yaml --once >top &&
	# (a row starts with "*" where that node is named the slowest)
	cat top &&
	test "$(grep -c "^[ *]$HERD_CLUSTER_PREFIX[0-9]* *up " top)" = 4 &&
	grep "^[ *]$HERD_CLUSTER_PREFIX[0-9]* .* 24  *[0-9.e+-]*$" top &&
	! grep " [0-9.]*e[+-]\?[0-9]\?$" top &&
	grep "^job: step 24, loss [0-9.e+-]*, [0-9.]*[kM]\? tokens/s" top &&
	herd report torch.yaml -o torch.html &&
	grep "<h2>Training</h2>" torch.html &&
	grep -i "tokens/s" torch.html &&
	test "$(grep -o "<polyline" torch.html | wc -l)" -ge 3
'

test_done
