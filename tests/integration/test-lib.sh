# test-lib.sh — sourced by every tests/integration/*.t before anything
# else.  Sets up sharness (Debian's /usr/share/sharness) with the test
# directory fixed, puts bin/ first on PATH, and offers helpers.
#
# A missing prerequisite fails the test run; nothing is ever skipped.

HERD_TEST_DIR=$(cd "$(dirname "$0")" && pwd)
HERD_ROOT=$(cd "$HERD_TEST_DIR/../.." && pwd)
SHARNESS_TEST_DIRECTORY=$HERD_TEST_DIR
SHARNESS_BUILD_DIRECTORY=$HERD_ROOT/bin
export HERD_TEST_DIR HERD_ROOT SHARNESS_TEST_DIRECTORY SHARNESS_BUILD_DIRECTORY

if [ ! -r /usr/share/sharness/sharness.sh ]; then
	echo "Bail out! sharness is not installed (run 'make deps')"
	exit 1
fi
. /usr/share/sharness/sharness.sh

# Sanitizer builds: any report fails the process that made it.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# `make integration` collects every report in one directory as well and
# prints them at the end: a test that sends herd's stderr to a file would
# otherwise hide why it failed.
if [ -n "${HERD_SANITIZER_LOG:-}" ]; then
	ASAN_OPTIONS=$ASAN_OPTIONS:log_path=$HERD_SANITIZER_LOG/asan
	UBSAN_OPTIONS=$UBSAN_OPTIONS:log_path=$HERD_SANITIZER_LOG/ubsan
fi
export ASAN_OPTIONS UBSAN_OPTIONS

# require_cmd CMD...: bail out (fail the run, never skip) when a command a
# test needs is missing.
require_cmd() {
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 ||
			error "prerequisite '$c' is missing (run 'make deps')"
	done
}

require_cmd herd herd-agent

# require_root: the local cluster needs network namespaces.
require_root() {
	[ "$(id -u)" -eq 0 ] || error "this test needs root (network namespaces)"
}
