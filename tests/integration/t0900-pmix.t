#!/bin/sh

test_description='herd run in launch.mode pmix on the local test cluster: Open MPI ranks get their rank, size and peers from the agents'"'"' PMIx servers (4 nodes x 2, uneven 1+3 hostfiles), MPI_Abort stops every rank on every node with its status, a node lost mid-run is evicted and the rerun on 3 nodes passes, and the singleton trap is reported as a failure'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require

test_expect_success 'cluster of 4 nodes' '
	own_binaries &&
	pmix_prog &&
	cluster_up 4 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	N3=$(cluster_node 3) && N4=$(cluster_node 4)
'

test_expect_success '4 nodes x 2 ranks: every rank has size 8, its own rank on the right node, right sum and ring' '
	pmix_job even <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	herd run even.yaml >out 2>err &&
	pmix_expect 8 $N1 $N1 $N2 $N2 $N3 $N3 $N4 $N4 >expect &&
	pmix_lines out >got &&
	test_cmp expect got &&
	ev_all runs/even/latest/events.jsonl attempt_start ".world_size == 8 and .nodes == 4" &&
	jq -c "select(.event == \"rank_exit\") | [.rank, .host, .status]" runs/even/latest/events.jsonl | sort >exits &&
	cat >expect.exits <<-EOF &&
	[0,"$N1",0]
	[1,"$N1",0]
	[2,"$N2",0]
	[3,"$N2",0]
	[4,"$N3",0]
	[5,"$N3",0]
	[6,"$N4",0]
	[7,"$N4",0]
	EOF
	test_cmp expect.exits exits &&
	pmix_none_left
'

test_expect_success 'uneven 1+3 ranks from an Open MPI hostfile (slots=1, slots=3; no nodes.slots)' '
	printf "%s slots=1 max_slots=1\n%s slots=3\n" $N1 $N2 >hosts.openmpi &&
	pmix_job ompi <<-EOF &&
	nodes: {hostfile: "$PWD/hosts.openmpi"}
	restart: {max: 0}
	EOF
	herd run ompi.yaml >out 2>err &&
	pmix_expect 4 $N1 $N2 $N2 $N2 >expect &&
	pmix_lines out >got &&
	test_cmp expect got &&
	ev_all runs/ompi/latest/events.jsonl attempt_start ".world_size == 4 and .nodes == 2"
'

test_expect_success 'uneven 1+3 ranks from a DeepSpeed hostfile' '
	printf "%s slots=1\n%s slots=3\n" $N3 $N4 >hosts.deepspeed &&
	pmix_job ds <<-EOF &&
	nodes: {hostfile: "$PWD/hosts.deepspeed"}
	restart: {max: 0}
	EOF
	herd run ds.yaml >out 2>err &&
	pmix_expect 4 $N3 $N4 $N4 $N4 >expect &&
	pmix_lines out >got &&
	test_cmp expect got
'

# The ranks would sleep 60 s: gone within 8 s is the abort carried to every
# node, with room for a loaded machine (CI: 2 shared cores under ASan took
# more than 2 s).  The time is printed.
test_expect_success 'MPI_Abort(42) on rank 5: herd exits 42 and no rank is left on any node within 8 s' '
	pmix_job abort --abort 5 --sleep 60 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	health: {grace: 2s}
	restart: {max: 3}
	EOF
	run_bg abort.yaml out err &&
	i=0 &&
	until grep -q "rank 5: calling MPI_Abort(42)" err; do
		i=$((i + 1)) &&
		test $i -lt 3000 || return 1
		sleep 0.01   # poll interval of a bounded wait
	done &&
	t0=$(now_ms) &&
	wait_exit $HERD_PID 10 &&
	t_exit=$(now_ms) &&
	pmix_none_left 5 &&
	t_gone=$(now_ms) &&
	echo "MPI_Abort: herd exited $((t_exit - t0)) ms, every rank gone $((t_gone - t0)) ms after the abort message" &&
	test $WAIT_RC = 42 &&
	test $((t_exit - t0)) -le 8000 &&
	test $((t_gone - t0)) -le 8000 &&
	grep "herd: rank 5 on $N3 called MPI_Abort (status 42)" err &&
	ev_all runs/abort/latest/events.jsonl attempt_start ".attempt == 1" &&
	test -z "$(ls runs/abort/latest/ | grep attempt-2)"
'

test_expect_success 'node 2 killed mid-run: the attempt fails, node 2 is evicted, the rerun on 3 nodes passes' '
	pmix_job kill --sleep "\$((HERD_ATTEMPT == 1 ? 60 : 0))" <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2, min: 3}
	health: {heartbeat: 500ms, timeout: 3s, grace: 2s}
	restart: {max: 1, backoff: 500ms}
	EOF
	run_bg kill.yaml out err &&
	wait_files 8 "runs/kill/latest/attempt-1/rank-*.log" 20 &&
	i=0 &&
	until test "$(cat runs/kill/latest/attempt-1/rank-*.log | grep -c " of 8 on ")" = 8; do
		i=$((i + 1)) &&
		test $i -lt 600 || return 1
		sleep 0.05   # poll interval of a bounded wait
	done &&
	t0=$(now_ms) &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 60 &&
	echo "node kill: herd done (rerun included) $(($(now_ms) - t0)) ms after the kill" &&
	test $WAIT_RC = 0 &&
	jq -e -n "[inputs | select(.event == \"node_evicted\" and .attempt == 1) | .host] == [\"$N2\"]" runs/kill/latest/events.jsonl &&
	jq -e -n "[inputs | select(.event == \"attempt_end\") | [.attempt, .status]] == [[1, 1], [2, 0]]" runs/kill/latest/events.jsonl &&
	jq -e -n "[inputs | select(.event == \"attempt_start\" and .attempt == 2)] | length == 1 and .[0].world_size == 6 and .[0].nodes == 3" runs/kill/latest/events.jsonl &&
	grep "evicted: $N2" err &&
	for r in 0 1 2 3 4 5; do
		printf "rank %s of 6\n" $r || return 1
	done >expect.6 &&
	sed -n "s/^\(rank [0-9]* of [0-9]*\) on .*/\1/p" runs/kill/latest/attempt-2/rank-*.log | sort >got.6 &&
	test_cmp expect.6 got.6 &&
	pmix_expect 6 $N1 $N1 $N3 $N3 $N4 $N4 >expect.2 &&
	for r in 0 1 2 3 4 5; do
		sed "s/^/[$r] /" runs/kill/latest/attempt-2/rank-$r.log | grep " rank " || return 1
	done | sort >got.2 &&
	test_cmp expect.2 got.2 &&
	pmix_none_left
'

test_expect_success 'node 2 comes back' '
	cluster_start_node 2
'

test_expect_success 'singleton trap (launch.env OMPI_MCA_schizo: ""): every rank ran as size 1, herd reports it and fails' '
	pmix_job single <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	printf "  env: {OMPI_MCA_schizo: \"\"}\n" >>single.yaml &&
	test_expect_code 1 herd run single.yaml >out 2>err &&
	grep "without ever connecting to herd.s PMIx server" err &&
	grep "of 1 on" out &&
	! grep " of 8 on " out &&
	jq -e -n "[inputs | select(.event == \"attempt_end\")] | length == 1 and .[0].status == 1" runs/single/latest/events.jsonl &&
	pmix_none_left
'

test_done
