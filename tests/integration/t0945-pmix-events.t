#!/bin/sh

test_description='issue 16: PMIx_Notify_event between ranks on 4 nodes x 2: rank 2 notifies a custom code with a payload; in range namespace, session and global every other rank (7 of 7) gets it, local only its node-mate, custom only the ranks it names (0 and 5); before, 1 of 7 (the agents refused to forward), and with the agent forwarding but answering later, libpmix 4.2 wedged'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pev.c" -o pev $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/pev &&
	cluster_up 4
'

# got RANGE: the ranks whose handler got rank 2's event, sorted, one line.
got() {
	sed -n "s/^\[\([0-9]*\)\] rank [0-9]* event: got hello from rank 2 from rank 2\$/\1/p" out.$1 |
		sort -n | tr "\n" " "
}

for range in namespace session global local custom; do
	case $range in
	local) want="3 " ;;
	custom) want="0 5 " ;;
	*) want="0 1 3 4 5 6 7 " ;;
	esac
	test_expect_success "range $range: the handlers of ranks $want got it, with its payload, and no other" '
		pmix_job ev-$range notify $range <<-EOF &&
		nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
		restart: {max: 0}
		EOF
		timeout 120 herd run ev-$range.yaml >out.$range 2>err.$range &&
		grep "^\[2\] rank 2 notify $range: SUCCESS\$" out.$range &&
		echo "range $range: got by $(got $range)" &&
		test "$(got $range)" = "$want" &&
		test "$(grep -c " event: " out.$range)" = 7
	'
done

test_done
