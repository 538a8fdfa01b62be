#!/bin/sh

test_description='issue 16: every server upcall answers: each of 8 ranks (4 nodes x 2) calls every PMIx client API once (Init, Put/Commit, Get own/remote/job, Fence, a fence over a subset, Publish/Lookup/Unpublish, Spawn, Connect/Disconnect, event handlers and Notify_event, Query_info, Log, Allocation_request, Job_control, Process_monitor, credentials, IOF pull/push, groups, fabric, Finalize): each answers within its bound with a PMIx status (served or refused), every rank finalizes, herd exits 0, no node is lost, no agent or rank is left; a PMIx tool that connects to an agent'"'"'s server is refused, and is not taken for the rank that never connected'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require
require_cmd cc pkg-config timeout

# none_left: no agent (by its real name, issue 23) and no test program
# process within 10 s.
none_left() { pmix_gone 10 "$AGENT" apicall ptool tool.sh true; }

# The calls every rank makes (IOF_deregister and Fabric_deregister only
# after a successful IOF_pull / Fabric_register).
CALLS="Init Get-job-size Put Commit Fence Get-own Get-remote Fence-subset
Publish Lookup Lookup-missing Unpublish Spawn Connect Disconnect
Register_event_handler Notify_event Deregister_event_handler Query_info Log
Allocation_request Job_control Process_monitor Get_credential
Validate_credential IOF_pull IOF_push Group_construct Group_destruct
Fabric_register Finalize"

test_expect_success 'cluster of 4 nodes, the programs' '
	own_binaries &&
	AGENT=$(pmix_agent_comm) &&
	case $AGENT in agent-?*) ;; *) false ;; esac &&
	for p in apicall ptool; do
		cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
			"$PMIX_DATA/$p.c" -o $p $(pkg-config --libs pmix) || return 1
	done &&
	cluster_up 4
'

test_expect_success 'every rank calls every PMIx API: each answers (a PMIx status, no hang), every rank finalizes, herd exits 0' '
	PMIX_PROG=$PWD/apicall &&
	pmix_job api <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	start=$(now_ms) &&
	timeout 500 herd run api.yaml >out 2>err ||
		{ cat err >&2; false; } &&
	echo "herd run: $(( $(now_ms) - start )) ms" &&
	sed -n "s/^\[\([0-7]\)\] \(rank \1 [A-Za-z_-]*: .*\)/\2/p" out >calls &&
	! grep ": HANG$" calls &&
	for r in 0 1 2 3 4 5 6 7; do
		for c in $CALLS; do
			test "$(grep -c "^rank $r $c: [A-Z][A-Z-]*\$" calls)" = 1 ||
				{ echo "rank $r: $c not answered once" >&2; return 1; }
		done
	done &&
	test "$(grep -c "^rank [0-7] Finalize: SUCCESS\$" calls)" = 8 &&
	# PMIX_WAIT false: a key nobody published is not found at once, not
	# after the lookup'"'"'s 20 s PMIX_TIMEOUT (each call'"'"'s ms on stderr)
	test "$(grep -c "^rank [0-7] Lookup-missing: NOT-FOUND\$" calls)" = 8 &&
	sed -n "s/.*rank [0-7] Lookup-missing: \([0-9]*\) ms\$/\1/p" err >lookup.ms &&
	test "$(wc -l <lookup.ms)" = 8 &&
	test "$(sort -n lookup.ms | tail -n 1)" -lt 5000 &&
	for c in $CALLS; do
		printf "%s:" $c
		sed -n "s/^rank [0-7] $c: //p" calls | sort | uniq -c | tr -s " \n" " "
		echo
	done
'

test_expect_success 'no node was lost, no rank died of a signal' '
	ev=runs/api/latest/events.jsonl &&
	test -s $ev &&
	! grep -E "\"event\": *\"node_(failed|evicted|unhealthy)\"" $ev &&
	test "$(jq -c "select(.event == \"rank_exit\") | .status" $ev | sort -u)" = 0
'

test_expect_success 'no agent, rank or spawned process is left' '
	none_left
'

for how in anonymous as-rank; do
	test_expect_success "a PMIx tool ($how) at an agent's server URI is not taken for the rank that ran it (never a PMIx client: it still fails as one that never connected); no agent is lost" '
		cat >tool.sh <<-EOF &&
		#!/bin/sh
		# A rank that is no PMIx client runs a tool against its server.
		uri=\$PMIX_SERVER_URI41
		test -n "\$uri" || { echo "no PMIX_SERVER_URI41"; exit 2; }
		ns=
		test $how = as-rank && ns=\$PMIX_NAMESPACE
		env -i PATH="\$PATH" HERD_TOOL_URI="\$uri" \${ns:+HERD_TOOL_NSPACE="\$ns"} "$PWD/ptool"
		EOF
		chmod +x tool.sh &&
		PMIX_PROG=$PWD/tool.sh &&
		pmix_job tool-$how <<-EOF &&
		nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
		restart: {max: 0}
		EOF
		test_expect_code 1 timeout 120 herd run tool-$how.yaml >out.tool 2>err.tool &&
		cat out.tool &&
		grep "^\[[0-7]\] tool: [A-Z][A-Z-]*\$" out.tool &&
		! grep "tool: HANG" out.tool &&
		if test $how = anonymous; then ! grep "tool: SUCCESS" out.tool; fi &&
		grep "without ever connecting" err.tool &&
		ev=runs/tool-$how/latest/events.jsonl &&
		! grep -E "\"event\": *\"node_(failed|evicted|unhealthy)\"" $ev &&
		none_left
	'
done

test_expect_success 'after the tool, the same agents serve a job' '
	PMIX_PROG=$PWD/apicall &&
	pmix_job api2 <<-EOF &&
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	restart: {max: 0}
	EOF
	timeout 500 herd run api2.yaml >out2 2>err2 &&
	test "$(grep -c "^\[[0-7]\] rank [0-7] Finalize: SUCCESS\$" out2)" = 8 &&
	none_left
'

test_done
