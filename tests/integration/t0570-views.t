#!/bin/sh

test_description='herd status and herd top read a run directory (events.jsonl, metrics.jsonl): fixture runs built from the issue-12 contract (ended, running with a partial last line, events only), bad lines skipped and counted, one-line errors, top followed without a terminal and driven on a pseudo-terminal (keys, signals, terminal restored), and a real local run found through its job file'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq python3

VIEWS=$HERD_TEST_DIR/data/views

test_expect_success 'the commands are in herd --help and have --help' '
	own_binaries &&
	herd --help >help &&
	grep "^  herd status " help &&
	grep "^  herd top " help &&
	grep "^  herd report " help &&
	herd status --help >out && grep "^usage: herd status RUNDIR" out &&
	herd top --help >out && grep "^usage: herd top JOB|RUNDIR" out &&
	grep "^JOB is a job.s id or name" out &&
	herd report --help >out && grep "^usage: herd report JOB|RUNDIR" out &&
	grep "^JOB is a job.s id or name" out
'

test_expect_success 'errors: one line each, with the exit status' '
	test_expect_code 2 herd status nowhere 2>err &&
	test $(wc -l <err) = 1 &&
	grep -x "herd: status: no job nowhere here (herd list shows yours)" err &&
	mkdir plain &&
	test_expect_code 2 herd top --once plain 2>err &&
	test $(wc -l <err) = 1 &&
	grep -x "herd: top: $PWD/plain: not a run directory (no events.jsonl or metrics.jsonl)" err &&
	mkdir unreadable && echo "{}" >unreadable/events.jsonl &&
	mkdir unreadable/metrics.jsonl &&
	test_expect_code 1 herd status unreadable 2>err &&
	test $(wc -l <err) = 1 &&
	grep -x "herd: status: $PWD/unreadable/metrics.jsonl: Is a directory" err &&
	test_expect_code 2 herd status 2>err &&
	test_expect_code 2 herd status --bogus plain 2>err &&
	grep -x "herd: status: unknown option .--bogus." err &&
	grep -x "try .herd status --help." err &&
	test_expect_code 2 herd top --sort colour --once plain 2>err &&
	grep "^herd: top: --sort colour: unknown key" err &&
	test_expect_code 2 herd top --interval 0 --once plain 2>err &&
	grep "^herd: top: --interval 0: expected seconds" err &&
	printf "name: j\nlaunch: {command: true}\nbogus: 1\n" >bad.yaml &&
	test_expect_code 2 herd status bad.yaml 2>err &&
	grep "^bad.yaml:3:1: " err &&
	printf "name: never\nlaunch: {command: \"true\"}\n" >never.yaml &&
	test_expect_code 1 herd status never.yaml 2>err &&
	test $(wc -l <err) = 1 &&
	grep "^herd: status: never.yaml: no run yet ($PWD/runs/never/latest: No such file or directory)" err
'

test_expect_success 'status of an ended run: attempts, nodes, metrics, slowest, checkpoint, skipped lines' '
	herd status "$VIEWS/ended" >out &&
	cat out &&
	grep -x "job train, run 20251201-004640.000-ab12 (torch, transport local)" out &&
	grep -x "state: ended, exit status 0, 2 attempts, ran 5:00" out &&
	grep -x "attempt 1: started +0:00, 4 nodes, ran 2:00, node node3 failed (status 1)" out &&
	grep -x "attempt 2: started +2:02, 4 nodes, ran 2:58, completed (status 0), resumed from /ckpt/step-100" out &&
	grep -x "nodes: 4 up, 1 failed, 0 evicted; spares: 1, 1 used" out &&
	grep -x "  node3: failed: lost <script>alert(\"x\")</script> & .gone." out &&
	grep -x "  node5: up (spare used)" out &&
	grep "^metrics at +4:59: step 201, loss 0.85, tokens/s .*GPU util min 59 %, avg 86 %, net rx .* drops 2$" out &&
	grep -x "slowest node: node2" out &&
	grep -x "checkpoints resumed from: /ckpt/step-100 (attempt 2)" out &&
	grep -x "logs: $VIEWS/ended" out &&
	grep -x "skipped: 0 bad lines in events.jsonl, 2 in metrics.jsonl" out
'

test_expect_success 'status --json of the same run' '
	herd status --json "$VIEWS/ended" >json &&
	jq -e ".state == \"ended\" and .exit_status == 0 and .job == \"train\"
		and (.attempts | length) == 2
		and .attempts[0].reason == \"node node3 failed\"
		and .attempts[1].checkpoint == \"/ckpt/step-100\"
		and .nodes.up == 4 and .nodes.failed == 1 and .nodes.spares_used == 1
		and .slowest == \"node2\" and .metrics.step == 201
		and .metrics.t == 1764550299000 and .metrics.attempt == 2
		and .checkpoints == [{attempt: 2, path: \"/ckpt/step-100\"}]
		and .skipped_lines == {\"events.jsonl\": 0, \"metrics.jsonl\": 2}
		and .elapsed_ms == 300010" json
'

test_expect_success 'a running job: no job_end, a partial last line ignored, a bad line counted' '
	herd status "$VIEWS/running" >out &&
	grep "^state: running (no job_end yet), attempt 1, for .*, last update .* ago$" out &&
	grep -x "attempt 1: started +0:00, 2 nodes, running" out &&
	grep "^metrics at +0:30: step 30, loss 1.5," out &&
	grep -x "slowest node: beta" out &&
	grep -x "skipped: 1 bad line in events.jsonl, 0 in metrics.jsonl" out &&
	herd status --json "$VIEWS/running" >json &&
	jq -e ".state == \"running\" and (has(\"exit_status\") | not)
		and .metrics.step == 30" json
'

test_expect_success 'a run without metrics.jsonl: events only' '
	herd status "$VIEWS/eventsonly" >out &&
	grep -x "state: ended, exit status 3, 1 attempt, ran 0:01" out &&
	grep -x "attempt 1: started +0:00, 1 node, ran 0:01, rank 0 exited with status 3 (status 3)" out &&
	grep -x "metrics: none (no metrics.jsonl yet)" out &&
	herd top --once "$VIEWS/eventsonly" >out &&
	grep "^job: no metrics yet" out &&
	grep "^ solo  *up  *-  *-" out
'

test_expect_success 'top --once: every node, the slowest marked, sortable; a node gone from the samples shows no stale values' '
	herd top --once "$VIEWS/ended" >out &&
	cat out &&
	grep "^herd top: job train, run 20251201-004640.000-ab12, ended, exit status 0, attempt 2, 5:00$" out &&
	grep "^slowest: node2   sorted by node" out &&
	grep "^ NODE  *STATE  *GPU%  *GPUMEM  *RX/s  *TX/s  *DROPS  *CPU%  *RSS  *STEP/s  *STEP  *LOSS$" out &&
	sed -n "5,9p" out | cut -c1-7 >names &&
	printf " node1 \n*node2 \n node3 \n node4 \n node5 \n" >expect &&
	test_cmp expect names &&
	grep "^\*node2  *up  *59  *60G/80G  *1[0-9][0-9]MB  *1[0-9][0-9]MB  *0  *39[0-9]  *2.0[0-9]GB  *0\.[0-9]*  *201  *0.85$" out &&
	grep "^ node3  *failed  *-  *-  *-  *-  *-  *-  *-  *-  *-  *-$" out &&
	grep "^ node4 .* 2 " out &&
	herd top --once --sort rate "$VIEWS/ended" >out &&
	sed -n 5p out | grep "^\*node2 " &&
	sed -n 9p out | grep "^ node3 " &&
	herd top --once --sort gpu "$VIEWS/running" >out &&
	sed -n 5p out | grep "^ alpha  *up  *97 " &&
	herd top --once --sort drops "$VIEWS/running" >out &&
	sed -n 5p out | grep "^\*beta .* 7 "
'

test_expect_success 'top --once: an evicted node shows no stale values (metrics.jsonl as herd wrote it before issue 22: its last values on every line)' '
	mkdir evicted &&
	t=1764550000000 &&
	{
		echo "{\"t\":$t,\"event\":\"job_start\",\"job\":\"ev\",\"run\":\"r1\",\"nodes\":2,\"spares\":0,\"mode\":\"plain\",\"transport\":\"ssh\"}"
		echo "{\"t\":$((t + 10)),\"event\":\"node_up\",\"host\":\"alpha\",\"hostname\":\"alpha\"}"
		echo "{\"t\":$((t + 20)),\"event\":\"node_up\",\"host\":\"beta\",\"hostname\":\"beta\"}"
		echo "{\"t\":$((t + 30)),\"event\":\"attempt_start\",\"attempt\":1,\"nodes\":2,\"world_size\":2}"
		echo "{\"t\":$((t + 3000)),\"event\":\"node_evicted\",\"host\":\"beta\",\"reason\":\"slow\",\"attempt\":1}"
	} >evicted/events.jsonl &&
	node="\"load1\":1.0,\"cpu_pct\":99.0,\"rss_kib\":1000,\"rx_bytes_per_s\":5e6,\"tx_bytes_per_s\":5e6,\"drops\":3,\"step\":42,\"steps_per_s\":1.5,\"loss\":0.25" &&
	{
		echo "{\"t\":$((t + 2000)),\"attempt\":1,\"elapsed_ms\":2000,\"nodes_up\":2,\"spares\":0,\"job\":{\"step\":42,\"drops\":3},\"nodes\":[{\"node\":\"alpha\",\"state\":\"up\",$node},{\"node\":\"beta\",\"state\":\"up\",$node}]}"
		echo "{\"t\":$((t + 4000)),\"attempt\":1,\"elapsed_ms\":4000,\"nodes_up\":1,\"spares\":0,\"job\":{\"step\":43,\"drops\":3},\"nodes\":[{\"node\":\"alpha\",\"state\":\"up\",$node},{\"node\":\"beta\",\"state\":\"failed\",$node}]}"
	} >evicted/metrics.jsonl &&
	herd top --once evicted >out &&
	cat out &&
	grep "^ alpha  *up  *- .* 42  *0.25$" out &&
	grep "^ beta  *evicted  *-  *-  *-  *-  *-  *-  *-  *-  *-  *-$" out
'

test_expect_success 'top without a terminal follows the files and stops at job_end' '
	cp -r "$VIEWS/running" follow &&
	{ herd top --interval 0.1 follow >frames 2>err & } &&
	pid=$! &&
	wait_file frames &&
	i=0 && while ! grep -q "step 30" frames; do
		i=$((i + 1)); test $i -lt 200 || false; sleep 0.05
	done &&
	kill -0 $pid &&
	printf ", \"nodes_up\": 2}}\n{\"t\": 1764550032000, \"attempt\": 1, \"job\": {\"step\": 32, \"loss\": 1.25}}\n" >>follow/metrics.jsonl &&
	printf "{\"t\":1764550033000,\"event\":\"job_end\",\"status\":0,\"attempts\":1}\n" >>follow/events.jsonl &&
	wait_exit $pid 20 &&
	test $WAIT_RC = 0 &&
	grep "^job: step 32, loss 1.25" frames &&
	grep "^herd top:" frames | tail -n 1 | grep "^herd top: job live, run .*, ended, exit status 0" &&
	test $(grep -c "^herd top:" frames) -ge 2
'

test_expect_success 'top on a terminal: s sorts, q quits, SIGTERM quits, the terminal is given back' '
	python3 "$VIEWS/top-tty.py" keys herd top "$VIEWS/ended" &&
	python3 "$VIEWS/top-tty.py" sigterm herd top "$VIEWS/running"
'

test_expect_success 'a real local run: status, top and report find it through the job file' '
	cat >real.yaml <<-EOF &&
	name: real
	nodes: {hosts: "sim[1-2]", slots: 1, transport: local, spares: "sim3"}
	health: {heartbeat: 1s, timeout: 30s, grace: 1s}
	restart: {max: 1, backoff: 0s}
	metrics: {interval: 200ms}
	launch:
	  command: |
	    for s in 1 2 3; do
	      [ -n "\$HERD_METRICS" ] && echo "{\"step\": \$s, \"loss\": 2.\$s, \"tokens\": 1000}" >>"\$HERD_METRICS"
	      echo "step \$s loss=2.\$s"
	      sleep 0.4
	    done
	EOF
	herd run real.yaml >run.out 2>run.err &&
	run=$(readlink runs/real/latest) &&
	herd status real.yaml >out &&
	cat out &&
	grep -x "job real, run $run (torch, transport local)" out &&
	grep "^state: ended, exit status 0, 1 attempt, ran " out &&
	grep -x "nodes: 2 up, 0 failed, 0 evicted; spares: 1, 0 used" out &&
	grep -x "logs: $PWD/runs/real/$run" out &&
	herd status --json runs/real >json &&
	jq -e ".run == \"$run\" and .state == \"ended\"" json &&
	herd top --once real.yaml >out &&
	grep "^[ *]sim1  *up " out && grep "^[ *]sim2  *up " out &&
	herd report real.yaml -o real.html &&
	grep "<h1>herd report: job real</h1>" real.html &&
	if test -e runs/real/latest/metrics.jsonl
	then
		# metrics.jsonl is written (the controller side of issue 12):
		# its values reach the views.
		herd status --json real.yaml >json &&
		jq -e ".metrics.step == 3 and .metrics.loss == 2.3" json &&
		herd top --once real.yaml >out &&
		cat out &&
		grep "^[ *]sim1  *up .*  3  *2.3$" out &&
		grep "^[ *]sim2  *up .*  3  *2.3$" out &&
		grep "<polyline" real.html
	fi
'

test_expect_success 'while a real job runs: status says running, top follows it until job_end' '
	cat >live.yaml <<-EOF &&
	name: live
	nodes: {hosts: "sim[1-2]", slots: 1, transport: local}
	health: {heartbeat: 1s, timeout: 30s, grace: 1s}
	metrics: {interval: 200ms}
	launch:
	  command: |
	    while [ ! -e "$PWD/go" ]; do sleep 0.05; done
	    for s in 1 2 3 4; do
	      [ -n "\$HERD_METRICS" ] && echo "{\"step\": \$s, \"loss\": 1.\$s}" >>"\$HERD_METRICS"
	      sleep 0.2
	    done
	EOF
	run_bg live.yaml live.out live.err &&
	wait_file runs/live/latest/events.jsonl &&
	i=0 && while ! grep -q "\"event\":\"rank_start\"" runs/live/latest/events.jsonl; do
		i=$((i + 1)); test $i -lt 400 || false; sleep 0.05
	done &&
	herd status live.yaml >out &&
	grep "^state: running (no job_end yet), attempt 1, for " out &&
	{ herd top --interval 0.2 live.yaml >frames 2>top.err & } &&
	top_pid=$! &&
	wait_file frames &&
	# Its first frame, before the job may go on: on a busy machine top
	# can take seconds to start, and the job would end before it looks.
	_end=$(($(date +%s) + 60)) &&
	while ! grep -q "^herd top: job live, run .*, running" frames; do
		test "$(date +%s)" -lt $_end || return 1
		sleep 0.05   # poll interval of a bounded wait
	done &&
	touch go &&
	wait_exit $HERD_PID 30 && test $WAIT_RC = 0 &&
	wait_exit $top_pid 20 && test $WAIT_RC = 0 &&
	grep "^herd top: job live, run .*, running, attempt 1" frames &&
	grep "^herd top:" frames | tail -n 1 | grep ", ended, exit status 0" &&
	herd status live.yaml >out &&
	grep "^state: ended, exit status 0, 1 attempt" out &&
	if test -e runs/live/latest/metrics.jsonl
	then
		grep "^job: step [1-4], loss 1.[1-4]" frames
	fi
'

test_done
