#!/bin/sh

test_description='the PMIx server of an agent keeps its rendezvous files only in the agent'"'"'s private run directory: when the agent cannot make one (TMPDIR missing), the pmix launch fails with a clear error instead of falling back to /tmp/pmix, a path another local user could have made first'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

[ -x "$HERD_ROOT/build/examples/allreduce" ] ||
	error "prerequisite build/examples/allreduce is missing (run 'make examples')"
require_cmd timeout

test_expect_success 'two local nodes in pmix mode run the program' '
	own_binaries &&
	pmix_prog &&
	cat >j.yaml <<-EOF &&
	name: tmpdir
	nodes: {hosts: "a[1-2]", slots: 1, transport: local}
	restart: {max: 0}
	# Both ranks run in this namespace, where other tests add and
	# remove their cluster bridges: Open MPI keeps to loopback.
	launch: {mode: pmix, command: "\"$PMIX_PROG\"", workdir: "$PWD",
	         env: {OMPI_MCA_btl_tcp_if_include: lo}}
	EOF
	timeout 120 herd run j.yaml >out 2>err ||
	{ cat out err; false; } &&
	test "$(grep -c "allreduce 3 (ok)" out)" = 2 ||
	{ cat out err; false; }
'

test_expect_success 'no private run directory: the launch fails and says why; nothing under /tmp/pmix is used' '
	before=$(stat -c %Y /tmp/pmix 2>/dev/null || echo none) &&
	test_expect_code 1 env TMPDIR="$PWD/no-such-dir" timeout 60 herd run j.yaml >out 2>err &&
	grep "launch.mode pmix: the agent has no private run directory" err &&
	! grep "allreduce" out &&
	test "$(stat -c %Y /tmp/pmix 2>/dev/null || echo none)" = "$before"
'

test_done
