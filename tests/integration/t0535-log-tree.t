#!/bin/sh

test_description='the log tree: a directory per run with a latest link, modes 0600/0700 and log.mode, links planted by another user, a full disk'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare ssh jq stat useradd userdel runuser mount umount mountpoint dd
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# The second local user, who tries to steer herd's (root's) writes.  Made
# here, removed when the script exits, with the tmpfs of the full-disk
# tests.
OTHER=herd-t-$$

tree_cleanup() {
	for m in full full-events; do
		mountpoint -q "$SHARNESS_TRASH_DIRECTORY/$m" &&
			umount "$SHARNESS_TRASH_DIRECTORY/$m"
	done
	userdel "$OTHER" >/dev/null 2>&1
	return 0
}

# as_other CMD...: CMD as the second user.
as_other() {
	runuser -u "$OTHER" -- "$@"
}

# job NAME LOGDIR: a one-attempt local job of 2 ranks logging to LOGDIR;
# the launch: section (indented by two) from stdin.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: localhost, slots: 2}"
		echo "health: {grace: 1s}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$2\"}"
		echo "launch:"
		sed 's/^/  /'
	} >"$1.yaml"
}

# mode PATH: its permission bits in octal (e.g. 600).
mode() {
	stat -c %a "$1"
}

# victims: two files of root's that a planted link points at.
victims() {
	echo precious >victim.log &&
	echo precious >victim.events &&
	chmod 644 victim.log victim.events
}

victims_untouched() {
	test "$(cat victim.log)" = precious &&
	test "$(cat victim.events)" = precious
}

test_expect_success 'setup: a cluster of 2 nodes and a second local user' '
	own_binaries &&
	cluster_up 2 &&
	trap "_rc=\$?; tree_cleanup; (exit \$_rc); _herd_cluster_exit; die" EXIT &&
	useradd -M -d /nonexistent -s /bin/sh "$OTHER" &&
	id "$OTHER"
'

test_expect_success 'logs are 0600 and directories 0700, whatever the umask' '
	job modes "$PWD/modes/runs/{{name}}" <<-\EOF &&
	command: echo secret-token $RANK
	EOF
	(umask 0 && herd run modes.yaml >out 2>err) &&
	find modes -type d -printf "%m %p\n" >dirs &&
	find modes -type f -printf "%m %p\n" >files &&
	cat dirs files &&
	! grep -v "^700 " dirs &&
	! grep -v "^600 " files &&
	test "$(wc -l <dirs)" = 5 &&
	# events, metrics, job.yaml, run.json and a log per rank
	test "$(wc -l <files)" = 6 &&
	cmp modes.yaml modes/runs/modes/latest/job.yaml &&
	jq -e ".job_file == \"$PWD/modes.yaml\" and .cwd == \"$PWD\"" modes/runs/modes/latest/run.json &&
	grep -x "secret-token 1" modes/runs/modes/latest/attempt-1/rank-1.log
'

test_expect_success 'log.mode: 0640 over ssh gives 0640 files and 0750 directories' '
	{
		echo "name: shared"
		echo "nodes: {hosts: \"${HERD_CLUSTER_PREFIX}[1-2]\", slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {grace: 2s}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$PWD/group/{{name}}\", mode: 0640}"
		echo "launch: {command: echo on \$(hostname) rank \$RANK}"
	} >shared.yaml &&
	herd validate --print shared.yaml | grep -x "  mode: 0640" &&
	herd run shared.yaml >out 2>err || { cat out err; false; } &&
	run=group/shared/$(readlink group/shared/latest) &&
	test "$(mode group/shared)" = 750 &&
	test "$(mode $run)" = 750 &&
	test "$(mode $run/attempt-1)" = 750 &&
	test "$(mode $run/events.jsonl)" = 640 &&
	test "$(mode $run/attempt-1/rank-0.log)" = 640 &&
	test "$(mode $run/attempt-1/rank-1.log)" = 640 &&
	# the job file may hold secrets: 0600 whatever log.mode says
	test "$(mode $run/job.yaml)" = 600 &&
	test "$(mode $run/run.json)" = 600 &&
	grep -x "on $(cluster_node 2) rank 1" $run/attempt-1/rank-1.log &&
	ev_all $run/events.jsonl job_start ".transport == \"ssh\""
'

test_expect_success 'two runs of a job keep both logs; latest is the newest; the run dir is printed' '
	job twice "$PWD/twice" <<-\EOF &&
	command: echo run $(cat which) rank $RANK; [ $RANK = 0 ] || exit $(cat exit)
	EOF
	echo 1 >which && echo 3 >exit &&
	test_expect_code 3 herd run twice.yaml >out1 2>err1 &&
	first=$(readlink twice/latest) &&
	echo 2 >which && echo 0 >exit &&
	herd run twice.yaml >out2 2>err2 &&
	second=$(readlink twice/latest) &&
	test "$first" != "$second" &&
	# RUN-IDs sort by start time
	test "$(printf "%s\n" "$second" "$first" | sort | head -1)" = "$first" &&
	test "$(ls twice | grep -v latest | wc -l)" = 2 &&
	grep -xF "herd: logs in $PWD/twice/$first" err1 &&
	grep -xF "herd: logs in $PWD/twice/$second" err2 &&
	grep -x "run 1 rank 1" twice/$first/attempt-1/rank-1.log &&
	grep -x "run 2 rank 0" twice/$second/attempt-1/rank-0.log &&
	grep -x "run 2 rank 1" twice/latest/attempt-1/rank-1.log &&
	ev_all twice/$first/events.jsonl job_start ".run == \"$first\"" &&
	ev_all twice/$first/events.jsonl job_end ".status == 3" &&
	ev_all twice/$second/events.jsonl job_start ".run == \"$second\"" &&
	ev_all twice/$second/events.jsonl job_end ".status == 0" &&
	test "$(grep -c job_start twice/$second/events.jsonl)" = 1
'

test_expect_success 'links planted in a parent the other user owns: refused, targets untouched' '
	victims &&
	mkdir theirs && chown "$OTHER" theirs &&
	as_other mkdir -p theirs/runs/planted/attempt-1 &&
	as_other ln -s "$PWD/victim.log" theirs/runs/planted/attempt-1/rank-0.log &&
	as_other ln -s "$PWD/victim.events" theirs/runs/planted/events.jsonl &&
	job planted "$PWD/theirs/runs/{{name}}" <<-EOF &&
	command: touch "$PWD/planted.ran"
	EOF
	test_expect_code 1 herd run planted.yaml >out 2>err &&
	cat err &&
	test "$(wc -l <err)" = 1 &&
	grep "^herd: log.dir: .*/theirs is owned by $OTHER (uid [0-9]*), who could redirect herd.s logs; put log.dir on a path owned by root or by you$" err &&
	victims_untouched &&
	test ! -e planted.ran
'

test_expect_success 'links planted through a group-writable parent: refused, targets untouched' '
	victims &&
	mkdir -m 2775 grp && chgrp "$(id -gn "$OTHER")" grp && chmod 2775 grp &&
	as_other mkdir -p grp/runs/g/attempt-1 &&
	as_other ln -s "$PWD/victim.log" grp/runs/g/attempt-1/rank-0.log &&
	as_other ln -s "$PWD/victim.events" grp/runs/g/events.jsonl &&
	job g "$PWD/grp/runs/g" <<-\EOF &&
	command: echo overwritten
	EOF
	test_expect_code 1 herd run g.yaml >out 2>err &&
	cat err &&
	test "$(wc -l <err)" = 1 &&
	grep "^herd: log.dir: .*/grp is writable by its group (mode 2775), who could redirect herd.s logs; run chmod go-w .*/grp. or put log.dir elsewhere$" err &&
	victims_untouched
'

test_expect_success 'a log.dir writable by others or not ours: one line naming it and the fix' '
	mkdir -m 0770 open && chmod 0770 open &&
	job open "$PWD/open" <<-\EOF &&
	command: true
	EOF
	test_expect_code 1 herd run open.yaml 2>err &&
	test "$(wc -l <err)" = 1 &&
	grep "^herd: log.dir: .*/open is writable by its group (mode 0770), who could plant links in it; run chmod go-w .*/open.$" err &&
	mkdir notmine && chown "$OTHER" notmine && chmod 700 notmine &&
	job notmine "$PWD/notmine" <<-\EOF &&
	command: true
	EOF
	test_expect_code 1 herd run notmine.yaml 2>err &&
	test "$(wc -l <err)" = 1 &&
	grep "^herd: log.dir: .*/notmine is owned by $OTHER (uid [0-9]*), not by you; set log.dir to a directory of your own$" err
'

test_expect_success 'a sticky parent like /tmp: herd makes its own directory; a link or a directory planted there is refused' '
	victims &&
	mkdir -m 1777 sticky && chmod 1777 sticky &&
	job st "$PWD/sticky/mine" <<-\EOF &&
	command: echo fine
	EOF
	herd run st.yaml >out 2>err &&
	test "$(mode sticky/mine)" = 700 &&
	grep -x fine sticky/mine/latest/attempt-1/rank-0.log &&
	as_other mkdir sticky/d &&
	as_other ln -s "$PWD/victim.log" sticky/d/latest &&
	job std "$PWD/sticky/d" <<-\EOF &&
	command: echo overwritten
	EOF
	test_expect_code 1 herd run std.yaml >out 2>err &&
	grep "^herd: log.dir: .*/sticky/d is owned by $OTHER" err &&
	mkdir victimdir &&
	as_other ln -s "$PWD/victimdir" sticky/l &&
	job stl "$PWD/sticky/l" <<-\EOF &&
	command: echo overwritten
	EOF
	test_expect_code 1 herd run stl.yaml >out 2>err &&
	test "$(wc -l <err)" = 1 &&
	grep "^herd: log.dir: .*/sticky/l is a symlink owned by $OTHER (uid [0-9]*); herd follows only links of root or yours: remove it or set log.dir to the real directory$" err &&
	test -z "$(ls -A victimdir)" &&
	victims_untouched
'

test_expect_success 'a link of root on the way is followed' '
	mkdir real && ln -s real via &&
	job via "$PWD/via/logs" <<-\EOF &&
	command: echo via
	EOF
	herd run via.yaml >out 2>err &&
	grep -x via real/logs/latest/attempt-1/rank-0.log
'

test_expect_success 'a full disk: one line and one log_write_failed event, the job goes on and exits 0' '
	mkdir full &&
	mount -t tmpfs -o size=64k,mode=0700 herd-test full &&
	test_when_finished "umount \"$PWD/full\"" &&
	{
		echo "name: big"
		echo "nodes: {hosts: localhost, slots: 1}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$PWD/full/runs\"}"
		echo "launch: {command: \"seq 1 30000\"}"
	} >big.yaml &&
	herd run big.yaml >out 2>err &&
	cat err &&
	test "$(wc -l <out)" = 30000 &&
	test "$(tail -1 out)" = "[0] 30000" &&
	ev=full/runs/latest/events.jsonl &&
	test "$(grep -c "cannot write .*/rank-0.log: No space left on device" err)" = 1 &&
	grep "^herd: logs in .*/full/runs/[0-9.-]*[0-9a-f]* are incomplete: [1-9][0-9]* bytes of rank output (1 log) and 0 bytes of events could not be written$" err &&
	test "$(jq -c "select(.event == \"log_write_failed\")" $ev | wc -l)" = 1 &&
	ev_all $ev log_write_failed ".rank == 0 and .attempt == 1 and .error == \"No space left on device\" and (.path | endswith(\"/attempt-1/rank-0.log\"))" &&
	ev_all $ev rank_exit ".status == 0" &&
	ev_all $ev attempt_end ".reason == \"completed\"" &&
	ev_all $ev job_end ".status == 0 and .log_bytes_lost > 0" &&
	lost=$(jq -r "select(.event == \"job_end\") | .log_bytes_lost" $ev) &&
	size=$(stat -c %s full/runs/latest/attempt-1/rank-0.log) &&
	test $((size + lost)) = $(seq 1 30000 | wc -c)
'

test_expect_success 'events.jsonl itself on a full disk: stderr only, once, and the job goes on' '
	mkdir full-events &&
	mount -t tmpfs -o size=64k,mode=0700 herd-test full-events &&
	test_when_finished "umount \"$PWD/full-events\"" &&
	{ dd if=/dev/zero of=full-events/filler bs=4k 2>/dev/null || :; } &&
	{
		echo "name: noev"
		echo "nodes: {hosts: localhost, slots: 2}"
		echo "restart: {max: 0}"
		echo "log: {dir: \"$PWD/full-events/runs\"}"
		echo "launch: {command: echo hi}"
	} >noev.yaml &&
	herd run noev.yaml >out 2>err &&
	cat err &&
	test "$(wc -l <out)" = 2 &&
	test "$(grep -c "cannot write .*/events.jsonl: No space left on device; the job goes on$" err)" = 1 &&
	test ! -s full-events/runs/latest/events.jsonl &&
	grep "are incomplete: .* bytes of events could not be written$" err
'

test_done
