#!/bin/sh

test_description='warm interpreters (launch.warm, launch.preload) on the test cluster: a warm rank sees exactly what a cold one sees, a torch job starts warm and sooner, launch.warm off and commands that are not a Python script run cold, nothing of the job is imported before LAUNCH, the agent killed leaves nothing, a warm interpreter killed comes back, another user cannot reach one'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq awk ps pgrep \
	setpriv
[ -x /usr/sbin/sshd ] ||
	error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"
/usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import torch.distributed"

WARM_DATA=$HERD_TEST_DIR/data/warm

# job NAME COMMAND: NAME.yaml on nodes 1-2 (one slot each), node 3 a
# spare, workdir ./wd; more launch: lines (indented by two) on stdin
# when it is not a terminal; JOB_ENV: more of launch.env (", K: V"),
# JOB_RESTART: restart: instead of {max: 0}.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"$TWO\", slots: 1, spares: \"$(cluster_node 3)\"}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 2s}"
		echo "restart: ${JOB_RESTART:-{max: 0\}}"
		echo "launch:"
		printf '  command: %s\n' "$2"
		echo "  workdir: \"$PWD/wd\""
		echo "  env: {OMP_NUM_THREADS: \"1\"${JOB_ENV:-}}"
		[ -t 0 ] || sed 's/^/  /'
	} >"$1.yaml"
}

# show NAME [ARGS...]: the command running wd/show.py into out-NAME
show_cmd() {
	_sc=$1
	shift
	mkdir -p "out-$_sc" &&
	yaml_cmd /usr/bin/python3 show.py "$PWD/out-$_sc" "$@"
}

ev() { echo "runs/$1/latest/events.jsonl"; }

# same_show COLD WARM: the two show files but for what names the run
# or its agent (the memory tier's job directory, the control socket).
same_show() {
	for _ss in "$1" "$2"; do
		sed "s/\"HERD_CKPT_MEM=[^\"]*\"/\"HERD_CKPT_MEM=\"/; s/\"HERD_CONTROL=[^\"]*\"/\"HERD_CONTROL=\"/" "$_ss" >"$_ss.same" || return 1
	done &&
	test_cmp "$1.same" "$2.same"
}

# warm_pids [AGENT_DIR]: pids of the warm interpreters (of one agent) on
# this test's cluster: the suite runs other tests' agents beside it, and
# their interpreters are neither counted nor touched (test 8 failed in a
# full make check, most likely on one of theirs; test 10 could kill one)
warm_pids() {
	_wp_in=$(for _wp_ns in $(ip netns list | awk '{print $1}' |
		grep "^herd-$HERD_CLUSTER_ID-n[0-9]*\$"); do
		ip netns pids "$_wp_ns"
	done)
	for _wp_p in $(pgrep -f -- "^/usr/bin/python3 ${1:-/tmp/herd-agent-}.*/warm_boot\.py "); do
		echo "$_wp_in" | grep -qx "$_wp_p" && echo "$_wp_p"
	done
	return 0
}

# warm_ready: how many warm interpreters wait for their rank (blocked in
# read(2) on their channel, fd 3)
warm_ready() {
	for _p in $(warm_pids); do
		cut -d" " -f1,2 /proc/$_p/syscall 2>/dev/null
	done | grep -c "^0 0x3\$"
}
ready_at_least() { [ "$(warm_ready)" -ge "$1" ]; }
# has_warm AGENT_DIR: that agent has a warm interpreter (idle or a rank)
has_warm() { [ -n "$(warm_pids "$1")" ]; }
# idle_warm_pids: the warm interpreters that wait (not ranks yet)
idle_warm_pids() {
	for _p in $(warm_pids); do
		cut -d" " -f1,2 /proc/$_p/syscall 2>/dev/null | grep -q "^0 0x3\$" &&
			echo $_p
	done
}

# wait_for CMD... : poll (60 s at most) until CMD succeeds
wait_for() {
	_wf_i=0
	until "$@"; do
		_wf_i=$((_wf_i + 1))
		[ $_wf_i -lt 1200 ] || { echo "not true after 60 s: $*" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

test_expect_success 'cluster of 3 nodes' '
	own_binaries &&
	cluster_up 3 &&
	TWO="${HERD_CLUSTER_PREFIX}[1-2]" &&
	mkdir wd &&
	cp "$WARM_DATA/show.py" "$WARM_DATA/ddp.py" wd/
'

test_expect_success 'a warm rank sees what a cold one sees: environment, argv, workdir, sys.path, binding, process group, __main__, stdio, torch threads' '
	job warm "$(show_cmd warm)" &&
	herd run warm.yaml >out.warm 2>err.warm &&
	ev_all "$(ev warm)" rank_start ".warm == true" &&
	job cold "$(show_cmd cold)" <<-EOF &&
	warm: "off"
	EOF
	herd run cold.yaml >out.cold 2>err.cold &&
	ev_all "$(ev cold)" rank_start ".warm == false" &&
	for r in 0 1; do
		sed "s/out-cold/out-warm/g; s/HERD_JOB=cold/HERD_JOB=warm/" \
			out-cold/show.$r >expect &&
		same_show expect out-warm/show.$r || return 1
	done &&
	grep "^cwd \"$PWD/wd\"\$" out-warm/show.0 &&
	grep "^argv \[\"show.py\", \"$PWD/out-warm\"\]\$" out-warm/show.0 &&
	grep "^own_group false\$" out-warm/show.0 &&
	grep "^leader_parent_is_agent true\$" out-warm/show.0 &&
	grep "^cuda_initialized false\$" out-warm/show.0 &&
	grep "^dist_initialized false\$" out-warm/show.0
'

test_expect_success 'the same with -u, PYTHONPATH, a failing exit status and output tagged by rank' '
	mkdir -p lib &&
	JOB_ENV=", PYTHONPATH: \"$PWD/lib:rel\"" &&
	job warmu "$(yaml_cmd /usr/bin/python3 -u show.py "$PWD/out-warmu" exit3)" &&
	mkdir -p out-warmu out-coldu &&
	test_expect_code 3 herd run warmu.yaml >out.warmu 2>err.warmu &&
	ev_all "$(ev warmu)" rank_start ".warm == true" &&
	jq -e -n "[inputs | select(.event == \"rank_exit\" and .code == 3)] | length > 0" "$(ev warmu)" &&
	job coldu "$(yaml_cmd /usr/bin/python3 -u show.py "$PWD/out-coldu" exit3)" <<-EOF &&
	warm: "off"
	EOF
	JOB_ENV= &&
	test_expect_code 3 herd run coldu.yaml >out.coldu 2>err.coldu &&
	ev_all "$(ev coldu)" rank_start ".warm == false" &&
	for r in 0 1; do
		sed "s/out-coldu/out-warmu/g; s/HERD_JOB=coldu/HERD_JOB=warmu/" \
			out-coldu/show.$r >expect &&
		same_show expect out-warmu/show.$r || return 1
	done &&
	grep "^\[0\] rank 0 pid" out.warmu &&
	grep "^\[1\] rank 1 pid" out.warmu &&
	grep "^rank 0 pid" runs/warmu/latest/attempt-1/rank-0.log
'

test_expect_success 'a torch job restarts warm and sooner: gloo group over both nodes; times from LAUNCH to the first line and to the group, warm and cold' '
	JOB_RESTART="{max: 1, backoff: 100ms}" &&
	for mode in auto off; do
		o=$PWD/out-ddp-$mode &&
		mkdir -p "$o" &&
		job ddp-$mode "$(yaml_cmd /usr/bin/python3 ddp.py "$o")" <<-EOF &&
		warm: "$mode"
		EOF
		run_bg ddp-$mode.yaml out.ddp-$mode err.ddp-$mode &&
		wait_for test -e "$o/ddp.1.1" &&
		wait_for test -e "$o/ddp.0.1" &&
		# the next attempt finds its warm interpreters ready
		if [ $mode = auto ]; then
			wait_for ready_at_least 3 || return 1
		fi &&
		touch "$o/go" &&
		wait_exit $HERD_PID 120 &&
		test $WAIT_RC = 0 &&
		grep "^\[0\] rank 0 attempt 2 sum 3\$" out.ddp-$mode &&
		for a in 1 2; do
			launch=$(jq -n "[inputs | select(.event == \"attempt_start\" and .attempt == $a)][0].t" "$(ev ddp-$mode)") &&
			for r in 0 1; do
				first=$(sed -n "s/^first_ms //p" "$o/ddp.$r.$a") &&
				up=$(sed -n "s/^up_ms //p" "$o/ddp.$r.$a") &&
				echo "warm: $mode attempt $a rank $r: first line $((first - launch)) ms after LAUNCH, group up after $((up - launch)) ms" || return 1
			done || return 1
		done || return 1
	done &&
	JOB_RESTART= &&
	jq -e -n "[inputs | select(.event == \"rank_start\" and .attempt == 2 and .warm)] | length == 2" "$(ev ddp-auto)" &&
	ev_all "$(ev ddp-off)" rank_start ".warm == false" &&
	for j in warm cold; do
		echo "import torch in the script ($j): $(sed -n "s/^import_torch_ms //p" out-$j/time.0) ms" || return 1
	done
'

test_expect_success 'commands that are not a Python script, python -m and pipes run cold' '
	job notpy "echo \$RANK" &&
	herd run notpy.yaml >out 2>err &&
	ev_all "$(ev notpy)" rank_start ".warm == false" &&
	job mod "$(yaml_cmd /usr/bin/python3 -m json.tool --help)" &&
	herd run mod.yaml >out 2>err &&
	ev_all "$(ev mod)" rank_start ".warm == false" &&
	job pipe "/usr/bin/python3 show.py '"'"'$PWD/out-pipe'"'"' | cat" &&
	mkdir -p out-pipe &&
	herd run pipe.yaml >out 2>err &&
	ev_all "$(ev pipe)" rank_start ".warm == false" &&
	test -s out-pipe/show.1
'

test_expect_success 'plain mode: warm only with launch.preload; a bad module name is a spec error with its place' '
	echo "print(\"plain\")" >wd/plain.py &&
	job plainnone "$(yaml_cmd /usr/bin/python3 plain.py)" <<-EOF &&
	mode: plain
	EOF
	herd run plainnone.yaml >out 2>err &&
	ev_all "$(ev plainnone)" rank_start ".warm == false" &&
	job plainjson "$(yaml_cmd /usr/bin/python3 plain.py)" <<-EOF &&
	mode: plain
	preload: [json, email.mime.text]
	EOF
	herd run plainjson.yaml >out 2>err &&
	ev_all "$(ev plainjson)" rank_start ".warm == true" &&
	grep "^\[0\] plain\$" out &&
	job badpre "$(yaml_cmd /usr/bin/python3 plain.py)" <<-EOF &&
	preload: [torch, "os; rm -rf x"]
	EOF
	test_expect_code 2 herd validate badpre.yaml 2>err &&
	grep "^badpre.yaml:[0-9]*:[0-9]*: launch.preload: .os; rm -rf x. is not a Python module name" err
'

# nomod NAME PRELOAD: NAME runs plain.py with launch.preload PRELOAD
# (whose last module cannot be imported): its ranks run cold, and each
# node that got that far says so once.
nomod() {
	job "$1" "$(yaml_cmd /usr/bin/python3 plain.py)" <<-EOF &&
	preload: [$2]
	EOF
	herd run "$1.yaml" >out 2>err &&
	cat err &&
	ev_all "$(ev "$1")" rank_start ".warm == false" &&
	grep "^\[0\] plain\$" out &&
	test "$(grep -c "warm interpreters are off on this node: cannot import no_such_module_t0736" err)" -le 3 &&
	grep -q "warm interpreters are off on this node: cannot import no_such_module_t0736" err
}

test_expect_success 'a preload module that cannot be imported: one line per node, the ranks run cold' '
	nomod nomod no_such_module_t0736 &&
	# After torch (seconds to import), the module that fails: the rank
	# comes while the interpreter still imports, and the line is said
	# all the same.
	nomod nomod2 "torch, no_such_module_t0736"
'

test_expect_success 'nothing of the job is imported before LAUNCH: a torch.py beside the script and a sitecustomize.py on PYTHONPATH are never read by a warm interpreter; such a rank runs cold and imports them, as python3 would' '
	mkdir -p shadow sitelib &&
	cat >shadow/torch.py <<-EOF &&
	import os
	open("$PWD/planted.%d" % os.getpid(), "w").close()
	EOF
	echo "import torch; print(\"torch from\", torch.__file__)" >shadow/uses.py &&
	cp shadow/torch.py sitelib/sitecustomize.py &&
	echo "print(\"no torch here\")" >wd/plain.py &&
	job shadow "$(yaml_cmd /usr/bin/python3 "$PWD/shadow/uses.py")" &&
	herd run shadow.yaml >out.shadow 2>err.shadow &&
	ev_all "$(ev shadow)" rank_start ".warm == false" &&
	grep "herd-agent: rank [01] starts cold, not from its warm interpreter: $PWD/shadow/torch.py would be imported instead of a preloaded module\$" err.shadow &&
	test "$(grep -c "starts cold" err.shadow)" = 2 &&
	grep "^\[0\] torch from $PWD/shadow/torch.py\$" out.shadow &&
	ls planted.* >planted &&
	test "$(wc -l <planted)" = 2 &&
	rm -f planted.* &&
	JOB_ENV=", PYTHONPATH: \"$PWD/sitelib\"" &&
	job site "$(yaml_cmd /usr/bin/python3 plain.py)" &&
	herd run site.yaml >out.site 2>err.site &&
	ev_all "$(ev site)" rank_start ".warm == false" &&
	ls planted.* >planted &&
	test "$(wc -l <planted)" = 2 &&
	rm -f planted.* &&
	# The warm interpreters up meanwhile (the spare'"'"'s, the refilled
	# ones): cwd /, no PYTHONPATH, no planted file of theirs, torch
	# imported.
	JOB_ENV=", PYTHONPATH: \"$PWD/lib\"" &&
	JOB_RESTART="{max: 1}" &&
	job idle "$(show_cmd idle sleep)" &&
	JOB_ENV= && JOB_RESTART= &&
	run_bg idle.yaml out.idle err.idle &&
	wait_for grep -q "rank 1 pid" out.idle &&
	# both members refilled, and the hot spare
	wait_for ready_at_least 3 &&
	for p in $(idle_warm_pids); do
		test "$(readlink /proc/$p/cwd)" = / &&
		! tr "\0" "\n" <"/proc/$p/environ" | grep "^PYTHONPATH=" &&
		test ! -e planted.$p || return 1
	done &&
	p=$(idle_warm_pids | head -1) &&
	grep -q libtorch /proc/$p/maps &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID 30
'

test_expect_success 'another local user cannot reach a warm interpreter: its channel has no name, its fds, the bootstrap and the agent directory are closed to it' '
	job hostile "$(show_cmd hostile sleep)" &&
	run_bg hostile.yaml out.h err.h &&
	wait_for grep -q "rank 1 pid" out.h &&
	wait_for ready_at_least 1 &&
	p=$(idle_warm_pids | head -1) &&
	boot=$(tr "\0" "\n" <"/proc/$p/cmdline" | sed -n 2p) &&
	# fd 3 is a socket pair: no path in /proc/net/unix for it
	ino=$(readlink /proc/$p/fd/3 | sed -n "s/^socket:\[\([0-9]*\)\]\$/\1/p") &&
	test -n "$ino" &&
	awk -v i="$ino" "\$7 == i && NF >= 8 { print; bad = 1 } END { exit bad }" /proc/net/unix &&
	test "$(stat -c %a "$(dirname "$boot")")" = 700 &&
	test "$(stat -c %a "$boot")" = 600 &&
	! setpriv --reuid=nobody --regid=nogroup --clear-groups cat "$boot" &&
	! setpriv --reuid=nobody --regid=nogroup --clear-groups ls -l /proc/$p/fd/3 &&
	! setpriv --reuid=nobody --regid=nogroup --clear-groups ls "$(dirname "$boot")" &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID 30
'

test_expect_success 'a warm interpreter killed (kill -9) before LAUNCH is started again' '
	job again "$(show_cmd again sleep)" &&
	run_bg again.yaml out.a err.a &&
	wait_for grep -q "rank 1 pid" out.a &&
	wait_for ready_at_least 1 &&
	old=$(idle_warm_pids | head -1) &&
	dir=$(tr "\0" "\n" <"/proc/$old/cmdline" | sed -n 2p | xargs dirname) &&
	kill -9 $old &&
	wait_for sh -c "pgrep -f -- \"^/usr/bin/python3 $dir/warm_boot\\.py \" | grep -qvx $old" &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID 30
'

test_expect_success 'a node lost: the hot spare takes its place and its rank starts warm' '
	JOB_RESTART="{max: 1, backoff: 100ms}" &&
	job spare "$(show_cmd spare sleep)" &&
	JOB_RESTART= &&
	run_bg spare.yaml out.s err.s &&
	wait_for grep -q "rank 1 pid" out.s &&
	wait_for jq -e -n "[inputs | select(.event == \"node_up\" and .spare)] | length == 1" "$(ev spare)" &&
	cluster_kill_node 2 &&
	wait_for sh -c "grep -q \"^\[1\] rank 1 pid\" out.s && test \$(grep -c \"^\[1\] rank 1 pid\" out.s) = 2" &&
	jq -e -n "[inputs | select(.event == \"rank_start\" and .attempt == 2 and .host == \"$(cluster_node 3)\" and .warm)] | length == 1" "$(ev spare)" &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID 30 &&
	cluster_start_node 2
'

test_expect_success 'the agent killed (kill -9): no warm interpreter and no rank of it is left' '
	# restart.max 1: the member refills the slot its rank took
	JOB_RESTART="{max: 1}" &&
	job kill "$(show_cmd kill sleep)" &&
	JOB_RESTART= &&
	run_bg kill.yaml out.k err.k &&
	wait_for grep -q "rank 0 pid" out.k &&
	agent_dir=$(sed -n "s/^\[0\] rank 0 pid [0-9]* agent_dir //p" out.k) &&
	rank=$(sed -n "s/^\[0\] rank 0 pid \([0-9]*\) .*/\1/p" out.k) &&
	agent=$(basename "$agent_dir" | sed "s/-.*//") &&
	wait_for has_warm "$agent_dir" &&
	warm=$(warm_pids "$agent_dir") &&
	kill -9 $agent &&
	wait_for sh -c "! kill -0 $rank 2>/dev/null" &&
	for p in $warm; do
		wait_for sh -c "! kill -0 $p 2>/dev/null" || return 1
	done &&
	test -z "$(warm_pids "$agent_dir")" &&
	# the job goes on on the spare (restart.max 1): stopped here
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID 60
'

# warm_pids_on N...: the warm interpreters (idle or importing) on nodes N.
warm_pids_on() {
	_wo_in=$(for _wo_n; do ip netns pids "herd-$HERD_CLUSTER_ID-n$_wo_n"; done)
	for _wo_p in $(warm_pids); do
		echo "$_wo_in" | grep -qx "$_wo_p" && echo "$_wo_p"
	done
	return 0
}
# warm_on COUNT N...: nodes N hold COUNT warm interpreters.
warm_on() {
	_wc=$1
	shift
	[ "$(warm_pids_on "$@" | wc -l)" -eq "$_wc" ]
}

# Ranks that speak herd's elastic protocol, in a job that keeps
# survivors: a failure elsewhere never restarts them, so their nodes do
# not refill the slots they took (an import of torch beside the ranks
# cost the rejoins of bench/chaos 0.16 s each and the next seconds of
# steps); a node refills once a rank of it ends.
test_expect_success 'ranks that all speak the elastic protocol: their nodes do not refill their warm slots until a rank ends; the spare stays warm' '
	mkdir -p wd &&
	cat >wd/hold.py <<-\EOF &&
	import os, sys, time
	import herd.elastic
	m = herd.elastic.Membership()
	r = os.environ["RANK"]
	print("rank %s hello" % r, flush=True)
	while not os.path.exists(os.path.join(sys.argv[1], "go" + r)):
	    time.sleep(0.05)
	EOF
	mkdir -p hold &&
	JOB_RESTART="{max: 1}" &&
	job hold "$(yaml_cmd /usr/bin/python3 hold.py "$PWD/hold")" &&
	JOB_RESTART= &&
	run_bg hold.yaml out.hold err.hold &&
	test_when_finished "touch hold/go0 hold/go1; wait_exit \$HERD_PID 60" &&
	wait_for grep -q "rank 0 hello" out.hold &&
	wait_for grep -q "rank 1 hello" out.hold &&
	ev_all "$(ev hold)" rank_start ".warm == true" &&
	# no refill on the members; the spare keeps its warm slot
	wait_for warm_on 0 1 2 &&
	wait_for warm_on 1 3 &&
	# rank 0 ends: its node refills, the other member still holds
	touch hold/go0 &&
	wait_for warm_on 1 1 &&
	warm_on 0 2 &&
	touch hold/go1 &&
	wait_exit $HERD_PID 60 &&
	test "$WAIT_RC" = 0
'

# restart.max 0: no LAUNCH comes after the first, so a member refills
# nothing (herd tells its agents --warm-once); a spare keeps its slot for
# a rejoin.  A refill there would import torch again beside the ranks,
# for interpreters nothing can use.
test_expect_success 'restart.max 0: the members do not refill the slots their ranks took; the spare stays warm' '
	job once "$(show_cmd once sleep)" &&
	run_bg once.yaml out.once err.once &&
	wait_for grep -q "rank 0 pid" out.once &&
	wait_for grep -q "rank 1 pid" out.once &&
	ev_all "$(ev once)" rank_start ".warm == true" &&
	wait_for warm_on 1 3 &&
	# the agents of this cluster (others run beside it) said so
	n=0 &&
	for p in $(for i in 1 2 3; do ip netns pids "herd-$HERD_CLUSTER_ID-n$i"; done); do
		tr "\0" " " <"/proc/$p/cmdline" >cmd 2>/dev/null &&
		grep -q -- " --warm " cmd && ! grep -q -- " --keeper " cmd ||
			continue
		grep -q -- " --warm-once" cmd || { cat cmd >&2; return 1; }
		n=$((n + 1))
	done &&
	{ test $n -ge 3 || { echo "$n agents with --warm" >&2; false; }; } &&
	{ warm_on 0 1 2 || { warm_pids_on 1 2 >&2; false; }; } &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID 30
'

# Both cores busy (two loops of our own, ended by pid): a rank that comes
# while its warm interpreter is still starting (the first LAUNCH, right
# after the agent started) runs at the keeper's priority.  The keeper
# used to let the interpreter put itself into SCHED_IDLE, which it could
# do after the LAUNCH had already taken it out: the rank then waited for
# a free cpu, here until the loops ended (CI: t0620 test 4, 74 s).
test_expect_success 'both cores busy: a rank that comes while its warm interpreter starts is not left at idle priority' '
	cat >hi.py <<-\EOF &&
	print("hi from", __file__)
	EOF
	cat >busy.yaml <<-EOF &&
	name: busy
	nodes: {hosts: localhost, slots: 1}
	log: {dir: "$PWD/runs/{{name}}"}
	restart: {max: 0}
	launch:
	  command: $(yaml_cmd /usr/bin/python3 "$PWD/hi.py")
	EOF
	hogs= &&
	for i in 1 2; do
		{ while :; do :; done & } &&
		hogs="$hogs $!" || return 1
	done &&
	test_when_finished "kill $hogs" &&
	run_bg busy.yaml out.busy err.busy &&
	wait_exit $HERD_PID 120 &&
	test "$WAIT_RC" = 0 &&
	grep -q "^\[0\] hi from" out.busy &&
	jq -e -n "[inputs | select(.event == \"rank_start\" and .warm)] | length == 1" runs/busy/latest/events.jsonl
'

test_done
