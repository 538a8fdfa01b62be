#!/bin/sh

test_description='the README commands work on their first run: make demo and make check build after make deps, on a machine where pkg-config finds nothing until the packages are installed'

. "$(dirname "$0")/test-lib.sh"

require_cmd make cc pkg-config tar

# A copy of the tree, so the real build is not touched; the build is -O0
# to keep this quick.
test_expect_success 'a copy of the sources, without build outputs' '
	mkdir src &&
	(cd "$HERD_ROOT" && tar cf - Makefile include lib launcher agent keeper scripts examples templates) |
		(cd src && tar xf -) &&
	rm -f src/lib/libherd.a src/lib/*.o
'

# pkg-config that knows no package until "make deps" has run: the state of
# a fresh Debian 12 machine, where the -dev packages bring the .pc files.
# (In a directory without spaces: make runs these through the shell.)
FAKE=$(mktemp -d /tmp/herd-t0010.XXXXXX) || error "mktemp failed"
trap 'rm -rf "$FAKE"; die' EXIT
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

test_expect_success 'the first make demo builds herd and herd-agent after installing' '
	make -C src -j2 CFLAGS=-O0 PKG_CONFIG="$FAKE/pkg-config" \
		DEPS="$FAKE/deps" DEMO_RUN=true demo >out 2>err ||
		{ tail -20 err; false; } &&
	grep "fake deps: installing" out &&
	src/bin/herd --version &&
	src/bin/herd-agent --version &&
	! grep "undefined reference" err
'

test_done
