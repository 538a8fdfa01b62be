#!/bin/sh

test_description='issue 16, direct modex: on 4 nodes x 2 every rank puts and commits a key and, with no fence, gets every other rank'"'"'s key (PMIx_Get with PMIX_TIMEOUT): the six remote values travel agent -> herd -> agent (DMODEX, DMODEX_DATA); a rank outside the job fails at once; a Get whose owner commits late times out after its PMIX_TIMEOUT and succeeds when asked again; before, every remote Get failed with NOT-SUPPORTED'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/dmodex.c" -o dmodex $(pkg-config --libs pmix) &&
	PMIX_PROG=$PWD/dmodex &&
	cluster_up 4
'

test_expect_success 'no fence: every rank gets the 7 other values by direct modex; herd exits 0' '
	pmix_job dm <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run dm.yaml >out 2>err &&
	test "$(grep -c "^\[\([0-7]\)\] rank \1 dmodex: got 7 of 7\$" out)" = 8 &&
	test "$(grep -c "^\[\([0-7]\)\] rank \1 done\$" out)" = 8
'

test_expect_success 'a Get of a rank outside the job fails at once (under 2 s), not a hang' '
	test "$(grep -c "^\[[0-7]\] rank [0-7] outside: " out)" = 8 &&
	! grep "outside: SUCCESS" out &&
	sed -n "s/^\[[0-7]\] rank [0-7] outside: .* \([0-9]*\)\$/\1/p" out >ms &&
	test $(wc -l <ms) = 8 &&
	test "$(sort -n ms | tail -1)" -lt 2000
'

test_expect_success 'many at once: 4 nodes x 6 ranks, each gets the 23 others (432 remote Gets, 24 ranks asking at once)' '
	pmix_job many <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 6}
	restart: {max: 0}
	EOF
	timeout 120 herd run many.yaml >out.many 2>err.many &&
	test "$(grep -c "^\[\([0-9]*\)\] rank \1 dmodex: got 23 of 23\$" out.many)" = 24 &&
	test "$(grep -c "^\[\([0-9]*\)\] rank \1 done\$" out.many)" = 24
'

test_expect_success 'late commit: PMIX_TIMEOUT 2 ends in a timeout after about 2 s, the next Get gets the value' '
	pmix_job late late <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run late.yaml >out.late 2>err.late &&
	grep "rank 2 late: " out.late >late &&
	test $(wc -l <late) = 2 &&
	head -1 late | grep -q "late: TIMEOUT [0-9]*\$" &&
	ms=$(head -1 late | sed "s/.* //") &&
	test $ms -ge 1500 && test $ms -lt 5000 &&
	tail -1 late | grep -q "late: SUCCESS [0-9]*\$" &&
	test "$(grep -c "^\[\([0-7]\)\] rank \1 done\$" out.late)" = 8
'

test_done
