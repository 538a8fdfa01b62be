#!/bin/sh

test_description='herd sbatch on the local Slurm: the batch script, submission through libslurm, --wait, Slurm refusals'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh-keygen bash timeout \
	sinfo scontrol sbatch jq
for c in /usr/sbin/sshd /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
	[ -x $c ] || error "prerequisite $c is missing (run 'make deps')"
done

DATA=$HERD_TEST_DIR/data/sbatch

# job NAME: writes NAME.yaml, a job on the batch node itself (local
# transport: the nodes of the allocation are not used); the command is $1
# after the name, the slurm: section (indented by two) comes from stdin.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: localhost}"
		echo "health: {grace: 1s}"
		echo "launch:"
		echo "  command: $2"
		echo "slurm:"
		sed 's/^/  /'
	} >"$1.yaml"
}

# job_field ID KEY: KEY=value of scontrol show job ID (one line per field).
job_field() {
	timeout 5 scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" |
		head -n 1
}

# job_path ID KEY: a path field of scontrol show job ID (WorkDir, StdOut:
# alone on their lines, so a space in the path is kept).
job_path() {
	timeout 5 scontrol show job "$1" | sed -n "s/^ *$2=//p" | head -n 1
}

# wait_job_state ID STATE [S]: poll until the job is in STATE (at most S s, 20).
wait_job_state() {
	_i=0
	until [ "$(job_field "$1" JobState)" = "$2" ]; do
		_i=$((_i + 1))
		[ $_i -lt $((${3:-20} * 10)) ] || {
			echo "job $1 is '$(job_field "$1" JobState)', not $2" >&2
			return 1
		}
		sleep 0.1   # poll interval of a bounded wait
	done
}

# wait_file FILE [S]: poll until FILE exists (at most S s, 20).
# wait_line FILE REGEX [SECONDS]: until a line of FILE matches REGEX.
wait_line() {
	_i=0
	until grep -q -x "$2" "$1" 2>/dev/null; do
		_i=$((_i + 1))
		[ $_i -lt $((${3:-20} * 20)) ] || {
			echo "no line $2 in $1:" >&2 && cat "$1" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

# submitted_id FILE: the job id of herd sbatch --wait's first line.
submitted_id() {
	sed -n "1s/^submitted batch job \([0-9][0-9]*\) (output: .*)\$/\1/p" "$1"
}

wait_file() {
	_i=0
	until [ -e "$1" ]; do
		_i=$((_i + 1))
		[ $_i -lt $((${2:-20} * 20)) ] || { echo "no $1" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

test_expect_success '--help says what it does, without Slurm' '
	herd sbatch --help >out &&
	grep "^usage: herd sbatch JOB.yaml \[--dry-run\] \[--wait \[--parsable\]\]" out &&
	grep -- "--wait" out &&
	herd --help | grep "herd sbatch" &&
	test_expect_code 2 herd sbatch 2>err &&
	grep "^try .herd sbatch --help.$" err &&
	test_expect_code 2 herd sbatch a.yaml b.yaml 2>err
'

# The trash directory sharness runs in has a space in its name: the
# #SBATCH lines that name it quote it the way sbatch reads them.
test_expect_success '--dry-run: every slurm key as an #SBATCH line; bash -n passes' '
	herd sbatch --dry-run "$DATA/full.yaml" >script &&
	bash -n script &&
	head -n 1 script | grep "^#!/bin/bash\$" &&
	grep "^#SBATCH" script >got &&
	cat >expect <<-EOF &&
	#SBATCH --job-name=llama-ft
	#SBATCH --chdir="$PWD"
	#SBATCH --partition=gpu
	#SBATCH --time=1-00:00:00
	#SBATCH --account=proj
	#SBATCH --qos=normal
	#SBATCH --nodes=4
	#SBATCH --gpus-per-node=8
	#SBATCH --exclusive
	#SBATCH --requeue
	#SBATCH --output="$PWD/runs/llama-ft/slurm-%j.out"
	#SBATCH --constraint=a100
	#SBATCH --mem 32G
	#SBATCH -x node[09-10]
	EOF
	test_cmp expect got &&
	tail -n 1 script >got &&
	echo "exec '\''$HERD_ROOT/bin/herd'\'' run '\''$DATA/full.yaml'\''" >expect &&
	test_cmp expect got &&
	test ! -e runs
'

test_expect_success '--dry-run: no slurm section gives one node and the defaults' '
	herd sbatch --dry-run "$DATA/minimal.yaml" >script &&
	bash -n script &&
	grep "^#SBATCH" script >got &&
	cat >expect <<-EOF &&
	#SBATCH --job-name=minimal
	#SBATCH --chdir="$PWD"
	#SBATCH --nodes=1
	EOF
	test_cmp expect got
'

test_expect_success 'a job file in a directory with a quote in its name' '
	mkdir "it'\''s" &&
	cp "$DATA/minimal.yaml" "it'\''s/job.yaml" &&
	herd sbatch --dry-run "it'\''s/job.yaml" >script &&
	bash -n script &&
	tail -n 1 script | sed "s/^exec //" >cmd &&
	eval "set -- $(cat cmd)" &&
	test "$3" = "$PWD/it'\''s/job.yaml"
'

test_expect_success 'spec errors exit 2 before anything is submitted' '
	job badextra true <<-\EOF &&
	extra: ["--mail-type=END"]
	EOF
	test_expect_code 2 herd sbatch --dry-run badextra.yaml 2>err &&
	grep "^herd: sbatch: badextra.yaml: slurm.extra: herd sbatch cannot pass .--mail-type=END. to Slurm" err &&
	job badtime true <<-\EOF &&
	time: soon
	EOF
	test_expect_code 2 herd sbatch badtime.yaml 2>err &&
	grep "slurm.time: .soon.: expected" err &&
	job badmem true <<-\EOF &&
	extra: ["--mem=lots"]
	EOF
	test_expect_code 2 herd sbatch badmem.yaml 2>err &&
	grep "slurm.extra: .--mem=lots.: expected a memory size" err &&
	echo "slurm: {nodes: two}" >badspec.yaml &&
	test_expect_code 2 herd sbatch badspec.yaml 2>err
'

test_expect_success 'cluster of 4 nodes with Slurm' '
	cluster_up 4 &&
	slurm_up
'

test_expect_success '--wait: the job runs herd run on its batch node; output in slurm.output' '
	job hello hostname <<-\EOF &&
	output: runs/{{name}}/slurm-%j.out
	EOF
	timeout 60 herd sbatch --wait hello.yaml >out 2>err &&
	id=$(submitted_id out) &&
	test -n "$id" &&
	grep -x "submitted batch job $id (output: $PWD/runs/hello/slurm-$id.out)" out &&
	tail -n 1 out | grep -x "job $id: COMPLETED" &&
	{ sed 1d out | grep -v -x "job $id: \(PENDING\|RUNNING on [^ ]*\|COMPLETING\|COMPLETED\)" >other || true; } &&
	test_must_be_empty other &&
	test -s runs/hello/slurm-$id.out &&
	node=$(sed -n "s/^\[0\] //p" runs/hello/slurm-$id.out) &&
	echo "$HERD_CLUSTER_NODES" | tr " " "\n" | grep -x "$node" &&
	test -s runs/hello/latest/events.jsonl &&
	test_must_be_empty err &&
	herd list --json >list.json &&
	jq -e --arg id "$id" "[.[] | select(.name == \"hello\")][0].slurm_job_id == \$id" list.json &&
	herd list >list &&
	grep "^[^ ]*  hello  .*  $id  *$PWD/runs/hello/" list
'

test_expect_success 'the job description carries every option: name, nodes, time, exclusive, requeue, exclude, workdir' '
	rm -f started go &&
	n4=$(cluster_node 4) &&
	job held "$DATA/hold.sh '\''$PWD'\''" <<-EOF &&
	partition: $HERD_SLURM_PARTITION
	time: "1:10:00"
	nodes: 2
	exclusive: true
	requeue: true
	output: logs/%x-%j.log
	extra: ["--exclude=$n4", "--cpus-per-task=1"]
	EOF
	herd sbatch held.yaml >out 2>err &&
	test_must_be_empty err &&
	id=$(cat out) &&
	wait_file started &&
	test "$(job_field $id JobState)" = RUNNING &&
	test "$(job_field $id JobName)" = held &&
	test "$(job_field $id Partition)" = "$HERD_SLURM_PARTITION" &&
	test "$(job_field $id NumNodes)" = 2 &&
	test "$(job_field $id TimeLimit)" = 01:10:00 &&
	test "$(job_field $id OverSubscribe)" = NO &&
	test "$(job_field $id Requeue)" = 1 &&
	test "$(job_field $id ExcNodeList)" = "$n4" &&
	test "$(job_path $id WorkDir)" = "$PWD" &&
	test "$(job_path $id StdOut)" = "$PWD/logs/held-$id.log" &&
	job_field $id NodeList >nodes &&
	! grep "$n4" nodes &&
	test "$(cat started)" != "$n4" &&
	echo "$HERD_CLUSTER_NODES" | tr " " "\n" | grep -x "$(cat started)" &&
	touch go &&
	wait_job_state $id COMPLETED &&
	grep "^\[0\] released\$" logs/held-$id.log
'

test_expect_success '--wait: a failing command fails the job; its exit status and state' '
	job fails "exit 3" <<-\EOF &&
	output: fails-%j.out
	EOF
	test_expect_code 3 timeout 60 herd sbatch --wait fails.yaml >out 2>err &&
	id=$(submitted_id out) &&
	grep -x "submitted batch job $id (output: $PWD/fails-$id.out)" out &&
	tail -n 1 out | grep -x "job $id: FAILED" &&
	grep "^herd: sbatch: job $id ended FAILED, exit status 3\$" err
'

test_expect_success '--wait prints each state as it changes: RUNNING on its node while it runs, then COMPLETED' '
	rm -f started go &&
	job heldw "$DATA/hold.sh '\''$PWD'\''" <<-EOF &&
	output: heldw-%j.out
	EOF
	{
		{ timeout 60 herd sbatch --wait heldw.yaml >wout 2>werr
		  echo $? >wrc.tmp && mv wrc.tmp wrc; } &
	} &&
	wait_file started &&
	id=$(submitted_id wout) &&
	test -n "$id" &&
	wait_line wout "job $id: RUNNING on $(cat started)" &&
	! grep "COMPLETED" wout &&
	touch go &&
	wait_file wrc 40 &&
	test "$(cat wrc)" = 0 &&
	tail -n 1 wout | grep -x "job $id: COMPLETED" &&
	test_must_be_empty werr
'

test_expect_success '--wait --parsable prints the job id alone, as plain herd sbatch does' '
	job quick true <<-\EOF &&
	output: quick-%j.out
	EOF
	timeout 60 herd sbatch --wait --parsable quick.yaml >out 2>err &&
	grep -x "[0-9][0-9]*" out &&
	test $(wc -l <out) -eq 1 &&
	test_must_be_empty err &&
	herd sbatch quick.yaml >out 2>err &&
	grep -x "[0-9][0-9]*" out &&
	test $(wc -l <out) -eq 1 &&
	test_expect_code 2 herd sbatch --parsable quick.yaml 2>err &&
	grep "^herd: sbatch: --parsable goes with --wait" err
'

test_expect_success 'the sbatch program takes a --dry-run script as it is' '
	rm -rf runs &&
	herd sbatch --dry-run "$DATA/minimal.yaml" >minimal.sh &&
	timeout 60 sbatch --wait --parsable minimal.sh >out &&
	id=$(cat out) &&
	node=$(sed -n "s/^\[0\] //p" slurm-$id.out) &&
	echo "$HERD_CLUSTER_NODES" | tr " " "\n" | grep -x "$node"
'

test_expect_success 'slurm.output in a directory herd cannot make: exit 1, nothing submitted' '
	echo file >blocker &&
	job blocked true <<-\EOF &&
	output: blocker/%j.out
	EOF
	test_expect_code 1 herd sbatch blocked.yaml >out 2>err &&
	test_must_be_empty out &&
	grep "^herd: sbatch: cannot make .*/blocker for slurm.output: Not a directory\$" err
'

test_expect_success 'a bad partition: Slurm'\''s reason, exit 1, no job id' '
	job nopart true <<-\EOF &&
	partition: nope
	EOF
	test_expect_code 1 herd sbatch nopart.yaml >out 2>err &&
	test_must_be_empty out &&
	echo "herd: sbatch: Slurm refused the job: Invalid partition name specified (partition \"nope\")" >expect &&
	test_cmp expect err
'

test_expect_success 'more nodes than the cluster has: Slurm'\''s reason, exit 1' '
	job many true <<-\EOF &&
	nodes: 99
	EOF
	test_expect_code 1 herd sbatch many.yaml >out 2>err &&
	test_must_be_empty out &&
	grep "^herd: sbatch: Slurm refused the job: [A-Z].* (nodes 99 .*)" err &&
	# The test cluster has EnforcePartLimits=NO: slurmctld takes the job
	# and leaves it pending for good; herd cancels it.
	id=$(sed -n "s/.*job \([0-9]*\) cancelled.*/\1/p" err) &&
	if test -n "$id"; then
		wait_job_state $id CANCELLED 10
	fi
'

test_expect_success 'GPUs the cluster does not have: Slurm'\''s reason, exit 1' '
	job gpus true <<-\EOF &&
	gpus_per_node: 2
	EOF
	test_expect_code 1 herd sbatch gpus.yaml >out 2>err &&
	test_must_be_empty out &&
	grep "^herd: sbatch: Slurm refused the job: .*gres:gpu:2" err
'

test_done
