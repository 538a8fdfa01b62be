#!/bin/sh
# t0586-list.t — herd list keeps its registry in check: --running, the
# running jobs and the 10 newest others on a terminal, --forget-ended
# (never a running job's entry, never through a link or another's file,
# only in a registry of the user's), and the Slurm job a run was part of.

test_description='herd list: --running, the terminal default, --forget-ended, the Slurm job id'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq script

XDG_STATE_HOME=$HOME/state
export XDG_STATE_HOME
REG=$XDG_STATE_HOME/herd/jobs

# local_job NAME COMMAND: a job of one rank on this machine.
local_job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: localhost}"
		echo "health: {grace: 1s}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"runs/{{name}}\"}"
		printf 'launch: {command: "%s"}\n' "$2"
	} >"$1.yaml"
}

# ids STATE...: the ids herd list --json gives, one a line, in its order
# (STATE: only those).
ids() {
	herd list --json | jq -r '.[] | .id'
}

# on_tty CMD...: CMD with stdout on a terminal (script(1)'s pty).
on_tty() {
	script -qec "$*" /dev/null
}

test_expect_success 'setup: 12 ended jobs (exit 0 and exit 3) and one running' '
	own_binaries &&
	local_job ok true && local_job bad "exit 3" &&
	for i in 1 2 3 4 5 6; do
		herd run ok.yaml >/dev/null 2>&1 &&
		test_expect_code 3 herd run bad.yaml >/dev/null 2>&1 || return 1
	done &&
	local_job held "while [ ! -e go ]; do sleep 0.05; done" &&
	run_bg held.yaml out.held err.held &&
	wait_file runs/held/latest/events.jsonl &&
	_i=0 &&
	until herd list --json | jq -e ".[] | select(.name == \"held\" and .state == \"running\")" >/dev/null; do
		_i=$((_i + 1)) && test $_i -lt 200 || return 1
		sleep 0.05   # poll interval of a bounded wait
	done &&
	test $(herd list --json | jq length) = 13
'

test_expect_success 'herd list --running: only the running job' '
	herd list --running >out 2>err &&
	test $(wc -l <out) = 2 &&
	grep "^[^ ]*  held  *running " out &&
	test_must_be_empty err &&
	herd list --running --json >out.json &&
	test "$(jq -r ".[].name" out.json)" = held
'

test_expect_success 'not on a terminal (a script), herd list shows every job' '
	herd list >out 2>err &&
	test $(wc -l <out) = 14 &&
	test_must_be_empty err
'

test_expect_success 'on a terminal: the running job and the 10 newest others; the rest counted' '
	on_tty herd list >out &&
	tr -d "\r" <out >out.txt &&
	grep -c "  ended (status" out.txt >n.ended &&
	test "$(cat n.ended)" = 10 &&
	grep -c "  running " out.txt >n.run &&
	test "$(cat n.run)" = 1 &&
	grep -x "herd: list: 2 older jobs not shown (herd list --all; herd list --forget-ended forgets the ended ones)" out.txt &&
	on_tty herd list --all >out &&
	test $(tr -d "\r" <out | grep -c "  ended (status") = 12
'

test_expect_success 'the table has a SLURM column: the Slurm job a run was part of (SLURM_JOB_ID), - otherwise' '
	SLURM_JOB_ID=4242 herd run ok.yaml >/dev/null 2>&1 &&
	herd list --json >l.json &&
	jq -e "[.[] | select(.slurm_job_id == \"4242\")] | length == 1" l.json &&
	jq -e "[.[] | select(.slurm_job_id)] | length == 1" l.json &&
	herd list >out &&
	head -n 1 out | grep "  STARTED  *SLURM  *RUN-DIR$" &&
	grep "  4242  *$PWD/runs/ok/" out &&
	test $(grep -c "  -  *$PWD/runs/" out) = 13
'

test_expect_success '--forget-ended refuses a registry another user could write, and removes nothing' '
	chmod 0770 "$REG" &&
	test_expect_code 1 herd list --forget-ended >out 2>err &&
	chmod 0700 "$REG" &&
	grep "$REG" err &&
	test_must_be_empty out &&
	test $(ls "$REG" | grep -c "\.json$") = 14
'

test_expect_success '--forget-ended forgets ended and gone jobs, keeps the running one and every run directory' '
	gone=$(herd list --json | jq -r "[.[] | select(.name == \"bad\")][0].run_dir") &&
	rm -rf "$gone" &&
	herd list --json | jq -e ".[] | select(.run_dir == \"$gone\") | .state == \"gone\"" &&
	held=$(herd list --running --json | jq -r ".[0].id") &&
	# A link in the registry is no entry: left alone, its target too.
	echo keep >target.json &&
	ln -s "$PWD/target.json" "$REG/20990101-000000.000-link.json" &&
	herd list --forget-ended >out 2>err &&
	test_must_be_empty err &&
	test $(grep -c "^forgot .* (ok, ended (status 0))$" out) = 7 &&
	test $(grep -c "^forgot .* (bad, ended (status 3))$" out) = 5 &&
	test $(grep -c "^forgot .* (bad, gone (no run directory))$" out) = 1 &&
	! grep "$held" out &&
	test "$(ids)" = "$held" &&
	test -f "$REG/$held.json" &&
	test -L "$REG/20990101-000000.000-link.json" &&
	test "$(cat target.json)" = keep &&
	test $(ls -d runs/ok/2* | wc -l) = 7 &&
	test $(ls -d runs/bad/2* | wc -l) = 5 &&
	herd list --forget-ended >out 2>err &&
	test_must_be_empty out &&
	grep -x "herd: list: no ended job to forget" err
'

test_expect_success 'a stopped controller, its backlog full: herd list and --forget-ended answer at once, herd stop says so in 5 s' '
	held=$(herd list --running --json | jq -r ".[0].id") &&
	pid=$(herd list --running --json | jq -r ".[0].pid") &&
	sock=$(jq -r .sock "$REG/$held.json") &&
	test -S "$sock" &&
	kill -STOP $pid &&
	test_when_finished "kill -CONT $pid" &&
	{ python3 "$HERD_TEST_DIR/data/run/fill-backlog.py" "$sock" full &
	  FILL=$!; } &&
	test_when_finished "kill $FILL" &&
	wait_file full &&
	timeout 60 herd list --forget-ended >out 2>err &&
	test_must_be_empty out &&
	grep -x "herd: list: no ended job to forget" err &&
	timeout 60 herd list --json >list.json &&
	jq -e ".[] | select(.id == \"$held\") | .state == \"running\"" list.json &&
	test -S "$sock" &&
	test_expect_code 1 timeout 60 herd stop "$held" >out 2>err &&
	grep -x "herd: stop: $held: the controller (pid $pid) has not answered in 5 s: stopped (kill -CONT $pid lets it go on) or hung" err
'

test_expect_success 'the running job ends: now it is forgotten too' '
	touch go &&
	wait_exit $HERD_PID 20 && test "$WAIT_RC" = 0 &&
	herd list --forget-ended >out &&
	grep "^forgot $held (held, ended (status 0))$" out &&
	herd list 2>err &&
	grep "no jobs yet" err
'

# A C1 control (U+009B, CSI, as UTF-8) in a path: a terminal may act on
# it.  --json escapes every byte past ASCII (jq reads the same path back).
test_expect_success 'herd list --json and herd status --json: a C1 control in a path is escaped, the path read back whole' '
	d=$(printf "c1-\302\233[2J-dir") &&
	mkdir "$d" &&
	local_job c1 true &&
	mv c1.yaml "$d/" &&
	herd run "$d/c1.yaml" >/dev/null 2>&1 &&
	herd list --json >list.json &&
	! LC_ALL=C grep -q "[^ -~]" list.json &&
	grep -F "\\u009B" list.json &&
	test "$(jq -r ".[] | select(.name == \"c1\") | .job_file" list.json)" = "$PWD/$d/c1.yaml" &&
	herd status c1 --json >status.json &&
	! LC_ALL=C grep -q "[^ -~]" status.json
'

test_expect_success 'usage: --running with --all, --forget-ended with another option' '
	test_expect_code 2 herd list --running --all 2>err &&
	grep -x "herd: list: --running or --all, not both" err &&
	test_expect_code 2 herd list --forget-ended --json 2>err &&
	grep -x "herd: list: --forget-ended goes alone" err
'

test_done
