#!/bin/sh

test_description='the README commands work on their first run: make demo builds after make deps and trains across the local cluster, on a copy of the tree with no build outputs, on a machine where pkg-config finds nothing until the packages are installed'

. "$(dirname "$0")/test-lib.sh"

require_cmd make cc pkg-config tar
require_root

# A copy of the tree as a clone has it (every file git tracks or would
# track, nothing it ignores: no build outputs), so the real build is not
# touched; the build is -O0 to keep this quick.
require_cmd git
test_expect_success 'a copy of the sources, without build outputs' '
	(cd "$HERD_ROOT" && git ls-files --cached --others --exclude-standard) >listed &&
	while read -r f; do
		if [ -e "$HERD_ROOT/$f" ]; then echo "$f"; fi
	done <listed >files &&
	mkdir src &&
	tar cf - -C "$HERD_ROOT" -T files | tar xf - -C src &&
	test -x src/examples/demo.sh &&
	test ! -e src/bin && test ! -e src/build && test ! -e src/lib/libherd.a
'

# pkg-config that knows no package until "make deps" has run: the state of
# a fresh Debian 12 machine, where the -dev packages bring the .pc files.
# (In a directory without spaces: make runs these through the shell.)
FAKE=$(mktemp -d /tmp/herd-t0010.XXXXXX) || error "mktemp failed"
trap '_rc=$?; rm -rf "$FAKE"; (exit $_rc); die' EXIT
test_expect_success 'a pkg-config that finds nothing before deps has run' '
	cat >"$FAKE/pkg-config" <<-EOF &&
	#!/bin/sh
	[ -e "$FAKE/installed" ] || { echo "Package jansson was not found" >&2; exit 1; }
	exec pkg-config "\$@"
	EOF
	cat >"$FAKE/deps" <<-EOF &&
	#!/bin/sh
	echo "fake deps: installing" && touch "$FAKE/installed"
	EOF
	chmod +x "$FAKE/pkg-config" "$FAKE/deps"
'

test_expect_success 'make all before deps names the fix instead of failing to link' '
	test_must_fail make -C src PKG_CONFIG="$FAKE/pkg-config" all >out 2>err &&
	grep "run .make deps." err &&
	! grep "undefined reference" err
'

# The real demo (examples/demo.sh, the README's first command): it builds,
# brings up the 4-node cluster and trains across it.  Before issue 22 it
# failed here: every rank raised ModuleNotFoundError for herd_metrics.
test_expect_success 'the first make demo builds, then trains across 4 nodes' '
	# Bounded: a rank that never exits must fail the run, not hang it.
	timeout 600 make -C src -j2 CFLAGS=-O0 PKG_CONFIG="$FAKE/pkg-config" \
		DEPS="$FAKE/deps" demo >out 2>err ||
		{ tail -40 out; tail -40 err; false; } &&
	grep "fake deps: installing" out &&
	src/bin/herd --version &&
	src/bin/herd-agent --version &&
	! grep "undefined reference" err &&
	! grep ModuleNotFoundError out err &&
	grep "\"event\":\"job_end\",\"status\":0,\"attempts\":1" out &&
	test $(grep -c "rank [0-3]/4 on .*: done" out) -eq 4 &&
	grep "== demo done" out
'

test_done
