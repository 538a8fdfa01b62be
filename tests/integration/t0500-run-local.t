#!/bin/sh

test_description='herd run on one machine (local transport): rank variables, launch.env, env_pass, workdir, exit status, events, rank logs, --dry-run, bad specs'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq awk ps

# job NAME SLOTS: writes NAME.yaml for localhost; the launch: section
# (indented by two) comes from stdin.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: localhost, slots: $2}"
		echo "health: {grace: 1s}"
		# One attempt: restarts are tested in t08xx.
		echo "restart: {max: 0}"
		echo "launch:"
		sed 's/^/  /'
	} >"$1.yaml"
}

test_expect_success 'every rank gets every variable herd sets' '
	mkdir envs &&
	job vars 3 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/print-env.sh" "$PWD/envs")
	master_port: 29611
	EOF
	herd run vars.yaml >out 2>err &&
	for r in 0 1 2; do
		cat >expect.$r <<-EOF &&
		RANK=$r
		LOCAL_RANK=$r
		WORLD_SIZE=3
		LOCAL_WORLD_SIZE=3
		NODE_RANK=0
		GROUP_RANK=0
		MASTER_ADDR=127.0.0.1
		MASTER_PORT=29611
		TORCHELASTIC_RESTART_COUNT=0
		HERD_JOB=vars
		HERD_ATTEMPT=1
		HERD_RESUME_FROM=
		GLOO_SOCKET_IFNAME=lo
		NCCL_SOCKET_IFNAME=lo
		EOF
		grep -v "^pwd=\|^host=\|^HERD_PROGRESS_FILE=" envs/env.$r >got.$r &&
		test_cmp expect.$r got.$r &&
		# node-local, in the agent'"'"'s private directory
		grep -x "HERD_PROGRESS_FILE=/tmp/herd-agent-[0-9]*/[0-9]*-[^/]*/rank-$r.progress" \
			envs/env.$r || return 1
	done &&
	test_must_be_empty out
'

test_expect_success 'launch.env wins over every computed value' '
	rm -rf envs && mkdir envs &&
	job over 2 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/print-env.sh" "$PWD/envs")
	env:
	  MASTER_ADDR: 10.9.9.9
	  MASTER_PORT: "1234"
	  LOCAL_WORLD_SIZE: "8"
	  HERD_PROGRESS_FILE: /tmp/mine
	  NCCL_SOCKET_IFNAME: ib0
	  HERD_JOB: renamed
	EOF
	herd run over.yaml &&
	for r in 0 1; do
		grep -x MASTER_ADDR=10.9.9.9 envs/env.$r &&
		grep -x MASTER_PORT=1234 envs/env.$r &&
		grep -x LOCAL_WORLD_SIZE=8 envs/env.$r &&
		grep -x HERD_PROGRESS_FILE=/tmp/mine envs/env.$r &&
		grep -x NCCL_SOCKET_IFNAME=ib0 envs/env.$r &&
		grep -x HERD_JOB=renamed envs/env.$r &&
		grep -x GLOO_SOCKET_IFNAME=lo envs/env.$r &&
		grep -x RANK=$r envs/env.$r || return 1
	done
'

test_expect_success 'env_pass: globs pick variables of herd'"'"'s environment; launch.env still wins' '
	job pass 1 <<-\EOF &&
	command: true
	env_pass: ["HT_KEEP_*", HT_EXACT]
	env: {HT_KEEP_B: from-spec}
	EOF
	HT_KEEP_A=a HT_KEEP_B=b HT_EXACT=x HT_EXACTLY=no HT_OTHER=no \
		herd run --dry-run pass.yaml >out &&
	grep -x "    HT_KEEP_A=a" out &&
	grep -x "    HT_KEEP_B=from-spec" out &&
	grep -x "    HT_EXACT=x" out &&
	! grep "HT_EXACTLY\|HT_OTHER\|HT_KEEP_B=b" out &&
	rm -rf envs && mkdir envs &&
	job pass2 1 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/print-env.sh" "$PWD/envs" HT_KEEP_A HT_KEEP_B HT_EXACT)
	env_pass: ["HT_KEEP_*", HT_EXACT]
	env: {HT_KEEP_B: from-spec}
	EOF
	HT_KEEP_A=a HT_KEEP_B=b HT_EXACT="two words" herd run pass2.yaml &&
	grep -x HT_KEEP_A=a envs/env.0 &&
	grep -x HT_KEEP_B=from-spec envs/env.0 &&
	grep -x "HT_EXACT=two words" envs/env.0
'

test_expect_success 'workdir: absolute, and relative to the job file' '
	rm -rf envs && mkdir envs wd jobs jobs/rel && top=$PWD &&
	job abs 2 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/print-env.sh" "$PWD/envs")
	workdir: $PWD/wd
	EOF
	herd run abs.yaml &&
	grep -x "pwd=$PWD/wd" envs/env.0 &&
	grep -x "pwd=$PWD/wd" envs/env.1 &&
	rm envs/* &&
	(cd jobs && job rel 1 <<-EOF
	command: $(yaml_cmd "$RUN_DATA/print-env.sh" "$top/envs")
	workdir: rel
	EOF
	) &&
	herd run jobs/rel.yaml &&
	grep -x "pwd=$PWD/jobs/rel" envs/env.0
'

test_expect_success 'a missing workdir fails the rank with a message' '
	job nowd 1 <<-EOF &&
	command: true
	workdir: $PWD/does-not-exist
	EOF
	test_expect_code 127 herd run nowd.yaml 2>err &&
	grep "workdir" err
'

test_expect_success 'a rank exiting 7: herd exits 7, names the rank, stops the others' '
	job fail 3 <<-\EOF &&
	command: if [ $RANK = 1 ]; then exit 7; fi; exec sleep 30
	EOF
	test_expect_code 7 herd run fail.yaml 2>err &&
	grep "rank 1 on localhost exited with status 7" err &&
	jq -c "select(.event == \"rank_exit\") | [.rank, .status, .code, .signal]" \
		runs/fail/latest/events.jsonl | sort >got &&
	cat >expect <<-\EOF &&
	[0,143,null,15]
	[1,7,7,null]
	[2,143,null,15]
	EOF
	test_cmp expect got &&
	test "$(jq -c "select(.event == \"job_end\") | .status" runs/fail/latest/events.jsonl)" = 7
'

test_expect_success 'a rank killed by a signal: herd exits 128+signal' '
	job sig 2 <<-\EOF &&
	command: if [ $RANK = 0 ]; then kill -USR1 $$; fi; exec sleep 30
	EOF
	test_expect_code 138 herd run sig.yaml 2>err &&
	grep "rank 0 on localhost was killed by signal 10" err &&
	job segv 1 <<-\EOF &&
	command: kill -SEGV $$
	EOF
	test_expect_code 139 herd run segv.yaml 2>err &&
	grep "signal 11" err
'

test_expect_success 'events.jsonl: the run from start to end, with fields' '
	job ev 2 <<-\EOF &&
	command: echo out $RANK; echo err $RANK >&2
	EOF
	herd run ev.yaml >out 2>err &&
	jq -r .event runs/ev/latest/events.jsonl >got &&
	head -3 got >got.head &&
	printf "job_start\nnode_up\nattempt_start\n" >expect &&
	test_cmp expect got.head &&
	test "$(grep -c ^rank_start got)" = 2 &&
	test "$(grep -c ^rank_exit got)" = 2 &&
	test "$(tail -1 got)" = job_end &&
	ev=runs/ev/latest/events.jsonl &&
	ev_all $ev job_start ".job == \"ev\" and .nodes == 1 and .transport == \"local\" and .mode == \"torch\"" &&
	ev_all $ev node_up ".host == \"localhost\" and (.hostname | length > 0)" &&
	ev_all $ev attempt_start ".attempt == 1 and .world_size == 2 and .nodes == 1 and .master_addr == \"127.0.0.1\"" &&
	jq -c "select(.event == \"rank_start\") | [.attempt, .rank, .host, .local_rank, .node_rank]" runs/ev/latest/events.jsonl | sort >got &&
	printf "%s\n" "[1,0,\"localhost\",0,0]" "[1,1,\"localhost\",1,0]" >expect &&
	test_cmp expect got &&
	jq -c "select(.event == \"rank_exit\") | [.attempt, .rank, .host, .status, .code, .signal]" runs/ev/latest/events.jsonl | sort >got &&
	printf "%s\n" "[1,0,\"localhost\",0,0,null]" "[1,1,\"localhost\",0,0,null]" >expect &&
	test_cmp expect got &&
	ev_all $ev job_end ".status == 0 and .attempts == 1" &&
	jq -e -n "[inputs | .t | type == \"number\" and . > 1600000000000] | all" $ev
'

test_expect_success 'output is tagged [rank] on stdout and stderr; rank logs per attempt hold it untagged' '
	sort out >got &&
	printf "[0] out 0\n[1] out 1\n" >expect &&
	test_cmp expect got &&
	grep -v "^herd: logs in " err | sort >got &&
	printf "[0] err 0\n[1] err 1\n" >expect &&
	test_cmp expect got &&
	for r in 0 1; do
		sort runs/ev/latest/attempt-1/rank-$r.log >got &&
		printf "err $r\nout $r\n" >expect &&
		test_cmp expect got || return 1
	done &&
	first=$(readlink runs/ev/latest) &&
	herd run ev.yaml >out2 2>err2 &&
	second=$(readlink runs/ev/latest) &&
	test "$first" != "$second" &&
	grep -xF "herd: logs in $PWD/runs/ev/$second" err2 &&
	test "$(jq -r .event runs/ev/$first/events.jsonl | grep -c job_start)" = 1 &&
	test "$(jq -r .event runs/ev/$second/events.jsonl | grep -c job_start)" = 1
'

test_expect_success 'a last line without a newline is printed whole' '
	job partial 1 <<-\EOF &&
	command: printf "one\ntwo"
	EOF
	herd run partial.yaml >out &&
	printf "[0] one\n[0] two\n" >expect &&
	test_cmp expect out
'

test_expect_success '-v tags output [host:rank]' '
	job verbose 2 <<-\EOF &&
	command: echo hi
	EOF
	herd run -v verbose.yaml >out &&
	sort out >got &&
	printf "[localhost:0] hi\n[localhost:1] hi\n" >expect &&
	test_cmp expect got
'

test_expect_success 'Ctrl-C: ranks get SIGINT, herd exits 130, no rank is left' '
	rm -rf pids && mkdir pids &&
	job intr 2 <<-EOF &&
	command: $(yaml_cmd "$RUN_DATA/rank-wait.sh" "$PWD/pids")
	EOF
	run_bg intr.yaml out err &&
	wait_files 2 "pids/pid.?" &&
	kill -INT $HERD_PID &&
	wait_exit $HERD_PID &&
	test $WAIT_RC = 130 &&
	grep -x "\[0\] rank 0 got SIGINT" out &&
	grep -x "\[1\] rank 1 got SIGINT" out &&
	! grep SIGTERM out &&
	groups_gone $(cut -d" " -f2 pids/pid.0) $(cut -d" " -f2 pids/pid.1)
'

test_expect_success '--dry-run prints every rank'"'"'s environment and touches nothing' '
	mkdir dry && top=$PWD && (
		cd dry &&
		job dry 2 <<-EOF &&
		command: $(yaml_cmd touch "$top/dry/ran")
		workdir: /nonexistent
		EOF
		herd run --dry-run dry.yaml >out &&
		grep "^job dry: 1 node, 2 ranks, transport local, log $top/dry/runs/dry" out &&
		grep -x "node 0: localhost (2 ranks)" out &&
		grep -x "  command: \"touch\" \"$top/dry/ran\"" out &&
		grep -x "  rank 0:" out &&
		grep -x "  rank 1:" out &&
		grep -x "    RANK=1" out &&
		grep -x "    LOCAL_WORLD_SIZE=2" out &&
		grep -x "    MASTER_ADDR=127.0.0.1" out &&
		test "$(ls -A | tr "\n" " ")" = "dry.yaml out "
	) &&
	test ! -e dry/ran
'

test_expect_success 'an agent removes the private directories that killed agents left in TMPDIR, and only those' '
	sh -c "exit 0" & dead=$! &&
	wait $dead &&
	u=tmpd/herd-agent-$(id -u) &&
	mkdir -p tmpd victim &&
	mkdir -m 700 $u &&
	: >victim/keep &&
	mkdir -m 700 $u/$dead-aaaaaa &&
	: >$u/$dead-aaaaaa/rank-0.progress &&
	mkdir -m 700 $u/$$-bbbbbb &&
	mkdir -m 700 $u/$dead-cccccc &&
	: >$u/$dead-cccccc/rank-0.progress &&
	chown -R nobody $u/$dead-cccccc &&
	ln -s "$PWD/victim" $u/$dead-dddddd &&
	mkdir -m 700 $u/eeeeee &&
	job tmpdir 2 <<-\EOF &&
	command: test -d "$(dirname "$HERD_PROGRESS_FILE")" && echo ran && echo "dir=$(dirname "$HERD_PROGRESS_FILE")"
	EOF
	TMPDIR=$PWD/tmpd herd run tmpdir.yaml >out 2>err &&
	test "$(grep -c ran out)" = 2 &&
	grep "dir=$PWD/$u/[0-9]*-......$" out &&
	test ! -e $u/$dead-aaaaaa &&
	test -d $u/$$-bbbbbb &&
	test -e $u/$dead-cccccc/rank-0.progress &&
	test -h $u/$dead-dddddd &&
	test -e victim/keep &&
	test -d $u/eeeeee &&
	# the agent kept its topology and the herd Python package there; its
	# own directory went at the end
	ls $u | grep "^topo-.*\.json$" &&
	ls $u | grep "^python-[0-9a-f]*$" &&
	test "$(ls $u | grep -v -e "^topo-" -e "^python-" | wc -l)" = 4 &&
	test "$(ls tmpd | wc -l)" = 1
'

test_expect_success 'the kept topology: 0600, used by the next start (the rank is bound by it); one not private is discovered again' '
	u=tmpd/herd-agent-$(id -u) &&
	t=$(ls $u/topo-*.json) &&
	test "$(stat -c %a "$t")" = 600 &&
	job cpus 1 <<-\EOF &&
	command: grep Cpus_allowed_list /proc/self/status
	EOF
	TMPDIR=$PWD/tmpd herd run cpus.yaml >real 2>err &&
	cp "$t" saved.json &&
	# the same node, as a summary that has CPU 0 only
	jq -c ".pus = \"0\" | .cores = [\"0\"] | .numa[].cpus = \"0\" | .packages[].cpus = \"0\" | .netdevs[].cpus = \"0\"" \
		saved.json >"$t" &&
	TMPDIR=$PWD/tmpd herd run cpus.yaml >kept 2>err &&
	grep "Cpus_allowed_list:	0$" kept &&
	chmod 664 "$t" &&
	TMPDIR=$PWD/tmpd herd run cpus.yaml >again 2>err &&
	test_cmp real again &&
	test "$(stat -c %a "$t")" = 600 &&
	test_cmp saved.json "$t"
'

test_expect_success 'kept topologies: those of other hosts are left alone while the own one is used; when a topology is written, the own host'"'"'s older ones and other hosts'"'"' unused for a week go' '
	u=tmpd/herd-agent-$(id -u) &&
	echo "{}" >$u/topo-gone-00000000000000000000000000000000.json &&
	echo "{}" >$u/topo-near-00000000000000000000000000000000.json &&
	touch -d "8 days ago" $u/topo-gone-00000000000000000000000000000000.json &&
	touch -d "6 days ago" $u/topo-near-00000000000000000000000000000000.json &&
	TMPDIR=$PWD/tmpd herd run cpus.yaml >out 2>err &&
	test -e $u/topo-gone-00000000000000000000000000000000.json &&
	own=$(ls $u/topo-*.json | grep -v -e topo-gone- -e topo-near-) &&
	# the own host under an older key: hardware it no longer has
	old=${own%-*}-00000000000000000000000000000000.json &&
	mv "$own" "$old" &&
	TMPDIR=$PWD/tmpd herd run cpus.yaml >out 2>err &&
	test -e "$own" &&
	test ! -e "$old" &&
	test ! -e $u/topo-gone-00000000000000000000000000000000.json &&
	test -e $u/topo-near-00000000000000000000000000000000.json
'

test_expect_success 'TMPDIR/herd-agent-UID planted by another user or open to others: not used, the job runs' '
	mkdir -p tmpo tmpw &&
	mkdir -m 700 tmpo/herd-agent-$(id -u) &&
	chown nobody tmpo/herd-agent-$(id -u) &&
	TMPDIR=$PWD/tmpo herd run tmpdir.yaml >out 2>err &&
	test "$(grep -c ran out)" = 2 &&
	grep "dir=$PWD/tmpo/herd-agent-[0-9]*-......$" out &&
	test -z "$(ls -A tmpo/herd-agent-$(id -u))" &&
	mkdir -m 777 tmpw/herd-agent-$(id -u) &&
	TMPDIR=$PWD/tmpw herd run tmpdir.yaml >out 2>err &&
	test "$(grep -c ran out)" = 2 &&
	test -z "$(ls -A tmpw/herd-agent-$(id -u))" &&
	ln -s "$PWD/victim" tmpo/herd-agent-x &&
	rm -rf tmpw/herd-agent-$(id -u) &&
	ln -s "$PWD/victim" tmpw/herd-agent-$(id -u) &&
	TMPDIR=$PWD/tmpw herd run tmpdir.yaml >out 2>err &&
	test "$(grep -c ran out)" = 2 &&
	test "$(ls victim)" = keep
'

test_expect_success 'a bad spec exits 2 with file:line:col and starts nothing' '
	mkdir bad && (
		cd bad &&
		printf "name: b\nlaunch:\n  command: touch ran\n  bogus: 1\n" >bad.yaml &&
		test_expect_code 2 herd run bad.yaml 2>err &&
		grep "bad.yaml:4:3:" err &&
		printf "name: b\nnodes: {hosts: \"n[1-\"}\nlaunch: {command: touch ran}\n" >badhosts.yaml &&
		test_expect_code 2 herd run badhosts.yaml 2>err &&
		test -s err &&
		test_expect_code 2 herd run missing.yaml 2>err &&
		grep missing.yaml err &&
		test_expect_code 2 herd run 2>err &&
		grep "^try .herd run --help.$" err &&
		test_expect_code 2 herd run --bogus bad.yaml 2>err &&
		test ! -e ran && test ! -e runs
	)
'

# Issue 22: herd returned while its local agents were still on their way
# out, so what an agent removes at its end (its private directory) was
# still there for the next command (test 14 failed 1 run in 2 under
# load).  Each rank names its agent (rank -> keeper -> agent); when herd
# has returned, every agent is gone.
test_expect_success 'herd returns after its local agents have exited' '
	cat >agent.sh <<-\EOF &&
	p=$$
	while q=$(ps -o ppid= -p $p | tr -d " ") &&
		test "$(cat /proc/$q/comm)" != herd; do
		p=$q
	done
	echo "agent $p"
	EOF
	job agents 3 <<-EOF &&
	command: $(yaml_cmd sh "$PWD/agent.sh")
	EOF
	herd run agents.yaml >out 2>err &&
	sed -n "s/^\[[0-2]\] agent //p" out | sort -u >agents &&
	cat agents &&
	test "$(wc -l <agents)" = 1 &&
	read -r a <agents &&
	{ test "$(cat /proc/$a/comm 2>/dev/null)" != herd-agent ||
		{ echo "agent $a is still there"; false; }; }
'

test_done
