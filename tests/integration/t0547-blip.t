#!/bin/sh

test_description='short network blips never evict a node, a real partition is still caught within health.timeout + 1 s (issue 11 item 3): seven 1.5 s partitions of a node (half of health.timeout 3 s) on a running job: exit 0, no eviction, the ranks run through on both sides; a partition held 6 s: the node is named and failed within 4 s of the cut'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# The rank: 64 ticks 0.5 s apart (about 32 s).
{
	echo 'i=0'
	echo 'while [ $i -lt 64 ]; do'
	echo '	i=$((i + 1))'
	echo '	echo "tick $i"'
	echo '	sleep 0.5'
	echo 'done'
} >blip-rank.sh

# job NAME [RESTARTS]: two nodes, one rank each, health.timeout 3 s and
# every other health key at its default (the rule under test is the
# default one).
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-2]\", slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {timeout: 3s, grace: 2s}"
		echo "restart: {max: ${2:-0}}"
		echo "launch:"
		echo "  workdir: $PWD"
		echo "  command: $(yaml_cmd sh "$PWD/blip-rank.sh")"
	} >"$1.yaml"
}

ev() { echo "runs/$1/latest/events.jsonl"; }

# node_ranks I: the rank shells left in node I's namespace
node_ranks() {
	for _nr_p in $(ip netns pids "herd-$HERD_CLUSTER_ID-n$1" 2>/dev/null); do
		tr '\0' ' ' <"/proc/$_nr_p/cmdline" 2>/dev/null |
			grep -q "blip-rank\.sh" && echo "$_nr_p"
	done
}

test_expect_success 'cluster of 2 nodes' '
	own_binaries &&
	cluster_up 2 &&
	N2=$(cluster_node 2)
'

# A blip's length is the fault under test (sleep is the fault, not a
# synchronisation); between blips the link is up until both ranks print
# the next tick looked for (a bounded wait), 8 ticks (4 s) after the last
# blip began: TCP has resent what the blip lost in both directions by then
# (at most 3.0 s after the first lost frame, see spec.h), so each blip is a
# blip of its own, not one long outage.
test_expect_success 'seven 1.5 s blips of node 2: the job exits 0, no node failed or evicted, the ranks ran through' '
	job blip &&
	run_bg blip.yaml out.blip err.blip &&
	for k in 2 10 18 26 34 42 50; do
		wait_ticks blip $k &&
		cluster_partition 2 && sleep 1.5 && cluster_heal 2 || return 1
	done &&
	wait_exit $HERD_PID 40 &&
	cat err.blip &&
	test "$WAIT_RC" = 0 &&
	! grep -E "\"event\": *\"node_(failed|evicted)\"" "$(ev blip)" &&
	ev_all "$(ev blip)" job_end ".status == 0 and .attempts == 1" &&
	grep "^tick 64$" runs/blip/latest/attempt-1/rank-1.log &&
	! grep "stopping the ranks" err.blip
'

test_expect_success 'a partition of node 2 held 6 s: node 2 is named and failed within health.timeout + 1 s of the cut; its agent stops its ranks' '
	job part &&
	run_bg part.yaml out.part err.part &&
	wait_ticks part 2 &&
	t0=$(date +%s%3N) &&
	cluster_partition 2 &&
	t1=$(date +%s%3N) &&
	sleep 6 &&   # the partition under test
	test -z "$(node_ranks 2)" &&
	cluster_heal 2 &&
	wait_exit $HERD_PID 40 &&
	cat err.part &&
	test "$WAIT_RC" != 0 &&
	ev_all "$(ev part)" node_failed ".host == \"$N2\" and (.reason | test(\"no heartbeat\"))" &&
	t=$(jq -n "[inputs | select(.event == \"node_failed\")][0].t" "$(ev part)") &&
	echo "node 2 failed $((t - t0)) ms after the partition command began, $((t - t1)) ms after it returned" &&
	# The cut came between t0 and t1 (on a busy machine the command took
	# 0.5 s, and a heartbeat got through after t0): within health.timeout
	# + 1 s of t1, and by herd'"'"'s own clock 3.9 s after the last byte.
	test $((t - t1)) -le 4000 &&
	ev_all "$(ev part)" node_failed ".host != \"$N2\" or .silent_ms <= 4000" &&
	grep "herd: node $N2 failed: no heartbeat for" err.part
'

test_done
