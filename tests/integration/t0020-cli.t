#!/bin/sh
# t0020-cli.t — the command line as a newcomer meets it: "did you mean"
# for a mistyped command, option or --set name; a usage error is one line
# and a hint, not the whole help; every --help lists -h and says what the
# exit statuses mean.

test_description='herd command line: did you mean, usage errors, --help'

. "$(dirname "$0")/test-lib.sh"

COMMANDS="validate hosts keys plan run attach stop sbatch render init check
bench list status top logs nodes report hostlist"

# expect_usage STATUS LINE1 CMD...: CMD exits STATUS and writes exactly
# LINE1 and the hint "try 'herd SUB --help'" (SUB: CMD's first word after
# herd, or none) on stderr, nothing on stdout.
expect_usage() {
	code=$1 line=$2 hint=$3 &&
	shift 3 &&
	test_expect_code "$code" "$@" >out 2>err &&
	test_must_be_empty out &&
	printf '%s\n%s\n' "$line" "$hint" >expect &&
	test_cmp expect err
}

test_expect_success 'a mistyped command: did you mean, one line and a hint' '
	expect_usage 2 "herd: unknown command '"'"'stauts'"'"' (did you mean '"'"'status'"'"'?)" \
		"try '"'"'herd --help'"'"'" herd stauts &&
	expect_usage 2 "herd: unknown command '"'"'valdiate'"'"' (did you mean '"'"'validate'"'"'?)" \
		"try '"'"'herd --help'"'"'" herd valdiate x.yaml &&
	expect_usage 2 "herd: unknown command '"'"'frobnicate'"'"'" \
		"try '"'"'herd --help'"'"'" herd frobnicate &&
	expect_usage 2 "herd: unknown option '"'"'--verison'"'"' (did you mean '"'"'--version'"'"'?)" \
		"try '"'"'herd --help'"'"'" herd --verison &&
	expect_usage 2 "herd: unknown option '"'"'--frob'"'"'" \
		"try '"'"'herd --help'"'"'" herd --frob
'

test_expect_success 'a mistyped option: did you mean, one line and a hint' '
	expect_usage 2 "herd: run: unknown option '"'"'--detatch'"'"' (did you mean '"'"'--detach'"'"'?)" \
		"try '"'"'herd run --help'"'"'" herd run --detatch job.yaml &&
	expect_usage 2 "herd: plan: unknown option '"'"'--jsno'"'"' (did you mean '"'"'--json'"'"'?)" \
		"try '"'"'herd plan --help'"'"'" herd plan --jsno job.yaml &&
	expect_usage 2 "herd: list: unknown option '"'"'--runing'"'"' (did you mean '"'"'--running'"'"'?)" \
		"try '"'"'herd list --help'"'"'" herd list --runing &&
	expect_usage 2 "herd: top: unknown option '"'"'--sotr=gpu'"'"' (did you mean '"'"'--sort'"'"'?)" \
		"try '"'"'herd top --help'"'"'" herd top --sotr=gpu x &&
	expect_usage 2 "herd: hosts: unknown option '"'"'--frobnicate'"'"'" \
		"try '"'"'herd hosts --help'"'"'" herd hosts x.yaml --frobnicate &&
	expect_usage 2 "herd: report: option '"'"'-o'"'"' needs a value" \
		"try '"'"'herd report --help'"'"'" herd report x -o &&
	expect_usage 2 "herd: stop: option '"'"'--wait'"'"' takes no value" \
		"try '"'"'herd stop --help'"'"'" herd stop --wait=1 x
'

test_expect_success 'a bad letter inside a short-option cluster is named, not the word before it' '
	expect_usage 2 "herd: bench: unknown option '"'"'-j'"'"'" \
		"try '"'"'herd bench --help'"'"'" herd bench --iters 5 -j.yaml &&
	expect_usage 2 "herd: run: unknown option '"'"'-x'"'"'" \
		"try '"'"'herd run --help'"'"'" herd run -vx job.yaml &&
	expect_usage 2 "herd: plan: unknown option '"'"'-q'"'"'" \
		"try '"'"'herd plan --help'"'"'" herd plan -q job.yaml
'

test_expect_success 'a missing argument: one line and a hint, not the help' '
	for c in validate hosts keys plan run check bench sbatch attach stop \
		status top logs report render init; do
		test_expect_code 2 herd $c >out 2>err &&
		test_must_be_empty out &&
		test $(wc -l <err) = 2 &&
		grep -x "try .herd $c --help." err &&
		! grep "^usage:" err || return 1
	done
'

test_expect_success 'a mistyped --set name: did you mean' '
	test_expect_code 2 herd render ds_zero3 --set micro_bacth=2 2>err &&
	grep -x "herd: --set micro_bacth: ds_zero3.json.tmpl has no {{micro_bacth}} (did you mean .micro_batch.?)" err &&
	test_expect_code 2 herd render finetune --set pyhton=python3 2>err &&
	grep "(did you mean .python.?)" err &&
	test_expect_code 2 herd init pretrain p --set stesp=10 2>err &&
	grep -x "herd: init: --set stesp: the pretrain template takes no such value (did you mean .steps.?; herd init pretrain --help)" err &&
	test ! -e p
'

test_expect_success 'every --help lists -h and has an exit-status section' '
	for c in $COMMANDS; do
		herd $c --help >out 2>err &&
		test_must_be_empty err &&
		grep -q -- "-h, --help" out &&
		grep -q "Exit status:" out &&
		herd $c -h >out.h &&
		test_cmp out out.h || {
			echo "herd $c --help: no -h or no exit status" &&
			return 1
		}
	done
'

test_expect_success 'top and report say they take a job id or name' '
	herd top --help >out && grep "^usage: herd top JOB|" out &&
	grep "JOB is a job.s id or name" out &&
	herd report --help >out && grep "^usage: herd report JOB|" out &&
	grep "JOB is a job.s id or name" out &&
	herd --help >out &&
	grep "^  herd top      JOB|" out && grep "^  herd report   JOB|" out
'

test_done
