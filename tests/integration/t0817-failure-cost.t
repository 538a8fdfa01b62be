#!/bin/sh

test_description='what a failure cost, from the events and the metrics: a node killed mid-run and replaced by a spare; herd status (text and --json), herd report and the live status line show detect, restart, restore and the steps redone (the step before the failure minus the checkpoint resumed from)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid ssh-keygen jq python3
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
M=$HERD_TEST_DIR/data/metrics

test_expect_success 'cluster of 3 nodes; a rank that counts steps into HERD_METRICS' '
	own_binaries &&
	cluster_up 3 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) && N3=$(cluster_node 3) &&
	# Attempt 1 steps until it is stopped (it too gets HERD_RESUME_FROM:
	# the checkpoint is there from the start; it counts from 0 all the
	# same); a later attempt resumes after the step its checkpoint names
	# and ends 30 steps on.
	cat >rank.sh <<-\EOF &&
	#!/bin/sh
	step=0 last=-1
	if [ "$HERD_ATTEMPT" != 1 ] && [ -n "$HERD_RESUME_FROM" ]; then
		step=${HERD_RESUME_FROM##*_}
		step=$(expr "$step" + 0)
		last=$((step + 30))
	fi
	while [ $last -lt 0 ] || [ $step -lt $last ]; do
		step=$((step + 1))
		echo "{\"step\":$step,\"loss\":1.5}" >>"$HERD_METRICS"
		sleep 0.1
	done
	EOF
	chmod 755 rank.sh &&
	mkdir -p ckpt/step_00000005 &&
	: >ckpt/step_00000005/COMPLETE &&
	cat >cost.yaml <<-EOF
	name: cost
	nodes: {hosts: "$N1,$N2", spares: "$N3", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {heartbeat: 500ms, timeout: 3s, grace: 1s}
	restart: {max: 1, backoff: 5s}
	metrics: {interval: 200ms}
	checkpoint: {dir: "$PWD/ckpt", pattern: "step_*", complete_marker: COMPLETE}
	launch: {command: $(yaml_cmd "$PWD/rank.sh"), workdir: "$PWD"}
	log: {dir: "$PWD/runs/cost"}
	EOF
'

# job_step: the newest job step in metrics.jsonl (0 before any).
job_step() {
	_js=$(jq -n "[inputs | .job.step // empty] | last // 0" runs/cost/latest/metrics.jsonl 2>/dev/null) || _js=0
	echo "${_js:-0}"
}

test_expect_success 'node 2 killed at step 20 or later: the failure is costed in herd status, herd report and the status line' '
	python3 "$M/pty-run.py" 24 220 raw herd run cost.yaml >/dev/null 2>&1 &
	PTY_PID=$! &&
	i=0 &&
	until [ "$(job_step)" -ge 20 ]; do
		i=$((i + 1)) && test $i -lt 600 || { echo "no step 20" >&2; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done &&
	test_when_finished "cluster_start_node 2" &&
	cluster_kill_node 2 &&
	wait_exit $PTY_PID 60 &&
	test "$WAIT_RC" = 0 &&
	herd status runs/cost/latest >status &&
	cat status &&
	grep "^failures: 1; each cost on average: detect [0-9.]* s, rejoin or restart [0-9.]* s, restore [^,]*, [0-9]* steps redone$" status &&
	grep "^  failure 1 (attempt 1, +[0-9:]*, node $N2): detect [0-9.]* s, restart [0-9.]* s, restore [^,]*, [0-9]* steps redone$" status &&
	herd status --json runs/cost/latest >status.json &&
	jq -e ".failures | length == 1" status.json &&
	jq -e ".failures[0] | .how == \"restart\" and .hosts == \"$N2\" and .attempt == 1 and .detect_ms >= 0 and .detect_ms < 4000" status.json &&
	# the spare was ready: no backoff, the restart is within 5 s
	jq -e ".failures[0] | .recover_ms > 0 and .recover_ms < 4000" status.json &&
	jq -e ".failures[0] | .step_restored == 5 and .step_before >= 20 and .steps_redone == .step_before - 5" status.json &&
	herd report runs/cost/latest -o report.html &&
	grep "<h2>Failures</h2>" report.html &&
	grep "<td>1</td><td>+[0-9:]*</td><td>1</td><td>$N2: [^<]*</td><td>[0-9.]* s</td><td>restart</td><td>[0-9.]* s</td><td>[^<]*</td><td>[0-9]*</td></tr>" report.html &&
	grep -a -o "last failure: detect [0-9.]*s restart [0-9.]*s restore [^ ]* redone [0-9]*" raw | tail -n 1
'

test_expect_success 'a run with no failure shows none' '
	cat >calm.yaml <<-EOF &&
	name: calm
	nodes: {hosts: "$N1", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	restart: {max: 0}
	launch: {command: "true", workdir: "$PWD"}
	log: {dir: "$PWD/runs/calm"}
	EOF
	herd run calm.yaml >out 2>err &&
	herd status runs/calm/latest >status2 &&
	! grep "^failures" status2 &&
	herd status --json runs/calm/latest | jq -e ".failures == []" &&
	herd report runs/calm/latest -o calm.html &&
	! grep "<h2>Failures</h2>" calm.html
'

test_done
