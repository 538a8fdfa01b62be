#!/bin/sh

test_description='the job registry and its views: herd list shows a foreground run running then ended; herd status (top, report) by id, name, run dir and job file (lost once its controller is gone); herd logs per rank, node and attempt, -f into the next attempt until job_end; herd run --resume after kill -9 of the controller starts again from the newest complete checkpoint (the PyTorch example on 2 sshd nodes); a second user sees none of it'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require
require_cmd useradd userdel runuser

# The second local user, with a home of its own.
OTHER=herd-j-$$

jobs_cleanup() {
	userdel "$OTHER" >/dev/null 2>&1
	return 0
}

as_other() {
	runuser -u "$OTHER" -- env HOME="$SHARNESS_TRASH_DIRECTORY/otherhome" \
		XDG_RUNTIME_DIR= PATH="$PATH" "$@"
}

# local_job NAME: a job of 2 ranks on this machine; the launch command
# from stdin (one line).
local_job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: localhost, slots: 2}"
		echo "health: {grace: 1s}"
		echo "restart: {max: ${RESTARTS:-0}, backoff: 100ms}"
		echo "log: {dir: \"runs/{{name}}\"}"
		printf 'launch: {command: %s}\n' "$(cat)"
	} >"$1.yaml"
}

# list_state ID: the state `herd list --json` gives the job.
list_state() {
	herd list --json | jq -r --arg id "$1" '.[] | select(.id == $id) | .state'
}

# wait_listed NAME: poll until `herd list` has a job named NAME (at most
# 10 s); sets ID to its id.
wait_listed() {
	_wl_i=0
	while ! ID=$(herd list --json | jq -er --arg n "$1" \
		'[.[] | select(.name == $n)][0].id'); do
		_wl_i=$((_wl_i + 1))
		[ $_wl_i -lt 200 ] || { echo "$1 not listed after 10 s" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

# wait_grep PATTERN FILE: poll until FILE has a line matching PATTERN.
wait_grep() {
	_wg_i=0
	while ! grep -q "$1" "$2" 2>/dev/null; do
		_wg_i=$((_wg_i + 1))
		[ $_wg_i -lt 400 ] || { echo "no '$1' in $2 after 20 s" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}

test_expect_success 'setup: a cluster of 2 nodes and a second local user' '
	own_binaries &&
	cluster_up 2 &&
	TWO="${HERD_CLUSTER_PREFIX}[1-2]" &&
	trap "_rc=\$?; jobs_cleanup; (exit \$_rc); _herd_cluster_exit; die" EXIT &&
	useradd -M -d /nonexistent -s /bin/sh "$OTHER" &&
	mkdir otherhome && chown "$OTHER" otherhome
'

test_expect_success 'herd --help lists list, logs and run --resume; each has --help' '
	herd --help >help &&
	grep "^  herd list " help &&
	grep "^  herd logs " help &&
	grep "^  herd run  *--resume RUNDIR" help &&
	herd list --help | grep "^usage: herd list" &&
	herd logs --help | grep "^usage: herd logs JOB" &&
	herd run --help | grep "herd run --resume RUNDIR" &&
	herd status --help | grep "job id or name" &&
	herd list 2>err && grep "no jobs yet" err
'

test_expect_success 'a foreground run: registered (0600 entry in a 0700 registry), listed running, then ended (status 3)' '
	local_job fg <<-\EOF &&
	"echo up $RANK; while [ ! -e go ]; do sleep 0.05; done; [ $RANK = 0 ] || exit 3"
	EOF
	run_bg fg.yaml out.fg err.fg &&
	wait_listed fg &&
	reg=.local/state/herd/jobs &&
	test "$(stat -c %a .local/state/herd)" = 700 &&
	test "$(stat -c %a $reg)" = 700 &&
	test "$(stat -c %a $reg/$ID.json)" = 600 &&
	jq -e --arg d "$PWD/runs/fg/$ID" --argjson p $HERD_PID \
		".run_dir == \$d and .pid == \$p and .host == null and .detached == false and .job_file == \"$PWD/fg.yaml\" and .cwd == \"$PWD\"" \
		$reg/$ID.json &&
	test "$(list_state $ID)" = running &&
	herd list >list && grep "^$ID  fg  *running " list &&
	touch go &&
	wait_exit $HERD_PID 20 && test "$WAIT_RC" = 3 &&
	test "$(list_state $ID)" = ended &&
	herd list >list &&
	grep "^$ID  fg  *ended (status 3)  *1  *1  .*  $PWD/runs/fg/$ID\$" list &&
	cmp fg.yaml runs/fg/$ID/job.yaml &&
	rm go
'

test_expect_success 'status by id, by name, by run dir and by job file: the same run' '
	herd status --json $ID >by-id &&
	herd status --json fg >by-name &&
	herd status --json runs/fg/$ID >by-dir &&
	herd status --json fg.yaml >by-file &&
	for f in by-id by-name by-dir by-file; do
		jq -e --arg id $ID ".run == \$id and .state == \"ended\" and .exit_status == 3" $f || return 1
	done &&
	herd status $ID | grep "^state: ended, exit status 3" &&
	herd top --once fg >top && grep "ended, exit status 3" top &&
	herd report $ID -o fg.html && grep -q "$ID" fg.html &&
	test_expect_code 2 herd status no-such-job 2>err &&
	test "$(wc -l <err)" = 1 &&
	grep -x "herd: status: no job no-such-job here (herd list shows yours)" err
'

test_expect_success 'logs: every rank prefixed, one rank as written, one node, one attempt; -f follows into attempt 2 and ends at job_end' '
	RESTARTS=1 local_job two <<-\EOF &&
	"echo a$HERD_ATTEMPT r$RANK; if [ $HERD_ATTEMPT = 1 ]; then while [ ! -e go ]; do sleep 0.05; done; [ $RANK = 0 ] || exit 1; fi; while [ ! -e go2 ]; do sleep 0.05; done; echo done$RANK"
	EOF
	run_bg two.yaml out.two err.two &&
	wait_listed two &&
	wait_grep "^a1 r1" runs/two/$ID/attempt-1/rank-1.log &&
	{ herd logs -f two >f.out 2>f.err & } &&
	LOGS_PID=$! &&
	wait_grep "^\[1\] a1 r1\$" f.out &&
	# attempt 2: rank logs that did not exist when -f started
	touch go &&
	wait_grep "^\[0\] a2 r0\$" f.out &&
	wait_grep "^\[1\] a2 r1\$" f.out &&
	kill -0 $LOGS_PID &&
	touch go2 &&
	wait_exit $HERD_PID 20 && test "$WAIT_RC" = 0 &&
	wait_exit $LOGS_PID 10 && test "$WAIT_RC" = 0 &&
	cat f.out f.err &&
	grep -x "\[0\] done0" f.out && grep -x "\[1\] done1" f.out &&
	grep -x "herd: logs: attempt 2" f.err &&
	test "$(grep -c "^\[0\] a1 r0\$" f.out)" = 1 &&

	herd logs two >all &&
	printf "[0] a2 r0\n[0] done0\n[1] a2 r1\n[1] done1\n" >expect &&
	test_cmp expect all &&
	herd logs --rank 1 --attempt 1 $ID >r1 &&
	echo a1 r1 >expect && test_cmp expect r1 &&
	herd logs --node localhost --attempt 1 runs/two/$ID >n1 &&
	printf "[0] a1 r0\n[1] a1 r1\n" >expect && test_cmp expect n1 &&
	test_expect_code 2 herd logs --attempt 3 two 2>err &&
	grep -x "herd: logs: $ID: no attempt 3 (the latest is 2)" err &&
	test_expect_code 2 herd logs --rank 7 two 2>err &&
	grep -x "herd: logs: $ID: no rank 7 in attempt 2" err &&
	test_expect_code 2 herd logs --node elsewhere two 2>err &&
	grep -x "herd: logs: $ID: no ranks on elsewhere in attempt 2 (nodes: localhost)" err &&
	rm go go2
'

test_expect_success 'logs over ssh: --node names the ranks of that node; --resume finds a relative hostfile next to the original job file' '
	printf "%s\n%s\n" $(cluster_node 1) $(cluster_node 2) >hosts.txt &&
	{
		echo "name: ssh2"
		echo "nodes: {hostfile: hosts.txt, slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"runs/{{name}}\"}"
		echo "launch: {command: \"echo rank \$RANK on \$(hostname)\"}"
	} >ssh2.yaml &&
	herd run ssh2.yaml >out 2>err &&
	herd logs --node $(cluster_node 2) ssh2 >n2 &&
	echo "[1] rank 1 on $(cluster_node 2)" >expect && test_cmp expect n2 &&
	first=$(readlink runs/ssh2/latest) &&
	# it ended (status 0): resumed with --force only (issue 23)
	test_expect_code 1 herd run --resume "runs/ssh2/$first" 2>err &&
	grep -x "herd: run --resume: $first ended (status 0); --force starts it again" err &&
	test "$(readlink runs/ssh2/latest)" = "$first" &&
	(cd / && herd run --resume "$OLDPWD/runs/ssh2/$first" --force) >out 2>err &&
	test "$(readlink runs/ssh2/latest)" != "$first" &&
	herd logs ssh2 >all &&
	printf "[0] rank 0 on %s\n[1] rank 1 on %s\n" $(cluster_node 1) $(cluster_node 2) >expect &&
	test_cmp expect all
'

test_expect_success 'kill -9 of the controller: list and status say lost and how to resume; --resume from elsewhere starts again from the newest complete checkpoint' '
	fo_job resume "$TWO" "" "" 0 </dev/null &&
	run_bg resume.yaml out.resume err.resume &&
	# listed first: between step 12 and the kill only a poll, or on a
	# busy machine the job can reach step 40 and end before the kill
	wait_listed resume && old=$ID &&
	fo_wait_step resume 1 12 &&
	kill -KILL $HERD_PID &&
	wait_exit $HERD_PID 5 &&
	test "$(list_state $old)" = lost &&
	herd status $old >st &&
	grep "^state: lost (no job_end, and its controller, pid $HERD_PID, is gone)" st &&
	grep -x "resume: herd run --resume $PWD/runs/resume/$old (from the newest complete checkpoint)" st &&
	herd logs --rank 0 $old | grep "^step 12/" &&
	# run on another login node sharing this home: its pid means
	# nothing here, the job is not called lost
	reg=.local/state/herd/jobs &&
	jq -e ".machine == \"$(hostname)\"" $reg/$old.json &&
	cp $reg/$old.json entry.saved &&
	jq -c ".machine = \"another-login-node\"" entry.saved >$reg/$old.json &&
	test "$(list_state $old)" = running &&
	cp entry.saved $reg/$old.json &&
	test "$(list_state $old)" = lost &&
	# the socket the killed controller left, removed by the resume
	sock=$(jq -r .sock $reg/$old.json) &&
	test -S "$sock" &&
	# the agents stop the ranks (health.timeout 3s)
	fo_no_train_left 15 &&
	(cd / && herd run --resume "$OLDPWD/runs/resume/$old") >out.resumed 2>err.resumed &&
	cat err.resumed &&
	grep "^herd: resuming $old " err.resumed &&
	test ! -e "$sock" &&
	new=$(readlink runs/resume/latest) && test "$new" != "$old" &&
	ev=runs/resume/$new/events.jsonl &&
	ev_all $ev job_start ".resumed_from == \"$old\"" &&
	ev_all $ev job_end ".status == 0 and .attempts == 1" &&
	# the newest complete checkpoint attempt 1 of the old run wrote
	last=$(grep "^step [0-9]*/" runs/resume/$old/attempt-1/rank-0.log |
		awk -F"[ /]" "{ s = \$2 } END { print s - s % 5 }") &&
	ck=$(jq -r -n "[inputs | select(.event == \"checkpoint_found\" and .attempt == 1)][0].path" $ev) &&
	echo "old run reached step >= $last; resumed from $ck" &&
	test -e "$ck/COMPLETE" &&
	at=$(( $(basename "$ck" | sed "s/^step_0*//") )) &&
	test "$at" -ge $((last - 5)) && test "$at" -ge 10 &&
	grep -q "^rank 0: resumed from $ck at step $at\$" runs/resume/$new/attempt-1/rank-0.log &&
	grep -q "^step 40/40 loss" runs/resume/$new/attempt-1/rank-0.log &&
	jq -e --arg o "$old" ".resumed_from == \$o and .cwd == \"$PWD\"" runs/resume/$new/run.json &&
	test "$(list_state $new)" = ended &&
	fo_no_train_left
'

test_expect_success 'a second user: none of our jobs listed, our logs and status unreadable, our ids unknown' '
	as_other herd list >other.out 2>other.err &&
	test ! -s other.out &&
	grep "no jobs yet" other.err &&
	test_must_fail as_other herd logs "$PWD/runs/fg/latest" 2>err &&
	grep "Permission denied" err &&
	test_must_fail as_other herd status "$PWD/runs/fg/latest" 2>err &&
	grep "Permission denied" err &&
	test_expect_code 2 as_other herd logs $ID 2>err &&
	grep -x "herd: logs: no job $ID here (herd list shows yours)" err &&
	test_must_fail as_other cat .local/state/herd/jobs/$ID.json
'

test_done
