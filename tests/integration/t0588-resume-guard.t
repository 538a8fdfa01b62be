#!/bin/sh

test_description='herd run --resume never starts a second controller of one job (issue 23): refused while the job runs, two resumes side by side of one lost job start exactly one, an ended or already resumed job only with --force; herd stop and attach of an ended job say ended (status N); --detach of a nodes.transport: local job leaves no agent on the caller'"'"'s stderr; herd top of a lost job without a terminal says lost and exits'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq timeout

# The job: 2 named local nodes, a rank each, ticking until stopped.
job() {
	cat >"$1.yaml" <<-EOF
	name: $1
	nodes: {hosts: "g[1-2]", slots: 1, transport: local}
	health: {heartbeat: 1s, timeout: 30s, grace: 1s}
	log: {dir: "runs/{{name}}"}
	launch:
	  command: "while :; do echo tick; sleep 0.2; done"
	EOF
}

# mine: the pids of this test's herds (its own copy of the binaries).
mine() {
	for _m_p in /proc/[0-9]*; do
		case $(readlink "$_m_p/exe" 2>/dev/null) in
		"$BIN/herd" | "$BIN/herd-agent") echo "${_m_p#/proc/}" ;;
		esac
	done
}

# Whatever a failed test left running is stopped as Ctrl-C would.
cleanup() {
	[ -n "$BIN" ] && for _c_p in $(mine); do kill -TERM "$_c_p" 2>/dev/null; done
	return 0
}

# list_state ID: the state `herd list --json` gives the job.
list_state() {
	herd list --json | jq -r --arg id "$1" '.[] | select(.id == $id) | .state'
}

# until_state ID STATE: poll until herd list says STATE (at most 20 s).
until_state() {
	_us_i=0
	while [ "$(list_state "$1")" != "$2" ]; do
		_us_i=$((_us_i + 1))
		[ $_us_i -lt 400 ] || { echo "$1 not $2 after 20 s" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

# until_ticking DIR: both ranks of run DIR printed a tick (at most 30 s).
until_ticking() {
	_ut_i=0
	while ! { grep -q "^tick" "$1/attempt-1/rank-0.log" &&
		grep -q "^tick" "$1/attempt-1/rank-1.log"; } 2>/dev/null; do
		_ut_i=$((_ut_i + 1))
		[ $_ut_i -lt 600 ] || { echo "$1: no ticks after 30 s" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

# runs: how many run directories job guard has.
runs() {
	ls runs/guard | grep -cv "^latest$"
}

test_expect_success 'setup: a lost job (its controller killed while running)' '
	own_binaries &&
	BIN=$PWD/bin &&
	trap "_rc=\$?; cleanup; (exit \$_rc); die" EXIT &&
	job guard &&
	run_bg guard.yaml out.a err.a &&
	until_ticking runs/guard/latest &&
	A=$(readlink runs/guard/latest) &&
	echo "$A" >A &&
	until_state "$A" running &&
	test_expect_code 1 timeout 30 herd run --resume "runs/guard/$A" 2>running.err &&
	cat running.err &&
	grep "^herd: run --resume: $A is running (its controller, pid $HERD_PID, answers); herd attach $A, herd stop $A" running.err &&
	test $(runs) = 1 &&
	kill -KILL $HERD_PID &&
	until_state "$A" lost
'

test_expect_success 'two --resume of one lost job side by side: exactly one runs, the other names it' '
	A=$(cat A) &&
	{ herd run --resume "runs/guard/$A" >out.r1 2>err.r1 & } && R1=$! &&
	{ herd run --resume "runs/guard/$A" >out.r2 2>err.r2 & } && R2=$! &&
	# the loser exits at once; the winner runs until stopped
	i=0 && while kill -0 $R1 2>/dev/null && kill -0 $R2 2>/dev/null; do
		i=$((i + 1)); test $i -lt 600 || { echo "both still run"; false; }
		sleep 0.05   # poll interval of a bounded wait
	done &&
	if kill -0 $R1 2>/dev/null; then W=$R1 L=$R2 LE=err.r2; else W=$R2 L=$R1 LE=err.r1; fi &&
	{ wait $L; echo $? >loser.rc; } &&
	cat $LE &&
	test "$(cat loser.rc)" = 1 &&
	grep -E "^herd: run --resume: $A is (running already, resumed as [^ ]+ \(pid $W\)|being resumed already \(herd pid $W\))" $LE &&
	kill -0 $W &&
	B=$(readlink runs/guard/latest) && test "$B" != "$A" &&
	until_ticking "runs/guard/$B" &&
	test $(runs) = 2 &&
	echo "$B" >B && echo $W >W &&
	# once it runs, a third one is told which run that is
	test_expect_code 1 timeout 30 herd run --resume "runs/guard/$A" 2>third.err &&
	grep "^herd: run --resume: $A is running already, resumed as $B (pid $W); herd attach $B, herd stop $B" third.err &&
	test $(runs) = 2 &&
	test "$(stat -c %a "runs/guard/$A/resume.lock")" = 600
'

test_expect_success 'herd stop and attach of an ended job say ended (status N), and resume refuses it without --force' '
	A=$(cat A) B=$(cat B) W=$(cat W) &&
	test_expect_code 143 herd stop --wait "$B" >stop.out &&
	wait_exit $W 20 &&
	test_expect_code 1 timeout 30 herd stop "$B" 2>stop.err &&
	cat stop.err &&
	grep -x "herd: stop: $B: ended (status 143); herd status $B shows it" stop.err &&
	test_expect_code 1 timeout 30 herd attach "$B" 2>attach.err &&
	grep -x "herd: attach: $B: ended (status 143); herd status $B shows it" attach.err &&
	test_expect_code 1 timeout 30 herd run --resume "runs/guard/$B" 2>ended.err &&
	grep -x "herd: run --resume: $B ended (status 143); --force starts it again" ended.err &&
	test_expect_code 1 timeout 30 herd run --resume "runs/guard/$A" 2>again.err &&
	grep -x "herd: run --resume: $A was resumed already as $B: \`herd run --resume $PWD/runs/guard/$B\` goes on from there (--force resumes $A again)" again.err &&
	test $(runs) = 2 &&
	herd run --help | grep -- "--force" &&
	test_expect_code 2 timeout 30 herd run --force guard.yaml 2>usage.err &&
	grep -x "herd: run: --force goes with --resume" usage.err
'

test_expect_success '--force resumes an ended job; detached, its lock holds for the life of the daemon' '
	B=$(cat B) &&
	herd run --resume "runs/guard/$B" --force --detach --json >forced.out 2>forced.err &&
	C=$(jq -r .id forced.out) && test -n "$C" &&
	until_state "$C" running &&
	test_expect_code 1 timeout 30 herd run --resume "runs/guard/$B" --force 2>busy.err &&
	grep "^herd: run --resume: $B is running already, resumed as $C (pid [0-9]*); herd attach $C, herd stop $C" busy.err &&
	test_expect_code 143 herd stop --wait "$C" >/dev/null
'

test_expect_success 'a resume.lock that is a symlink or writable by others is refused' '
	A=$(cat A) &&
	rm "runs/guard/$A/resume.lock" &&
	ln -s "$PWD/elsewhere" "runs/guard/$A/resume.lock" &&
	test_expect_code 1 timeout 30 herd run --resume "runs/guard/$A" --force 2>link.err &&
	grep "resume.lock: a symbolic link, refused" link.err &&
	! test -e elsewhere &&
	rm "runs/guard/$A/resume.lock" &&
	touch "runs/guard/$A/resume.lock" && chmod 666 "runs/guard/$A/resume.lock" &&
	test_expect_code 1 timeout 30 herd run --resume "runs/guard/$A" --force 2>mode.err &&
	grep "resume.lock: not a regular file of yours that only you can write; remove it" mode.err
'

test_expect_success 'herd top of a lost job without a terminal says lost and exits' '
	A=$(cat A) &&
	test_expect_code 1 timeout 60 herd top --interval 0.1 "$A" </dev/null >top.out 2>top.err &&
	cat top.out top.err &&
	grep "^herd top: job guard, run $A, lost (no job_end, and its controller, pid [0-9]*, is gone)" top.out &&
	grep "^herd: top: $A: no job_end and its controller (pid [0-9]*) is gone; \`herd run --resume .*$A\` starts it again" top.err
'

test_expect_success '--detach of a local job: the caller'"'"'s stderr is not held by the agents' '
	job dlocal &&
	{ herd run --detach dlocal.yaml 2>&1; echo "rc $?"; } | timeout 30 cat >detach.out;
	echo "pipe $?" >>detach.out &&
	cat detach.out &&
	grep -x "rc 0" detach.out &&
	grep -x "pipe 0" detach.out &&
	D=$(sed -n "s/^job //p" detach.out) && test -n "$D" &&
	until_state "$D" running &&
	test_expect_code 143 herd stop --wait "$D" >/dev/null
'

test_done
