#!/bin/sh

test_description='The agent measures and sends METRICS: every metrics.interval after LAUNCH, with GPU values from NVML (the fake library the tests build, values changed while the job runs, Xid events), RDMA port counters from /sys/class/infiniband (a directory bound there in a private mount namespace), per-interface network counters, rank CPU/RSS, and training values from $HERD_METRICS lines and metrics.patterns; a node without NVML says so in every frame; over SSH the frames pass herd'"'"'s strict check (no node fails)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd jq unshare nsenter mount setsid ssh
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
FAKE_NVML_DIR=$HERD_ROOT/build/tests
[ -r "$FAKE_NVML_DIR/libnvidia-ml.so.1" ] ||
	error "prerequisite $FAKE_NVML_DIR/libnvidia-ml.so.1 is missing (make build/tests/libnvidia-ml.so.1)"

# ib_counters DIR DEV PORT RCV XMIT DOWNED SYMERR RCVERR: a port's
# counters as the kernel shows them under /sys/class/infiniband.
ib_counters() {
	mkdir -p "$1/$2/ports/$3/counters" &&
	echo "$4" >"$1/$2/ports/$3/counters/port_rcv_data" &&
	echo "$5" >"$1/$2/ports/$3/counters/port_xmit_data" &&
	echo "$6" >"$1/$2/ports/$3/counters/link_downed" &&
	echo "$7" >"$1/$2/ports/$3/counters/symbol_error" &&
	echo "$8" >"$1/$2/ports/$3/counters/port_rcv_errors"
}

# The shell commands (for sh -c, $1: the directory to show as
# /sys/class/infiniband, $2: an empty directory) that bind it there in
# the current mount namespace, which must be private.  Without RDMA
# hardware /sys/class/infiniband does not exist and sysfs takes no new
# directory: a tmpfs over /sys/class holds the classes bound back one by
# one, and the new one.
FAKE_IB='
	if [ -d /sys/class/infiniband ]; then
		mount --bind "$1" /sys/class/infiniband
	else
		mount --bind /sys/class "$2" &&
		mount -t tmpfs -o mode=0755 herd-test-sysclass /sys/class &&
		for c in "$2"/*; do
			mkdir "/sys/class/${c##*/}" &&
			mount --bind "$c" "/sys/class/${c##*/}" || exit 1
		done &&
		mkdir /sys/class/infiniband &&
		mount --bind "$1" /sys/class/infiniband
	fi'

# wait_log EXPR [S]: poll until jq -e EXPR holds for the METRICS bodies
# in metrics.log (slurped into one array), at most S s (20).
wait_log() {
	_wl_i=0
	until jq -e -s "$1" metrics.log >/dev/null 2>&1; do
		_wl_i=$((_wl_i + 1))
		[ $_wl_i -lt $((${2:-20} * 20)) ] || {
			echo "metrics.log: no frame with $1 in ${2:-20} s; last:" >&2
			tail -n 2 metrics.log >&2
			return 1
		}
		kill -0 "$HERD_PID" 2>/dev/null || { echo "herd exited" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

test_expect_success 'setup: two local nodes, a fake NVML with two GPUs, one RDMA port' '
	own_binaries &&
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
	1 power -
	EOF
	mkdir ib sysclass &&
	ib_counters ib mlx5_0 1 100 200 0 0 0 &&
	cat >rank.sh <<-\EOF &&
	# Each rank: where its HERD_METRICS is, two records of 100 tokens, a
	# line the loss pattern matches, some CPU, then it waits for "go".
	d=${HERD_METRICS%/*}
	[ "$d" = "${HERD_PROGRESS_FILE%/*}" ] &&
		echo "metrics file $RANK beside the progress file: ${HERD_METRICS##*/}"
	echo "{\"step\": 1, \"tokens\": 100, \"lr\": 0.5}" >>"$HERD_METRICS"
	echo "{\"step\": 2, \"tokens\": 100, \"phase\": \"train\"}" >>"$HERD_METRICS"
	echo "not json" >>"$HERD_METRICS"
	echo "train: step 2 loss=1.25"
	i=0; while [ $i -lt 200000 ]; do i=$((i + 1)); done
	n=0
	while [ ! -e go ] && [ $n -lt 1200 ]; do sleep 0.05; n=$((n + 1)); done
	EOF
	cat >m.yaml <<-EOF
	name: m
	nodes: {hosts: "sim[1-2]", slots: 1, transport: local}
	health: {heartbeat: 1s, timeout: 30s, grace: 1s}
	restart: {max: 0}
	metrics:
	  interval: 100ms
	  patterns:
	    loss: "loss=([0-9.]+)"
	launch:
	  workdir: $PWD
	  command: sh rank.sh
	EOF
'

test_expect_success 'local nodes: METRICS carry GPUs, RDMA, net, ranks and training values' '
	rm -f go metrics.log &&
	LD_LIBRARY_PATH=$FAKE_NVML_DIR FAKE_NVML_VALUES=$PWD/nvml \
	HERD_AGENT_METRICS_LOG=$PWD/metrics.log \
		unshare --mount --propagation private \
		sh -c "$FAKE_IB"" && exec herd run m.yaml" sh "$PWD/ib" "$PWD/sysclass" \
		>out 2>err &
	HERD_PID=$! &&
	# Training values: tokens summed, latest step, lr from the file,
	# loss from the pattern, 3 records (2 lines + 1 output line), the
	# bad line and the string ignored.
	wait_log "[.[] | .train[] | select(.records == 3 and .values.tokens == 200 and
		   .values.step == 2 and .values.loss == 1.25 and .values.lr == 0.5 and
		   (.values | has(\"phase\") | not))] | map(.rank) | unique == [0, 1]" &&
	# GPUs as the fake says; what it cannot give is left out.
	jq -e -s "all(.[]; .gpus[0] == {index: 0, util_pct: 91, mem_used: 1024,
		   mem_total: 2048, temp_c: 61, power_mw: 300500, sm_mhz: 1980,
		   ecc_corrected: 3, ecc_uncorrected: 0, throttle: 4} and
		   .gpus[1] == {index: 1, util_pct: 50} and (has(\"gpu_error\") | not))" metrics.log &&
	# RDMA: 4-byte words as bytes.
	jq -e -s "all(.[]; .rdma == [{dev: \"mlx5_0\", port: 1, rx_bytes: 400,
		   tx_bytes: 800, link_downed: 0, symbol_error: 0, rcv_errors: 0}])" metrics.log &&
	# The machine'"'"'s interfaces, all eight counters, never lo.
	jq -e -s "all(.[]; (.net | length) >= 1 and all(.net[]; .dev != \"lo\" and
		   (keys | length) == 9)) and all(.[]; .cpus >= 1 and .load1 >= 0)" metrics.log &&
	jq -e -s "[.[] | .ranks[] | select(.rss_kb > 0)] | length > 0" metrics.log &&
	# HERD_METRICS: node-local, in the agent'"'"'s private directory.
	grep "^\[0\] metrics file 0 beside the progress file: rank-0.metrics$" out &&
	grep "^\[1\] metrics file 1 beside the progress file: rank-1.metrics$" out &&

	# Values change while the job runs: NVML (an Xid event), RDMA.
	sed -e "s/^0 util 91/0 util 42/" nvml >nvml.new &&
	echo "1 xid 79" >>nvml.new &&
	mv nvml.new nvml &&
	ib_counters ib mlx5_0 1 1000 2000 1 2 3 &&
	wait_log "map(select(.gpus[0].util_pct == 42 and .gpus[1].xid == 79 and
		   .rdma[0].rx_bytes == 4000 and .rdma[0].tx_bytes == 8000 and
		   .rdma[0].link_downed == 1 and .rdma[0].symbol_error == 2 and
		   .rdma[0].rcv_errors == 3)) | length >= 2" &&
	# CPU time of the busy ranks was counted: the shell of the rank
	# (sh -c COMMAND) started sh rank.sh, whose loop used it.
	wait_log "[.[] | .ranks[] | select(.cpu_ms >= 100)] | map(.rank) | unique == [0, 1]" &&
	: >go &&
	wait_exit $HERD_PID 30 &&
	test $WAIT_RC = 0 &&
	! grep -i "protocol error" err
'

test_expect_success 'a node without NVML says so in every METRICS; no GPU values' '
	rm -f go metrics.log &&
	: >go &&
	HERD_AGENT_METRICS_LOG=$PWD/metrics.log herd run m.yaml >out 2>err &&
	test -s metrics.log &&
	jq -e -s "all(.[]; .gpus == [] and
		   (.gpu_error | startswith(\"no NVML (libnvidia-ml.so.1: \")))" metrics.log &&
	# No RDMA devices on this machine.
	jq -e -s "all(.[]; .rdma == [])" metrics.log
'

test_expect_success 'a fake NVML whose driver is not loaded: the reason is sent' '
	rm -f metrics.log &&
	echo "init 9" >nvml.off &&
	LD_LIBRARY_PATH=$FAKE_NVML_DIR FAKE_NVML_VALUES=$PWD/nvml.off \
	HERD_AGENT_METRICS_LOG=$PWD/metrics.log herd run m.yaml >out 2>err &&
	jq -e -s "length > 0 and all(.[]; .gpu_error == \"no NVML (nvmlInit: Driver Not Loaded)\")" metrics.log
'

test_expect_success 'SSH nodes: METRICS every 100 ms pass herd'"'"'s check, RDMA read in the node'"'"'s own namespace' '
	cluster_up 2 &&
	mkdir ib1 sysclass1 &&
	ib_counters ib1 mlx5_0 1 5 6 0 0 0 &&
	ib_counters ib1 mlx5_1 1 7 8 0 0 1 &&
	cluster_exec 1 sh -c "$FAKE_IB" sh "$PWD/ib1" "$PWD/sysclass1" &&
	cluster_exec 1 cat /sys/class/infiniband/mlx5_1/ports/1/counters/port_rcv_errors >seen &&
	echo 1 >expect && test_cmp expect seen &&
	cat >s.yaml <<-EOF &&
	name: s
	nodes: {hosts: "${HERD_CLUSTER_PREFIX}[1-2]", slots: 2}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {grace: 2s}
	restart: {max: 0}
	metrics:
	  interval: 100ms
	  patterns:
	    loss: "loss=([0-9.]+)"
	launch:
	  workdir: $PWD
	  command: sh rank.sh
	EOF
	: >go &&
	cat >rank.sh <<-\EOF &&
	echo "{\"step\": 1, \"tokens\": 100}" >>"$HERD_METRICS"
	echo "loss=0.5"
	# Long enough for several samples.
	n=0; while [ $n -lt 15 ]; do sleep 0.1; n=$((n + 1)); done
	EOF
	herd run s.yaml >out 2>err &&
	test $(grep -c "loss=0.5" out) = 4 &&
	! grep -i "protocol error\|failed" err &&
	ev=runs/s/latest/events.jsonl &&
	! grep "node_failed" $ev
'

test_done
