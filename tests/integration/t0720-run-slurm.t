#!/bin/sh

test_description='herd run with the slurm transport inside salloc on the local Slurm cluster: one srun step, agents connect back and prove the job secret, strays are refused, PyTorch DDP across 4 nodes'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/slurm/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh-keygen timeout jq ss pgrep \
	sinfo salloc srun
for c in /usr/sbin/sshd /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
	[ -x $c ] || error "prerequisite $c is missing (run 'make deps')"
done
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"
/usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import torch.distributed"

# in_salloc OUT ERR CMD...: CMD inside a fresh 4-node allocation that
# survives a node failure, as a user would type it on the login node.
in_salloc() {
	_out=$1 _err=$2
	shift 2
	timeout 60 salloc -N4 --no-kill "$@" >"$_out" 2>"$_err"
}

# ours ADDR COMM: pids of the processes named COMM (srun, herd-agent)
# whose command line connects back to ADDR, the listener of our herd.
ours() {
	for _p in $(pgrep -f -- "--connect $1"); do
		test "$(cat /proc/$_p/comm 2>/dev/null)" = "$2" && echo $_p
	done
}

# hosts_of FILE: "RANK WORLD HOST" lines of rank output, sorted.
hosts_of() {
	sed -n "s/^\[[0-9]*\] //p" "$1" | sort -n
}

test_expect_success 'cluster of 4 nodes with Slurm' '
	own_binaries &&
	cluster_up 4 &&
	slurm_up &&
	n=0 &&
	for h in $HERD_CLUSTER_NODES; do
		echo "$n 4 $h unset" && n=$((n + 1)) || return 1
	done >expect.hosts
'

test_expect_success 'nodes: {slurm: true}: one rank per node, right hosts, no secret in any rank' '
	cat >sl.yaml <<-EOF &&
	name: sl
	nodes: {slurm: true, slots: 1}
	health: {grace: 2s}
	launch:
	  workdir: $PWD
	  command: echo \$RANK \$WORLD_SIZE \$(hostname) \${HERD_JOB_SECRET:-unset}
	EOF
	in_salloc out err herd run sl.yaml &&
	hosts_of out >got &&
	test_cmp expect.hosts got &&
	ev_all runs/sl/latest/events.jsonl job_start ".transport == \"slurm\"" &&
	ev_all runs/sl/latest/events.jsonl job_end ".status == 0" &&
	! grep HERD_JOB_SECRET err
'

test_expect_success 'no host source inside an allocation: the allocation, over slurm; --ntasks-per-node gives the slots' '
	cat >auto.yaml <<-EOF &&
	name: auto
	health: {grace: 2s}
	launch:
	  workdir: $PWD
	  command: echo \$RANK \$WORLD_SIZE \$(hostname) \${HERD_JOB_SECRET:-unset}
	EOF
	in_salloc out err herd run auto.yaml &&
	hosts_of out >got &&
	test_cmp expect.hosts got &&
	ev_all runs/auto/latest/events.jsonl job_start ".transport == \"slurm\" and .nodes == 4" &&
	in_salloc out err --ntasks-per-node=2 herd run auto.yaml &&
	test $(wc -l <out) -eq 8 &&
	for h in $HERD_CLUSTER_NODES; do
		test $(grep -c " 8 $h unset\$" out) -eq 2 || return 1
	done
'

test_expect_success 'srun that cannot start: every node gets "srun failed" with srun'"'"'s reason' '
	test_expect_code 1 in_salloc out err -N2 sh -c \
		"SLURM_JOB_NODELIST=$HERD_CLUSTER_HOSTLIST herd run sl.yaml" &&
	for h in $HERD_CLUSTER_NODES; do
		grep "herd: $h: srun failed: it exited with status 1 before the agent connected: srun: error: .*node configuration" err ||
			return 1
	done
'

test_expect_success 'a stray client with a wrong secret (and one with garbage) is refused and logged; the job completes; the secret stays out of argv, output and the agents'"'"' environment' '
	cat >stray.yaml <<-EOF &&
	name: stray
	nodes: {slurm: true, slots: 1}
	health: {grace: 2s}
	launch:
	  workdir: $PWD
	  command: $(yaml_cmd "$HERD_TEST_DIR/data/slurm/wait-go.sh" "$PWD/go")
	EOF
	rm -f go &&
	{ in_salloc out err herd run stray.yaml & } &&
	pid=$! &&
	i=0 &&
	until addr=$(ss -Htlnp "src $HERD_CLUSTER_GATEWAY" |
		awk "/\"herd\"/ {print \$4; exit}") && test -n "$addr"; do
		i=$((i + 1)) && test $i -lt 100 || return 1
		sleep 0.1   # poll interval of a bounded wait
	done &&
	wait_files 4 "ready.*" 20 &&
	/usr/bin/python3 "$HERD_TEST_DIR/data/slurm/stray.py" "$addr" >stray.out &&
	grep -x "challenge: 36 bytes HRDc" stray.out &&
	grep -x "wrong-hmac: closed after 0 bytes" stray.out &&
	grep -x "garbage: closed after 0 bytes" stray.out &&
	srun_pid=$(ours "$addr" srun | head -n 1) &&
	secret=$(tr "\0" "\n" </proc/$srun_pid/environ | sed -n "s/^HERD_JOB_SECRET=//p") &&
	test ${#secret} -eq 64 &&
	ps -e -o args= >ps.out &&
	! grep -aF "$secret" ps.out &&
	test $(ours "$addr" herd-agent | wc -l) -ge 4 &&
	for p in $(ours "$addr" herd-agent); do
		! grep -aF "$secret" /proc/$p/environ || return 1
	done &&
	touch go &&
	wait_exit $pid 30 &&
	test $WAIT_RC = 0 &&
	test $(grep -c "rejected a connection from $HERD_CLUSTER_GATEWAY:[0-9]*: wrong secret" err) -eq 1 &&
	test $(grep -c "rejected a connection from $HERD_CLUSTER_GATEWAY:[0-9]*: the peer hung up in the response" err) -eq 1 &&
	for r in 0 1 2 3; do
		grep -x "\[$r\] rank $r done" out || return 1
	done &&
	! grep -rF "$secret" out err runs/stray
'

test_expect_success 'PyTorch DDP (train.py --steps 10) across the 4 nodes of the allocation' '
	cat >torch.yaml <<-EOF &&
	name: torch
	nodes: {slurm: true, slots: 1}
	health: {grace: 2s}
	launch:
	  command: /usr/bin/python3 train.py --steps 10
	  workdir: $HERD_ROOT/examples/torch-ddp
	  env: {OMP_NUM_THREADS: "1"}
	log: {dir: $PWD/runs/torch}
	EOF
	in_salloc out err herd run torch.yaml &&
	grep -E "^\[0\] step 10/10 loss [0-9]+\.[0-9]+" out &&
	n=0 &&
	for h in $HERD_CLUSTER_NODES; do
		grep -x "\[$n\] rank $n/4 on $h: done" out && n=$((n + 1)) ||
			return 1
	done &&
	ev_all runs/torch/latest/events.jsonl attempt_start ".world_size == 4 and .master_addr == \"$(cluster_addr 1)\"" &&
	ev_all runs/torch/latest/events.jsonl job_end ".status == 0"
'

# herd_under PID: the pid of the herd that PID started (timeout, then
# salloc, in between), true when there is one.  Other herds run beside
# this one (other scripts of the suite, other users, the same job file
# name), so a herd is ours by its ancestry, not by its command line.
herd_under() {
	_found=1
	for _p in $(pgrep -x herd); do
		_q=$_p
		while [ "${_q:-0}" -gt 1 ]; do
			[ "$_q" != "$1" ] || { echo $_p; _found=0; break; }
			_q=$(ps -o ppid= -p $_q | tr -d " ")
		done
	done
	return $_found
}

# threads PID: how many threads the process has now (0 once it is gone).
threads() {
	ls "/proc/$1/task" 2>/dev/null | wc -l
}

test_expect_success 'a job with a spare: two srun steps, their output read on herd'"'"'s loop, herd has exactly 1 thread throughout (issue 11: a thread per step)' '
	cat >sp.sh <<-EOF &&
	#!/bin/sh
	# Attempt 1 says it runs (with its parent: the agent is above it)
	# and waits to be stopped; attempt 2 waits for the file go.
	echo "\$PPID" >"$PWD/sp/tmp.\$RANK" &&
	mv "$PWD/sp/tmp.\$RANK" "$PWD/sp/up\$HERD_ATTEMPT.\$RANK"
	[ "\$HERD_ATTEMPT" -ge 2 ] || exec sleep 60
	exec sh "$HERD_TEST_DIR/data/slurm/wait-go.sh" "$PWD/sp/go"
	EOF
	chmod 755 sp.sh &&
	rm -rf sp && mkdir sp &&
	spare_job sp "$(yaml_cmd "$PWD/sp.sh")" &&
	run_spare_job sp &&
	pid=$HERD_PID &&
	wait_files 3 "sp/up1.*" 30 &&
	herd=$(herd_under $pid) && echo "herd: $herd" && test -n "$herd" &&
	most=$(threads $herd) &&
	# The agent of rank 1 dies: its node fails, the spare is called in
	# with a second srun step, attempt 2 runs on it.
	agent=$(cat sp/up1.1) && i=0 &&
	until tr "\0" " " <"/proc/$agent/cmdline" | grep -q -- " --connect "; do
		agent=$(ps -o ppid= -p $agent | tr -d " ") &&
		i=$((i + 1)) && test $i -lt 4 || return 1
	done &&
	kill -9 $agent &&
	# Bounded by the clock, not by a count of samples: on a loaded
	# machine each sample costs more and the restart takes longer.
	end=$(($(date +%s) + 180)) &&
	while [ "$(ls sp/up2.* 2>/dev/null | wc -l)" -lt 3 ]; do
		n=$(threads $herd) &&
		[ $n -le $most ] || most=$n
		[ "$(date +%s)" -lt $end ] || { cat err; false; } || return 1
		sleep 0.02   # sampling interval, not a synchronisation
	done &&
	echo "herd $herd: at most $most thread(s) over two srun steps" &&
	{ test "$most" = 1 || {
		for t in /proc/$herd/task/*; do cat $t/comm; done
		false
	}; } &&
	grep "^herd: slurm: step 1: .* --overlap " err &&
	touch sp/go &&
	wait_exit $pid 40 &&
	test $WAIT_RC = 0 &&
	ev_all runs/sp/latest/events.jsonl spare_used ".attempt >= 1" &&
	for r in 0 1 2; do
		grep "\] rank $r done$" out || return 1
	done
'

# Issue 22 item 8: scancel is the user's stop, not a node failure.
test_expect_success 'scancel of the allocation: the job stops, no node is recorded (quarantine_after 1)' '
	cat >sc.yaml <<-EOF &&
	name: sc
	nodes: {slurm: true, slots: 1}
	health: {grace: 2s, quarantine_after: 1}
	restart: {max: 0}
	launch:
	  workdir: $PWD/sc
	  command: $(yaml_cmd "$HERD_TEST_DIR/data/slurm/wait-go.sh" "$PWD/sc/go")
	EOF
	mkdir sc &&
	{ in_salloc out.sc err.sc -J "herd-sc-$$" herd run sc.yaml & } &&
	pid=$! &&
	wait_files 4 "sc/ready.*" 30 &&
	job=$(squeue -h -o %i -n "herd-sc-$$") &&
	test -n "$job" &&
	scancel "$job" &&
	wait_exit $pid 60 &&
	cat err.sc &&
	# the agents say why they go (issue 22: one that went silently
	# could not be told from a crash)
	grep "^herd: srun step 0: herd-agent: Terminated (signal 15): stopping the ranks and exiting$" err.sc &&
	herd nodes sc >sc.nodes &&
	cat sc.nodes &&
	grep "no failed nodes recorded" sc.nodes
'

test_done
