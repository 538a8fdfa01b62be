#!/bin/sh

test_description='an agent that says HELLO and is gone before herd answers: the failed send is handled once, from the loop, never inside the send (issue 11 item 7)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq

# herd's answer to HELLO (HEARTBEAT, then LAUNCH) finds the socket closed
# (EPIPE) in most runs: the agent here reads end-of-input at once, so it
# says HELLO and exits.  Before the fix the send ran the close handler
# inside itself: the node was failed and evicted in the middle of
# on_hello, which then went on marking it up, and herd reported
# "localhost answers again; readmitted as a spare" for a dead node.
test_expect_success 'an agent that exits right after HELLO' '
	own_binaries &&
	mv bin/herd-agent bin/herd-agent.real &&
	printf "#!/bin/sh\nexec \"\$(dirname \"\$0\")/herd-agent.real\" --stdio </dev/null\n" \
		>bin/herd-agent &&
	chmod 0700 bin/herd-agent &&
	{
		echo "name: gone"
		echo "nodes: {hosts: localhost, slots: 1}"
		echo "health: {grace: 1s}"
		echo "restart: {max: 1}"
		echo "launch: {command: echo hi, workdir: \"$PWD\"}"
	} >gone.yaml
'

# Each run: herd exits 1, the node failed exactly once and was never
# readmitted, and nothing ran.  Eight runs: the send failure (rather than
# the read of end-of-input) is hit in most of them.
test_expect_success 'the dead node fails once and is never taken back' '
	i=0 &&
	while [ $i -lt 8 ]; do
		test_expect_code 1 herd run gone.yaml >out.$i 2>err.$i &&
		ev=runs/gone/latest/events.jsonl &&
		! grep "answers again" err.$i &&
		! grep -q "\"event\":\"node_readmitted\"" $ev &&
		test "$(jq -s "[.[] | select(.event == \"node_failed\")] | length" $ev)" = 1 &&
		! grep -q "\"event\":\"rank_exit\"" $ev &&
		! grep "^hi" out.$i &&
		i=$((i + 1)) || { cat err.$i; return 1; }
	done &&
	echo "runs whose send found the agent gone: $(grep -l "write: Broken pipe" err.* | wc -l) of 8"
'

test_done
