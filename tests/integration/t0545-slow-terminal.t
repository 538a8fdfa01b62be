#!/bin/sh

test_description='a slow reader of herd'"'"'s output never stalls the heartbeats or the job: the terminal misses output, the rank logs keep it all (issue 11 item 1); output without newlines keeps herd small (item 6)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq awk tr head yes

# job NAME HOSTS: NAME.yaml for the cluster, one rank per node,
# health.timeout 2s (a herd that stops sending heartbeats is caught within
# 2 s); launch: from stdin, indented.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"$2\", slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {grace: 2s, timeout: 2s}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$PWD/logs/{{name}}\"}"
		echo "launch:"
		echo "  workdir: $PWD"
		sed 's/^/  /'
	} >"$1.yaml"
}

# Each rank: 25 bursts of 200 lines of 1000 bytes, 0.2 s apart: 5 MB per
# rank in 5 s, 10 MB in all, more than herd holds for the terminal (4 MiB
# per stream).
{
	echo 'i=0'
	echo 'while [ $i -lt 25 ]; do'
	echo '	i=$((i + 1))'
	echo '	yes "$(printf %0999d $i)" | head -n 200'
	echo '	sleep 0.2'
	echo 'done'
} >burst.sh

test_expect_success 'cluster of 2 nodes' '
	own_binaries &&
	cluster_up 2 &&
	TWO="${HERD_CLUSTER_PREFIX}[1-2]"
'

# logs_full: both rank logs of the job slow hold all 5 MB.
logs_full() {
	for r in 0 1; do
		test "$(wc -c <logs/slow/latest/attempt-1/rank-$r.log)" = 5000000 ||
		return 1
	done
}

test_expect_success 'a reader that reads nothing until the ranks are done: the job goes on, no node is evicted, the logs are complete, stderr says what the terminal missed' '
	job slow "$TWO" <<-EOF &&
	command: $(yaml_cmd sh "$PWD/burst.sh")
	EOF
	# The reader starts only once every byte is in the rank logs (at
	# most 120 s): the ranks wrote 10 MB while nobody read, more than
	# herd holds for the terminal, however slowly this machine ran them.
	{ herd run slow.yaml 2>err; echo $? >rc; } |
	{
		i=0 &&
		until logs_full 2>/dev/null || test $i -ge 1200; do
			sleep 0.1; i=$((i + 1))
		done &&
		cat >/dev/null
	} &&
	cat err &&
	test "$(cat rc)" = 0 &&
	ev=logs/slow/latest/events.jsonl &&
	test -s $ev &&
	! grep -E "\"event\": *\"node_(failed|evicted)\"" $ev &&
	logs_full &&
	grep -E "^herd: the terminal missed [1-9][0-9]* bytes of rank output \(all of it is in the rank logs\)$" err
'

test_expect_success 'a reader that keeps up misses nothing' '
	herd run slow.yaml >out.fast 2>err.fast &&
	! grep missed err.fast &&
	test "$(wc -c <out.fast)" = $((2 * 25 * 200 * (4 + 1000)))
'

# N bytes on stdout without a newline, then one (the agent holds a last
# partial line until the rank ends), then the rank waits for the file named
# by its second argument, so that herd's peak RSS is read while it still
# runs.
{
	echo 'head -c "$1" /dev/zero | tr "\\0" x'
	echo 'echo'
	echo 'while [ ! -e "$2" ]; do sleep 0.05; done'
} >flat.sh

# run_flat NAME BYTES: runs a job whose rank prints BYTES that way; sets
# HWM to herd's peak RSS (kB) once the rank log holds them all and the
# newline.
run_flat() {
	rm -f go.$1 &&
	job $1 "${HERD_CLUSTER_PREFIX}1" <<-EOF &&
	command: $(yaml_cmd sh "$PWD/flat.sh" $2 "$PWD/go.$1")
	EOF
	# ASan (make SANITIZE=...) keeps freed memory in a quarantine of
	# 256 MB, which would count as herd's; 1 MB keeps the peak honest.
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 \
		herd run $1.yaml >out.$1 2>err.$1 &
	_rf_pid=$! &&
	_rf_log=logs/$1/latest/attempt-1/rank-0.log &&
	wait_file $_rf_log 20 &&
	# A deadline, not a count of polls: 30 MB through an ASan build on
	# a loaded 2-core machine can take a minute or more.
	_rf_end=$(($(date +%s) + 180)) &&
	while [ "$(wc -c <$_rf_log)" -le $2 ]; do
		test "$(date +%s)" -lt $_rf_end || { touch go.$1; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done &&
	HWM=$(awk "/^VmHWM:/ { print \$2 }" /proc/$_rf_pid/status) &&
	echo "herd VmHWM ($1, $2 bytes): $HWM kB" &&
	touch go.$1 &&
	wait_exit $_rf_pid 20 &&
	test $WAIT_RC = 0
}

test_expect_success 'a rank printing 30 MB without newlines: herd stays small (less than 10 MB over a quiet job), the output arrives whole' '
	run_flat quiet 1 &&
	quiet_hwm=$HWM &&
	run_flat flat 30000000 &&
	test $HWM -lt $((quiet_hwm + 10000)) &&
	log=logs/flat/latest/attempt-1/rank-0.log &&
	test "$(wc -c <$log)" = 30000001 &&
	test "$(tr -d x <$log)" = "" &&
	sed "s/^\[0\] //" out.flat | tr -d "\n" >got &&
	test "$(wc -c <got)" = 30000000 &&
	test "$(tr -d x <got | wc -c)" = 0 &&
	! grep missed err.flat
'

test_done
