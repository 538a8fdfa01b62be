#!/bin/sh

test_description='the health gate (issue 14): herd check on the test cluster (real sshd) names a read-only workdir, a failing site script, GPU ECC errors (fake NVML), a slow or down RDMA port (fake sysfs) and a rate-limited node (tc) with their reasons; health.preflight evicts an unhealthy member before the first attempt and a spare takes its place'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq tc mount umount
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
FAKE_NVML_DIR=$HERD_ROOT/build/tests
[ -r "$FAKE_NVML_DIR/libnvidia-ml.so.1" ] ||
	error "prerequisite $FAKE_NVML_DIR/libnvidia-ml.so.1 is missing (make build/tests/libnvidia-ml.so.1)"

# job NAME HOSTS [SPARES] [MORE]: a job whose ranks work in $PWD/work; MORE
# is extra YAML (a health: section).
job() {
	cat >"$1.yaml" <<-EOT
	name: $1
	nodes: {hosts: "$2", slots: 1${3:+, spares: "$3"}}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	launch: {command: "echo step 1 on \$(hostname)", workdir: $PWD/work}
	restart: {max: 0}
	$4
	EOT
}

# row HOST: herd check's table row of HOST (out).
row() {
	grep "^$1 " out
}

# node_env N VAR=VALUE...: node N's sshd sets these for every session
# (the agent's test hooks), restarted; node_env N with nothing resets.
node_env() {
	_n=$1 && shift &&
	_cfg=$HERD_CLUSTER_DIR/nodes/$(cluster_node $_n)/sshd_config &&
	{ [ -f "$_cfg.orig" ] || cp "$_cfg" "$_cfg.orig"; } &&
	cp "$_cfg.orig" "$_cfg" &&
	if [ $# -gt 0 ]; then
		_line=SetEnv &&
		for _a in "$@"; do _line="$_line \"$_a\""; done &&
		echo "$_line" >>"$_cfg"
	fi &&
	cluster_kill_node $_n &&
	cluster_start_node $_n
}

test_expect_success 'cluster of 4 nodes' '
	own_binaries &&
	cluster_up 4 &&
	mkdir work &&
	FOUR="${HERD_CLUSTER_PREFIX}[1-4]" &&
	N2=$(cluster_node 2) && N3=$(cluster_node 3) && N4=$(cluster_node 4)
'

test_expect_success 'all healthy: a table, exit 0, --json parses' '
	job all "$FOUR" "" "health: {check_command: \"test -d /tmp\", min_free: 1M}" &&
	herd check all.yaml >out 2>err;
	rc=$? &&
	cat out err &&
	test $rc = 0 &&
	head -n 1 out | grep "^HOST  *agent  *workdir  *checkpoint  *clock  *gpus  *rdma  *net  *script  *network$" &&
	for i in 1 2 3 4; do
		row $(cluster_node $i) >r &&
		grep -q FAIL r && return 1
		grep "^$(cluster_node $i)  *ok  *ok  *skipped  *ok  *skipped  *skipped  *ok  *ok  *ok$" r || return 1
	done &&
	tail -n 1 out | grep -x "4 of 4 nodes healthy" &&
	herd check all.yaml --json >out.json 2>err &&
	jq -e ".healthy == 4 and .total == 4 and (.nodes | length) == 4 and
		(.links | length) == 4 and all(.links[]; .mb_per_s > 0) and
		all(.nodes[]; .healthy and .checks.workdir.status == \"ok\" and
			.checks.net.value == \"eth0\" and
			(.clock_offset_ms | fabs) < 1000)" out.json &&
	herd check all.yaml -v --no-net >out 2>err &&
	grep "^  workdir: .* free$" out &&
	grep "^  network: --no-net$" out &&
	! test -d runs
'

test_expect_success 'a read-only workdir and a failing check script are named with their reasons; exit 1' '
	W=$PWD/work &&
	cluster_exec 2 sh -c "mount --bind \"\$1\" \"\$1\" && mount -o remount,bind,ro \"\$1\" \"\$1\"" sh "$W" &&
	job bad "$FOUR" "" "health: {check_command: \"if [ \$(hostname) = $N3 ]; then echo checking; echo disk scrub failed on \$(hostname) >&2; exit 1; fi\"}" &&
	test_expect_code 1 herd check bad.yaml --no-net >out 2>err &&
	cat out &&
	row $N2 | grep "^$N2  *ok  *FAIL" &&
	grep -x "  workdir: workdir $W not writable (Read-only file system)" out &&
	row $N3 | grep "FAIL *skipped$" &&
	grep -x "  script: disk scrub failed on $N3" out &&
	tail -n 1 out | grep -x "2 of 4 nodes healthy" &&
	test_expect_code 1 herd check bad.yaml --no-net --json >out.json &&
	jq -e ".healthy == 2 and ([.nodes[] | select(.healthy | not) | .host] == [\"$N2\", \"$N3\"])" out.json &&
	cluster_exec 2 umount "$W"
'

test_expect_success 'fake NVML with ECC errors and fake RDMA sysfs (a slow port, a down port) are named' '
	# sshd_config SetEnv takes no spaces: the fakes go where the trash
	# directory'"'"'s name cannot reach.
	FAKE=$(mktemp -d /tmp/herd-t0640.XXXXXX) &&
	test_when_finished "rm -rf \"$FAKE\"" &&
	cd "$FAKE" &&
	mkdir -p sys3/class/infiniband/mlx5_0/ports/1 sys4/class/infiniband/mlx5_0/ports/1 \
		sys4/class/infiniband/mlx5_1/ports/1 &&
	echo "4: ACTIVE" >sys3/class/infiniband/mlx5_0/ports/1/state &&
	echo "100 Gb/sec (4X EDR)" >sys3/class/infiniband/mlx5_0/ports/1/rate &&
	echo "4: ACTIVE" >sys4/class/infiniband/mlx5_0/ports/1/state &&
	echo "25 Gb/sec (1X EDR)" >sys4/class/infiniband/mlx5_0/ports/1/rate &&
	echo "1: DOWN" >sys4/class/infiniband/mlx5_1/ports/1/state &&
	echo "100 Gb/sec (4X EDR)" >sys4/class/infiniband/mlx5_1/ports/1/rate &&
	printf "count 2\n1 ecc_uncorrected 3\n" >nvml3 &&
	printf "count 2\n0 retired_pending 1\n" >nvml4 &&
	cd - >/dev/null &&
	node_env 3 HERD_AGENT_SYSFS=$FAKE/sys3 LD_LIBRARY_PATH=$FAKE_NVML_DIR FAKE_NVML_VALUES=$FAKE/nvml3 &&
	node_env 4 HERD_AGENT_SYSFS=$FAKE/sys4 LD_LIBRARY_PATH=$FAKE_NVML_DIR FAKE_NVML_VALUES=$FAKE/nvml4 &&
	job all "$FOUR" &&
	test_expect_code 1 herd check all.yaml --no-net >out 2>err;
	rc=$? &&
	cat out err &&
	test $rc = 0 &&
	row $N3 | grep "^$N3  *ok  *ok  *skipped  *ok  *FAIL  *ok " &&
	grep -x "  gpus: GPU 1: 3 uncorrectable ECC errors" out &&
	row $N4 | grep "^$N4  *ok  *ok  *skipped  *ok  *FAIL  *FAIL " &&
	grep -x "  gpus: GPU 0: retired pages pending (reset it)" out &&
	grep -x "  rdma: RDMA port mlx5_1/1 is 1: DOWN, not ACTIVE; RDMA port mlx5_0/1 at 25 Gb/sec, others at 100 Gb/sec" out &&
	tail -n 1 out | grep -x "2 of 4 nodes healthy" &&
	node_env 3 && node_env 4
'

test_expect_success 'a rate-limited node (tc tbf 8mbit) is named by the network probe' '
	cluster_exec 2 tc qdisc add dev eth0 root tbf rate 8mbit burst 32kbit latency 400ms &&
	job all "$FOUR" &&
	t0=$(date +%s%3N) &&
	test_expect_code 1 herd check all.yaml >out 2>err;
	rc=$? &&
	echo "herd check with the network probe: $(( $(date +%s%3N) - t0 )) ms" &&
	cluster_exec 2 tc qdisc del dev eth0 root &&
	test $rc = 0 &&
	cat out &&
	row $N2 | grep "FAIL$" &&
	grep "^  network: slow node: its links reach [0-9.]* MB/s at best, typical [0-9.]* MB/s$" out &&
	test $(grep -c "^  network:" out) = 1 &&
	tail -n 1 out | grep -x "3 of 4 nodes healthy"
'

test_expect_success 'two nodes, one rate-limited: the link is named, not a node' '
	cluster_exec 2 tc qdisc add dev eth0 root tbf rate 8mbit burst 32kbit latency 400ms &&
	job two "${HERD_CLUSTER_PREFIX}[1-2]" &&
	test_expect_code 1 herd check two.yaml >out 2>err;
	rc=$? &&
	cluster_exec 2 tc qdisc del dev eth0 root &&
	test $rc = 0 &&
	cat out &&
	test $(grep -c "^  network: link $(cluster_node 1)-$N2 slow (.*with 2 nodes herd cannot tell which node)$" out) = 2
'

test_expect_success 'preflight: the node whose check fails is evicted before attempt 1, the spare joins, the job completes' '
	job pre "${HERD_CLUSTER_PREFIX}[1-3]" "$N4" "health: {preflight: true, check_command: \"if [ \$(hostname) = $N2 ]; then echo no scratch on \$(hostname); exit 1; fi\"}" &&
	herd run pre.yaml >out 2>err &&
	cat err &&
	grep -x "herd: node $N2 is unhealthy: no scratch on $N2; a spare takes its place" err &&
	grep -x "herd: spare $N4 joins the job" err &&
	E=runs/pre/latest/events.jsonl &&
	jq -e -n "[inputs | select(.event == \"node_unhealthy\" and .host == \"$N2\" and
		.check == \"script\" and .reason == \"no scratch on $N2\" and .attempt == 1)] | length == 1" $E &&
	jq -e -n "[inputs | select(.event == \"spare_used\" and .host == \"$N4\")] | length == 1" $E &&
	jq -e -n "[inputs | select(.event == \"attempt_start\" and .attempt == 1 and .nodes == 3)] | length == 1" $E &&
	! jq -e -n "[inputs | select(.event == \"rank_start\" and .host == \"$N2\")] | length > 0" $E &&
	jq -e -n "[inputs | select(.event == \"job_end\" and .status == 0)] | length == 1" $E &&
	grep -c "step 1 on" out >n && test $(cat n) = 3
'

test_expect_success 'preflight with no spare: fewer healthy nodes than nodes.min end the job' '
	job pre2 "${HERD_CLUSTER_PREFIX}[1-3]" "" "health: {preflight: true, check_command: \"[ \$(hostname) != $N2 ]\"}" &&
	test_expect_code 1 herd run pre2.yaml >out 2>err &&
	cat err &&
	grep -x "herd: node $N2 is unhealthy: check_command exited 1" err &&
	grep -x "herd: 2 of 3 nodes are healthy; the job needs 3" err
'

test_expect_success 'preflight before a restart: a node that went bad during attempt 1 is replaced before attempt 2' '
	W=$PWD/work && rm -f "$W/bad" &&
	cat >restart.yaml <<-EOT &&
	name: restart
	nodes: {hosts: "${HERD_CLUSTER_PREFIX}[1-3]", slots: 1, spares: "$N4"}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	launch:
	  workdir: $W
	  command: "if [ \$HERD_ATTEMPT = 1 ]; then if [ \$(hostname) = $N2 ]; then touch bad; exit 1; fi; exec sleep 60; fi; echo step 1 on \$(hostname)"
	restart: {max: 1, backoff: 0s}
	health: {preflight: true, grace: 1s, check_command: "[ \$(hostname) != $N2 ] || [ ! -e bad ] || { echo $N2 broke; exit 1; }"}
	EOT
	herd run restart.yaml >out 2>err;
	rc=$? &&
	cat err &&
	test $rc = 0 &&
	grep -x "herd: node $N2 is unhealthy: $N2 broke; a spare takes its place" err &&
	E=runs/restart/latest/events.jsonl &&
	jq -e -n "[inputs | select(.event == \"node_unhealthy\")] | length == 1" $E &&
	jq -e -n "[inputs | select(.event == \"node_unhealthy\" and .host == \"$N2\" and .attempt == 2)] | length == 1" $E &&
	jq -e -n "[inputs | select(.event == \"spare_used\" and .host == \"$N4\" and .attempt == 2)] | length == 1" $E &&
	jq -e -n "[inputs | select(.event == \"rank_start\" and .attempt == 2 and .host == \"$N4\")] | length == 1" $E &&
	test $(grep -c "step 1 on" out) = 3 &&
	rm -f "$W/bad"
'

test_expect_success 'a node whose agent cannot start is a failed row with the transport'"'"'s words' '
	cluster_kill_node 4 &&
	job all "$FOUR" &&
	test_expect_code 1 herd check all.yaml --no-net >out 2>err;
	rc=$? &&
	cluster_start_node 4 &&
	cat out &&
	test $rc = 0 &&
	row $N4 | grep "^$N4  *FAIL  *-  *-" &&
	grep "^  agent: $N4: cannot connect: Connection refused" out &&
	tail -n 1 out | grep -x "3 of 4 nodes healthy"
'

test_expect_success 'usage' '
	herd check --help | grep "^usage: herd check JOB.yaml" &&
	test_expect_code 2 herd check 2>err && grep "^try .herd check --help.$" err &&
	test_expect_code 2 herd check all.yaml --bogus 2>err &&
	echo "name: [" >broken.yaml &&
	test_expect_code 2 herd check broken.yaml 2>err &&
	grep "broken.yaml:" err
'

test_done
