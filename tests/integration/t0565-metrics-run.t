#!/bin/sh

test_description='herd run shows the job: the status line on a terminal (a real pty, read back through a small VT interpreter: every field, no torn rank line, the terminal given back), --no-status, metrics.jsonl, the Prometheus endpoint (curl, promtool, 404, 405) and a metrics.listen that cannot be bound (issue 12)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq python3 curl promtool stat
FAKE_NVML_DIR=$HERD_ROOT/build/tests
[ -r "$FAKE_NVML_DIR/libnvidia-ml.so.1" ] ||
	error "prerequisite $FAKE_NVML_DIR/libnvidia-ml.so.1 is missing (make build/tests/libnvidia-ml.so.1)"

M=$HERD_TEST_DIR/data/metrics

# job NAME SLOTS [METRICS]: NAME.yaml for localhost, one attempt; the
# launch: section (indented by two) comes from stdin.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: localhost, slots: $2}"
		echo "health: {grace: 1s}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$PWD/runs/{{name}}\", mode: \"0640\"}"
		[ -z "${3:-}" ] || echo "metrics: $3"
		echo "launch:"
		sed 's/^/  /'
	} >"$1.yaml"
}

# pty_bg ROWS COLS RAW CMD...: CMD on a terminal in the background (its
# bytes to RAW); sets PTY_PID.
pty_bg() {
	python3 "$M/pty-run.py" "$@" >/dev/null 2>&1 &
	PTY_PID=$!
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Each rank prints 60 numbered lines of 70 bytes, 0.05 s apart: 3 s of
# output scrolling under the status line (redrawn each second).
cat >lines.sh <<'EOS'
i=0
while [ $i -lt 60 ]; do
	i=$((i + 1))
	echo "rank $RANK line $i $(printf %050d $i)"
	sleep 0.05
done
EOS

test_expect_success 'status line on a terminal: every field, no torn line, the terminal given back' '
	job st 2 "{interval: 200ms}" <<-EOF &&
	command: $(yaml_cmd sh "$PWD/lines.sh")
	EOF
	python3 "$M/pty-run.py" 12 140 raw herd run st.yaml &&
	python3 "$M/vt.py" 12 140 raw >screen.json &&
	# the last status drawn, with every field
	jq -r .status screen.json >status &&
	cat status &&
	for f in "attempt 1" "nodes 1 up" "step " "loss " "tok/s " "GPU " \
		"net " "drops " "slowest "; do
		grep -F "$f" status || { echo "no $f" >&2; return 1; }
	done &&
	# drops count the host interfaces (this job runs on localhost): a
	# busy machine may drop a packet of its own during the job
	grep -E "\| drops [0-9]+ \|" status &&
	jq -e ".draws >= 2 and .region == null and .bottom == \"\"" screen.json &&
	# every rank line whole, each once, and nothing else among them
	jq -r ".lines[]" screen.json | grep "^\[" >ranklines &&
	for r in 0 1; do
		i=0 &&
		while [ $i -lt 60 ]; do
			i=$((i + 1)) &&
			grep -cx "\[$r\] rank $r line $i $(printf %050d $i)" ranklines >n &&
			test "$(cat n)" = 1 || { echo "rank $r line $i: $(cat n)" >&2; return 1; }
		done || return 1
	done &&
	test "$(wc -l <ranklines)" = 120 &&
	! jq -r ".lines[]" screen.json | grep "attempt 1 |"
'

test_expect_success '--no-status, TERM=dumb, and stdout not a terminal: no escape sequence' '
	python3 "$M/pty-run.py" 12 140 raw2 herd run --no-status st.yaml &&
	! grep -q "$(printf "\033")" raw2 &&
	python3 "$M/pty-run.py" --term dumb 12 140 raw2 herd run st.yaml &&
	! grep -q "$(printf "\033")" raw2 &&
	herd run st.yaml >out 2>err &&
	! grep -q "$(printf "\033")" out &&
	test "$(grep -c "^\[" out)" = 120 &&
	herd run --help | grep -e "--no-status"
'

# A burst of 2 x 2500 lines of 1000 bytes (more than herd holds for the
# terminal, 4 MiB), then a tick every 0.3 s for 6 s, and on until the
# terminal showed a status line after a tick (pty-run.py --touch-when
# makes ./redrawn then; on a busy machine the terminal, stalled for 3 s,
# can take longer than 6 s to read what herd still sends).
cat >burst.sh <<EOS
yes "\$(printf %0999d \$RANK)" | head -n 2500
i=0
while [ \$i -lt 20 ] || { [ ! -e "$PWD/redrawn" ] && [ \$i -lt 400 ]; }; do
	i=\$((i + 1))
	echo "tick \$i"
	sleep 0.3
done
EOS

test_expect_success 'a terminal that stops reading for 3 s: herd never blocks (the status waits), the terminal misses output, the logs keep it' '
	{
		echo "name: slow"
		echo "nodes: {hosts: localhost, slots: 2}"
		echo "health: {grace: 1s, timeout: 2s}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$PWD/runs/{{name}}\"}"
		echo "metrics: {interval: 200ms}"
		echo "launch:"
		echo "  command: $(yaml_cmd sh "$PWD/burst.sh")"
	} >slow.yaml &&
	python3 "$M/pty-run.py" --stall 3 \
		--touch-when "tick [0-9]+\r?\n.*attempt 1 [|] nodes 1 up" redrawn \
		12 140 raw3 herd run slow.yaml &&
	test -e redrawn &&
	grep -a "herd: the terminal missed [0-9]* bytes of rank output (all of it is in the rank logs)" raw3 &&
	for r in 0 1; do
		test "$(grep -c "^0*$r\$" runs/slow/latest/attempt-1/rank-$r.log)" = 2500 &&
		grep -x "tick 20" runs/slow/latest/attempt-1/rank-$r.log || return 1
	done &&
	# the status was drawn again after the burst (redrawn), and the
	# terminal given back at the end
	python3 "$M/check-raw.py" raw3 -
'

test_expect_success 'Ctrl-Z while the status is shown: the terminal is given back before herd stops, the status comes back after' '
	cat >ticks.sh <<-\EOS &&
	i=0
	while [ $i -lt 30 ]; do
		i=$((i + 1))
		echo "tick $i"
		sleep 0.2
	done
	EOS
	job tz 1 "{interval: 200ms}" <<-EOF &&
	command: $(yaml_cmd sh "$PWD/ticks.sh")
	EOF
	pty_bg 12 140 raw4 herd run tz.yaml &&
	wait_file runs/tz/latest/attempt-1/rank-0.log &&
	i=0 &&
	until grep -q "^tick 10\$" runs/tz/latest/attempt-1/rank-0.log; do
		i=$((i + 1)) && test $i -lt 400 || return 1
		sleep 0.05   # poll interval of a bounded wait
	done &&
	kill -TSTP $(ps -o pid= --ppid $PTY_PID) &&
	wait_exit $PTY_PID &&
	test "$WAIT_RC" = 0 &&
	python3 "$M/check-pause.py" raw4 &&
	python3 "$M/check-raw.py" raw4 "tick 20"
'

test_expect_success 'metrics.jsonl: one line per interval, log.mode, the last with every node' '
	f=runs/st/latest/metrics.jsonl &&
	test "$(stat -c %a "$f")" = 640 &&
	jq -e -s "length >= 5 and all(.[]; .attempt <= 1 and .job.drops >= 0)" "$f" &&
	tail -n 1 "$f" | jq -e ".nodes[0].node == \"localhost\" and .nodes[0].state == \"up\" and .attempt == 1 and .nodes_up == 1"
'

test_expect_success 'Prometheus: scraped while the job runs, promtool clean, other paths 404, POST 405' '
	port=$(free_port) &&
	mkdir pids &&
	job prom 2 "{listen: \"127.0.0.1:$port\", interval: 200ms}" <<-EOF &&
	command: $(yaml_cmd sh "$RUN_DATA/rank-wait.sh" "$PWD/pids")
	EOF
	run_bg prom.yaml out err &&
	wait_files 2 "pids/pid.*" 20 &&
	grep -F "herd: metrics on http://127.0.0.1:$port/metrics" err &&
	curl -sS -D headers -o scrape "http://127.0.0.1:$port/metrics" &&
	grep -i "^content-type: text/plain; version=0.0.4" headers &&
	promtool check metrics <scrape &&
	grep -x "herd_attempt 1" scrape &&
	grep -x "herd_nodes{state=\"up\"} 1" scrape &&
	grep -x "# TYPE herd_train_tokens_total counter" scrape &&
	test "$(curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$port/")" = 404 &&
	test "$(curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$port/metricsx")" = 404 &&
	test "$(curl -s -o /dev/null -w "%{http_code}" -X POST "http://127.0.0.1:$port/metrics")" = 405 &&
	# the port is taken: a second job is refused before any node starts
	mkdir pids2 &&
	job prom2 1 "{listen: \"127.0.0.1:$port\"}" <<-EOF &&
	command: $(yaml_cmd sh "$RUN_DATA/rank-wait.sh" "$PWD/pids2")
	EOF
	test_expect_code 1 herd run prom2.yaml >out2 2>err2 &&
	echo "herd: metrics.listen 127.0.0.1:$port: cannot listen on 127.0.0.1 port $port: Address already in use (pick another port or remove metrics.listen)" >expect &&
	test_cmp expect err2 &&
	test_must_be_empty out2 &&
	# refused before anything: no run directory either
	! test -e runs/prom2 &&
	! ls pids2/pid.* 2>/dev/null &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID &&
	test "$WAIT_RC" = 130 &&
	# and the endpoint is gone with herd
	test_must_fail curl -s "http://127.0.0.1:$port/metrics"
'

test_expect_success 'Prometheus: 40 connections held with partial requests and then closed, or 40 scrapers at once, leave the endpoint scrapable (issue 23)' '
	port=$(free_port) &&
	mkdir pids3 &&
	job flood 1 "{listen: \"127.0.0.1:$port\"}" <<-EOF &&
	command: $(yaml_cmd sh "$RUN_DATA/rank-wait.sh" "$PWD/pids3")
	EOF
	run_bg flood.yaml out err &&
	test_when_finished "kill \$HERD_PID 2>/dev/null || :" &&
	wait_files 1 "pids3/pid.*" 20 &&
	# herd serves 32 at once: 8 wait in the accept queue
	python3 "$M/flood.py" $port 40 8 &&
	i=0 &&
	until curl -sS --max-time 2 -o scrape "http://127.0.0.1:$port/metrics"
	do
		i=$((i + 1)) && test $i -lt 5 || return 1
	done &&
	grep -x "herd_attempt 1" scrape &&
	curls= &&
	for k in $(seq 40); do
		curl -s --max-time 10 -o "scrape.$k" "http://127.0.0.1:$port/metrics" &
		curls="$curls $!"
	done &&
	for p in $curls; do wait $p || :; done &&
	test "$(grep -lx "herd_attempt 1" scrape.* | wc -l)" = 40 &&
	curl -sS --max-time 2 -o scrape "http://127.0.0.1:$port/metrics" &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID &&
	test "$WAIT_RC" = 130
'

test_expect_success 'GPU values (the fake NVML) flow to the status line, metrics.jsonl and the endpoint' '
	cat >nvml <<-\EOF &&
	count 2
	0 util 91
	0 mem_used 1024
	0 mem_total 2048
	0 temp 61
	0 power 300500
	0 sm_mhz 1980
	0 ecc_corrected 3
	0 ecc_uncorrected 0
	0 throttle 4
	1 util 50
	EOF
	port=$(free_port) &&
	job gpu 1 "{listen: \"127.0.0.1:$port\", interval: 200ms}" <<-EOF &&
	command: $(yaml_cmd sh "$PWD/ticks.sh")
	EOF
	pty_bg 12 160 raw5 env LD_LIBRARY_PATH="$FAKE_NVML_DIR" \
		FAKE_NVML_VALUES="$PWD/nvml" herd run gpu.yaml &&
	i=0 &&
	until curl -s "http://127.0.0.1:$port/metrics" >scrape &&
		grep -x "herd_gpu_utilization_ratio{node=\"localhost\",gpu=\"1\"} 0.5" scrape; do
		i=$((i + 1)) && test $i -lt 400 || return 1
		sleep 0.05   # poll interval of a bounded wait
	done &&
	promtool check metrics <scrape &&
	for m in "herd_gpu_utilization_ratio{node=\"localhost\",gpu=\"0\"} 0.91" \
		"herd_gpu_memory_used_bytes{node=\"localhost\",gpu=\"0\"} 1024" \
		"herd_gpu_memory_total_bytes{node=\"localhost\",gpu=\"0\"} 2048" \
		"herd_gpu_temperature_celsius{node=\"localhost\",gpu=\"0\"} 61" \
		"herd_gpu_power_watts{node=\"localhost\",gpu=\"0\"} 300.5" \
		"herd_gpu_sm_clock_hertz{node=\"localhost\",gpu=\"0\"} 1980000000" \
		"herd_gpu_ecc_errors_total{node=\"localhost\",gpu=\"0\",type=\"corrected\"} 3" \
		"herd_gpu_throttle_reasons{node=\"localhost\",gpu=\"0\"} 4"; do
		grep -x -F "$m" scrape || { echo "no $m" >&2; return 1; }
	done &&
	wait_exit $PTY_PID 30 &&
	test "$WAIT_RC" = 0 &&
	tail -n 1 runs/gpu/latest/metrics.jsonl >last &&
	jq -e ".job.gpu_util_min == 50 and .job.gpu_util_avg == 70.5 and
		.nodes[0].gpus[0] == {gpu: 0, util_pct: 91, mem_used: 1024,
		mem_total: 2048, temp_c: 61, power_w: 300.5, sm_mhz: 1980,
		ecc_corrected: 3, ecc_uncorrected: 0, throttle: 4} and
		.nodes[0].gpus[1] == {gpu: 1, util_pct: 50}" last &&
	grep -a -o "| GPU 50/7[01]% |" raw5 | tail -n 1
'

test_done
