#!/bin/sh

test_description='issue 16: PMIx_Query_info and PMIx_Log from each of 8 ranks (4 nodes x 2): the namespaces, their info, the job size, the process table (every rank, on its host) and the local one (the node'"'"'s ranks), no psets, no spawn or debug support; an unknown key is NOT-SUPPORTED, and with a known one QUERY-PARTIAL-SUCCESS (libpmix 4.2 then hands the client no values); every PMIx_Log reaches herd'"'"'s event log as a pmix_log event with rank, host and message'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout jq

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/pquery.c" -o pquery $(pkg-config --libs pmix) &&
	cluster_up 4 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	N3=$(cluster_node 3) && N4=$(cluster_node 4)
'

test_expect_success 'herd run: every rank queries and logs' '
	PMIX_PROG=$PWD/pquery &&
	pmix_job q <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 120 herd run q.yaml >out 2>err ||
		{ cat err >&2; false; } &&
	sed -n "s/^\[\([0-7]\)\] \(rank \1 .*\)/\2/p" out >got &&
	! grep HANG out &&
	ns=$(jq -r "select(.event == \"attempt_start\") | .attempt" runs/q/latest/events.jsonl) &&
	cat got
'

# each R LINE: LINE (with R for the rank) holds for every rank
each() {
	for r in 0 1 2 3 4 5 6 7; do
		line=$(printf "%s" "$1" | sed "s/@R@/$r/g")
		grep -qxF "rank $r $line" got ||
			{ echo "rank $r: no \"$line\"" >&2; return 1; }
	done
}

test_expect_success 'namespaces: the job'"'"'s one, its info and size' '
	nspace=$(sed -n "s/^rank 0 pmix.qry.ns: SUCCESS \"\(.*\)\"\$/\1/p" got) &&
	case "$nspace" in herd.q.1) ;; *) echo "nspace $nspace"; false ;; esac &&
	each "pmix.qry.ns: SUCCESS \"herd.q.1\"" &&
	each "pmix.qry.nsinfo: SUCCESS array of 1" &&
	each "pmix.job.size: SUCCESS 8"
'

test_expect_success 'process table: every rank on its host; local table: the node'"'"'s two' '
	all="8 procs: 0@$N1,1@$N1,2@$N2,3@$N2,4@$N3,5@$N3,6@$N4,7@$N4" &&
	each "pmix.qry.ptable: SUCCESS $all" &&
	for r in 0 1 2 3 4 5 6 7; do
		lo=$((r / 2 * 2)) && hi=$((lo + 1)) &&
		eval h=\$N$((r / 2 + 1)) &&
		grep -qxF "rank $r pmix.qry.lptable: SUCCESS 2 procs: $lo@$h,$hi@$h" got ||
			{ echo "rank $r: local table" >&2; return 1; }
	done
'

test_expect_success 'no psets, no spawn or debug support; unknown keys refused, partly with a known one' '
	each "pmix.qry.psetnum: SUCCESS 0" &&
	each "pmix.qry.spawn: SUCCESS \"\"" &&
	each "pmix.qry.debug: SUCCESS \"\"" &&
	each "herd.no.such.key: NOT-SUPPORTED" &&
	each "pmix.qry.ns+herd.no.such.key: QUERY-PARTIAL-SUCCESS"
'

test_expect_success 'PMIx_Log: SUCCESS, and a pmix_log event per rank, with its host and message' '
	each "log: SUCCESS" &&
	jq -c "select(.event == \"pmix_log\") | [.rank, .host, .key, .message, .attempt]" \
		runs/q/latest/events.jsonl | sort >events &&
	for r in 0 1 2 3 4 5 6 7; do
		eval h=\$N$((r / 2 + 1)) &&
		echo "[$r,\"$h\",\"herd.test.log\",\"hello from rank $r\",1]" || return 1
	done | sort >want &&
	test_cmp want events
'

test_done
