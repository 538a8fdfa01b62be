#!/bin/sh

test_description='herd run --detach of a 4-node PyTorch job (issue 13): the launching session hangs up and the job goes on; herd attach shows its live tagged output (Ctrl-C detaches, kill -9 changes nothing); another local user cannot reach its control socket; herd stop ends it with its status in job_end and nothing left on any node; a stopped attach client never stalls a chatty job and is told what it missed'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq ps awk useradd userdel runuser
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"
/usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import torch.distributed"

# The second local user, who must not reach our job.
OTHER=herd-d-$$
# The control sockets of this test: a private, short XDG_RUNTIME_DIR (a
# socket path holds at most 107 bytes; the trash directory is long).
RT=/tmp/herd-t0580.$$
XDG_RUNTIME_DIR=$RT
export XDG_RUNTIME_DIR
# This test's agents are the processes whose command line holds its own
# ssh.agent_dir; its ranks hold this step count.
CACHE=$PWD/agent-cache
STEPS=58058

# Processes that are this test's and alive (not zombies): agents, ranks,
# detached controllers (their command line holds the job files' names).
mine() {
	ps -e -o pid=,stat=,args= |
		C="$CACHE/" S="--steps $STEPS" J="t0580-torch.yaml" K="t0580-chatty.yaml" L="t0580-tick.yaml" awk '$2 !~ /^Z/ &&
			(index($0, ENVIRON["C"]) || index($0, ENVIRON["S"]) ||
			 index($0, ENVIRON["J"]) || index($0, ENVIRON["K"]) ||
			 index($0, ENVIRON["L"])) { print }'
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

nothing_left() { test -z "$(mine)"; }

SESSION=$PWD/session

cleanup() {
	[ -s "$SESSION" ] && kill -9 "$(cat "$SESSION")" 2>/dev/null
	for p in $(mine | awk '{ print $1 }'); do
		kill -9 "$p" 2>/dev/null
	done
	userdel "$OTHER" >/dev/null 2>&1
	rm -rf "$RT"
	return 0
}

# steps_done RUNDIR: the highest step rank 0 logged so far.
steps_done() {
	grep -o "^step [0-9]*/" "$1/attempt-1/rank-0.log" 2>/dev/null |
		tail -n 1 | tr -dc 0-9
}

# more_steps RUNDIR N: rank 0 got past step N.
more_steps() {
	_ms=$(steps_done "$1")
	test -n "$_ms" && test "$_ms" -gt "$2"
}

# CTL_REQ {op: info} sent by hand (proto.h: len, version 1, type 14,
# reserved, json_len, JSON); prints how many bytes came back.
PEEK='import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
j = b"{\"op\":\"info\"}"
n = 0
try:
    s.sendall(struct.pack(">IBBHI", 8 + len(j), 1, 14, 0, len(j)) + j)
    s.settimeout(10)
    while True:
        d = s.recv(65536)
        n += len(d)
        if not d or n >= 12:
            break
except (BrokenPipeError, ConnectionResetError):
    pass
print(n)'

test_expect_success 'setup: 4 nodes, a second local user, the job files' '
	own_binaries &&
	cluster_up 4 &&
	trap "_rc=\$?; cleanup; (exit \$_rc); _herd_cluster_exit; die" EXIT &&
	mkdir -m 700 "$RT" &&
	useradd -M -d /nonexistent -s /bin/sh "$OTHER" &&
	cat >t0580-torch.yaml <<-EOF &&
	name: dtorch
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS, agent_dir: "$CACHE"}
	health: {grace: 2s}
	restart: {max: 0}
	log:
	  dir: "$PWD/runs/{{name}}"
	launch:
	  command: /usr/bin/python3 train.py --steps $STEPS --step-sleep 0.1
	  workdir: $HERD_ROOT/examples/torch-ddp
	  env: {OMP_NUM_THREADS: "1"}
	EOF
	cat >t0580-chatty.yaml <<-EOF
	name: chatty
	nodes: {hosts: localhost, slots: 1}
	health: {grace: 1s}
	restart: {max: 0}
	log:
	  dir: "$PWD/runs/{{name}}"
	launch:
	  command: sh -c "while :; do seq 100000 104000; sleep 0.02; done"
	EOF
'

test_expect_success 'herd run --detach from a setsid shell prints the job and returns at once' '
	{ setsid sh -c "herd run --detach t0580-torch.yaml >launch.out 2>launch.err;
		echo \$? >launch.rc; exec sleep 120" & } &&
	echo $! >session &&
	until_true 30 test -s launch.rc &&
	test "$(cat launch.rc)" = 0 &&
	cat launch.out &&
	test "$(wc -l <launch.out)" = 3 &&
	ID=$(sed -n "s/^job //p" launch.out) &&
	echo "$ID" >id &&
	grep -x "run dir $PWD/runs/dtorch/$ID" launch.out &&
	grep -x "attach with: herd attach $ID" launch.out &&
	test -S "$RT/herd/$ID.sock" &&
	test "$(stat -c %a "$RT/herd/$ID.sock")" = 600 &&
	test "$(stat -c %a "$RT/herd")" = 700 &&
	jq -e ".detached == true and .sock == \"$RT/herd/$ID.sock\"" \
		".local/state/herd/jobs/$ID.json" &&
	# the controller: a session of its own, no terminal, nobody'"'"'s child
	PID=$(jq -r .pid ".local/state/herd/jobs/$ID.json") &&
	echo "$PID" >pid &&
	test "$(ps -o sid= -p "$PID" | tr -d " ")" != "$(cat session)" &&
	test "$(ps -o tty= -p "$PID" | tr -d " ")" = "?" &&
	test "$(ps -o ppid= -p "$PID" | tr -d " ")" = 1
'

test_expect_success 'SIGHUP to the launching session: the job goes on' '
	RD=runs/dtorch/$(cat id) &&
	until_true 60 more_steps "$RD" 2 &&
	kill -HUP -"$(cat session)" &&
	{ wait "$(cat session)"; true; } &&   # the session is gone
	n=$(steps_done "$RD") &&
	until_true 20 more_steps "$RD" $((n + 5)) &&
	kill -0 "$(cat pid)" &&
	! grep -q job_end "$RD/events.jsonl" &&
	# herd.log: herd'"'"'s own messages only, no rank output
	test -f "$RD/herd.log" &&
	! grep -q "^\[0\] step" "$RD/herd.log"
'

test_expect_success 'herd attach shows the live tagged output; Ctrl-C detaches with 0' '
	{ herd attach "$(cat id)" >att.out 2>att.err & } &&
	apid=$! &&
	until_true 20 grep -q "^\[0\] step [0-9]*/$STEPS loss" att.out &&
	kill -INT $apid &&
	{ wait $apid; echo $? >att.rc; } &&
	test "$(cat att.rc)" = 0 &&
	grep "attached to $(cat id) (dtorch, run, attempt 1)" att.err &&
	grep "detached from $(cat id); the job goes on" att.err &&
	# every line is tagged, none is cut or mixed; not a terminal: no
	# status line, no escape sequence
	! grep -v "^\[[0-3]\] " att.out &&
	! grep -q "$(printf "\033")" att.out &&
	kill -0 "$(cat pid)"
'

test_expect_success 'kill -9 of an attach client changes nothing for the job' '
	RD=runs/dtorch/$(cat id) &&
	{ herd attach "$(cat id)" >att9.out 2>att9.err & } &&
	apid=$! &&
	until_true 20 grep -q "^\[0\] step" att9.out &&
	kill -9 $apid &&
	{ wait $apid; true; } &&
	n=$(steps_done "$RD") &&
	until_true 20 more_steps "$RD" $((n + 5)) &&
	{ herd attach "$(cat id)" >att2.out 2>att2.err & } &&
	apid=$! &&
	until_true 20 grep -q "^\[0\] step" att2.out &&
	kill -INT $apid &&
	{ wait $apid; true; } &&
	! grep -q job_end "$RD/events.jsonl"
'

test_expect_success 'another user cannot reach the socket, even when its modes let them' '
	ID=$(cat id) &&
	SOCK=$RT/herd/$ID.sock &&
	# ours: the hand-made request gets an answer
	test "$(python3 -c "$PEEK" "$SOCK")" -ge 12 &&
	# theirs: the 0700 directory keeps them out
	test_must_fail runuser -u "$OTHER" -- python3 -c "$PEEK" "$SOCK" 2>peek.err &&
	grep "Permission denied" peek.err &&
	test_must_fail runuser -u "$OTHER" -- env HOME=/nonexistent \
		"$PWD/bin/herd" stop "$PWD/runs/dtorch/$ID" 2>stop.err &&
	cat stop.err &&
	test_must_fail runuser -u "$OTHER" -- env HOME=/nonexistent \
		"$PWD/bin/herd" stop "$ID" &&
	# and with the directory and the socket opened to all, SO_PEERCRED
	# closes them at once, with nothing said
	chmod 711 "$RT" "$RT/herd" && chmod 666 "$SOCK" &&
	{ got=$(runuser -u "$OTHER" -- python3 -c "$PEEK" "$SOCK"); true; } &&
	chmod 700 "$RT" "$RT/herd" && chmod 600 "$SOCK" &&
	test "$got" = 0 &&
	kill -0 "$(cat pid)" &&
	! grep -q job_end "runs/dtorch/$ID/events.jsonl"
'

test_expect_success 'herd stop --wait ends the job: status 143 in job_end, nothing left on any node' '
	ID=$(cat id) &&
	RD=runs/dtorch/$ID &&
	{ herd attach "$ID" >attend.out 2>attend.err & } &&
	apid=$! &&
	until_true 20 grep -q "^\[0\] step" attend.out &&
	test_expect_code 143 herd stop --wait "$ID" >stop.out &&
	cat stop.out &&
	grep "^herd: $ID: stopping all ranks (SIGTERM, SIGKILL after 2s)" stop.out &&
	grep "^herd: $ID: ended, exit status 143" stop.out &&
	ev_all "$RD/events.jsonl" job_end ".status == 143" &&
	# the attached client got the end too, and exits with the status
	{ wait $apid; echo $? >attend.rc; } &&
	test "$(cat attend.rc)" = 143 &&
	until_true 20 nothing_left &&
	# a sanitizer build reports into herd.log of the detached controller
	! grep -E "Sanitizer|runtime error" "$RD/herd.log" &&
	! test -e "$RT/herd/$ID.sock" &&
	test_must_fail herd stop "$ID" 2>gone.err &&
	grep -x "herd: stop: $ID: ended (status 143); herd status $ID shows it" gone.err
'

test_expect_success '--detach --json prints one JSON object line' '
	herd run --detach --json t0580-chatty.yaml >json.out 2>json.err &&
	test "$(wc -l <json.out)" = 1 &&
	jq -e "(keys == [\"host\", \"id\", \"run_dir\"]) and .host == null" json.out &&
	jq -r .id json.out >chatty.id &&
	jq -r .run_dir json.out >chatty.dir
'

# rank_log_bytes: how much of the chatty job's output is in its rank log.
rank_log_bytes() {
	stat -c %s "$(cat chatty.dir)/attempt-1/rank-0.log"
}

test_expect_success 'a stopped attach client never stalls the job and is told what it missed' '
	ID=$(cat chatty.id) &&
	{ herd attach "$ID" >slow.out 2>slow.err & } &&
	apid=$! &&
	until_true 20 test -s slow.out &&
	kill -STOP $apid &&
	b=$(rank_log_bytes) &&
	# 8 MiB of output while the client sleeps: far past its 1 MiB queue
	until_true 60 eval "test \$(rank_log_bytes) -gt $((b + 8 * 1024 * 1024))" &&
	kill -CONT $apid &&
	until_true 20 grep -q "^\[herd: attach: [0-9]* bytes of output missed; the rank logs have them\]" slow.err &&
	# and it goes on receiving
	s=$(stat -c %s slow.out) &&
	until_true 20 eval "test \$(stat -c %s slow.out) -gt $((s + 100000))" &&
	test_expect_code 143 herd stop --wait "$ID" >/dev/null &&
	{ wait $apid; echo $? >slow.rc; } &&
	test "$(cat slow.rc)" = 143 &&
	until_true 20 nothing_left &&
	! grep -E "Sanitizer|runtime error" "$(cat chatty.dir)/herd.log" slow.err
'

M=$HERD_TEST_DIR/data/metrics

test_expect_success 'herd attach on a terminal: the status line at the bottom, the terminal given back at the end' '
	cat >t0580-tick.yaml <<-EOF &&
	name: tick
	nodes: {hosts: localhost, slots: 2}
	health: {grace: 1s}
	restart: {max: 0}
	log:
	  dir: "$PWD/runs/{{name}}"
	launch:
	  command: sh -c "while :; do echo tick; sleep 0.2; done"
	EOF
	herd run --detach --json t0580-tick.yaml >tick.json &&
	ID=$(jq -r .id tick.json) &&
	TL=$(jq -r .run_dir tick.json)/attempt-1/rank-0.log &&
	until_true 30 test -s "$TL" &&
	{ python3 "$M/pty-run.py" 12 140 raw herd attach "$ID" & } &&
	ppid=$! &&
	# pty-run.py writes raw at the end: wait for 5 s of the job (25
	# ticks, 0.2 s apart), several status redraws (one a second)
	n=$(wc -l <"$TL") &&
	until_true 60 eval "test \$(wc -l <\"\$TL\") -ge $((n + 25))" &&
	test_expect_code 143 herd stop --wait "$ID" >/dev/null &&
	{ wait $ppid; echo $? >pty.rc; } &&
	test "$(cat pty.rc)" = 143 &&
	python3 "$M/vt.py" 12 140 raw >screen.json &&
	jq -r .status screen.json >status &&
	cat status &&
	grep "^attempt 1 | nodes 1 up | step - | loss - " status &&
	jq -e ".draws >= 1 and .region == null and .bottom == \"\"" screen.json &&
	jq -r ".lines[]" screen.json | grep -x "\[[01]\] tick" &&
	! jq -r ".lines[]" screen.json | grep "attempt 1 |" &&
	until_true 20 nothing_left
'

test_expect_success '--detach refuses to start a job it cannot register; the error and exit status reach the launching shell' '
	mkdir -m 777 badstate &&
	test_expect_code 1 env XDG_STATE_HOME="$PWD/badstate" \
		herd run --detach t0580-chatty.yaml >bad.out 2>bad.err &&
	cat bad.err &&
	test_must_be_empty bad.out &&
	grep "^herd: job not registered: .*badstate" bad.err &&
	until_true 20 nothing_left
'

test_expect_success '--detach when no node accepts the key: the reason and exit 1 reach the shell, no job printed' '
	ssh-keygen -q -t ed25519 -N "" -C stranger -f stranger &&
	sed "s|identity: $HERD_CLUSTER_KEY|identity: $PWD/stranger|; s/^name: dtorch/name: dauth/" \
		t0580-torch.yaml >t0580-auth.yaml &&
	grep -q "identity: $PWD/stranger" t0580-auth.yaml &&
	test_expect_code 1 herd run --detach t0580-auth.yaml >auth.out 2>auth.err &&
	cat auth.err &&
	# a refused key is known at once, not by the 10 s connect timeout
	! grep -i "timed\? \?out" auth.err &&
	test_must_be_empty auth.out &&
	test "$(grep -c "authentication failed for user root" auth.err)" = 4 &&
	grep "0 of 4 nodes are up\|nodes are up" auth.err &&
	ev_all runs/dauth/latest/events.jsonl job_end ".status == 1 and .attempts == 0" &&
	until_true 20 nothing_left
'

test_expect_success '--detach --no-wait returns once the run dir exists, as before' '
	herd run --detach --no-wait --json t0580-auth.yaml >nw.out 2>nw.err &&
	jq -e ".id and .run_dir" nw.out &&
	RD=$(jq -r .run_dir nw.out) &&
	until_true 30 grep -q "\"event\":\"job_end\"" "$RD/events.jsonl" &&
	ev_all "$RD/events.jsonl" job_end ".status == 1" &&
	grep "authentication failed for user root" "$RD/herd.log" &&
	test_expect_code 2 herd run --no-wait t0580-auth.yaml 2>usage.err &&
	grep -x "herd: run: --no-wait goes with --detach" usage.err &&
	herd run --help | grep -- "--no-wait" &&
	until_true 20 nothing_left
'

test_done
