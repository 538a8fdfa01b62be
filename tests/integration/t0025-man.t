#!/bin/sh
# t0025-man.t — the man pages and the bash completion are made from the
# code (scripts/mkman.py): one page per command of `herd --help`, each
# option of `herd CMD --help` in its page, every key of the spec schema
# in herd.yaml(5), every page clean under mandoc -T lint, a key without a
# line in doc/keys.md's key table an error; the completion offers the
# commands, each command's options and job files.

test_description='man pages and bash completion generated from --help'

. "$(dirname "$0")/test-lib.sh"

require_cmd python3 mandoc bash

MKMAN=$HERD_ROOT/scripts/mkman.py
AGENT=$(command -v herd-agent)

# plain FILE: a page as text, without overstrike.
plain() {
	mandoc -T ascii -O width=300 "$1" | sed 's/.\x08//g'
}

commands() {
	herd --help | sed -n 's/^  herd \([a-z][a-z]*\) .*/\1/p' | sort -u
}

test_expect_success 'the pages are generated, --strict' '
	python3 "$MKMAN" --strict --herd "$(command -v herd)" --agent "$AGENT" \
		--spec-dir "$HERD_ROOT/lib/job" --keys "$HERD_ROOT/doc/keys.md" \
		--out man --completion completion/herd 2>err &&
	test_must_be_empty err &&
	test -s man/herd.1 && test -s man/herd-agent.1 && test -s man/herd.yaml.5 &&
	test -s completion/herd
'

test_expect_success 'every command of herd --help has its page, and herd(1) names it' '
	commands >cmds &&
	test $(wc -l <cmds) -ge 19 &&
	while read c; do
		test -s "man/herd-$c.1" || { echo "no page for $c"; return 1; }
		plain man/herd.1 | grep -q "herd-$c(1)" || { echo "herd(1) lacks $c"; return 1; }
		plain "man/herd-$c.1" | grep -q "^NAME" &&
		plain "man/herd-$c.1" | grep -q "^SYNOPSIS" &&
		plain "man/herd-$c.1" | grep -q "^EXIT STATUS" || return 1
	done <cmds &&
	ls man | sed -n "s/^herd-\(.*\)\.1$/\1/p" | grep -v "^agent$" | sort >pages &&
	test_cmp cmds pages
'

test_expect_success 'each page lints clean (mandoc -T lint, warnings and worse)' '
	mandoc -T lint -W warning man/*.1 man/*.5 >lint 2>&1;
	rc=$? &&
	cat lint &&
	test_must_be_empty lint &&
	test $rc -eq 0
'

test_expect_success 'every option of every --help is in its page' '
	while read c; do
		herd "$c" --help >help &&
		sed -n "s/^  \(-[-a-zA-Z0-9]*\).*/\1/p; s/^  -[a-z], \(--[-a-z]*\).*/\1/p" help |
			sort -u >opts &&
		test -s opts || { echo "no options in herd $c --help"; return 1; }
		plain "man/herd-$c.1" >page &&
		while read o; do
			grep -q -e "$o" page || { echo "herd-$c(1) lacks $o"; return 1; }
		done <opts || return 1
	done <cmds
'

test_expect_success 'the usage lines are the synopsis, the exit status its section' '
	herd run --help | sed -n "1s/^usage: //p" >want &&
	plain man/herd-run.1 | sed -n "/^SYNOPSIS/{n;p;}" | sed "s/^ *//" >got &&
	test_cmp want got &&
	plain man/herd-validate.1 | sed -n "/^EXIT STATUS/,/^SEE/p" >exit &&
	grep -q "0 valid; 1 --print could not write; 2 a bad job" exit
'

test_expect_success 'every key of the spec schema is in herd.yaml(5), with the default herd prints' '
	grep -oh "\.name = \"[a-z_.]*\"" "$HERD_ROOT"/lib/job/spec*.c |
		sed "s/.*\"\(.*\)\"/\1/" | grep "\." | sort -u >keys &&
	test $(wc -l <keys) -ge 70 &&
	plain man/herd.yaml.5 >page &&
	while read k; do
		grep -q -F "$k" page || { echo "herd.yaml(5) lacks $k"; return 1; }
	done <keys &&
	grep -q "health.heartbeat (default: 500ms)" page &&
	grep -q "ssh.fanout (default: 64)" page &&
	! grep -q "Not described in" page
'

test_expect_success 'a key of the schema missing from doc/keys.md is named, and an error with --strict' '
	grep -v "^| \`launch.master_port\`" "$HERD_ROOT/doc/keys.md" >keys.md &&
	test_expect_code 1 python3 "$MKMAN" --strict --herd "$(command -v herd)" \
		--agent "$AGENT" --spec-dir "$HERD_ROOT/lib/job" --keys keys.md \
		--out man2 --completion completion2/herd 2>err &&
	grep "launch.master_port" err &&
	plain man2/herd.yaml.5 | grep -A1 "launch.master_port" | grep "Not described in doc/keys.md"
'

# complete WORD...: what the completion offers for the words typed (the
# last one is being completed), one a line.
complete_words() {
	bash -c '. ./completion/herd; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _herd; printf "%s\n" "${COMPREPLY[@]}"' herd "$@"
}

test_expect_success 'the completion offers the commands and each command its options' '
	complete_words herd va >got &&
	echo validate >want &&
	test_cmp want got &&
	complete_words herd "" >got &&
	commands >want &&
	sort got | grep -v "^--" >got.cmds &&
	test_cmp want got.cmds &&
	complete_words herd run --de >got &&
	echo --detach >want &&
	test_cmp want got &&
	while read c; do
		herd "$c" --help | sed -n "s/^  \(--[a-z][-a-z]*\).*/\1/p" | sort -u >want &&
		complete_words herd "$c" -- | sort >got &&
		comm -23 want got >lack &&
		test_must_be_empty lack || { echo "herd $c"; return 1; }
	done <cmds
'

test_expect_success 'the completion offers job files for a job and files for a file option' '
	mkdir jobs && touch jobs/a.yaml jobs/b.yml jobs/c.txt && mkdir jobs/d &&
	complete_words herd validate jobs/ | sort >got &&
	printf "%s\n" jobs/a.yaml jobs/b.yml jobs/d >want &&
	test_cmp want got &&
	complete_words herd report x.yaml -o jobs/c | sort >got &&
	echo jobs/c.txt >want &&
	test_cmp want got
'

test_expect_success 'the completion offers the templates of herd init and herd render' '
	complete_words herd init "" >got &&
	grep -x pretrain got && grep -x finetune got &&
	complete_words herd render ds >got &&
	echo ds_zero3 >want &&
	test_cmp want got
'

test_done
