#!/bin/sh

test_description='restart.backoff is for a crash loop, not for a first failure: a node lost and replaced by a spare starts the next attempt well within restart.backoff of node_failed (events.jsonl); a node lost with no spare, and a rank that fails at once every attempt, still wait restart.backoff, doubling'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid ssh-keygen jq
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# job NAME HOSTS SPARES MIN MAX BACKOFF: NAME.yaml running rank.sh.
job() {
	{
		echo "name: $1"
		printf 'nodes: {hosts: "%s", slots: 1' "$2"
		[ -z "$3" ] || printf ', spares: "%s"' "$3"
		echo ", min: $4}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 1s}"
		echo "restart: {max: $5, backoff: $6}"
		echo "launch: {command: $(yaml_cmd "$PWD/rank.sh" "$PWD"), workdir: \"$PWD\"}"
		echo "log: {dir: \"$PWD/runs/$1\"}"
	} >"$1.yaml"
}

# gap NAME FROM-EVENT FROM-JQ ATTEMPT: ms from the first FROM-EVENT
# matching FROM-JQ to attempt_start of ATTEMPT, from events.jsonl.
gap() {
	jq -n --arg e "$2" --argjson a "$4" "[inputs] as \$all |
		([\$all[] | select(.event == \$e and ($3))][0].t) as \$from |
		([\$all[] | select(.event == \"attempt_start\" and .attempt == \$a)][0].t) as \$to |
		\$to - \$from" "runs/$1/latest/events.jsonl"
}

test_expect_success 'cluster of 3 nodes; a rank that waits in attempt 1 and ends in attempt 2' '
	own_binaries &&
	cluster_up 3 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) && N3=$(cluster_node 3) &&
	cat >rank.sh <<-\EOF &&
	#!/bin/sh
	if [ "$HERD_ATTEMPT" -ge 2 ]; then exit 0; fi
	: >"$1/up.$RANK"
	exec sleep 60
	EOF
	chmod 755 rank.sh
'

test_expect_success 'node 2 lost, spare node 3 takes over: the next attempt starts well within restart.backoff (5 s) of node_failed' '
	rm -f up.* &&
	job spare "$N1,$N2" "$N3" 2 1 5s &&
	run_bg spare.yaml out.spare err.spare &&
	wait_files 2 "up.*" 30 &&
	test_when_finished "cluster_start_node 2 && cluster_wait_ssh 2" &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 60 &&
	test "$WAIT_RC" = 0 &&
	ev_all runs/spare/latest/events.jsonl spare_used ".host == \"$N3\"" &&
	g=$(gap spare node_failed ".host == \"$N2\"" 2) &&
	echo "node_failed to attempt 2: $g ms (restart.backoff 5000 ms)" &&
	test "$g" -lt 4000
'

test_expect_success 'node 2 lost with no spare (the job shrinks): restart.backoff (3 s) is waited' '
	rm -f up.* &&
	job shrink "$N1,$N2" "" 1 1 3s &&
	run_bg shrink.yaml out.shrink err.shrink &&
	wait_files 2 "up.*" 30 &&
	test_when_finished "cluster_start_node 2 && cluster_wait_ssh 2" &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 60 &&
	test "$WAIT_RC" = 0 &&
	g=$(gap shrink node_failed ".host == \"$N2\"" 2) &&
	echo "node_failed to attempt 2: $g ms (restart.backoff 3000 ms)" &&
	test "$g" -ge 2950
'

test_expect_success 'a crash loop (every attempt fails at once) backs off: restart.backoff, then twice it, even with a spare' '
	cat >crash.sh <<-\EOF &&
	#!/bin/sh
	exit 3
	EOF
	chmod 755 crash.sh &&
	job loop "$N1" "$N3" 1 2 1s &&
	sed -i "s|rank.sh|crash.sh|" loop.yaml &&
	test_expect_code 3 herd run loop.yaml >out.loop 2>err.loop &&
	g2=$(gap loop attempt_end ".attempt == 1" 2) &&
	g3=$(gap loop attempt_end ".attempt == 2" 3) &&
	echo "attempt 1 end to attempt 2: $g2 ms, attempt 2 end to attempt 3: $g3 ms" &&
	test "$g2" -ge 950 && test "$g2" -lt 1950 &&
	test "$g3" -ge 1950
'

test_done
