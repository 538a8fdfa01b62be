#!/bin/sh
# t0200-hostlist-scontrol.t — `herd hostlist` against Slurm's own
# `scontrol show hostnames` (expansion) and `scontrol show hostlist`
# (compression) on a corpus: hand-picked edge cases (handpicked.txt) and
# generated expressions (generated.txt, from gen-corpus with a fixed
# seed).  scontrol answers these two without a controller when SLURM_CONF
# names a minimal file, written here into the trash directory.
#
# Hand-picked lines are compared one by one; generated ones ten to a
# line, joined with ',' (expansion of a joined line is the expansions one
# after the other, so nothing is compared less, and compression also
# merges across them), which keeps the 800 sanitized herd runs this took
# down to about 260.

test_description='herd hostlist equals scontrol on a corpus'

. "$(dirname "$0")/test-lib.sh"

require_cmd scontrol perl cmp

DATA=$HERD_TEST_DIR/data/hostlist

test_expect_success 'write a minimal slurm.conf' '
	cat >slurm.conf <<-\CONF &&
	ClusterName=herdtest
	SlurmctldHost=localhost
	NodeName=n1 CPUs=1 State=UNKNOWN
	PartitionName=p Nodes=n1 Default=YES
	CONF
	SLURM_CONF=$PWD/slurm.conf scontrol show hostnames "n[1-2]" >out &&
	printf "n1\nn2\n" >expect &&
	test_cmp expect out
'
SLURM_CONF=$PWD/slurm.conf
export SLURM_CONF

test_expect_success 'the generated corpus is what gen-corpus makes' '
	"$DATA/gen-corpus" 200 300 >generated.txt &&
	test_cmp "$DATA/generated.txt" generated.txt
'

{
	cat "$DATA/handpicked.txt" &&
	paste -d, - - - - - - - - - - <"$DATA/generated.txt"
} >corpus.txt || error "cannot read the corpus in $DATA"
NCORPUS=$(cat "$DATA/handpicked.txt" "$DATA/generated.txt" | wc -l)
NLINES=$(wc -l <corpus.txt)
NINVALID=$(wc -l <"$DATA/invalid.txt")

test_expect_success "the corpus holds at least 200 expressions ($NCORPUS)" '
	test "$NCORPUS" -ge 200
'

# compare MODE SCONTROL_WHAT: runs herd and scontrol on every line of
# corpus.txt and compares all outputs at once (each headed by its
# expression, so that a difference shows the expression).
compare() {
	n=0
	: >"herd.$1" && : >"slurm.$1" &&
	while IFS= read -r expr; do
		n=$((n + 1))
		printf "== %s\n" "$expr" >>"herd.$1"
		printf "== %s\n" "$expr" >>"slurm.$1"
		herd hostlist "--$1" "$expr" >>"herd.$1" 2>&1 ||
			echo "exit $?" >>"herd.$1"
		scontrol show "$2" "$expr" >>"slurm.$1" 2>&1 ||
			echo "exit $?" >>"slurm.$1"
	done <corpus.txt &&
	test "$n" -eq "$NLINES" &&
	test_cmp "slurm.$1" "herd.$1"
}

test_expect_success "expansion equals scontrol show hostnames ($NCORPUS expressions)" '
	compare expand hostnames
'

test_expect_success "compression equals scontrol show hostlist ($NCORPUS expressions)" '
	compare compress hostlist
'

test_expect_success 'several EXPR arguments are joined with a comma' '
	herd hostlist --compress n1 "n[2-3]" n5 >out &&
	scontrol show hostlist "n1,n[2-3],n5" >expect &&
	test_cmp expect out &&
	herd hostlist n1 "n[2-3]" >out &&
	printf "n1\nn2\nn3\n" >expect &&
	test_cmp expect out
'

test_expect_success 'expand is the default' '
	herd hostlist "node[08-10]" >out &&
	printf "node08\nnode09\nnode10\n" >expect &&
	test_cmp expect out
'

test_expect_success "malformed expressions fail with a column and status 2 ($NINVALID)" '
	n=0 &&
	while IFS= read -r expr; do
		n=$((n + 1)) &&
		test_expect_code 2 herd hostlist "$expr" >out 2>err &&
		test_must_be_empty out &&
		grep -q "^herd: hostlist: .*: column [0-9][0-9]*: " err ||
		{ echo "not rejected right: $expr"; cat err; return 1; }
	done <"$DATA/invalid.txt" &&
	test "$n" -eq "$NINVALID"
'

test_expect_success 'errors name the column and what was expected' '
	test_expect_code 2 herd hostlist "node[" 2>err &&
	echo "herd: hostlist: '\''node['\'': column 6: expected a number, found end of input" >expect &&
	test_cmp expect err &&
	test_expect_code 2 herd hostlist "n[5-1]" 2>err &&
	echo "herd: hostlist: '\''n[5-1]'\'': column 3: range 5-1 goes down (expected LOW-HIGH)" >expect &&
	test_cmp expect err &&
	test_expect_code 2 herd hostlist "]x[" 2>err &&
	echo "herd: hostlist: '\'']x['\'': column 1: unexpected '\'']'\'' (expected a host name or '\''['\'')" >expect &&
	test_cmp expect err
'

test_expect_success 'the host caps are enforced before anything is allocated' '
	test_expect_code 2 herd hostlist "n[1-1000][1-1000],m1" 2>err &&
	grep "column 19: more than 1000000 hosts" err &&
	test_expect_code 2 herd hostlist "m1,n[1-65537]" 2>err &&
	grep "column 6: range 1-65537 holds more than 65536 hosts" err &&
	herd hostlist --compress "n[1-1000][1-1000]" >out &&
	scontrol show hostlist "n[1-1000][1-1000]" >expect &&
	test_cmp expect out &&
	herd hostlist "n[1-65536]" >out &&
	scontrol show hostnames "n[1-65536]" >expect &&
	test_cmp expect out
'

test_expect_success 'a number Slurm would saturate is refused' '
	test_expect_code 2 herd hostlist "a,n99999999999999999999" 2>err &&
	grep "column 4: number too large" err &&
	herd hostlist n18446744073709551614 >out &&
	echo n18446744073709551614 >expect &&
	test_cmp expect out
'

test_expect_success 'usage: --help, no EXPR, unknown option' '
	herd hostlist --help >out &&
	grep "^usage: herd hostlist" out &&
	test_expect_code 2 herd hostlist 2>err &&
	grep "^herd: hostlist: expected at least one EXPR" err &&
	test_expect_code 2 herd hostlist --sort n1 2>err &&
	grep "^herd: hostlist: unknown option" err
'

test_done
