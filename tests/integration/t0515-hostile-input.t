#!/bin/sh

test_description='hostile input on real sshd nodes: checkpoint names that are shell text reach the rank as one literal argument and run nothing; one host name rule for every source; a command exec cannot take is refused at validate, and a failed exec is reported per rank with its errno; nohup herd run survives SIGHUP'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq awk ps nohup od
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

HOSTILE='ckpt-2;touch INJ;#'

# job NAME: writes NAME.yaml for 2 nodes x 1 slot, ranks starting in this
# directory (whose path holds a blank); the rest of the job (checkpoint:,
# launch: keys indented by two under launch:) comes from stdin.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"$TWO\", slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {grace: 2s}"
		echo "restart: {max: 0}"
		cat
	} >"$1.yaml"
}

# argv.sh: run as a rank; writes each of its arguments, NUL-terminated,
# to argv.$RANK (whole, by rename).
cat >argv.sh <<\EOF
printf '%s\0' "$@" >"argv.$RANK.tmp" && mv "argv.$RANK.tmp" "argv.$RANK"
EOF

# ev_any FILE EVENT COND: true when some EVENT of FILE satisfies COND (jq)
ev_any() {
	jq -e -n --arg e "$2" "[inputs | select(.event == \$e)] | any(.[]; $3)" "$1" >/dev/null
}

# want_argv WORD...: true when every rank's argv file holds exactly the
# words, each one argument.
want_argv() {
	printf '%s\0' "$@" >argv.want &&
	for r in 0 1; do
		cmp argv.want "argv.$r" || {
			od -c "argv.$r" | head -20 >&2
			return 1
		}
	done
}

test_expect_success 'cluster of 2 nodes' '
	own_binaries &&
	cluster_up 2 &&
	TWO="${HERD_CLUSTER_PREFIX}[1-2]" &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2)
'

# ---- item 3: checkpoint names ------------------------------------------

test_expect_success 'a checkpoint directory named "ckpt-2;touch INJ;#": the rank gets the exact path as one argument, nothing runs' '
	mkdir -p ck1 "ck1/$HOSTILE" &&
	job ck1 <<-EOF &&
	checkpoint: {dir: "$PWD/ck1", pattern: "ckpt-*", resume_args: "--resume {{checkpoint}}"}
	launch:
	  workdir: "$PWD"
	  command: sh argv.sh {{resume_args}} -- {{checkpoint}} "in {{checkpoint}} quotes" end
	EOF
	herd run ck1.yaml >out 2>err &&
	want_argv --resume "$PWD/ck1/$HOSTILE" -- "$PWD/ck1/$HOSTILE" \
		"in $PWD/ck1/$HOSTILE quotes" end &&
	test ! -e INJ &&
	ev_all runs/ck1/latest/events.jsonl checkpoint_found ".path == \"$PWD/ck1/$HOSTILE\""
'

test_expect_success 'a checkpoint directory with blanks ("step 3") is one argument' '
	rm -f argv.? &&
	mkdir -p "ck2/step 2" "ck2/step 3" &&
	job ck2 <<-EOF &&
	checkpoint: {dir: "$PWD/ck2", pattern: "step*", resume_args: "--resume={{checkpoint}}"}
	launch:
	  workdir: "$PWD"
	  command: sh argv.sh {{resume_args}}
	EOF
	herd run ck2.yaml >out 2>err &&
	want_argv "--resume=$PWD/ck2/step 3"
'

test_expect_success 'DeepSpeed latest file naming "ckpt-2;touch INJ;#": the same path, one argument, nothing runs' '
	rm -f argv.? &&
	mkdir -p "ck3/$HOSTILE" ck3/global_step1 &&
	touch "ck3/$HOSTILE/COMPLETE" ck3/global_step1/COMPLETE &&
	printf "%s\n" "$HOSTILE" >ck3/latest &&
	job ck3 <<-EOF &&
	checkpoint: {dir: "$PWD/ck3", latest_file: latest, complete_marker: COMPLETE, resume_args: "--resume {{checkpoint}}"}
	launch:
	  workdir: "$PWD"
	  command: sh argv.sh {{resume_args}}
	EOF
	herd run ck3.yaml >out 2>err &&
	want_argv --resume "$PWD/ck3/$HOSTILE" &&
	test ! -e INJ &&
	ev_all runs/ck3/latest/events.jsonl checkpoint_found ".source == \"latest_file\""
'

test_expect_success 'a latest file that leaves checkpoint.dir ("../x") is skipped with its reason' '
	rm -f argv.? &&
	mkdir -p ck4/global_step1 x &&
	touch ck4/global_step1/COMPLETE x/COMPLETE &&
	echo ../x >ck4/latest &&
	job ck4 <<-EOF &&
	checkpoint: {dir: "$PWD/ck4", latest_file: latest, pattern: "global_step*", complete_marker: COMPLETE, resume_args: "--resume {{checkpoint}}"}
	launch:
	  workdir: "$PWD"
	  command: sh argv.sh {{resume_args}}
	EOF
	herd run ck4.yaml >out 2>err &&
	want_argv --resume "$PWD/ck4/global_step1" &&
	ev_all runs/ck4/latest/events.jsonl checkpoint_skipped ".reason | test(\"latest names no entry of checkpoint.dir\")"
'

test_expect_success 'checkpoint names that JSON or a line cannot carry (bytes not UTF-8, a newline) are skipped with their reason; no node is evicted' '
	rm -f argv.? &&
	mkdir -p ck6/ckpt-1 "ck6/ckpt-2$(printf "\ntouch INJ")" "ck6/ckpt-3$(printf "\377")" &&
	job ck6 <<-EOF &&
	checkpoint: {dir: "$PWD/ck6", pattern: "ckpt-*", resume_args: "--resume {{checkpoint}}"}
	launch:
	  workdir: "$PWD"
	  command: sh argv.sh {{resume_args}}
	EOF
	herd run ck6.yaml >out 2>err &&
	want_argv --resume "$PWD/ck6/ckpt-1" &&
	test ! -e INJ &&
	ev_any runs/ck6/latest/events.jsonl checkpoint_skipped ".path == \"$PWD/ck6/ckpt-3?\" and (.reason | test(\"not valid UTF-8\"))" &&
	ev_any runs/ck6/latest/events.jsonl checkpoint_skipped ".path == \"$PWD/ck6/ckpt-2?touch INJ\" and (.reason | test(\"control character\"))" &&
	! grep node_evicted runs/ck6/latest/events.jsonl
'

test_expect_success 'validate: a placeholder whose quoting herd cannot tell is refused at file:line:col' '
	cat >q.yaml <<-\EOF &&
	launch:
	  command: echo "$(cat {{checkpoint}})"
	EOF
	test_expect_code 2 herd validate q.yaml 2>err &&
	grep "^q.yaml:2:12: launch.command: character 13: herd cannot tell how the shell quotes {{checkpoint}}" err
'

test_expect_success 'validate: simple "${HOME}", "$(cmd)" before a placeholder pass; bash-only quoting and a resume_args ending in a comment are refused at file:line:col' '
	cat >ok.yaml <<-\EOF &&
	checkpoint: {dir: /c, pattern: "s*", resume_args: "--resume {{checkpoint}}"}
	launch:
	  command: cd "$(dirname "$0")"; python "${HOME}/t.py" {{resume_args}} --log "$(hostname).log" --out {{checkpoint}}
	EOF
	herd validate ok.yaml >out &&
	cat >b1.yaml <<-\EOF &&
	launch:
	  command: printf x $'"'"'a\'"'"'{{checkpoint}}'"'"'
	EOF
	test_expect_code 2 herd validate b1.yaml 2>err &&
	grep "^b1.yaml:2:12: launch.command: character 15: .*a \$.\.\.\.. with a backslash" err &&
	cat >b2.yaml <<-\EOF &&
	launch:
	  command: (( n = {{attempt}} )); run
	EOF
	test_expect_code 2 herd validate b2.yaml 2>err &&
	grep "^b2.yaml:2:12: launch.command: .*arithmetic ((" err &&
	cat >b3.yaml <<-\EOF &&
	checkpoint: {dir: /c, pattern: "s*", resume_args: "--resume {{checkpoint}} # resume"}
	launch:
	  command: train {{resume_args}} --out {{checkpoint}}
	EOF
	test_expect_code 2 herd validate b3.yaml 2>err &&
	grep "^b3.yaml:1:51: checkpoint.resume_args: the text ends in a # comment" err
'

# ---- item 8: host names --------------------------------------------------

test_expect_success 'validate: nodes.hosts and nodes.spares take only host names, at file:line:col' '
	for h in "a;b" "\$(touch INJ)" "-oProxyCommand=touch INJ" "-n1" "_x" "n$(printf "\303\251")"; do
		printf "nodes:\n  hosts: [\"n1\", \"%s\"]\nlaunch: {command: \"true\"}\n" "$h" >h.yaml &&
		test_expect_code 2 herd validate h.yaml 2>err &&
		grep "^h.yaml:2:17: nodes.hosts: " err &&
		printf "nodes:\n  hosts: n1\n  spares: \047n2,%s\047\nlaunch: {command: \"true\"}\n" "$h" >s.yaml &&
		test_expect_code 2 herd validate s.yaml 2>err &&
		grep "^s.yaml:3:11: nodes.spares: " err || return 1
	done &&
	grep "bad host name .n.*. (character 2: expected letters, digits, .\.., .-. or ._.; ASCII only)" err &&
	test ! -e INJ
'

test_expect_success 'the same rule for a hostfile, nodes.command and SLURM_JOB_NODELIST' '
	printf "n1 slots=1\n-n2 slots=1\n" >hf2 &&
	printf "nodes: {hostfile: hf2}\nlaunch: {command: \"true\"}\n" >hf.yaml &&
	test_expect_code 2 herd hosts hf.yaml 2>err &&
	grep "hf2:2: bad host name .-n2. (it must start with a letter or digit)" err &&
	printf "printf \"%%s\\\\n\" n1 \"a;b\"\n" >disc.sh &&
	sh disc.sh >disc.out && printf "n1\na;b\n" >expect && test_cmp expect disc.out &&
	printf "nodes: {command: sh disc.sh}\nlaunch: {command: \"true\"}\n" >cmd.yaml &&
	herd validate cmd.yaml &&
	test_must_fail herd hosts cmd.yaml 2>err &&
	grep "nodes.command output:2: bad host name .a;b." err &&
	printf "nodes: {slurm: true}\nlaunch: {command: \"true\"}\n" >sl.yaml &&
	SLURM_JOB_NODELIST="n1,a;b" test_must_fail herd hosts sl.yaml 2>err &&
	grep "SLURM_JOB_NODELIST: bad host name .a;b." err &&
	SLURM_JOB_NODELIST="n[1-2],-x" test_must_fail herd hosts sl.yaml 2>err &&
	grep "SLURM_JOB_NODELIST: bad host name .-x." err &&
	SLURM_JOB_NODELIST="n[1-2]" herd hosts sl.yaml >out &&
	printf "n1\nn2\n" >expect &&
	test_cmp expect out
'

# ---- item 11: what exec cannot take ------------------------------------

test_expect_success 'validate: a 131,100-byte launch.command is refused at file:line:col' '
	{
		printf "launch:\n  command: echo "
		head -c 131095 /dev/zero | tr "\0" a
		echo
	} >big.yaml &&
	test $(sed -n 2p big.yaml | cut -c12- | tr -d "\n" | wc -c) -eq 131100 &&
	test_expect_code 2 herd validate big.yaml 2>err &&
	grep "^big.yaml:2:12: launch.command is 131100 bytes; Linux passes at most 131071 bytes as one argument (MAX_ARG_STRLEN)" err
'

# failed_start JOB ERRNO TEXT: every rank that exited 127 in runs/JOB has
# ERRNO and a reason starting with TEXT in its rank_exit event, and herd
# said "rank R on HOST: TEXT" on stderr for each; at least one did.  (A
# rank of the other node may be stopped by the failing attempt before
# its own exec.)
failed_start() {
	jq -r "select(.event == \"rank_exit\" and .status == 127) |
		\"\(.rank) \(.host) \(.errno) \(.reason)\"" "runs/$1/latest/events.jsonl" >failed &&
	test -s failed &&
	while read -r rank host errno reason; do
		test "$errno" = "$2" &&
		case $reason in "$3"*) ;; *) false ;; esac &&
		grep "^herd: rank $rank on $host: $3" err || return 1
	done <failed
}

test_expect_success 'a command that passes validate but not exec (the checkpoint makes it too long): each rank says why, with its errno' '
	mkdir -p "ck5/step_$(head -c 200 /dev/zero | tr "\0" 9)" &&
	job e2big <<-EOF &&
	checkpoint: {dir: "$PWD/ck5", pattern: "step_*", resume_args: "--resume {{checkpoint}}"}
	launch:
	  workdir: "$PWD"
	  command: ": $(head -c 130900 /dev/zero | tr "\0" a) {{resume_args}}"
	EOF
	herd validate e2big.yaml &&
	test_expect_code 127 herd run e2big.yaml >out 2>err &&
	failed_start e2big 7 "cannot exec /bin/sh: Argument list too long"
'

# Issue 22: the missing workdir is said once (it is the same path on every
# node), and each rank's rank_exit event still carries its errno.
test_expect_success 'a workdir missing on the nodes: one line says so with its errno, each rank'"'"'s event too' '
	job nowd <<-EOF &&
	launch:
	  workdir: "$PWD/no such dir"
	  command: "true"
	EOF
	test_expect_code 127 herd run nowd.yaml >out 2>err &&
	jq -r "select(.event == \"rank_exit\" and .status == 127) | \"\(.errno) \(.reason)\"" \
		runs/nowd/latest/events.jsonl >failed &&
	test "$(wc -l <failed)" -ge 1 &&
	! grep -v "^2 cannot enter the workdir: No such file or directory" failed &&
	test "$(grep -c "^herd: rank [0-9]* on .*: launch.workdir $PWD/no such dir does not exist there" err)" = 1 &&
	test "$(grep -c "workdir" err)" -le 2
'

test_expect_success 'the report pipe stays out of the rank: a rank holds fds 0, 1, 2 only, its keeper /dev/null only' '
	job fds <<-\EOF &&
	launch:
	  command: "ls /proc/$$/fd; echo =; ls /proc/$PPID/fd; readlink /proc/$PPID/fd/1 /proc/$PPID/fd/2; true"
	EOF
	herd run fds.yaml >out 2>err &&
	for r in 0 1; do
		printf "[$r] %s\n" 0 1 2 = 0 1 2 /dev/null /dev/null >expect &&
		grep "^\[$r\] " out >actual &&
		test_cmp expect actual || return 1
	done
'

# ---- item 12: SIGHUP ----------------------------------------------------

# The ranks write started.R, then wait (bounded) for the file "go"; on
# SIGHUP they say so and exit 129.
cat >hup.sh <<\EOF
trap 'echo "rank $RANK got SIGHUP"; exit 129' HUP
touch "started.$RANK"
i=0
while [ ! -e go ] && [ $i -lt 400 ]; do
	sleep 0.05 &
	wait $!
	i=$((i + 1))
done
test -e go
EOF

hup_job() {
	rm -f started.? go &&
	job "$1" <<-EOF
	launch:
	  workdir: "$PWD"
	  command: exec sh hup.sh
	EOF
}

# sig_ignored PID SIG: true when PID ignores signal number SIG
sig_ignored() {
	mask=$(awk "/^SigIgn:/ {print \$2}" "/proc/$1/status") &&
	test $(( (0x$mask >> ($2 - 1)) & 1 )) = 1
}

test_expect_success 'nohup herd run: SIGHUP to herd is ignored, the 2-node job completes with exit 0' '
	hup_job nohup &&
	{ nohup herd run nohup.yaml >out 2>err </dev/null & } &&
	HERD_PID=$! &&
	wait_files 2 "started.?" 20 &&
	sig_ignored $HERD_PID 1 &&
	kill -HUP $HERD_PID &&
	touch go &&
	wait_exit $HERD_PID 30 &&
	test $WAIT_RC = 0 &&
	! grep "got SIGHUP" out &&
	ev_all runs/nohup/latest/events.jsonl job_end ".status == 0"
'

test_expect_success 'without nohup, SIGHUP stops the job like Ctrl-C: the ranks get SIGHUP, herd exits 129' '
	hup_job hup &&
	{ env --default-signal=HUP herd run hup.yaml >out 2>err </dev/null & } &&
	HERD_PID=$! &&
	wait_files 2 "started.?" 20 &&
	! sig_ignored $HERD_PID 1 &&
	kill -HUP $HERD_PID &&
	wait_exit $HERD_PID 30 &&
	test $WAIT_RC = 129 &&
	grep -x "\[0\] rank 0 got SIGHUP" out &&
	grep -x "\[1\] rank 1 got SIGHUP" out
'

test_done
