#!/bin/sh

test_description='local test cluster: netns nodes with their own sshd, names, teardown'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen ssh-keyscan getent bash
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# ssh exactly as the issue states it: by name, strict host key checking
# against the cluster's known_hosts, the cluster's key.
strict_ssh() {
	ssh -o StrictHostKeyChecking=yes -o BatchMode=yes -o IdentitiesOnly=yes \
		-o UserKnownHostsFile="$HERD_CLUSTER_KNOWN_HOSTS" \
		-i "$HERD_CLUSTER_KEY" -l root "$@"
}

# tcp_open HOST [FROM-NODE]: true when HOST:22 accepts a connection.
tcp_open() {
	timeout 2 bash -c 'exec 3<>/dev/tcp/$0/22' "$1"
}

# pid_gone PID: poll (bounded, 5 s) until PID has exited and been reaped.
pid_gone() {
	i=0
	while kill -0 "$1" 2>/dev/null; do
		i=$((i + 1))
		test $i -lt 500 || { echo "pid $1 still there" >&2; return 1; }
		sleep 0.01   # poll interval of a bounded wait
	done
}

test_expect_success 'up 4 nodes' '
	cluster_up 4 &&
	test -d "$HERD_CLUSTER_DIR" &&
	test $(echo $HERD_CLUSTER_NODES | wc -w) -eq 4 &&
	for f in "$HERD_CLUSTER_KEY" "$HERD_CLUSTER_KNOWN_HOSTS" "$HERD_CLUSTER_DIR/env"; do
		test -s "$f" || return 1
	done &&
	test $(wc -l <"$HERD_CLUSTER_KNOWN_HOSTS") -eq 4 &&
	test $(ip netns list | grep -c "^herd-$HERD_CLUSTER_ID-") -eq 4
'

test_expect_success 'names resolve through a marked block in /etc/hosts' '
	grep "^# BEGIN herd-test-cluster $HERD_CLUSTER_ID " /etc/hosts &&
	grep "^# END herd-test-cluster $HERD_CLUSTER_ID\$" /etc/hosts &&
	for n in $HERD_CLUSTER_NODES; do
		test "$(getent hosts $n | awk "{print \$1}")" = "$(cluster_addr $n)" || return 1
	done
'

test_expect_success 'ssh by name with strict host keys: each node is its own host' '
	for n in $HERD_CLUSTER_NODES; do
		strict_ssh $n hostname >out &&
		echo $n >expect &&
		test_cmp expect out || return 1
	done
'

test_expect_success 'on each node its own name is 127.0.1.1' '
	for n in $HERD_CLUSTER_NODES; do
		strict_ssh $n "getent hosts \$(hostname)" >out &&
		test "$(awk "{print \$1}" out)" = 127.0.1.1 || return 1
	done &&
	getent hosts $(cluster_node 1) >out &&
	test "$(awk "{print \$1}" out)" != 127.0.1.1
'

test_expect_success 'nodes reach each other by name over the veth network' '
	n1=$(cluster_node 1) &&
	others=$(echo $HERD_CLUSTER_NODES | tr " " "\n" | grep -vx $n1) &&
	for n in $others; do
		echo "$n $(cluster_addr $n)" &&
		grep "^$n," "$HERD_CLUSTER_KNOWN_HOSTS" | cut -d" " -f2- || return 1
	done >want &&
	# the filesystem is shared: node 1 runs a script from this directory
	cat >peers.sh <<-\EOF &&
	for n in "$@"; do
		echo "$n $(getent hosts $n | cut -d" " -f1)" &&
		bash -c "exec 3<>/dev/tcp/$n/22" &&
		ssh-keyscan -T 5 -t ed25519 $n 2>/dev/null | cut -d" " -f2- || exit 1
	done
	EOF
	cluster_ssh 1 sh "\"$PWD/peers.sh\"" $others >got &&
	test_cmp want got
'

test_expect_success 'a wrong host key is refused (host keys are really checked)' '
	n2=$(cluster_node 2) &&
	sed "s/^$(cluster_node 1),[^ ]*/$n2,$(cluster_addr 2)/" "$HERD_CLUSTER_KNOWN_HOSTS" |
		grep "^$n2," | head -n 1 >bad_known_hosts &&
	test_must_fail ssh -o StrictHostKeyChecking=yes -o BatchMode=yes \
		-o UserKnownHostsFile="$PWD/bad_known_hosts" -i "$HERD_CLUSTER_KEY" \
		root@$n2 true
'

test_expect_success 'cluster_exec runs in the node namespaces' '
	cluster_exec 3 hostname >out &&
	cluster_node 3 >expect &&
	test_cmp expect out
'

test_expect_success 'kill a node: every process in its namespace is gone' '
	n4=$(cluster_node 4) &&
	cluster_kill_node 4 &&
	test -z "$(ip netns pids herd-$HERD_CLUSTER_ID-n4)" &&
	test_must_fail tcp_open $n4 &&
	tcp_open $(cluster_node 1)
'

test_expect_success 'start the killed node again' '
	cluster_start_node 4 &&
	strict_ssh $(cluster_node 4) hostname >out &&
	cluster_node 4 >expect &&
	test_cmp expect out
'

test_expect_success 'partition a node and heal it' '
	n3=$(cluster_node 3) &&
	cluster_partition 3 &&
	test_must_fail tcp_open $n3 &&
	tcp_open $(cluster_node 2) &&
	cluster_heal 3 &&
	cluster_wait_ssh 3 &&
	strict_ssh $n3 hostname
'

test_expect_success 'down removes namespaces, bridge, hosts block, sshds, state' '
	id=$HERD_CLUSTER_ID &&
	dir=$HERD_CLUSTER_DIR &&
	cat "$dir"/nodes/*/pid >pids &&
	test $(wc -l <pids) -eq 4 &&
	cluster_down &&
	test -z "$(ip netns list | grep "^herd-$id-")" &&
	test_must_fail ip link show hb$id &&
	test -z "$(ip -o link show | grep "hv${id}n")" &&
	test_must_fail grep "herd-test-cluster $id" /etc/hosts &&
	for p in $(cat pids); do
		pid_gone $p || return 1
	done &&
	test ! -e "$dir"
'

test_expect_success 'down twice is harmless' '
	"$HERD_ROOT/tests/cluster/down" "$dir"
'

test_expect_success 'up again in the same directory after down, then down' '
	cluster_up 2 "$dir" &&
	test "$HERD_CLUSTER_DIR" = "$dir" &&
	strict_ssh $(cluster_node 2) hostname &&
	test_must_fail "$HERD_ROOT/tests/cluster/up" 2 "$dir" &&
	cluster_down
'

test_expect_success 'up 8 nodes in under 5 s (10 s allowed on slow CI), next to another cluster' '
	cluster_up 2 &&
	other=$HERD_CLUSTER_DIR other_subnet=$HERD_CLUSTER_SUBNET &&
	start=$(date +%s%N) &&
	cluster_up 8 &&
	end=$(date +%s%N) &&
	ms=$(( (end - start) / 1000000 )) &&
	say "# up of 8 nodes took $ms ms (up itself: $(cat $HERD_CLUSTER_DIR/up_seconds) s)" &&
	test $ms -lt 10000 &&
	test "$HERD_CLUSTER_SUBNET" != "$other_subnet" &&
	for n in $HERD_CLUSTER_NODES; do
		strict_ssh $n hostname >out.$n &
	done &&
	wait &&
	for n in $HERD_CLUSTER_NODES; do
		echo $n >expect && test_cmp expect out.$n || return 1
	done &&
	cluster_down &&
	cluster_down "$other"
'

# Issue 22: scripts run side by side, and each up and down edits
# /etc/hosts.  A rewrite (truncate, then write) left it empty for an
# instant, and a script resolving its own node then failed (t0537:
# "Failed to resolve hostname"; here 4 misses in 20 rounds before).
test_expect_success 'names keep resolving while other clusters come up and go down' '
	cluster_up 1 &&
	mine=$HERD_CLUSTER_NODES &&
	rm -f stop misses &&
	{ while [ ! -e stop ]; do
		getent hosts $mine >/dev/null || echo miss >>misses
	done & } &&
	looker=$! &&
	for i in $(seq 20); do
		d=$("$HERD_CLUSTER_TOOLS/up" 1 2>/dev/null) &&
		"$HERD_CLUSTER_TOOLS/down" "$d" >/dev/null 2>&1 || break
	done &&
	touch stop &&
	wait $looker &&
	test "$i" = 20 &&
	test ! -e misses &&
	cluster_down
'

test_expect_success 'nothing of ours is left' '
	test -z "$_herd_cluster_dirs" &&
	test -z "$(ip netns list | grep "^herd-$id-")"
'

test_done
