#!/bin/sh

test_description='the wire contract at both dispatchers: a frame that does not match its row of the proto table (include/herd/proto.h) fails the node on herd'"'"'s side; an agent answers ERROR, stops its ranks and exits'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd jq

# frame TYPE JSON: one proto.h frame on stdout (ASCII JSON, no data).
# Written to a file: the fake agent below uses it too.
cat >frames.sh <<'END'
be32() {
	printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) \
		$(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"
}
frame() {
	be32 $((8 + ${#2}))
	printf "$(printf '\\%03o\\%03o\\000\\000' 1 "$1")"
	be32 ${#2}
	printf '%s' "$2"
}
END
. ./frames.sh

# A fake agent (the local transport runs bin/herd-agent): the HELLO in
# ./hello, then the frame in ./bad ("TYPE JSON"), then it waits for herd
# to hang up.
test_expect_success 'a fake agent' '
	own_binaries &&
	version=$(bin/herd-agent --version | cut -d" " -f2) &&
	hello="{\"version\":\"$version\",\"hostname\":\"fake\",\"addrs\":[],\"cores\":1,\"pid\":$$,\"topo_error\":\"fake\"" &&
	{
		echo "#!/bin/sh"
		echo ". \"$PWD/frames.sh\""
		echo "frame 1 \"\$(cat \"$PWD/hello\")\""
		echo "read -r type json <\"$PWD/bad\""
		echo "frame \"\$type\" \"\$json\""
		echo "exec cat >/dev/null"
	} >bin/herd-agent &&
	chmod 0700 bin/herd-agent &&
	{
		echo "name: proto"
		echo "nodes: {hosts: localhost, slots: 1}"
		echo "health: {grace: 1s}"
		echo "launch: {command: sleep 30, workdir: \"$PWD\"}"
	} >proto.yaml
'

test_expect_success 'herd: a HELLO with a key nobody defined fails the node' '
	printf "%s,\"zzz\":1}" "$hello" >hello &&
	echo "9 {\"attempt\":1}" >bad &&
	test_expect_code 1 herd run proto.yaml >out 2>err &&
	cat err &&
	grep "localhost: protocol error: HELLO frame from agent: unknown key zzz" err &&
	ev_all runs/proto/latest/events.jsonl node_failed \
		".reason | contains(\"protocol error: HELLO frame from agent: unknown key zzz\")"
'

test_expect_success 'herd: OUTPUT for fd 3 fails the node' '
	printf "%s}" "$hello" >hello &&
	echo "3 {\"rank\":0,\"fd\":3,\"attempt\":1}" >bad &&
	test_expect_code 1 herd run proto.yaml >out 2>err &&
	cat err &&
	grep "protocol error: OUTPUT frame from agent: key \"fd\": 3 is out of range 1..2" err
'

test_expect_success 'herd: a LAUNCH from an agent fails the node' '
	echo "2 {\"attempt\":1}" >bad &&
	test_expect_code 1 herd run proto.yaml >out 2>err &&
	cat err &&
	grep "protocol error: LAUNCH frame from agent: only herd sends LAUNCH" err
'

# The real agent, fed by hand: a heartbeat, a LAUNCH of one rank that
# writes its pid, then a SIGNAL whose number is out of range.  Its input
# stays open (the feeder then holds the fifo open for 60 s, far longer
# than the bounded wait for the agent's exit), so only the protocol error
# can end it.
test_expect_success 'agent: a SIGNAL out of range: ERROR, ranks stopped, exit' '
	rm -f rank.pid agent.out && mkfifo in &&
	cmd="echo \$\$ >rank.pid; exec sleep 300" &&
	{ "$HERD_ROOT/bin/herd-agent" --stdio <in >agent.out 2>agent.err & } &&
	agent=$! &&
	{
		{
			frame 7 "{\"interval_ms\":1000,\"timeout_ms\":30000}" &&
			frame 2 "{\"attempt\":1,\"command\":\"$cmd\",\"workdir\":\"$PWD\",\"grace_ms\":1000,\"env\":{},\"ranks\":[{\"rank\":0,\"env\":{}}]}" &&
			wait_file rank.pid 10 &&
			frame 5 "{\"signal\":0}" &&
			exec sleep 60
		} >in &
	} &&
	feeder=$! &&
	wait_file rank.pid 10 &&
	rank=$(cat rank.pid) &&
	wait_exit $agent 10 &&
	kill $feeder &&
	cat agent.err &&
	test $WAIT_RC = 0 &&
	grep -aq "protocol error: SIGNAL frame from herd: key .*signal.*: 0 is out of range 1\.\.64" agent.out &&
	grep "connection to herd lost: protocol error: SIGNAL frame from herd" agent.err &&
	! kill -0 $rank 2>/dev/null
'

test_done
