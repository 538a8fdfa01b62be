#!/bin/sh

test_description='herd list with jobs on other hosts (issue 23 item 9): a job whose job_end is in its run directory here (a shared file system) is ended without asking its host; the others are asked each host once, every host at once, with a short bound: with both hosts dropping every packet herd list returns within a few seconds and shows those unknown (HOST unreachable)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare ssh ssh-keygen jq awk
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

XDG_STATE_HOME=$PWD/state
export XDG_STATE_HOME
REG=$XDG_STATE_HOME/herd/jobs

# far HOST ID [STATUS]: the run directory runs/ID of a job on HOST (its
# job.yaml has the ssh settings for HOST), with a job_end of STATUS when
# one is given, and its entry in the registry here, as herd run --detach
# --on HOST leaves them.
far() {
	mkdir -p "runs/$2" "$REG" &&
	cp far.yaml "runs/$2/job.yaml" &&
	{
		echo "{\"t\":1,\"event\":\"job_start\",\"job\":\"far\",\"run\":\"$2\",\"nodes\":1,\"spares\":0}"
		echo "{\"t\":2,\"event\":\"attempt_start\",\"attempt\":1,\"nodes\":1,\"world_size\":1}"
		[ -z "${3:-}" ] ||
			echo "{\"t\":3,\"event\":\"job_end\",\"status\":$3,\"attempts\":1}"
	} >"runs/$2/events.jsonl" &&
	jq -n --arg id "$2" --arg d "$PWD/runs/$2" --arg h "$1" \
		--arg j "$PWD/far.yaml" --arg c "$PWD" \
		"{id: \$id, name: \"far\", run_dir: \$d, host: \$h, pid: 4242,
		  started: 1, detached: true, job_file: \$j, cwd: \$c}" \
		>"$REG/$2.json"
}

# state_of ID: the STATE column herd list gave job ID (list.out).
state_of() {
	awk -v id="$1" '$1 == id { sub(/^[^ ]+  +far  +/, ""); sub(/  +[0-9-]+  +[0-9-]+  +[0-9-]+ .*$/, ""); print }' list.out
}

# accepted I: the logins node I's sshd has accepted so far.
accepted() {
	grep -c "Accepted publickey" "$HERD_CLUSTER_DIR/nodes/$(cluster_node "$1")/sshd.log"
}

test_expect_success 'setup: 2 nodes; 3 jobs on each, 2 of them ended (job_end in the run directory here)' '
	own_binaries &&
	cluster_up 2 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	trap "_rc=\$?; cluster_heal \"\$N1\"; cluster_heal \"\$N2\"; (exit \$_rc); _herd_cluster_exit; die" EXIT &&
	cat >far.yaml <<-EOF &&
	name: far
	nodes: {hosts: "$N1,$N2", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS, connect_timeout: 5s}
	restart: {max: 0}
	log: {dir: runs}
	launch: {command: "sleep 100"}
	EOF
	herd validate far.yaml &&
	far "$N1" 20261201-100000.000-a001 0 &&
	far "$N1" 20261201-100001.000-a002 3 &&
	far "$N1" 20261201-100002.000-a003 &&
	far "$N2" 20261201-100003.000-b001 143 &&
	far "$N2" 20261201-100004.000-b002 &&
	far "$N2" 20261201-100005.000-b003 0 &&
	test $(herd list --json | jq length) = 6
'

test_expect_success 'both hosts drop every packet: herd list returns within 6 s; the ended jobs are ended, the others unknown (HOST unreachable)' '
	cluster_partition "$N1" &&
	cluster_partition "$N2" &&
	t0=$(date +%s%3N) &&
	herd list --all >list.out 2>list.err &&
	t1=$(date +%s%3N) &&
	cat list.out list.err &&
	echo "herd list took $((t1 - t0)) ms" &&
	test $((t1 - t0)) -lt 6000 &&
	test "$(state_of 20261201-100000.000-a001)" = "ended (status 0)" &&
	test "$(state_of 20261201-100001.000-a002)" = "ended (status 3)" &&
	test "$(state_of 20261201-100003.000-b001)" = "ended (status 143)" &&
	test "$(state_of 20261201-100005.000-b003)" = "ended (status 0)" &&
	test "$(state_of 20261201-100002.000-a003)" = "unknown ($N1 unreachable)" &&
	test "$(state_of 20261201-100004.000-b002)" = "unknown ($N2 unreachable)" &&
	herd list --json >list.json &&
	jq -e "[.[] | select(.state == \"ended\")] | length == 4" list.json &&
	jq -e "[.[] | select(.state == \"unknown\")] | length == 2" list.json &&
	# --forget-ended forgets what ended, never an unknown one
	herd list --forget-ended >forget.out &&
	test $(grep -c "^forgot " forget.out) = 4 &&
	test $(herd list --json | jq length) = 2 &&
	cluster_heal "$N1" &&
	cluster_heal "$N2"
'

test_expect_success 'the hosts answer again: each is asked once, whatever number of its jobs' '
	far "$N1" 20261201-100006.000-a004 &&
	far "$N1" 20261201-100007.000-a005 &&
	cluster_wait_ssh "$N1" && cluster_wait_ssh "$N2" &&
	a1=$(accepted 1) && a2=$(accepted 2) &&
	t0=$(date +%s%3N) &&
	herd list --all >list.out 2>list.err &&
	t1=$(date +%s%3N) &&
	cat list.out list.err &&
	echo "herd list took $((t1 - t0)) ms" &&
	test $(($(accepted 1) - a1)) = 1 &&
	test $(($(accepted 2) - a2)) = 1 &&
	# the hosts have no such job in their registry (only here)
	test "$(state_of 20261201-100002.000-a003)" = "unknown (not registered on $N1)" &&
	test "$(state_of 20261201-100006.000-a004)" = "unknown (not registered on $N1)" &&
	test "$(state_of 20261201-100004.000-b002)" = "unknown (not registered on $N2)"
'

test_done
