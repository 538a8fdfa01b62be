#!/bin/sh
# t0100-validate.t — `herd validate` on good and bad job files, as a user
# runs it: exit statuses, the exact file:line:col of errors, --print and
# its round trip, usage errors, and an oversized file refused quickly.

test_description='herd validate: job spec checks and --print'

. "$(dirname "$0")/test-lib.sh"

require_cmd truncate head cmp

DATA=$HERD_TEST_DIR/data/spec

# expect_error FILE MESSAGE: validate fails with status 2, prints nothing
# on stdout and exactly "FILE:MESSAGE" on stderr.
expect_error() {
	test_expect_code 2 herd validate "$1" >out 2>err &&
	test_must_be_empty out &&
	printf '%s:%s\n' "$1" "$2" >expect &&
	test_cmp expect err
}

test_expect_success 'copy the job files' '
	cp "$DATA"/*.yaml . &&
	cp "$HERD_ROOT/examples/spec/full.yaml" .
'

test_expect_success 'a minimal job is ok' '
	herd validate good-minimal.yaml >out 2>err &&
	echo "good-minimal.yaml: ok" >expect &&
	test_cmp expect out &&
	test_must_be_empty err
'

test_expect_success 'a job with a host list is ok' '
	herd validate good-hosts-list.yaml >out &&
	echo "good-hosts-list.yaml: ok" >expect &&
	test_cmp expect out
'

test_expect_success 'the full example using every key is ok' '
	herd validate full.yaml >out &&
	echo "full.yaml: ok" >expect &&
	test_cmp expect out
'

test_expect_success 'every example job in the tree validates' '
	for f in "$HERD_ROOT"/examples/*/job.yaml "$HERD_ROOT"/examples/spec/*.yaml
	do
		test -e "$f" || continue
		herd validate "$f" >/dev/null || return 1
	done
'

test_expect_success 'unknown key suggests the nearest key' '
	expect_error bad-unknown-key.yaml \
		"4:3: unknown key '"'"'slot'"'"' in nodes (did you mean '"'"'slots'"'"'?)"
'

test_expect_success 'two host sources name both positions' '
	expect_error bad-two-sources.yaml \
		"5:3: two host sources: nodes.hostfile and nodes.hosts (at 4:3); give only one"
'

test_expect_success 'nodes.min above the expanded host count' '
	expect_error bad-min-above-count.yaml \
		"5:8: nodes.min (5) is more than the 4 nodes of the job (nodes.hosts)"
'

test_expect_success 'host key checking cannot be turned off' '
	expect_error bad-host-keys-off.yaml \
		"4:14: ssh.host_keys cannot turn host key checking off: use strict (keys pinned by '"'"'herd keys'"'"') or accept-new (pin a key on first contact)"
'

test_expect_success 'log.mode: files may be read by others, never written' '
	printf "launch: {command: ./train}\nlog:\n  mode: 0666\n" >bad-log-mode.yaml &&
	expect_error bad-log-mode.yaml \
		"3:9: expected a file mode for log.mode: 0600, 0640, 0604 or 0644 (the owner reads and writes, others at most read), got '"'"'0666'"'"'" &&
	printf "launch: {command: ./train}\nlog: {mode: 640}\n" >log-mode.yaml &&
	herd validate --print log-mode.yaml >printed &&
	grep -x "  mode: 0640" printed &&
	herd validate printed
'

test_expect_success 'a duration without a unit' '
	expect_error bad-duration.yaml \
		"5:12: bad duration '"'"'3'"'"' for health.timeout: a duration needs a unit: write 3s or 3ms (units: ms, s, m, h)"
'

test_expect_success 'aliases are refused (no billion laughs)' '
	expect_error bad-alias.yaml \
		"2:8: aliases are not supported (*a): write the value out"
'

test_expect_success 'duplicate key names the first position' '
	expect_error bad-duplicate.yaml \
		"4:3: duplicate key '"'"'launch.mode'"'"' (first at 3:3)"
'

test_expect_success 'unknown enum value lists the allowed ones' '
	expect_error bad-mode.yaml \
		"3:9: unknown value '"'"'mpirun'"'"' for launch.mode (expected one of: torch, pmix, plain)"
'

test_expect_success 'checkpoint.memory: auto (the default, printed) or off; any other word lists both' '
	herd validate --print good-minimal.yaml >printed.yaml &&
	grep -x "  memory: auto" printed.yaml &&
	for v in auto off; do
		sed "/^launch:/i checkpoint: {memory: $v}" good-minimal.yaml >mem-$v.yaml &&
		herd validate mem-$v.yaml >out &&
		echo "mem-$v.yaml: ok" >expect &&
		test_cmp expect out || return 1
	done &&
	herd validate --print mem-off.yaml | grep -x "  memory: off" &&
	sed "/^launch:/i checkpoint: {memory: never}" good-minimal.yaml >bad-memory.yaml &&
	line=$(grep -n "^checkpoint:" bad-memory.yaml | cut -d: -f1) &&
	expect_error bad-memory.yaml \
		"$line:22: unknown value '"'"'never'"'"' for checkpoint.memory (expected one of: auto, off)"
'

test_expect_success 'negative count, port out of range, wrong type' '
	expect_error bad-count.yaml \
		"4:10: expected a positive integer or '"'"'all'"'"' for nodes.count, got -2 (negative)" &&
	expect_error bad-port.yaml \
		"4:9: expected a port number 1..65535 for ssh.port, got 70000 (out of range)" &&
	expect_error bad-type.yaml \
		"3:5: expected a string for launch.command, got a mapping"
'

test_expect_success 'launch.command is required' '
	expect_error bad-no-command.yaml \
		"3:3: launch.command is required (the command every rank runs)"
'

test_expect_success 'empty file, list at the top, two documents' '
	expect_error bad-empty.yaml \
		"1:1: empty job file: expected a mapping of job keys (launch.command at least)" &&
	expect_error bad-top-list.yaml \
		"1:1: expected a mapping of job keys (name, nodes, launch, ...) at the top, got a list" &&
	expect_error bad-two-documents.yaml \
		"3:1: a second YAML document; a job file holds exactly one"
'

test_expect_success 'text that is not UTF-8' '
	expect_error bad-utf8.yaml \
		"2:17: not valid UTF-8 text (invalid trailing UTF-8 octet); a job file must be UTF-8"
'

test_expect_success 'a 100 MB file is refused by its size' '
	truncate -s 100M big.yaml &&
	expect_error big.yaml \
		"1:1: job file is 104857600 bytes; at most 1048576 are allowed (a job file is a few KiB)"
'

test_expect_success 'a 100 MB stream through a pipe is refused too' '
	head -c 104857600 /dev/zero | test_expect_code 2 herd validate /dev/stdin 2>err &&
	grep "^/dev/stdin:1:1: job file is larger than 1048576 bytes" err
'

test_expect_success 'a missing file' '
	test_expect_code 2 herd validate nothing.yaml 2>err &&
	grep "^nothing.yaml: No such file or directory" err
'

# The hosts are resolved as herd run resolves them (the hostfile read, the
# counts applied), without contacting any node: a hostfile herd run would
# refuse is refused here.
test_expect_success 'nodes.hostfile: missing, a bad line, a host twice, nodes.count above it, a spare that is a node' '
	mkdir hf &&
	printf "nodes: {hostfile: hosts.txt}\nlaunch: {command: \"true\"}\n" >hf/job.yaml &&
	test_expect_code 2 herd validate hf/job.yaml >out 2>err &&
	test_must_be_empty out &&
	grep "hosts.txt: No such file or directory" err &&
	printf "n1 slots=2\nn2 slots=x\n" >hf/hosts.txt &&
	test_expect_code 2 herd validate hf/job.yaml 2>err &&
	grep -x "hf/hosts.txt:2: bad slots value .x. (expected a whole number from 1 to 65536)" err &&
	printf "n1 slots=2\nn2\nn1\n" >hf/hosts.txt &&
	test_expect_code 2 herd validate hf/job.yaml 2>err &&
	grep -x "hf/hosts.txt:3: host .n1. listed twice (first on line 1)" err &&
	printf "n1 slots=2\nn2\n" >hf/hosts.txt &&
	herd validate hf/job.yaml >out &&
	echo "hf/job.yaml: ok" >expect &&
	test_cmp expect out &&
	printf "nodes: {hostfile: hosts.txt, count: 3}\nlaunch: {command: \"true\"}\n" >hf/three.yaml &&
	test_expect_code 2 herd validate hf/three.yaml 2>err &&
	grep -x "hf/three.yaml: nodes.count is 3 but nodes.hostfile gives 2 hosts" err &&
	printf "nodes: {hosts: \"n[1-2]\", spares: n2}\nlaunch: {command: \"true\"}\n" >hf/spare.yaml &&
	test_expect_code 2 herd validate hf/spare.yaml 2>err &&
	grep -x "hf/spare.yaml: host .n2. is both a node and a spare (nodes.spares)" err
'

test_expect_success '--print fills in every default' '
	herd validate --print good-minimal.yaml >printed.yaml &&
	grep "^name: good-minimal$" printed.yaml &&
	grep "^  port: 22$" printed.yaml &&
	grep "^  host_keys: strict$" printed.yaml &&
	grep "^  command_timeout: 30s$" printed.yaml &&
	grep "^  master_port: 29500$" printed.yaml &&
	grep "^  dir: runs/{{name}}$" printed.yaml &&
	grep "^  mode: 0600$" printed.yaml &&
	grep "^  progress_timeout: off$" printed.yaml
'

test_expect_success '--print output validates again, and prints the same' '
	for f in good-minimal.yaml good-hosts-list.yaml full.yaml
	do
		herd validate "$f" --print >p1.yaml &&
		herd validate p1.yaml >out &&
		echo "p1.yaml: ok" >expect &&
		test_cmp expect out &&
		herd validate --print p1.yaml >p2.yaml &&
		test_cmp p1.yaml p2.yaml || return 1
	done
'

test_expect_success 'metrics: listen, interval and patterns are checked at file:line:col' '
	mcheck() {
		printf "name: m\nlaunch: {command: \"true\"}\nmetrics:\n  %s\n" "$1" >m.yaml &&
		{ herd validate m.yaml 2>err; test $? = 2; } &&
		grep -F "m.yaml:$2: " err && grep -F "$3" err
	} &&
	mcheck "listen: \"nope:99\"" 4:11 "bad address" &&
	mcheck "listen: 70000" 4:11 "expected a port from 1 to 65535" &&
	mcheck "listen: \"::1:80\"" 4:11 "brackets" &&
	mcheck "interval: 10ms" 4:13 "at least 100ms" &&
	mcheck "patterns: {loss: \"a(b\"}" 4:20 "bad regular expression for metrics.patterns.loss" &&
	mcheck "patterns: {loss: \"(a)(b)\"}" 4:20 "has 2 groups; it needs exactly one" &&
	mcheck "patterns: {loss: \"ab\"}" 4:20 "has 0 groups" &&
	mcheck "patterns: {1x: \"(a)\"}" 4:14 "expected a metric name" &&
	printf "name: m\nlaunch: {command: \"true\"}\nmetrics:\n  listen: \"[::1]:9464\"\n  patterns:\n    loss: \"loss=([0-9.]+)\"\n" >m.yaml &&
	herd validate --print m.yaml >p.yaml &&
	grep "^  interval: auto$" p.yaml &&
	grep -F "loss: loss=([0-9.]+)" p.yaml &&
	herd validate --print p.yaml | test_cmp p.yaml -
'

test_expect_success 'a tab in the indentation is named as a tab, with file:line:col' '
	printf "name: t\nlaunch:\n\tcommand: true\n" >tab1.yaml &&
	expect_error tab1.yaml "3:1: a tab in the indentation: YAML indents with spaces only" &&
	printf "name: t\nlaunch:\n  command: true\n\t  x: 1\n" >tab2.yaml &&
	expect_error tab2.yaml "4:1: a tab in the indentation: YAML indents with spaces only" &&
	printf "name: t\nlaunch:\n  \tcommand: true\n" >tab3.yaml &&
	expect_error tab3.yaml "3:3: a tab in the indentation: YAML indents with spaces only"
'

test_expect_success 'nesting deeper than 32 is refused at once, even 1 MiB of it; a UTF-8 byte order mark is fine (issue 23)' '
	python3 -c "import sys; sys.stdout.write(\"launch: {command: x}\nx: \" + \"[\" * (1024 * 1024 - 40))" >deep.yaml &&
	test_expect_code 2 timeout 30 herd validate deep.yaml 2>err &&
	echo "deep.yaml:2:35: nested deeper than 32 (a job file needs a few levels)" >expect &&
	test_cmp expect err &&
	printf "launch:\n" >deep2.yaml &&
	for i in $(seq 40); do printf "%*s- \n" $((i * 2)) "" >>deep2.yaml; done &&
	test_expect_code 2 herd validate deep2.yaml 2>err &&
	grep -F "deep2.yaml:33:65: nested deeper than 32" err &&
	printf "\357\273\277name: bom\nlaunch: {command: x}\n" >bom.yaml &&
	herd validate bom.yaml &&
	printf "\377\376n\000:\000" >u16.yaml &&
	test_expect_code 2 herd validate u16.yaml 2>err &&
	grep -F "u16.yaml:1:1: starts with a UTF-16 or UTF-32 byte order mark; a job file must be UTF-8" err
'

test_expect_success 'usage: --help, no file, two files, unknown option' '
	herd validate --help >out &&
	grep "^usage: herd validate JOB.yaml \[--print\]" out &&
	test_expect_code 2 herd validate 2>err &&
	grep "^try .herd validate --help.$" err &&
	test_expect_code 2 herd validate a.yaml b.yaml 2>err &&
	grep "expected one job file, got 2" err &&
	test_expect_code 2 herd validate --frobnicate good-minimal.yaml 2>err &&
	grep "unknown option" err &&
	test_expect_code 2 herd validate --prnit good-minimal.yaml 2>err &&
	printf "%s\n" "herd: validate: unknown option '"'"'--prnit'"'"' (did you mean '"'"'--print'"'"'?)" \
		"try '"'"'herd validate --help'"'"'" >expect &&
	test_cmp expect err
'

test_done
