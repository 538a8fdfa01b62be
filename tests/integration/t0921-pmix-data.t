#!/bin/sh

test_description='issue 16: complete job and process data: every rank reads, for every rank of the job (remote ones too), PMIX_LOCAL_RANK, PMIX_NODE_RANK, PMIX_APPNUM, PMIX_NODEID, PMIX_GLOBAL_RANK, PMIX_APP_RANK, PMIX_HOSTNAME, and the job'"'"'s PMIX_JOB_SIZE, PMIX_JOB_NUM_APPS, PMIX_NUM_NODES, PMIX_LOCAL_SIZE, PMIX_NODE_SIZE, PMIX_SPAWNED, PMIX_WDIR, PMIX_TMPDIR, PMIX_NSDIR, as herd placed them (4 nodes x 2), and every value srun --mpi=pmix gives on the same nodes is the same; MPI_Abort(-1) exits 255 and MPI_Abort(3) 3, as under srun and mpirun (herd exited 1 for -1 before)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc mpicc pkg-config timeout srun sinfo slurmctld slurmd munged

test_expect_success 'cluster of 4 nodes with Slurm, the programs' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pdata.c" -o pdata $(pkg-config --libs pmix) &&
	mpicc -O2 -Wall -Werror "$PMIX_DATA/mabort.c" -o mabort &&
	cluster_up 4 &&
	slurm_up
'

# expect FILE: the lines herd must print (4 nodes x 2, rank r on node
# r/2 as local rank r%2; each rank's host as it says itself; PMIx 4.2's
# client answers PMIX_NODEID only for its own node's ranks: "-" for the
# others, see doc/mpi.md).
expect() {
	awk '
	$3 == "me" { sub("host=", "", $4); host[$2] = $4 }
	END {
		for (r = 0; r < 8; r++) {
			printf "rank %d job size=8 napps=1 nnodes=4 lsize=2 nsize=2 spawned=false wdir=cwd tmpdir=abs nsdir=abs\n", r
			printf "rank %d me host=%s\n", r, host[r]
			for (q = 0; q < 8; q++)
				printf "rank %d of %d lr=%d nr=%d app=0 nid=%s gr=%d ar=%d host=%s hnid=-\n", r, q, q % 2, q % 2, int(q / 2) == int(r / 2) ? int(q / 2) : "-", q, q, host[q]
		}
	}' "$1" | sort
}

test_expect_success 'herd: every rank reads every rank'"'"'s data, as herd placed it' '
	PMIX_PROG=$PWD/pdata &&
	pmix_job data <<-EOF &&
	nodes: {hosts: "$HERD_SLURM_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run data.yaml >out.herd 2>err.herd ||
		{ cat err.herd >&2; false; } &&
	sed -n "s/^\[[0-9]*\] \(rank .*\)/\1/p" out.herd | sort >got.herd &&
	expect got.herd >want.herd &&
	test_cmp want.herd got.herd
'

test_expect_success 'srun --mpi=pmix on the same nodes: herd gives every value srun gives, the same' '
	pmix_srun 120 out.srun err.srun -N4 --ntasks-per-node=2 ./pdata ||
		{ cat err.srun >&2; false; } &&
	sort out.srun >got.srun &&
	test $(wc -l <got.srun) = $(wc -l <got.herd) &&
	paste -d "\n" got.srun got.herd | awk '"'"'
	NR % 2 { n = split($0, s, " "); next }
	{
		split($0, h, " ")
		for (i = 1; i <= n; i++)
			if (s[i] !~ /=-$/ && s[i] != h[i]) {
				print "srun: " s[i] ", herd: " h[i]; bad = 1
			}
	}
	END { exit bad }'"'"' &&
	grep -c "lr=-" got.srun >srun.missing &&
	test "$(cat srun.missing)" = 48
'

for code in -1 3; do
	test_expect_success "MPI_Abort($code): srun and herd exit the same (and mpirun: $code & 255)" '
		PMIX_PROG=$PWD/mabort &&
		pmix_job abort$code $code <<-EOF &&
		nodes: {hosts: "$HERD_SLURM_HOSTLIST", slots: 2}
		restart: {max: 0}
		EOF
		{ timeout 120 herd run abort$code.yaml >out.ha 2>err.ha; h=$?; } &&
		{ timeout 30 srun --mpi=pmix -N4 --ntasks-per-node=2 ./mabort $code >out.sa 2>err.sa; s=$?; } &&
		echo "herd $h srun $s" &&
		test $h = $(( code & 255 )) &&
		# srun itself now and then never ends after an MPI_Abort (1 run
		# in 6 here): said, not compared.
		if test $s = 124; then
			echo "# srun did not end within 30 s: not compared" >&2
		else
			test $s = $h
		fi
	'
done

test_done
