#!/bin/sh

test_description='herd run over SSH on the local test cluster: rank variables, output tagging, exit status, Ctrl-C, kill -9 of herd and of an agent, agent upload'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq awk ps cmp stat
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"

# job NAME HOSTS SLOTS: writes NAME.yaml for the cluster, ranks starting
# in this directory; the rest of launch: (indented by two) comes from stdin.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"$2\", slots: $3}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {grace: 2s}"
		# One attempt: restarts are tested in t08xx.
		echo "restart: {max: 0}"
		echo "launch:"
		echo "  workdir: $PWD"
		sed 's/^/  /'
	} >"$1.yaml"
}

test_expect_success 'cluster of 4 nodes' '
	own_binaries &&
	cluster_up 4 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	TWO="${HERD_CLUSTER_PREFIX}[1-2]"
'

test_expect_success 'the agent is uploaded (exec channel) to ~/.cache/herd, mode 0700' '
	name=$(/usr/bin/python3 "$RUN_DATA/agent-name.py" bin/herd-agent \
		"$(herd-agent --version | cut -d" " -f2)") &&
	case $name in agent-*-????????????) ;; *) false ;; esac &&
	rm -f "/root/.cache/herd/$name" &&
	job up "$TWO" 1 <<-\EOF &&
	command: echo up
	EOF
	herd run up.yaml >out &&
	test "$(stat -c %a "/root/.cache/herd/$name")" = 700 &&
	cmp bin/herd-agent "/root/.cache/herd/$name" &&
	stat -c %Y "/root/.cache/herd/$name" >mtime.before &&
	herd run up.yaml >out &&
	stat -c %Y "/root/.cache/herd/$name" >mtime.after &&
	test_cmp mtime.before mtime.after &&
	printf "[0] up\n[1] up\n" >expect &&
	sort out >got &&
	test_cmp expect got &&
	test -z "$(ls -A /root/.cache/herd | grep "^\.$name")"
'

test_expect_success '2 nodes x 2 slots: every rank sees its variables; MASTER_ADDR is node 0 on the cluster network' '
	mkdir envs &&
	job vars "$TWO" 2 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/print-env.sh" "$PWD/envs" HT_PASS HT_NOT)
	env_pass: [HT_PASS]
	EOF
	HT_PASS=passed HT_NOT=local-only herd run vars.yaml >out 2>err &&
	a1=$(cluster_addr 1) &&
	case $a1 in 127.*) false ;; esac &&
	for r in 0 1 2 3; do
		node=$((r / 2)) &&
		cat >expect.$r <<-EOF &&
		RANK=$r
		LOCAL_RANK=$((r % 2))
		WORLD_SIZE=4
		LOCAL_WORLD_SIZE=2
		NODE_RANK=$node
		GROUP_RANK=$node
		MASTER_ADDR=$a1
		MASTER_PORT=29500
		TORCHELASTIC_RESTART_COUNT=0
		HERD_JOB=vars
		HERD_ATTEMPT=1
		HERD_RESUME_FROM=
		GLOO_SOCKET_IFNAME=eth0
		NCCL_SOCKET_IFNAME=eth0
		HT_PASS=passed
		HT_NOT!unset
		pwd=$PWD
		host=$(cluster_node $((node + 1)))
		EOF
		grep -v "^HERD_PROGRESS_FILE=" envs/env.$r >got.$r &&
		test_cmp expect.$r got.$r &&
		grep -x "HERD_PROGRESS_FILE=/tmp/herd-agent-[0-9]*/[0-9]*-[^/]*/rank-$r.progress" \
			envs/env.$r || return 1
	done &&
	test_must_be_empty out &&
	test "$(cluster_exec 1 ip -o -4 addr show dev eth0 | awk "{print \$4}" | cut -d/ -f1)" = "$a1" &&
	jq -e -n "[inputs | select(.event == \"node_up\") | .host] | sort == [\"$N1\", \"$N2\"]" runs/vars/latest/events.jsonl &&
	ev_all runs/vars/latest/events.jsonl attempt_start ".master_addr == \"$a1\" and .world_size == 4 and .nodes == 2" &&
	ev_all runs/vars/latest/events.jsonl job_start ".transport == \"ssh\""
'

test_expect_success '4 ranks x 10,000 lines: every line tagged with its rank, none lost, none mixed' '
	job tag "$TWO" 2 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/lines.sh" 10000)
	EOF
	herd run tag.yaml >out 2>err &&
	{ grep -v "^herd: logs in .*/runs/tag/2[0-9]*-[0-9]*\.[0-9]*-[0-9a-f]*$" err >err.other || :; } &&
	test_must_be_empty err.other &&
	test $(wc -l <out) -eq 40000 &&
	awk -v n=10000 -v ranks=4 -f "$RUN_DATA/check-lines.awk" out >complaints &&
	test_must_be_empty complaints &&
	for r in 0 1 2 3; do
		sed -n "s/^\[$r\] //p" out >want &&
		test_cmp want runs/tag/latest/attempt-1/rank-$r.log || return 1
	done
'

test_expect_success 'a rank exiting 7 on node 1: herd exits 7 and names rank and node' '
	job fail "$TWO" 2 <<-\EOF &&
	command: if [ $RANK = 3 ]; then exit 7; fi; exec sleep 60
	EOF
	test_expect_code 7 herd run fail.yaml 2>err &&
	grep "rank 3 on $N2 exited with status 7" err &&
	jq -c "select(.event == \"rank_exit\") | [.rank, .host, .status]" runs/fail/latest/events.jsonl | sort >got &&
	cat >expect <<-EOF &&
	[0,"$N1",143]
	[1,"$N1",143]
	[2,"$N2",143]
	[3,"$N2",7]
	EOF
	test_cmp expect got
'

# start_waiters NAME: runs rank-wait.sh on 2 nodes x 2 slots in the
# background and waits until every rank has written pids/pid.R; PGIDS:
# the ranks' process groups, each led by the rank's keeper, a child of
# the node's agent
start_waiters() {
	rm -rf pids && mkdir pids &&
	job "$1" "$TWO" 2 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/rank-wait.sh" "$PWD/pids")
	EOF
	run_bg "$1.yaml" out err &&
	wait_files 4 "pids/pid.?" 20 &&
	PGIDS=$(cat pids/pid.? | cut -d" " -f2)
}

test_expect_success 'Ctrl-C: every rank gets SIGINT, herd exits 130, no rank is left' '
	start_waiters intr &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID &&
	test $WAIT_RC = 130 &&
	for r in 0 1 2 3; do
		grep -x "\[$r\] rank $r got SIGINT" out || return 1
	done &&
	! grep SIGTERM out &&
	groups_gone $PGIDS &&
	jq -c "select(.event == \"rank_exit\") | .status" runs/intr/latest/events.jsonl >got &&
	test "$(sort -u got)" = 130 &&
	ev_all runs/intr/latest/events.jsonl job_end ".status == 130"
'

test_expect_success 'kill -9 of herd: no rank is alive 5 s later' '
	start_waiters k9 &&
	kill -9 $HERD_PID &&
	wait_exit $HERD_PID &&
	test $WAIT_RC = 137 &&
	groups_gone -t 5 $PGIDS
'

test_expect_success 'kill -9 of one agent: its ranks die, herd names the node and exits non-zero' '
	start_waiters agent9 &&
	keeper=$(cut -d" " -f2 pids/pid.2) &&
	agent=$(ps -o ppid= -p $keeper | tr -d " ") &&
	ps -o args= -p $agent | grep -q "/.cache/herd/agent-.* --stdio" &&
	# The keeper is the program the agent carries, run from a memfd,
	# in keeper mode under the agent'"'"'s name.
	tr "\0" " " <"/proc/$keeper/cmdline" | grep -q "/.cache/herd/agent-.* --keeper --rank 2 $" &&
	test "$(readlink /proc/$keeper/exe)" = "/memfd:herd-keeper (deleted)" &&
	test "$(cut -d" " -f2 pids/pid.3 | xargs ps -o ppid= -p | tr -d " ")" = $agent &&
	test "$(cut -d" " -f2 pids/pid.0 | xargs ps -o ppid= -p | tr -d " ")" != $agent &&
	ip netns pids "herd-$HERD_CLUSTER_ID-n2" | grep -qx $agent &&
	kill -9 $agent &&
	groups_gone -t 5 $(cut -d" " -f2 pids/pid.2 pids/pid.3) &&
	wait_exit $HERD_PID &&
	test $WAIT_RC -ne 0 &&
	grep "node $N2 failed" err &&
	groups_gone $PGIDS &&
	ev_all runs/agent9/latest/events.jsonl node_failed ".host == \"$N2\" and .attempt == 1" &&
	ev_all runs/agent9/latest/events.jsonl job_end ".status != 0"
'

# Issue 22 item 9: ~/.ssh/config (a HOME of the test's own).
test_expect_success '~/.ssh/config: HostName, User, Port, IdentityFile and UserKnownHostsFile are honoured; LogLevel DEBUG3 prints nothing without -v' '
	mkdir -p home/.ssh && chmod 700 home/.ssh &&
	{
		echo "Host first"
		echo "	HostName $N1"
		echo "Host *"
		echo "	User root"
		echo "	Port 22"
		echo "	IdentityFile $HERD_CLUSTER_KEY"
		echo "	UserKnownHostsFile $HERD_CLUSTER_KNOWN_HOSTS"
		echo "	LogLevel DEBUG3"
	} >home/.ssh/config &&
	{
		echo "name: cfg"
		echo "nodes: {hosts: \"first,$N2\", slots: 1}"
		echo "restart: {max: 0}"
		echo "launch:"
		echo "  workdir: $PWD"
		echo "  command: echo cfg"
	} >cfg.yaml &&
	HOME=$PWD/home herd run cfg.yaml >out 2>err &&
	cat err &&
	printf "[0] cfg\n[1] cfg\n" >expect &&
	sort out >got &&
	test_cmp expect got &&
	! grep -v "^herd: " err &&
	! grep "libssh" err &&
	HOME=$PWD/home herd run -v cfg.yaml >out.v 2>err.v &&
	grep "^herd: libssh: " err.v &&
	! grep -v "^herd: " err.v
'

test_expect_success 'a missing ssh.identity file is named as missing, not as a failed login' '
	job noid "$N1" 1 <<-\EOF &&
	command: echo x
	EOF
	sed -i "s|identity: $HERD_CLUSTER_KEY|identity: $PWD/no-such-key|" noid.yaml &&
	grep no-such-key noid.yaml &&
	! herd run noid.yaml >out 2>err &&
	cat err &&
	grep "ssh.identity $PWD/no-such-key: no such file" err &&
	! grep "authentication failed" err
'

test_done
