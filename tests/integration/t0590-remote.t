#!/bin/sh

test_description='herd run --detach --on HOST: the controller runs on node 1 and the job goes on while the launching machine has no route to the nodes; herd list, logs, attach and stop reach it through the proxy; a wrong host key on HOST is refused; no secret and no job file byte on any command line'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq awk ps
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# The registry on the nodes: sshd gives the job user (root) HOME=/root.
NODE_JOBS=/root/.local/state/herd/jobs

# The route from this machine (the root namespace) to the node network,
# taken away and given back; given back whatever happens (EXIT trap).
route_cut() {
	ip route del "$HERD_CLUSTER_SUBNET" dev "hb$HERD_CLUSTER_ID"
}
route_back() {
	ip route replace "$HERD_CLUSTER_SUBNET" dev "hb$HERD_CLUSTER_ID" \
		proto kernel scope link src "$HERD_CLUSTER_GATEWAY"
}

# Whatever happens, the route comes back, the controller is gone and the
# nodes' registry loses this test's entry (the EXIT trap, before the
# cluster is torn down).
CTL_PID= JOB_ID= SHARED_PID= SHARED_ID=
cleanup() {
	route_back 2>/dev/null
	[ -z "$CTL_PID" ] || kill -9 "$CTL_PID" 2>/dev/null
	[ -z "$JOB_ID" ] || rm -f "$NODE_JOBS/$JOB_ID.json"
	[ -z "$SHARED_PID" ] || kill -9 "$SHARED_PID" 2>/dev/null
	[ -z "$SHARED_ID" ] || rm -f "$NODE_JOBS/$SHARED_ID.json"
	return 0
}

# ticks R: the last tick rank R wrote to its log.
ticks() {
	tail -n 1 "$RUN_DIR/attempt-1/rank-$1.log" 2>/dev/null |
		awk '$1 == "tick" { print $2 }'
}

# within S CMD...: poll until CMD succeeds, at most S seconds.
within() {
	_w_end=$(($(date +%s%3N) + $1 * 1000))
	shift
	until "$@"; do
		[ "$(date +%s%3N)" -lt $_w_end ] || {
			echo "not within the time: $*" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

# tick_past R N: rank R's log has a tick above N.
tick_past() {
	_tp=$(ticks "$1")
	[ -n "$_tp" ] && [ "$_tp" -gt "$2" ]
}

# wait_ticks_past R N [S]: rank R's log reaches a tick above N (S s, 10).
wait_ticks_past() { within "${3:-10}" tick_past "$1" "$2"; }

gone() { ! kill -0 "$1" 2>/dev/null; }
no_remote_attach() { ! ps -e -o args= | grep -q "^[^ ]*/herd attach $1"; }

# node_clean I: nothing but sshd runs in node I's namespace.
node_clean() {
	_nc_ns=herd-$HERD_CLUSTER_ID-n$1
	for _nc_p in $(ip netns pids "$_nc_ns"); do
		_nc_c=$(cat "/proc/$_nc_p/comm" 2>/dev/null) || continue
		[ "$_nc_c" = sshd ] || {
			echo "node $1: $_nc_p $_nc_c still runs" >&2
			return 1
		}
	done
}

test_expect_success 'cluster of 2 nodes; a job of 2 ranks that ticks' '
	own_binaries &&
	cluster_up 2 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	trap "_rc=\$?; cleanup; (exit \$_rc); _herd_cluster_exit; die" EXIT &&
	cat >long.yaml <<-EOF &&
	name: long
	# secret-marker-7f3a: the job file travels on stdin, never in argv
	nodes: {hosts: "$N1,$N2", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {timeout: 2s, grace: 2s}
	restart: {max: 0}
	log: {dir: runs/long}
	launch:
	  workdir: $PWD
	  command: "i=0; while :; do i=\$((i + 1)); echo tick \$i; sleep 0.2; done"
	EOF
	herd validate long.yaml
'

test_expect_success 'herd run --detach --on node 1: the controller runs there (its network namespace); the job id, its run dir; registered here with host node 1' '
	herd run --detach --on "$N1" long.yaml >out 2>err &&
	JOB_ID=$(awk "\$1 == \"job\" { print \$2 }" out) &&
	RUN_DIR=$(sed -n "s/^run dir //p" out) &&
	test -n "$JOB_ID" && test -d "$RUN_DIR" &&
	grep -qx "attach with: herd attach $JOB_ID" out &&
	jq -e --arg h "$N1" ".host == \$h and .detached" \
		"$HOME/.local/state/herd/jobs/$JOB_ID.json" &&
	jq -r .remote_herd "$HOME/.local/state/herd/jobs/$JOB_ID.json" >rh &&
	grep -q "/herd-[0-9.]*-[0-9a-f]\{12\}/herd\$" rh &&
	CTL_PID=$(jq -r .pid "$NODE_JOBS/$JOB_ID.json") &&
	test "$CTL_PID" -gt 0 &&
	test "$(ip netns identify "$CTL_PID")" = "herd-$HERD_CLUSTER_ID-n1" &&
	wait_ticks_past 0 3 && wait_ticks_past 1 3
'

test_expect_success 'no secret and no byte of the job file on a command line; the cwd (with a space) one argument' '
	! grep -l secret-marker-7f3a /proc/[0-9]*/cmdline 2>/dev/null &&
	tr "\0" "\n" <"/proc/$CTL_PID/cmdline" >ctl.args &&
	grep -qx -- "--job-stdin" ctl.args &&
	grep -qxF -- "$PWD" ctl.args &&
	grep -qxF -- "$PWD/long.yaml" ctl.args &&
	! grep -q "HERD_JOB_SECRET\|secret" ctl.args
'

test_expect_success 'no route from here to the nodes for longer than health.timeout: the job goes on (seen from node 1 and the shared file system)' '
	route_cut &&
	test_expect_code 255 herd status "$JOB_ID" >st.out 2>st.err &&
	cat st.err &&
	test "$(wc -l <st.err)" = 1 &&
	grep -q "$N1" st.err &&
	herd list >list.cut &&
	grep "$JOB_ID" list.cut | grep -q "unknown ($N1 unreachable)" &&
	before=$(ticks 0) &&
	t0=$(date +%s) &&
	# health.timeout is 2 s: 6 s without the launching machine
	wait_ticks_past 0 $((before + 25)) 15 &&
	wait_ticks_past 1 $((before + 25)) 15 &&
	test $(( $(date +%s) - t0 )) -ge 4 &&
	cluster_exec "$N1" kill -0 "$CTL_PID" &&
	! jq -e "select(.event == \"node_failed\")" "$RUN_DIR/events.jsonl" &&
	route_back
'

test_expect_success 'route back: herd list shows the job with host node 1 and running, through the proxy' '
	herd list --json >list.json &&
	jq -e --arg id "$JOB_ID" --arg h "$N1" \
		"(if type == \"array\" then .[] else . end) | select(.id == \$id) | .host == \$h" list.json &&
	herd list >list.txt &&
	grep "$JOB_ID" list.txt | grep -q running
'

test_expect_success 'herd logs through the proxy: every rank, tagged' '
	herd logs "$JOB_ID" >logs.out &&
	grep -q "^\[0\] tick" logs.out &&
	grep -q "^\[1\] tick" logs.out &&
	herd logs "$JOB_ID" --rank 1 >logs1.out &&
	grep -q "^tick" logs1.out
'

test_expect_success 'herd attach through the proxy: live output; Ctrl-C ends the attach (exit 0), never the job' '
	herd attach "$JOB_ID" >att.out 2>att.err &
	ATT=$! &&
	within 10 grep -q "^\[[01]\] tick" att.out &&
	kill -INT $ATT &&
	wait_exit $ATT 10 &&
	test "$WAIT_RC" = 0 &&
	grep -q "detached from $JOB_ID" att.err &&
	# the remote attach ended too (not only its session)
	within 5 no_remote_attach "$JOB_ID" &&
	now=$(ticks 0) &&
	wait_ticks_past 0 $((now + 3)) &&
	cluster_exec "$N1" kill -0 "$CTL_PID"
'

test_expect_success 'herd stop through the proxy: the job ends, nothing is left on any node' '
	test_expect_code 143 herd stop "$JOB_ID" --wait >stop.out 2>stop.err;
	rc=$? &&
	cat stop.out stop.err &&
	test $rc = 0 &&
	within 10 gone "$CTL_PID" &&
	CTL_PID= &&
	jq -e "select(.event == \"job_end\")" "$RUN_DIR/events.jsonl" &&
	node_clean 1 && node_clean 2 &&
	herd status "$JOB_ID" >st2.out &&
	cat st2.out
'

test_expect_success 'the controller on HOST dies (kill -9): the agents stop every rank after health.timeout; herd list says lost; herd run --detach --on HOST --resume RUNDIR starts the job again there' '
	# the run was stopped (job_end 143): refused without --force (issue 23)
	test_expect_code 1 herd run --detach --on "$N1" --resume "$RUN_DIR" 2>res.err &&
	grep "^herd: run --resume: .* ended (status 143); --force starts it again" res.err &&
	herd run --detach --on "$N1" --resume "$RUN_DIR" --force >res.out 2>res.err &&
	RES_ID=$(awk "\$1 == \"job\" { print \$2 }" res.out) &&
	RES_DIR=$(sed -n "s/^run dir //p" res.out) &&
	test "$RES_DIR" != "$RUN_DIR" &&
	grep -q "resuming $JOB_ID" res.err &&
	CTL_PID=$(jq -r .pid "$NODE_JOBS/$RES_ID.json") &&
	test "$(ip netns identify "$CTL_PID")" = "herd-$HERD_CLUSTER_ID-n1" &&
	RUN_DIR=$RES_DIR &&
	wait_ticks_past 0 3 &&
	cluster_exec "$N1" kill -9 "$CTL_PID" &&
	within 10 gone "$CTL_PID" &&
	CTL_PID= &&
	# health.timeout 2 s, then SIGTERM and SIGKILL after health.grace 2 s
	within 12 node_clean 1 && within 12 node_clean 2 &&
	herd list >list.lost &&
	grep "$RES_ID" list.lost | grep -q lost &&
	# the killed controller left its socket (HOST has no
	# XDG_RUNTIME_DIR: /tmp/herd-UID, shared with this machine)
	sock=$(jq -r .sock "$NODE_JOBS/$RES_ID.json") &&
	rm -f "$NODE_JOBS/$RES_ID.json" "$sock"
'

test_expect_success 'a home shared with HOST (one registry): the entry keeps the controller'"'"'s pid and socket and gains the host' '
	HOME=/root herd run --detach --json --on "$N1" long.yaml >shared.json &&
	SHARED_ID=$(jq -r .id shared.json) &&
	jq -e --arg h "$N1" ".host == \$h" shared.json &&
	e=$NODE_JOBS/$SHARED_ID.json &&
	jq -e --arg h "$N1" ".host == \$h and .pid > 0 and (.sock | type) == \"string\"" "$e" &&
	SHARED_PID=$(jq -r .pid "$e") &&
	test "$(ip netns identify "$SHARED_PID")" = "herd-$HERD_CLUSTER_ID-n1"
'

# Needs ctlclient_find() (launcher/view/ctlclient.c) to refuse only entries for
# which remote_entry_is_remote() holds, not every entry with a host: the
# herd that the proxy runs on HOST (HERD_PROXIED set) must act there.
test_expect_success 'a home shared with HOST: herd stop through the proxy acts on HOST, not through HOST again' '
	(HOME=/root && export HOME &&
		test_expect_code 143 herd stop "$SHARED_ID" --wait) >sstop.out 2>sstop.err;
	rc=$? &&
	cat sstop.out sstop.err &&
	test $rc = 0 &&
	grep -q "ended, exit status" sstop.out
'

test_expect_success 'a home shared with HOST: the job ends (SIGTERM to its controller), nothing is left on any node' '
	kill "$SHARED_PID" 2>/dev/null;
	within 10 gone "$SHARED_PID" &&
	rm -f "$NODE_JOBS/$SHARED_ID.json" &&
	node_clean 1 && node_clean 2
'

test_expect_success 'a wrong host key on HOST is refused as for nodes: nothing runs there' '
	ssh-keygen -q -t ed25519 -N "" -f wrong_key &&
	printf "%s %s\n" "$N2" "$(cut -d" " -f1-2 wrong_key.pub)" >wrong_known_hosts &&
	sed "s|known_hosts: [^}]*}|known_hosts: $PWD/wrong_known_hosts}|" long.yaml >badkey.yaml &&
	grep -q wrong_known_hosts badkey.yaml &&
	test_expect_code 1 herd run --detach --on "$N2" badkey.yaml >bad.out 2>bad.err &&
	cat bad.err &&
	grep -q "$N2.*HOST KEY CHANGED" bad.err &&
	test "$(wc -l <bad.err)" = 1 &&
	test ! -s bad.out &&
	node_clean 2
'

test_expect_success 'the route is back; no entry of this test left on node 1' '
	cleanup
'

test_done
