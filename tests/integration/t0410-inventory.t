#!/bin/sh

test_description='herd hosts with nodes.inventory: an HTTP JSON inventory (a local server on 127.0.0.1), filters, the bearer token from the environment, redirects, and every failure named'

. "$(dirname "$0")/test-lib.sh"

require_cmd jq
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"

# inv NAME PATH [EXTRA [TIMEOUT]]: NAME.yaml asks the test inventory at
# PATH; EXTRA goes into the inventory: map; nodes.command_timeout is
# TIMEOUT, 30s by default (the 17 MiB answer takes seconds to make on a
# loaded machine).
inv() {
	cat >"$1.yaml" <<-EOT
	nodes:
	  inventory: {url: "http://127.0.0.1:$PORT$2"${3:+, $3}}
	  command_timeout: ${4:-30s}
	launch: {command: "true"}
	EOT
}

test_expect_success 'the inventory server is up' '
	/usr/bin/python3 "$HERD_TEST_DIR/data/inventory/server.py" port requests &
	SERVER=$! &&
	cleanup "kill $SERVER" &&
	i=0 && while [ ! -s port ]; do
		i=$((i + 1)) && test $i -lt 100 && sleep 0.05 || return 1   # bounded wait
	done &&
	PORT=$(cat port)
'

test_expect_success 'an array of names, in order; Accept: application/json' '
	inv list /list &&
	herd hosts list.yaml >out &&
	printf "n1\nn2\nn3\n" >expect &&
	test_cmp expect out &&
	grep -x "GET /list - application/json" requests
'

test_expect_success 'objects: name, hostname or host; slots kept' '
	inv objects /objects &&
	herd hosts objects.yaml --format deepspeed >out &&
	printf "gpu01 slots=8\ngpu02 slots=8\ngpu03 slots=1\ngpu04 slots=4\n" >expect &&
	test_cmp expect out
'

test_expect_success 'filters: a string, a number, a nested key, an array member, two pairs, true' '
	inv f1 /objects "filter: \"state=ready\"" &&
	herd hosts f1.yaml >out && printf "gpu01\ngpu03\ngpu04\n" >expect && test_cmp expect out &&
	inv f2 /objects "filter: \"rack=2\"" &&
	herd hosts f2.yaml >out && printf "gpu03\ngpu04\n" >expect && test_cmp expect out &&
	inv f3 /objects "filter: \"labels.zone = a\"" &&
	herd hosts f3.yaml >out && printf "gpu01\ngpu02\n" >expect && test_cmp expect out &&
	inv f4 /objects "filter: \"tags=ib\"" &&
	herd hosts f4.yaml >out && printf "gpu01\ngpu03\n" >expect && test_cmp expect out &&
	inv f5 /objects "filter: \"state=ready, tags=h100\"" &&
	herd hosts f5.yaml >out && printf "gpu03\ngpu04\n" >expect && test_cmp expect out &&
	inv f6 /objects "filter: \"healthy=true\"" &&
	herd hosts f6.yaml >out && echo gpu04 >expect && test_cmp expect out
'

test_expect_success 'nodes.count and spares work on what the inventory gives' '
	cat >count.yaml <<-EOT &&
	nodes:
	  inventory: {url: "http://127.0.0.1:$PORT/objects", filter: "state=ready"}
	  count: 2
	  spares: extra1
	launch: {command: "true"}
	EOT
	herd hosts count.yaml >out &&
	printf "gpu01\ngpu03\n" >expect && test_cmp expect out &&
	herd hosts count.yaml --spares >out &&
	printf "gpu01\ngpu03\n# spares\ngpu04\nextra1\n" >expect && test_cmp expect out
'

test_expect_success 'a filter nothing matches names the filter and the count' '
	inv none /objects "filter: \"state=gone\"" &&
	test_expect_code 2 herd hosts none.yaml 2>err &&
	grep "nodes.inventory http://127.0.0.1:$PORT/objects: no host of 4 matches the filter .state=gone." err
'

test_expect_success 'the bearer token comes from token_env and is never shown' '
	inv tok /secret "token_env: INV_TOKEN" &&
	INV_TOKEN=s3cret herd hosts tok.yaml >out &&
	printf "gpu01\ngpu02\ngpu03\ngpu04\n" >expect && test_cmp expect out &&
	grep -x "GET /secret Bearer_s3cret application/json" requests &&
	test_expect_code 1 env INV_TOKEN=wrong herd hosts tok.yaml 2>err &&
	grep "HTTP status 401 (is the token in nodes.inventory.token_env right?)" err &&
	! grep -e s3cret -e wrong err &&
	test_expect_code 2 env -u INV_TOKEN herd hosts tok.yaml 2>err &&
	grep "token_env names INV_TOKEN, which is not set" err &&
	inv notok /secret &&
	test_expect_code 1 herd hosts notok.yaml 2>err &&
	grep "HTTP status 401 (does it need a token? set nodes.inventory.token_env)" err
'

test_expect_success 'redirects are followed; the token does not follow to another host' '
	inv redir /redirect &&
	herd hosts redir.yaml >out &&
	printf "gpu01\ngpu02\ngpu03\ngpu04\n" >expect && test_cmp expect out &&
	: >requests &&
	inv away /away "token_env: INV_TOKEN" &&
	test_expect_code 1 env INV_TOKEN=s3cret herd hosts away.yaml 2>err &&
	grep "HTTP status 401" err &&
	grep -x "GET /away Bearer_s3cret application/json" requests &&
	grep -x "GET /secret - application/json" requests
'

test_expect_success 'user, password and query of the URL are never shown' '
	cat >creds.yaml <<-EOT &&
	nodes:
	  inventory: {url: "http://me:pw0rd@127.0.0.1:$PORT/error?key=k3y"}
	launch: {command: "true"}
	EOT
	test_expect_code 1 herd hosts creds.yaml 2>err &&
	grep "nodes.inventory http://127.0.0.1:$PORT/error: HTTP status 500" err &&
	! grep -e pw0rd -e k3y err
'

test_expect_success 'failures are named: refused, timeout, too big, not JSON, bad entries, empty' '
	cat >refused.yaml <<-EOT &&
	nodes: {inventory: {url: "http://127.0.0.1:1/x"}}
	launch: {command: "true"}
	EOT
	test_expect_code 1 herd hosts refused.yaml 2>err &&
	grep "nodes.inventory http://127.0.0.1:1/x: .*\(refused\|connect\)" err &&
	inv slow /slow "" 2s &&
	# /slow answers after 60 s: only the 2 s timeout makes this fail
	# (no clock is read here: a loaded machine starts herd slowly).
	test_expect_code 1 herd hosts slow.yaml 2>err &&
	grep "no answer within 2s (nodes.command_timeout)" err &&
	inv huge /huge &&
	test_expect_code 1 herd hosts huge.yaml 2>err &&
	grep "the answer is larger than 16 MiB" err &&
	inv notjson /notjson &&
	test_expect_code 2 herd hosts notjson.yaml 2>err &&
	grep "/notjson: not JSON: .*(line 1, column" err &&
	inv badname /bad-name &&
	test_expect_code 2 herd hosts badname.yaml 2>err &&
	grep "/bad-name: entry 2: bad host name .bad name." err &&
	inv badslots /bad-slots &&
	test_expect_code 2 herd hosts badslots.yaml 2>err &&
	grep "/bad-slots: entry 1 (n1): expected \"slots\" to be an integer from 1 to" err &&
	inv empty /empty &&
	test_expect_code 2 herd hosts empty.yaml 2>err &&
	grep "/empty: the inventory lists no hosts" err &&
	inv missing /nope &&
	test_expect_code 1 herd hosts missing.yaml 2>err &&
	grep "/nope: HTTP status 404" err
'

test_expect_success 'herd validate checks url, token_env and filter with file:line:col' '
	printf "nodes:\n  inventory: {url: ftp://x/y}\nlaunch: {command: x}\n" >v1.yaml &&
	test_expect_code 2 herd validate v1.yaml 2>err &&
	grep "^v1.yaml:2:[0-9]*: expected an http:// or https:// URL for nodes.inventory.url" err &&
	printf "nodes:\n  inventory: {url: \"http://x/\", token_env: \"Bearer abc\"}\nlaunch: {command: x}\n" >v2.yaml &&
	test_expect_code 2 herd validate v2.yaml 2>err &&
	grep "^v2.yaml:2:[0-9]*: expected the name of an environment variable for nodes.inventory.token_env" err &&
	printf "nodes:\n  inventory: {url: \"http://x/\", filter: \"state\"}\nlaunch: {command: x}\n" >v3.yaml &&
	test_expect_code 2 herd validate v3.yaml 2>err &&
	grep "^v3.yaml:2:[0-9]*: nodes.inventory.filter: expected key=value, found .state." err &&
	printf "nodes:\n  inventory: {url: \"http://x/\", filter: \"=a\"}\nlaunch: {command: x}\n" >v4.yaml &&
	test_expect_code 2 herd validate v4.yaml 2>err &&
	grep "expected a key before .=a." err
'

test_done
