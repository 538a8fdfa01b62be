#!/bin/sh

test_description='issue 16: PMIx_Publish / Lookup / Unpublish across 4 nodes x 2 ranks, held by herd: values of any type come back intact with their publisher, a lookup with PMIX_WAIT waits for a publisher that comes 1 s later (and times out when none does), a duplicate key is refused, only the owner unpublishes, and an unpublished key is gone; the same through Open MPI'"'"'s MPI_Publish_name / MPI_Lookup_name / MPI_Unpublish_name'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc mpicc pkg-config timeout

test_expect_success 'cluster of 4 nodes, the programs' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/ppub.c" -o ppub $(pkg-config --libs pmix) &&
	mpicc -O2 -Wall -Werror "$PMIX_DATA/mpub.c" -o mpub &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pflood.c" -o pflood $(pkg-config --libs pmix) &&
	cluster_up 4
'

test_expect_success 'PMIx: publish, lookup everywhere, wait, duplicate, unpublish' '
	PMIX_PROG=$PWD/ppub &&
	pmix_job pub <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run pub.yaml >out 2>err &&
	cat out &&
	test "$(grep -c "^\[[1-7]\] rank [1-7] lookup svc-a: SUCCESS port-of-rank-0 from rank 0\$" out)" = 7 &&
	test "$(grep -c "^\[[1-7]\] rank [1-7] lookup svc-bytes: SUCCESS 256 bytes intact\$" out)" = 7 &&
	grep "^\[2\] rank 2 publish svc-a again: DUPLICATE KEY\$" out &&
	grep "^\[5\] rank 5 unpublish svc-b of rank 0: NOT-FOUND\$" out &&
	grep "^\[1\] rank 1 lookup late (wait): SUCCESS published-late-by-7 from rank 7 after [0-9]* ms\$" out &&
	ms=$(sed -n "s/^\[1\] rank 1 lookup late (wait): .* after \([0-9]*\) ms\$/\1/p" out) &&
	echo "lookup with PMIX_WAIT answered $ms ms after it was made (publisher 1 s late)" &&
	test "$ms" -ge 900 &&
	grep "^\[3\] rank 3 lookup never (wait 1 s): TIMEOUT after [0-9]* ms\$" out &&
	grep "^\[0\] rank 0 unpublish svc-a: SUCCESS\$" out &&
	grep "^\[6\] rank 6 lookup svc-a after unpublish: NOT-FOUND\$" out &&
	grep "^\[6\] rank 6 lookup svc-b: SUCCESS 4242\$" out &&
	test "$(grep -c "^\[[0-7]\] rank [0-7] finalize: SUCCESS good\$" out)" = 8
'

test_expect_success 'Open MPI: MPI_Publish_name, MPI_Lookup_name from 7 ranks, MPI_Unpublish_name' '
	PMIX_PROG=$PWD/mpub &&
	pmix_job mpub <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run mpub.yaml >out 2>err &&
	cat out &&
	grep "^\[0\] rank 0 publish: ok\$" out &&
	test "$(grep -c "^\[[1-7]\] rank [1-7] lookup: ok herd-port-of-rank-0\$" out)" = 7 &&
	grep "^\[0\] rank 0 unpublish: ok\$" out &&
	grep "^\[1\] rank 1 lookup after unpublish: not found\$" out
'

# Issue 23: every refused publish printed one line (7,765 in 2 minutes).
test_expect_success 'publishes past the job'"'"'s limit (8 ranks x 24 calls of 64 keys: 64 taken, 128 refused): a few lines, then one with the count' '
	PMIX_PROG=$PWD/pflood &&
	pmix_job flood 24 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run flood.yaml >out 2>err &&
	sed -n "s/^\[[0-7]\] rank [0-7] published \([0-9]*\) refused \([0-9]*\)\$/\1 \2/p" out >counts &&
	test "$(wc -l <counts)" = 8 &&
	test "$(awk "{p += \$1; r += \$2} END {print p, r}" counts)" = "64 128" &&
	grep "PMIx_Publish refused" err >lines &&
	cat lines &&
	test "$(wc -l <lines)" -le 5 &&
	grep -c "^herd: rank [0-7] on [^ ]*: PMIx_Publish refused: the job holds 4096 entries (.* bytes), at most 4096 " lines &&
	grep "^herd: [0-9]* more PMIx_Publish refused (the latest from rank [0-7] on [^ ]*): the job holds at most 4096 entries" lines &&
	test "$(awk "
		/^herd: rank / { n++; if (match(\$0, /and [0-9]+ more/)) n += substr(\$0, RSTART + 4, RLENGTH - 9) }
		/^herd: [0-9]+ more / { n += \$2 }
		END { print n }" lines)" = 128
'

test_done
