#!/bin/sh

test_description='herd'"'"'s own pause never evicts a healthy node (issue 11 item 2): SIGSTOP for longer than the silence limit, then SIGCONT: the job goes on; SIGTSTP stops every rank (state T) until SIGCONT, as mpirun does; a node killed while herd is stopped is still caught after the resume'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq perl
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# The rank: 24 ticks 0.5 s apart (about 12 s), each appended to its log
# too, so that the test sees it run on.
{
	echo 'i=0'
	echo 'while [ $i -lt 24 ]; do'
	echo '	i=$((i + 1))'
	echo '	echo "tick $i"'
	echo '	sleep 0.5'
	echo 'done'
} >pause-rank.sh

# job NAME [RESTARTS]: two nodes, one rank each, health.timeout 3 s (the
# silence limit is 3.9 s with the default heartbeat).
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-2]\", slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {timeout: 3s, grace: 2s}"
		echo "restart: {max: ${2:-2}, backoff: 500ms}"
		echo "launch:"
		echo "  workdir: $PWD"
		echo "  command: $(yaml_cmd sh "$PWD/pause-rank.sh")"
	} >"$1.yaml"
}

# run_pgrp FILE OUT ERR: run_bg, with herd leading its own process group
# (a terminal's job): SIGTSTP's default action stops nothing in an
# orphaned group, and a script's shell gives no job its own group.
run_pgrp() {
	perl -e 'setpgrp(0, 0); exec @ARGV or die "exec: $!\n"' \
		herd run "$1" >"$2" 2>"$3" &
	HERD_PID=$!
}

# rank_pids: the rank shells on both nodes
rank_pids() {
	for _rp_n in 1 2; do
		for _rp_p in $(ip netns pids "herd-$HERD_CLUSTER_ID-n$_rp_n" 2>/dev/null); do
			tr '\0' ' ' <"/proc/$_rp_p/cmdline" 2>/dev/null |
				grep -q "pause-rank\.sh" && echo "$_rp_p"
		done
	done
}

# proc_state PID: the one-letter state of /proc/PID/stat
proc_state() {
	sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null
}

# wait_states T|run: every rank process (the rank's shell and its keeper,
# on both nodes) is stopped (T), or none is (bounded: 5 s)
wait_states() {
	_ws_i=0
	while :; do
		_ws_ok=0 _ws_n=0
		for _ws_p in $(rank_pids); do
			_ws_n=$((_ws_n + 1))
			_ws_s=$(proc_state $_ws_p)
			case $1:$_ws_s in
			T:T | run:[RSD]) _ws_ok=$((_ws_ok + 1)) ;;
			esac
		done
		[ $_ws_n -ge 2 ] && [ $_ws_ok -eq $_ws_n ] && return 0
		_ws_i=$((_ws_i + 1))
		[ $_ws_i -lt 100 ] || {
			echo "rank states after 5 s (want $1):" >&2
			for _ws_p in $(rank_pids); do echo "$_ws_p $(proc_state $_ws_p)" >&2; done
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

ev() { echo "runs/$1/latest/events.jsonl"; }

test_expect_success 'cluster of 2 nodes' '
	own_binaries &&
	cluster_up 2 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2)
'

test_expect_success 'SIGSTOP for 5 s (longer than the 3.9 s silence limit), then SIGCONT: the job completes, no node is failed or evicted' '
	job stop &&
	run_bg stop.yaml out.stop err.stop &&
	wait_ticks stop 2 &&
	kill -STOP $HERD_PID &&
	sleep 5 &&   # the pause under test, not a synchronisation
	kill -CONT $HERD_PID &&
	wait_exit $HERD_PID 40 &&
	cat err.stop &&
	test "$WAIT_RC" = 0 &&
	! grep -E "\"event\": *\"node_(failed|evicted)\"" "$(ev stop)" &&
	ev_all "$(ev stop)" job_end ".status == 0 and .attempts == 1" &&
	grep "^tick 24$" runs/stop/latest/attempt-1/rank-0.log &&
	grep "^tick 24$" runs/stop/latest/attempt-1/rank-1.log &&
	grep "herd: herd did not run for [4-9]\.[0-9] s" err.stop
'

test_expect_success 'SIGTSTP: every rank is stopped (state T) while herd is, longer than the silence limit; SIGCONT continues them and the job ends 0' '
	job tstp &&
	run_pgrp tstp.yaml out.tstp err.tstp &&
	wait_ticks tstp 2 &&
	kill -TSTP $HERD_PID &&
	wait_states T &&
	# herd stops itself once its agents answered (up to 1 s after the
	# ranks stopped): wait for it, bounded.
	_hs_i=0 &&
	while [ "$(proc_state $HERD_PID)" != T ]; do
		_hs_i=$((_hs_i + 1)) &&
		test $_hs_i -lt 100 || return 1
		sleep 0.05   # poll interval of a bounded wait
	done &&
	sleep 5 &&   # held past the silence limit: the agents must wait
	wait_states T &&
	kill -CONT $HERD_PID &&
	wait_states run &&
	wait_exit $HERD_PID 40 &&
	cat err.tstp &&
	test "$WAIT_RC" = 0 &&
	! grep -E "\"event\": *\"node_(failed|evicted)\"" "$(ev tstp)" &&
	ev_all "$(ev tstp)" job_end ".status == 0 and .attempts == 1" &&
	ev_all "$(ev tstp)" job_paused ".attempt == 1" &&
	ev_all "$(ev tstp)" job_resumed ".paused_ms >= 5000" &&
	grep "^tick 24$" runs/tstp/latest/attempt-1/rank-1.log &&
	grep "herd: suspended: every rank is stopped" err.tstp
'

test_expect_success 'a node killed while herd is stopped is caught and evicted after the resume' '
	job killed 0 &&
	run_bg killed.yaml out.killed err.killed &&
	wait_ticks killed 2 &&
	kill -STOP $HERD_PID &&
	cluster_kill_node 2 &&
	sleep 4 &&   # the pause under test, not a synchronisation
	t0=$(date +%s%3N) &&
	kill -CONT $HERD_PID &&
	wait_exit $HERD_PID 40 &&
	cat err.killed &&
	test "$WAIT_RC" != 0 &&
	ev_all "$(ev killed)" node_failed ".host == \"$N2\"" &&
	ev_all "$(ev killed)" node_evicted ".host == \"$N2\"" &&
	t=$(jq -n "[inputs | select(.event == \"node_failed\")][0].t" "$(ev killed)") &&
	echo "node 2 failed $((t - t0)) ms after the resume" &&
	test $((t - t0)) -le 4750 &&
	cluster_start_node 2
'

test_done
