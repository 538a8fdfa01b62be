#!/bin/sh

test_description='herd run over SSH when nodes cannot be used: unknown and changed host keys, accept-new, unreachable node, unauthorized key; each named, exit 1, no half-started job'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# job NAME IDENTITY KNOWN_HOSTS [EXTRA-SSH-KEYS]: 2 nodes x 1 slot; every
# rank that starts appends to ./started.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-2]\", slots: 1}"
		echo "ssh: {identity: $2, known_hosts: $3$4}"
		echo "health: {grace: 1s}"
		echo "restart: {max: 0}"
		echo "launch:"
		echo "  workdir: $PWD"
		echo "  command: echo \$RANK >>started; echo ran"
	} >"$1.yaml"
}

# fp FILE.pub: the SHA256 fingerprint of a public key
fp() {
	ssh-keygen -l -E sha256 -f "$1" | cut -d" " -f2
}

# no_job NAME: nothing ran and the event log says the job ended with 1
# before any attempt
no_job() {
	test ! -e started &&
	ev_all "runs/$1/latest/events.jsonl" job_end ".status == 1 and .attempts == 0" &&
	! grep -q "\"event\":\"\(attempt_start\|rank_start\)\"" "runs/$1/latest/events.jsonl"
}

test_expect_success 'cluster of 2 nodes' '
	own_binaries &&
	cluster_up 2 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	ssh-keygen -q -t ed25519 -N "" -C stranger -f stranger &&
	for n in 1 2; do
		cp "$HERD_CLUSTER_DIR/nodes/$(cluster_node $n)/ssh_host_ed25519_key.pub" \
			host$n.pub || return 1
	done
'

test_expect_success 'strict: an unknown host key is refused, the node named, the fix told' '
	: >empty_known_hosts &&
	job unknown "$HERD_CLUSTER_KEY" "$PWD/empty_known_hosts" &&
	test_expect_code 1 herd run unknown.yaml >out 2>err &&
	for n in 1 2; do
		grep "$(cluster_node $n): host key $(fp host$n.pub) is not pinned in $PWD/empty_known_hosts" err || return 1
	done &&
	grep "herd keys unknown.yaml --accept-new\|herd keys JOB.yaml --accept-new" err &&
	grep "accept-new" err &&
	test_must_be_empty out &&
	test_must_be_empty empty_known_hosts &&
	no_job unknown
'

test_expect_success 'strict: a changed host key is refused with both fingerprints' '
	grep "^$N1[, ]" "$HERD_CLUSTER_KNOWN_HOSTS" |
		awk -v k="$(cut -d" " -f1,2 stranger.pub)" "{print \$1, k}" >changed_known_hosts &&
	grep "^$N2[, ]" "$HERD_CLUSTER_KNOWN_HOSTS" >>changed_known_hosts &&
	job changed "$HERD_CLUSTER_KEY" "$PWD/changed_known_hosts" &&
	test_expect_code 1 herd run changed.yaml >out 2>err &&
	grep "$N1: HOST KEY CHANGED" err >msg &&
	grep "presents $(fp host1.pub)" msg &&
	grep "pins $(fp stranger.pub)" msg &&
	grep "$PWD/changed_known_hosts:1" msg &&
	! grep "$N2:" err &&
	test_must_be_empty out &&
	no_job changed
'

test_expect_success 'accept-new pins unknown keys into known_hosts and the run succeeds' '
	: >new_known_hosts &&
	job accept "$HERD_CLUSTER_KEY" "$PWD/new_known_hosts" ", host_keys: accept-new" &&
	herd run accept.yaml >out &&
	printf "[0] ran\n[1] ran\n" >expect &&
	sort out >got &&
	test_cmp expect got &&
	rm started &&
	for n in 1 2; do
		ssh-keygen -F $(cluster_node $n) -f new_known_hosts >line &&
		test "$(grep -v "^#" line | cut -d" " -f2,3)" = "$(cut -d" " -f1,2 host$n.pub)" || return 1
	done &&
	test $(grep -c . new_known_hosts) = 2 &&
	job pinned "$HERD_CLUSTER_KEY" "$PWD/new_known_hosts" &&
	herd run pinned.yaml >out &&
	rm started
'

test_expect_success 'accept-new still refuses a changed key' '
	job acceptchanged "$HERD_CLUSTER_KEY" "$PWD/changed_known_hosts" ", host_keys: accept-new" &&
	test_expect_code 1 herd run acceptchanged.yaml 2>err &&
	grep "$N1: HOST KEY CHANGED" err &&
	no_job acceptchanged
'

test_expect_success 'a key the nodes do not authorize: named error, exit 1, nothing runs' '
	job wrongkey "$PWD/stranger" "$HERD_CLUSTER_KNOWN_HOSTS" &&
	test_expect_code 1 herd run wrongkey.yaml >out 2>err &&
	for n in 1 2; do
		grep "$(cluster_node $n): authentication failed for user root" err || return 1
	done &&
	grep "$PWD/stranger" err &&
	test_must_be_empty out &&
	no_job wrongkey
'

test_expect_success 'an unreachable node (link down): named timeout, exit 1, nothing runs on the other' '
	cluster_partition 2 &&
	job unreachable "$HERD_CLUSTER_KEY" "$HERD_CLUSTER_KNOWN_HOSTS" ", connect_timeout: 2s" &&
	start=$(date +%s) &&
	test_expect_code 1 herd run unreachable.yaml >out 2>err &&
	# connect_timeout 2s, not the ~2 minutes of SYN retries of the kernel
	# (a loose bound: a loaded machine starts herd slowly)
	test $(($(date +%s) - start)) -le 60 &&
	cluster_heal 2 &&
	grep "$N2: cannot connect: .*imeout" err &&
	grep "1 of 2 nodes are up" err &&
	! grep "$N1:" err &&
	test_must_be_empty out &&
	no_job unreachable &&
	ev_all runs/unreachable/latest/events.jsonl node_failed ".host == \"$N2\"" &&
	ev_all runs/unreachable/latest/events.jsonl node_up ".host == \"$N1\""
'

test_expect_success 'a name that does not resolve: named error, exit 1' '
	sed "s/\"${HERD_CLUSTER_PREFIX}\[1-2\]\"/\"${HERD_CLUSTER_PREFIX}1,nosuchnode-$HERD_CLUSTER_ID\"/" \
		unreachable.yaml >noname.yaml &&
	sed -i "s/^name: .*/name: noname/" noname.yaml &&
	test_expect_code 1 herd run noname.yaml 2>err &&
	grep "nosuchnode-$HERD_CLUSTER_ID: cannot connect" err &&
	no_job noname
'

# fatal NAME COMMAND WORKDIR: 2 nodes x 2 slots, 3 restarts 2 s apart
fatal() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-2]\", slots: 2}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {grace: 1s}"
		echo "restart: {max: 3, backoff: 2s}"
		echo "launch:"
		echo "  workdir: $3"
		echo "  command: $2"
	} >"$1.yaml"
}

# attempts NAME: how many attempts the latest run of NAME started
attempts() {
	jq -c "select(.event == \"attempt_start\")" "runs/$1/latest/events.jsonl" | wc -l
}

test_expect_success 'a command no rank finds: one attempt, exit 127, one line naming it' '
	fatal nocmd /no/such/prog "$PWD" &&
	test_expect_code 127 herd run nocmd.yaml >out 2>err &&
	cat err &&
	# one attempt: no restart, so none of the 2 + 4 + 8 s of backoff
	test "$(attempts nocmd)" = 1 &&
	test "$(grep -c "^herd: .*/no/such/prog" err)" = 1 &&
	grep "^herd: every rank exited with status 127 (command not found): launch.command ./no/such/prog.; not restarting" err &&
	! grep "recovering\|restart limit" err &&
	ev_all runs/nocmd/latest/events.jsonl job_end ".status == 127 and .attempts == 1"
'

test_expect_success 'a workdir that does not exist: one attempt, named once' '
	fatal nowd "echo ran" "$PWD/no-such-dir" &&
	test_expect_code 127 herd run nowd.yaml >out 2>err &&
	cat err &&
	test "$(attempts nowd)" = 1 &&
	test "$(grep -c "no-such-dir" err)" = 1 &&
	grep "launch.workdir $PWD/no-such-dir does not exist there; stopping the attempt" err &&
	grep "^herd: not restarting: a restart cannot make the missing workdir" err &&
	! grep "recovering\|restart limit" err &&
	test_must_be_empty out
'

test_expect_success 'a command that fails on one rank only is still restarted' '
	fatal somecmd "test \$RANK = 1 || exit 0; /no/such/prog" "$PWD" &&
	sed -i "s/max: 3, backoff: 2s/max: 1, backoff: 100ms/" somecmd.yaml &&
	test_expect_code 127 herd run somecmd.yaml >out 2>err &&
	cat err &&
	test "$(attempts somecmd)" = 2 &&
	grep "^herd: attempt 1 failed; recovering" err &&
	grep "^herd: restart limit reached (restart.max 1)" err
'

test_expect_success 'the cluster still works afterwards' '
	job ok "$HERD_CLUSTER_KEY" "$HERD_CLUSTER_KNOWN_HOSTS" &&
	herd run ok.yaml >out &&
	test $(wc -l <out) = 2
'

test_done
