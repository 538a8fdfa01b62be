#!/bin/sh

test_description='herd bench: a timed TCP ring all-reduce between the nodes of a job on the local test cluster (real sshd), on the addresses the job uses; one node and bad options are named'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen awk
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# job NAME HOSTS: a job whose own command would fail: bench replaces it.
job() {
	cat >"$1.yaml" <<-EOT
	name: $1
	nodes: {hosts: "$2", slots: 2}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	launch: {command: "exit 3"}
	EOT
}

# until_true S CMD...: polls CMD every 0.1 s for at most S seconds.
until_true() {
	_ut_n=$(($1 * 10))
	shift
	while ! "$@"; do
		_ut_n=$((_ut_n - 1))
		[ $_ut_n -gt 0 ] || { echo "not true in time: $*" >&2; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done
}

test_expect_success 'cluster of 3 nodes' '
	own_binaries &&
	cluster_up 3 &&
	job three "${HERD_CLUSTER_PREFIX}[1-3]"
'

test_expect_success '3 nodes: one rank per node, the ring on the cluster addresses, every sum right' '
	herd bench three.yaml --sizes 8,4K,1M --iters 3 >out 2>err &&
	cat out &&
	grep "^ring all-reduce over 3 nodes (TCP, float32 sums, median of 3 timed rounds after 1 warm-up):$" out &&
	i=0 && for a in $HERD_CLUSTER_ADDRS; do
		grep -E "^  $i +$(cluster_node $((i + 1))) +$a\$" out || return 1
		i=$((i + 1))
	done &&
	awk "\$1 ~ /^[0-9]+\$/ && NF == 5" out >rows &&
	test $(wc -l <rows) = 3 &&
	awk "{ print \$1 }" rows >sizes && printf "8\n4096\n1048576\n" >expect &&
	test_cmp expect sizes &&
	awk "\$5 != \"ok\" || \$2 <= 0 { bad = 1 } END { exit bad }" rows &&
	awk "\$1 == 1048576 && \$4 > 0 { found = 1 } END { exit !found }" rows &&
	jq -e -n "[inputs | select(.event == \"rank_start\")] | length == 3" runs/three/bench/latest/events.jsonl
'

test_expect_success 'one node: nothing to measure, said so' '
	job one "$(cluster_node 1)" &&
	herd bench one.yaml >out &&
	grep "^one node: nothing crosses the network" out
'

test_expect_success 'a bench has its own run tree: the job'"'"'s latest and herd status stay the job'"'"'s' '
	cat >fixed.yaml <<-EOT &&
	name: fixed
	nodes: {hosts: "${HERD_CLUSTER_PREFIX}[1-2]", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	log: {dir: "$PWD/fixedlogs"}
	launch: {command: "echo trained"}
	EOT
	herd run fixed.yaml >run.out 2>run.err &&
	RUN=$(readlink fixedlogs/latest) &&
	test -n "$RUN" &&
	herd bench fixed.yaml --sizes 8 --iters 1 >out 2>err &&
	test "$(readlink fixedlogs/latest)" = "$RUN" &&
	grep "^herd: logs in $PWD/fixedlogs/bench/" err &&
	jq -e -n "[inputs | select(.event == \"rank_start\")] | length == 2" fixedlogs/bench/latest/events.jsonl &&
	herd status fixed.yaml >status.out &&
	cat status.out &&
	grep "^job fixed, run $RUN " status.out &&
	grep "^state: ended, exit status 0" status.out
'

test_expect_success 'a busy MASTER_PORT is named with launch.master_port' '
	sed "s/^launch: .*/launch: {command: \"exit 3\", master_port: 29517}/" three.yaml >busy.yaml &&
	sed -i "s/^name: three/name: busy/" busy.yaml &&
	# rank 0 runs on node 1: something else listens on its port there
	{ cluster_exec 1 python3 -c "import os, socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"0.0.0.0\", 29517))
s.listen(16)
open(sys.argv[1] + \".tmp\", \"w\").write(str(os.getpid()))
os.rename(sys.argv[1] + \".tmp\", sys.argv[1])
time.sleep(300)" "$PWD/listening" & } &&
	test_when_finished "kill \$(cat listening); wait" &&
	until_true 30 test -s listening &&
	test_must_fail herd bench busy.yaml --sizes 8 --iters 1 >out 2>err &&
	cat err &&
	grep "MASTER_PORT 29517 on .* is in use by another program: set launch.master_port to a free port" err
'

test_expect_success 'bad options are usage errors' '
	test_expect_code 2 herd bench three.yaml --sizes "1M;rm" 2>err &&
	grep "bench: --sizes takes byte counts" err &&
	test_expect_code 2 herd bench three.yaml --iters 0 2>err &&
	grep "bench: --iters takes 1 to 1000, not .0." err &&
	test_expect_code 2 herd bench 2>err &&
	grep "^try .herd bench --help.$" err &&
	herd bench --help | grep "^usage: herd bench JOB.yaml"
'

test_expect_success 'a size the probe refuses fails the run with the reason' '
	test_expect_code 2 herd bench three.yaml --sizes 2G 2>err &&
	grep "herd-agent probe: --sizes takes 4 bytes to 1G each" err
'

test_done
