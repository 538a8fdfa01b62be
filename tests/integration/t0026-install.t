#!/bin/sh
# t0026-install.t — `make install` (PREFIX, DESTDIR) from a fresh copy of
# the tree puts the layout of DESIGN.md under the staging root, and the
# installed herd works with no source tree: it finds its templates and
# its agent from its own location, runs a local job and a PMIx job; the
# pages are the ones the installed herd's --help makes; `make uninstall`
# removes every file install wrote.

test_description='make install and make uninstall with PREFIX and DESTDIR'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/install/lib.sh"

require_cmd git tar make python3 mandoc man
[ -x "$HERD_ROOT/build/examples/allreduce" ] ||
	error "prerequisite build/examples/allreduce is missing (run 'make examples')"

PREFIX=/opt/herd-t0026
# The pages carry a date: the same for the install and the regeneration.
SOURCE_DATE_EPOCH=$(date +%s)
export SOURCE_DATE_EPOCH

test_expect_success 'make install from a fresh copy of the tree (PREFIX, DESTDIR)' '
	copy_tree src &&
	make -C src -j2 install PREFIX=$PREFIX DESTDIR="$PWD/root" >log 2>&1 ||
		{ tail -40 log; false; }
'

test_expect_success 'the layout: bin/, share/herd/{templates,python/herd}, the pages, the completion' '
	test -x "root$PREFIX/bin/herd" &&
	test -x "root$PREFIX/bin/herd-agent" &&
	(cd src/templates && find . -type f | sort) >expect &&
	(cd "root$PREFIX/share/herd/templates" && find . -type f | sort) >got &&
	test_cmp expect got &&
	test -d "root$PREFIX/share/herd/python/herd" &&
	(cd src && ls python/herd/*.py 2>/dev/null | sed "s|.*/||" | sort) >expect &&
	(cd "root$PREFIX/share/herd/python/herd" && ls | sort) >got &&
	test_cmp expect got &&
	for c in $(src/bin/herd --help | sed -n "s/^  herd \([a-z]*\) .*/\1/p" | sort -u); do
		test -s "root$PREFIX/share/man/man1/herd-$c.1" || { echo "no herd-$c.1"; return 1; }
	done &&
	test -s "root$PREFIX/share/man/man1/herd.1" &&
	test -s "root$PREFIX/share/man/man1/herd-agent.1" &&
	test -s "root$PREFIX/share/man/man5/herd.yaml.5" &&
	test -s "root$PREFIX/share/bash-completion/completions/herd" &&
	mandoc -T lint -W warning "root$PREFIX"/share/man/man*/* >lint 2>&1 &&
	test_must_be_empty lint
'

test_expect_success 'man finds the installed pages, which man --warnings renders silently' '
	MANPATH="$PWD/root$PREFIX/share/man" man -w herd-run >where &&
	echo "$PWD/root$PREFIX/share/man/man1/herd-run.1" >expect &&
	test_cmp expect where &&
	for p in "root$PREFIX"/share/man/man*/*; do
		MANWIDTH=80 man --warnings -l "$p" >/dev/null 2>warn &&
		test_must_be_empty warn || { echo "$p"; return 1; }
	done
'

test_expect_success 'the installed herd works without the source tree' '
	mv src src.away &&
	installed_checks "$PWD/root" $PREFIX;
	rc=$? &&
	mv src.away src &&
	test $rc -eq 0
'

test_expect_success 'the installed pages are what the installed herd says (no drift)' '
	python3 src/scripts/mkman.py --strict --herd "root$PREFIX/bin/herd" \
		--agent "root$PREFIX/bin/herd-agent" --spec-dir src/lib \
		--keys src/doc/keys.md --out again --completion again.bash &&
	for p in again/*.1; do
		test_cmp "$p" "root$PREFIX/share/man/man1/${p#again/}" || return 1
	done &&
	test_cmp again/herd.yaml.5 "root$PREFIX/share/man/man5/herd.yaml.5" &&
	test_cmp again.bash "root$PREFIX/share/bash-completion/completions/herd"
'

test_expect_success 'make uninstall removes every file make install wrote' '
	make -C src uninstall PREFIX=$PREFIX DESTDIR="$PWD/root" >log 2>&1 ||
		{ cat log; false; } &&
	find root ! -type d >left &&
	test_must_be_empty left &&
	! test -e "root$PREFIX/share/herd"
'

test_done
