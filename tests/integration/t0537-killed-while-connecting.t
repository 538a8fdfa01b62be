#!/bin/sh

test_description='herd killed (SIGKILL) at random early points while it connects to its nodes: no herd-agent is left behind on any node (issue 11 item 4); an agent that never hears from herd exits by itself'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen ps awk mkfifo
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# The nodes share this machine's process table (network and mount
# namespaces only), so the agents of this test are the processes whose
# command line holds this test's own ssh.agent_dir: nothing of another
# test or user can match.
CACHE=$PWD/agent-cache

# agents: the live (non-zombie) processes running an agent from CACHE
# (the path reaches awk through its environment, so awk itself does not
# match).
agents() {
	ps -e -o pid=,stat=,args= |
		C="$CACHE/" awk '$2 !~ /^Z/ && index($0, ENVIRON["C"]) { print }'
}

# agents_gone S: poll until no agent of this test is alive (at most S s);
# names the survivors on failure.
agents_gone() {
	_ag_i=0
	while [ -n "$(agents)" ]; do
		_ag_i=$((_ag_i + 1))
		[ $_ag_i -lt $(($1 * 20)) ] || {
			echo "agents still alive after $1 s:" >&2
			agents >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

# kill_agents: ends, by pid, the agents this test started and left (so a
# failure does not leak them into the next test).
kill_agents() {
	for p in $(agents | awk '{ print $1 }'); do
		kill -9 "$p" 2>/dev/null
	done
	return 0
}

test_expect_success 'cluster of 3 nodes; one full run fills the agent cache' '
	own_binaries &&
	cluster_up 3 &&
	test_when_finished kill_agents &&
	{
		echo "name: early"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-3]\", slots: 2}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS, agent_dir: \"$CACHE\"}"
		echo "restart: {max: 0}"
		echo "launch: {command: sleep 30, workdir: \"$PWD\"}"
	} >early.yaml &&
	sed "s/command: sleep 30/command: \"true\"/" early.yaml >warm.yaml &&
	herd run warm.yaml >out 2>err &&
	agents_gone 10
'

# As in the issue: `herd run & sleep 0.05..0.4; kill -9 $!`, twelve
# times, the kill landing anywhere from the SSH handshake to HELLO and
# the first LAUNCH.  Before the fix an agent whose HELLO write failed
# (EPIPE) lost its loop_stop() and waited for ever.
test_expect_success 'SIGKILL of herd while it connects leaves no agent behind' '
	test_when_finished kill_agents &&
	i=0 &&
	while [ $i -lt 12 ]; do
		herd run early.yaml >out.$i 2>err.$i &
		pid=$! &&
		sleep "0.$(( (i * 7 % 8) + 1 ))" &&   # the kill lands 0.1..0.8 s in
		kill -9 $pid &&
		{ wait $pid; true; } &&
		i=$((i + 1)) || return 1
	done &&
	# Each agent sees its input end when sshd tears the session down;
	# 10 s covers a slow machine, not the 30 s start-up deadline.
	agents_gone 10
'

# An agent whose channel stays open but whose herd never speaks (a herd
# hung or stopped while connecting): it exits by itself once
# --hello-timeout (30 s by default) has passed with no frame.
test_expect_success 'an agent that never hears from herd exits after --hello-timeout' '
	mkfifo silent &&
	{ sleep 20 >silent & } &&
	holder=$! &&
	test_when_finished "kill $holder 2>/dev/null; true" &&
	start=$(date +%s%N) &&
	test_expect_code 0 herd-agent --stdio --hello-timeout 300 <silent >hello.out 2>hello.err &&
	ms=$(( ($(date +%s%N) - start) / 1000000 )) &&
	echo "agent exited after $ms ms" &&
	test $ms -ge 300 && test $ms -lt 5000 &&
	grep "no word from herd within 300 ms of starting; exiting" hello.err
'

test_expect_success 'herd-agent --hello-timeout refuses a value out of range' '
	test_expect_code 2 herd-agent --hello-timeout 5 </dev/null 2>err &&
	grep "hello-timeout wants milliseconds" err &&
	test_expect_code 2 herd-agent --hello-timeout 12x </dev/null 2>err
'

test_done
