#!/bin/sh

test_description='checkpoints in memory with a copy on another node: a DDP job saves through herd.ckpt into the memory tier of its node (HERD_CKPT_MEM, 0700, unreadable by another user); each step is copied to the next node; a node killed mid-run (its /dev/shm gone with it) resumes from memory on the survivors and from the peer copy on the spare; a node lost with its replica peer resumes from the copy persisted to disk; a step on disk and in memory is read from memory where the node holds it; torn steps are never offered; a squatted or symlinked tier, a full tier and a peer copy over memory_max fall back to disk in one line; the tier goes at job end unless keep_memory'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require
require_cmd useradd userdel runuser stat

MEM_PY=$HERD_TEST_DIR/data/ckpt/ddp-mem.py
OTHER=herd-cm-$$
TIER=/dev/shm/herd-mem-$(id -u)

# mem_job NAME HOSTS SPARES CKPT-EXTRA [ARGS...]: NAME.yaml running
# ddp-mem.py, one rank per node, checkpoints every 5 steps (memory, or
# ./ckpt-NAME on disk); CKPT-EXTRA goes inside checkpoint: {...}.
mem_job() {
	_mj_name=$1 _mj_hosts=$2 _mj_spares=$3 _mj_extra=$4
	shift 4
	mkdir -p "ckpt-$_mj_name" &&
	{
		echo "name: $_mj_name"
		printf 'nodes: {hosts: "%s", slots: 1' "$_mj_hosts"
		[ -z "$_mj_spares" ] || printf ', spares: "%s"' "$_mj_spares"
		echo "}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 2s}"
		echo "restart: {max: 3, backoff: 500ms}"
		echo "checkpoint: {dir: \"$PWD/ckpt-$_mj_name\", pattern: \"step_*\", complete_marker: COMPLETE${_mj_extra}}"
		echo "launch:"
		printf '  command: %s\n' "$(yaml_cmd /usr/bin/python3 "$MEM_PY" \
			--ckpt "$PWD/ckpt-$_mj_name" "$@")"
		echo "  workdir: \"$PWD\""
		echo '  env: {OMP_NUM_THREADS: "1"}'
	} >"$_mj_name.yaml"
}

ev() { echo "runs/$1/latest/events.jsonl"; }
rlog() { echo "runs/$1/latest/attempt-$2/rank-$3.log"; }
jobkey() { echo "$1-$(basename "$(readlink -f "runs/$1/latest")")-n$2"; }
on() { _on_n=$1; shift; cluster_exec "$_on_n" "$@"; }

# No ddp-mem.py left in any node (bounded).
mem_left() {
	_ml_i=0
	while :; do
		_ml_p=
		for _ml_n in $(seq 1 5); do
			for _ml_pid in $(ip netns pids "$(fo_ns $_ml_n)" 2>/dev/null); do
				tr '\0' ' ' <"/proc/$_ml_pid/cmdline" 2>/dev/null |
					grep -q "ddp-mem\.py" && _ml_p="$_ml_p $_ml_pid"
			done
		done
		[ -n "$_ml_p" ] || return 0
		_ml_i=$((_ml_i + 1))
		[ $_ml_i -lt 200 ] || { echo "left:$_ml_p" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

test_expect_success 'cluster of 5 nodes, each with its own /dev/shm; a second local user' '
	own_binaries &&
	cluster_up 5 &&
	useradd -M -d /nonexistent -s /bin/sh "$OTHER" &&
	on 1 sh -c "echo n1 >/dev/shm/herd-t0820-mark" &&
	! on 2 test -e /dev/shm/herd-t0820-mark &&
	on 1 rm /dev/shm/herd-t0820-mark
'

test_expect_success 'node 2 killed once step 10 is copied: survivors resume from memory, the spare from the peer copy; a torn step is never offered; the tier is 0700 and unreadable by another user; it is gone at job end' '
	# The ranks wait at step 25 until node 2 is killed: on a busy
	# machine the checks below outlasted the whole job.
	rm -f go.mem &&
	mem_job mem "${HERD_CLUSTER_PREFIX}[1-3]" "$(cluster_node 4)" "" \
		--steps 60 --every 5 --sleep 0.2 --torn 7 \
		--wait-step 25 --wait-file "$PWD/go.mem" &&
	run_bg mem.yaml out.mem err.mem &&
	fo_wait_event mem checkpoint_replicated ".rank == 1 and .step >= 10 and .why == \"replica\"" 60 &&
	fo_wait_event mem checkpoint_replicated ".rank == 2 and .step >= 10" 30 &&
	grep -q "^rank 0: left a torn step" "$(rlog mem 1 0)" &&
	K1=$(jobkey mem 0) &&
	echo "tier on node 1: $TIER/$K1" &&
	test "$(on 1 stat -c "%a %u" "$TIER")" = "700 $(id -u)" &&
	test "$(on 1 stat -c "%a" "$TIER/$K1")" = 700 &&
	test "$(on 1 stat -c "%a" "$TIER/$K1/rank-0")" = 700 &&
	# The ranks go on saving and drop their oldest step meanwhile: a
	# step the glob named may be gone when ls looks, so: some complete
	# step is there.
	on 1 sh -c "ls -d \"$TIER/$K1\"/rank-0/step_*/COMPLETE 2>/dev/null" | grep -q . &&
	on 1 sh -c "ls -d \"$TIER/$K1\"/peer/rank-2/step_*/COMPLETE 2>/dev/null" | grep -q . &&
	# The newest step: the rank goes on saving, and drops its oldest.
	ST=$(on 1 sh -c "ls -d \"$TIER/$K1\"/rank-0/step_*/COMPLETE 2>/dev/null" | tail -n 1) &&
	test -n "$ST" &&
	on 1 cat "${ST%/COMPLETE}/state.pt" >/dev/null &&
	! on 1 runuser -u "$OTHER" -- ls "$TIER/$K1" 2>/dev/null &&
	! on 1 runuser -u "$OTHER" -- cat "${ST%/COMPLETE}/state.pt" >/dev/null 2>&1 &&
	fo_has mem checkpoint_saved ".rank == 0 and .tier == \"memory\" and .step == 10 and .bytes > 0" &&
	cluster_kill_node 2 &&
	touch go.mem &&
	wait_exit $HERD_PID 180 &&
	cat err.mem &&
	test "$WAIT_RC" = 0 &&
	fo_has mem job_end ".status == 0 and .attempts == 2" &&
	jq -c -n "inputs | select(.event == \"checkpoint_restored\")" "$(ev mem)" &&
	S=$(jq -n "[inputs | select(.event == \"checkpoint_restored\" and .attempt == 2) | .step] | unique | if length == 1 then .[0] else -1 end" "$(ev mem)") &&
	echo "attempt 2 resumes every rank from step $S" &&
	test "$S" -ge 10 && test "$S" -lt 99999998 &&
	R1=$(jq -n "[inputs] | ([.[] | select(.event == \"node_failed\")][0].t) as \$f | [.[] | select(.event == \"checkpoint_replicated\" and .rank == 1 and .why == \"replica\" and .t < \$f) | .step] | max" "$(ev mem)") &&
	echo "newest copy of rank 1 (the lost node) on another node: step $R1" &&
	test "$S" -ge "$R1" &&
	test "$(jq -n "[inputs | select(.event == \"checkpoint_restored\" and .attempt == 2)] | length" "$(ev mem)")" = 3 &&
	fo_has mem checkpoint_restored ".attempt == 2 and .tier == \"memory\"" &&
	fo_has mem checkpoint_restored ".attempt == 2 and .tier == \"peer\"" &&
	R4=$(jq -n "[inputs | select(.event == \"rank_start\" and .attempt == 2 and .host == \"$(cluster_node 4)\") | .rank][0]" "$(ev mem)") &&
	fo_has mem checkpoint_restored ".attempt == 2 and .rank == $R4 and .tier == \"peer\"" &&
	fo_has mem checkpoint_replicated ".why == \"restore\" and .peer == \"$(cluster_node 4)\"" &&
	! fo_has mem checkpoint_saved ".step >= 99999998" &&
	for r in 0 1 2; do
		grep "^rank $r: resumed from /dev/shm/.* at step $S\$" "$(rlog mem 2 $r)" || return 1
	done &&
	grep -q "^step $((S + 1))/60 " "$(rlog mem 2 0)" &&
	grep -q "^step 60/60 " "$(rlog mem 2 0)" &&
	P0=$(sed -n "s/^rank 0: params //p" "$(rlog mem 2 0)") &&
	for r in 1 2; do
		test "$(sed -n "s/^rank $r: params //p" "$(rlog mem 2 $r)")" = "$P0" || return 1
	done &&
	grep "attempt 2 resumes from step $S in memory" err.mem &&
	mem_left &&
	! on 1 test -e "$TIER/$K1" &&
	! on 3 test -e "$TIER/$(jobkey mem 2)"
'

test_expect_success 'node 2 comes back' '
	cluster_start_node 2
'

test_expect_success 'nodes 2 and 3 (rank 1 and its replica) lost together: every rank resumes from the step persisted to disk' '
	test_when_finished "touch go.both; wait_exit \$HERD_PID 180; cluster_node_back 2; cluster_node_back 3" &&
	# The ranks wait at step 25 until both nodes are gone: on a busy
	# machine the job could end before the kill.
	rm -f go.both &&
	mem_job both "${HERD_CLUSTER_PREFIX}[1-3]" "${HERD_CLUSTER_PREFIX}[4-5]" \
		", persist_every: 1s" --steps 40 --every 5 --sleep 0.15 \
		--wait-step 25 --wait-file "$PWD/go.both" &&
	run_bg both.yaml out.both err.both &&
	fo_wait_event both checkpoint_persisted ".step >= 10" 60 &&
	fo_has both checkpoint_persisted ".path | test(\"ckpt-both/step_[0-9]{8}$\")" &&
	ls -la ckpt-both &&
	PS=$(jq -n "[inputs | select(.event == \"checkpoint_persisted\") | .step] | max" "$(ev both)") &&
	test -e "ckpt-both/$(printf step_%08d "$PS")/COMPLETE" &&
	test -e "ckpt-both/$(printf step_%08d "$PS")/state.pt" &&
	# Whole or not at all: the persisted step has no half-written twin
	# (a later persist may be under way as a .tmp directory meanwhile).
	! ls -a ckpt-both | grep "^\.tmp-herd-$(printf step_%08d "$PS")-" &&
	# Both cut off first, then killed: killed one after the other,
	# node 3 could die after the next attempt started on a hot spare
	# (no backoff when a spare is ready) and made new copies.
	cluster_partition 2 && cluster_partition 3 &&
	cluster_kill_node 2 && cluster_kill_node 3 &&
	touch go.both &&
	wait_exit $HERD_PID 180 &&
	cat err.both &&
	test "$WAIT_RC" = 0 &&
	fo_has both job_end ".status == 0 and .attempts == 2" &&
	ev_all "$(ev both)" checkpoint_restored ".attempt != 2 or .tier == \"disk\"" &&
	test "$(jq -n "[inputs | select(.event == \"checkpoint_restored\" and .attempt == 2)] | length" "$(ev both)")" = 3 &&
	DS=$(jq -n "[inputs | select(.event == \"checkpoint_restored\" and .attempt == 2) | .step][0]" "$(ev both)") &&
	test "$DS" -ge "$PS" &&
	for r in 0 1 2; do
		grep "^rank $r: resumed from $PWD/ckpt-both/step_[0-9]* at step $DS\$" "$(rlog both 2 $r)" || return 1
	done &&
	grep -q "^step 40/40 " "$(rlog both 2 0)" &&
	mem_left
'

test_expect_success 'memory and disk hold the same step: the ranks whose node holds it resume from there, the spare from disk with no fetch' '
	rm -f go.same &&
	mem_job same "${HERD_CLUSTER_PREFIX}[1-3]" "$(cluster_node 4)" \
		", persist_every: 500ms" --steps 20 --every 5 --sleep 0.1 \
		--wait-file "$PWD/go.same" --wait-step 12 &&
	run_bg same.yaml out.same err.same &&
	fo_wait_event same checkpoint_persisted ".step == 10" 60 &&
	fo_wait_event same checkpoint_replicated ".rank == 1 and .step == 10 and .why == \"replica\"" 60 &&
	cluster_kill_node 2 &&
	fo_wait_event same attempt_start ".attempt == 2" 60 &&
	touch go.same &&
	wait_exit $HERD_PID 180 &&
	cat err.same &&
	test "$WAIT_RC" = 0 &&
	jq -c -n "inputs | select(.event == \"checkpoint_restored\")" "$(ev same)" &&
	ev_all "$(ev same)" checkpoint_restored ".attempt != 2 or .step == 10" &&
	R4=$(jq -n "[inputs | select(.event == \"rank_start\" and .attempt == 2 and .host == \"$(cluster_node 4)\") | .rank][0]" "$(ev same)") &&
	fo_has same checkpoint_restored ".attempt == 2 and .rank == $R4 and .tier == \"disk\"" &&
	# The other two read their own node: its memory tier, or the copy
	# it holds for a rank that moved there.
	test "$(jq -n "[inputs | select(.event == \"checkpoint_restored\" and .attempt == 2 and .tier != \"disk\")] | length" "$(ev same)")" = 2 &&
	! fo_has same checkpoint_replicated ".why == \"restore\"" &&
	grep -q "^step 20/20 " "$(rlog same 2 0)" &&
	mem_left
'

test_expect_success 'node 2 comes back (also when the test above failed before its end)' '
	wait_exit $HERD_PID 180;
	cluster_node_back 2
'

test_expect_success 'keep_memory: the tier stays after the job; what a killed agent left is removed by the next one' '
	mem_job keep "$(cluster_node 1)" "" ", keep_memory: true" \
		--steps 10 --every 5 --sleep 0 &&
	herd run keep.yaml >out.keep 2>err.keep &&
	K=$(jobkey keep 0) &&
	on 1 test -e "$TIER/$K/rank-0/step_00000010/COMPLETE" &&
	on 1 test -e "$TIER/$K/rank-0/step_00000005/COMPLETE" &&
	on 1 test -e "$TIER/$K/.keep" &&
	# What a killed agent left (its pid gone) goes at the next job of
	# the user on the node; a kept tier stays.
	on 1 sh -c "mkdir -m 0700 \"$TIER/stale-job\" && echo \"999999999 \$(cat /proc/sys/kernel/random/boot_id)\" >\"$TIER/stale-job/.agent\"" &&
	mem_job keep2 "$(cluster_node 1)" "" "" --steps 5 --every 5 --sleep 0 &&
	herd run keep2.yaml >out.keep2 2>err.keep2 &&
	! on 1 test -e "$TIER/stale-job" &&
	on 1 test -e "$TIER/$K/rank-0/step_00000010/COMPLETE" &&
	! on 1 test -e "$TIER/$(jobkey keep2 0)" &&
	on 1 rm -rf "$TIER/$K"
'

test_expect_success 'a tier squatted by another user, or a symlink: one line, checkpoints go to disk, the job completes' '
	on 1 rm -rf "$TIER" &&
	on 1 runuser -u "$OTHER" -- mkdir -m 0777 "$TIER" &&
	mem_job squat "${HERD_CLUSTER_PREFIX}[1-2]" "" "" --steps 10 --every 5 --sleep 0 &&
	herd run squat.yaml >out.squat 2>err.squat &&
	cat err.squat &&
	test "$(grep -c "memory tier: .*herd-mem-$(id -u) is owned by uid $(id -u "$OTHER")" err.squat)" -ge 1 &&
	test "$(grep -c "^herd: $(cluster_node 1): memory tier:" err.squat)" = 1 &&
	grep -q "^rank 0: saved step 5 to disk" "$(rlog squat 1 0)" &&
	grep -q "^rank 1: saved step 5 to memory" "$(rlog squat 1 1)" &&
	test -e ckpt-squat/step_00000010/COMPLETE &&
	on 1 sh -c "test -z \"\$(ls -A \"$TIER\")\"" &&
	on 1 rmdir "$TIER" &&
	on 1 ln -s /tmp "$TIER" &&
	mem_job link "${HERD_CLUSTER_PREFIX}[1-2]" "" "" --steps 10 --every 5 --sleep 0 &&
	herd run link.yaml >out.link 2>err.link &&
	cat err.link &&
	grep -q "memory tier: .*herd-mem-$(id -u): a symlink" err.link &&
	grep -q "^rank 0: saved step 5 to disk" "$(rlog link 1 0)" &&
	on 1 rm "$TIER"
'

test_expect_success 'memory_max reached: one line per node, checkpoints go to disk; a peer copy over memory_max is refused before anything is written' '
	mem_job full "${HERD_CLUSTER_PREFIX}[1-2]" "" ", memory_max: 150000" \
		--steps 15 --every 5 --sleep 0.1 --pad 100000 &&
	herd run full.yaml >out.full 2>err.full &&
	cat err.full &&
	grep -q "^rank 0: saved step 5 to memory" "$(rlog full 1 0)" &&
	grep -q "^rank 0: saved step 10 to disk" "$(rlog full 1 0)" &&
	grep -q "^rank 1: saved step 10 to disk" "$(rlog full 1 1)" &&
	test "$(grep -c "^herd: $(cluster_node 1): the memory tier is full" err.full)" = 1 &&
	test "$(grep -c "^herd: $(cluster_node 2): the memory tier is full" err.full)" = 1 &&
	fo_has full checkpoint_copy_failed ".error | test(\"memory_max\")" &&
	test -e ckpt-full/step_00000015/COMPLETE
'

test_expect_success 'no peer copy written past the limit, nothing left in the tiers' '
	for n in 1 2; do
		on $n sh -c "test ! -e \"$TIER\" || test -z \"\$(ls -A \"$TIER\")\"" || return 1
	done
'

test_expect_success 'a 16 MB step: copied to the next node in 1 MiB chunks through herd, fetched to the spare after a crash' '
	mem_job big "${HERD_CLUSTER_PREFIX}[1-2]" "$(cluster_node 3)" "" \
		--steps 30 --every 10 --sleep 1 --pad 16000000 \
		--wait-step 15 --wait-file "$PWD/go.big" &&
	rm -f go.big &&
	run_bg big.yaml out.big err.big &&
	fo_wait_event big checkpoint_replicated ".rank == 1 and .step >= 10 and .bytes > 16000000" 90 &&
	# Rank 0 (the survivor) has its step 10 too, as herd knows it.
	fo_wait_event big checkpoint_saved ".rank == 0 and .step >= 10" 90 &&
	jq -c -n "inputs | select(.event == \"checkpoint_replicated\")" "$(ev big)" | head -n 4 &&
	cluster_kill_node 2 &&
	touch go.big &&
	wait_exit $HERD_PID 180 &&
	cat err.big &&
	jq -c -n "inputs | select(.event | test(\"^(checkpoint|attempt|node)_\"))" "$(ev big)" | tail -n 12 &&
	test "$WAIT_RC" = 0 &&
	jq -c -n "inputs | select(.event == \"checkpoint_restored\")" "$(ev big)" &&
	fo_has big checkpoint_restored ".attempt == 2 and .tier == \"peer\" and .host == \"$(cluster_node 1)\"" &&
	fo_has big checkpoint_restored ".attempt == 2 and .tier == \"memory\"" &&
	grep -q "^step 30/30 " "$(rlog big 2 0)" &&
	mem_left &&
	cluster_start_node 2
'

test_expect_success 'tear down' '
	userdel "$OTHER"
'

test_done
