#!/bin/sh

test_description='herd render ds_zero3 --tune: bucket sizes from a herd bench run on the local test cluster (real sshd), smaller when every node'"'"'s link is rate-limited with tc tbf, as the documented rule predicts from the printed numbers; from a platform file without a network run; --set wins; errors'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen awk jq tc
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# job NAME HOSTS [EXTRA]: 8 slots a node, so P = nodes x 8.
job() {
	cat >"$1.yaml" <<-EOT
	name: $1
	nodes: {hosts: "$2", slots: 8}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	launch: {command: "exit 3"}
	$3
	EOT
}

# rule_ok ERR JSON: the rendered sizes are the rule (doc/projects.md, "Tuning
# DeepSpeed to the network") applied to the inputs herd printed:
# bucket = 10 x ranks x latency x bandwidth / elem_bytes, clamped to
# [1e5, 5e8]; prefetch 2 buckets (same clamp); persistence bucket / 10,
# clamped to [1e4, 1e6].  Prints the bucket.
rule_ok() {
	sed -n "s/^herd: tune: inputs //p" "$1" >inputs &&
	test $(wc -l <inputs) = 1 &&
	jq -r ".zero_optimization | [.reduce_bucket_size, .allgather_bucket_size, .stage3_prefetch_bucket_size, .stage3_param_persistence_threshold] | @tsv" "$2" >got &&
	tr " =" "\n\n" <inputs | awk "NR % 2 == 0" | paste - - - - >nums &&
	paste nums got | awk "
		function clamp(v, lo, hi) { return v < lo ? lo : v > hi ? hi : v }
		function near(a, b) { return a >= b * 0.999 - 1 && a <= b * 1.001 + 1 }
		{
			b = clamp(10 * \$3 * \$1 * 1e-6 * \$2 / \$4, 1e5, 5e8)
			pf = clamp(2 * b, 1e5, 5e8)
			pt = clamp(b / 10, 1e4, 1e6)
			if (!near(\$5, b) || \$6 != \$5 || !near(\$7, pf) || !near(\$8, pt)) {
				print \"rule says \" b \" \" pf \" \" pt \", got \" \$5 \" \" \$7 \" \" \$8
				exit 1
			}
			print \$5
		}"
}

test_expect_success 'cluster of 3 nodes' '
	own_binaries &&
	cp -R "$HERD_ROOT/templates" templates &&
	cluster_up 3 &&
	job three "${HERD_CLUSTER_PREFIX}[1-3]"
'

test_expect_success 'unlimited links: measured, printed, rendered by the rule' '
	herd render ds_zero3 --tune three.yaml >fast.json 2>fast.err &&
	cat fast.err &&
	grep "^herd: tune: measured (herd bench three.yaml) over 3 nodes: 8-byte all-reduce" fast.err &&
	grep "^herd: tune: 24 ranks = 3 nodes x 8 slots" fast.err &&
	jq -e ".zero_optimization.stage == 3" fast.json &&
	rule_ok fast.err fast.json >fast.bucket &&
	test "$(cat fast.bucket)" -gt 100000
'

test_expect_success 'every node limited to 10 Mbit/s with tbf: smaller buckets, as the rule predicts' '
	# 10 Mbit/s, not 50: tbf delays packets on a timer, and on CI that
	# timer added a 4 ms tick to each small all-reduce (1002 us per hop,
	# 17x the unlimited 58 us), so at 50 Mbit/s latency x bandwidth came
	# out the same as unlimited.  At 10 Mbit/s the product stays smaller
	# even with a 10 ms tick.
	for i in 1 2 3; do
		cluster_exec $i tc qdisc add dev eth0 root tbf rate 10mbit burst 64kbit latency 50ms || return 1
	done &&
	test_when_finished "for i in 1 2 3; do cluster_exec \$i tc qdisc del dev eth0 root; done" &&
	herd render ds_zero3 --tune three.yaml >slow.json 2>slow.err &&
	grep "^herd: tune: measured" fast.err &&
	cat slow.err &&
	jq -e . slow.json >/dev/null &&
	rule_ok slow.err slow.json >slow.bucket &&
	bw=$(sed -n "s/.* bandwidth_Bps=\([0-9]*\) .*/\1/p" slow.err) &&
	test "$bw" -lt 2500000 &&
	test "$(cat slow.bucket)" -lt "$(cat fast.bucket)" &&
	test "$(jq .zero_optimization.stage3_prefetch_bucket_size slow.json)" -lt \
	     "$(jq .zero_optimization.stage3_prefetch_bucket_size fast.json)"
'

test_expect_success 'a platform file: the values from its link rate, no network run' '
	cat >plat.json <<-\EOF &&
	{"network": {"nics": [{"name": "mlx5_0", "rate_gbps": 100, "fabric": "ib"},
	                      {"name": "mlx5_1", "rate_gbps": 100, "fabric": "ib"}]}}
	EOF
	rm -rf runs/three/bench &&
	herd render ds_zero3 --tune three.yaml --platform plat.json >p.json 2>p.err &&
	cat p.err &&
	grep "^herd: tune: from platform file plat.json: 2 NICs (ib), 200 Gb/s in all" p.err &&
	rule_ok p.err p.json >p.bucket &&
	# 10 x 24 ranks x 14 us x 25 GB/s / 2 bytes
	test "$(cat p.bucket)" = 42000000 &&
	test ! -e runs/three/bench &&
	# The same file as the job s bind.topology_file.
	job plat "${HERD_CLUSTER_PREFIX}[1-3]" "bind: {topology_file: plat.json}" &&
	herd render ds_zero3 --tune plat.yaml >p2.json 2>p2.err &&
	grep "^herd: tune: from platform file $PWD/plat.json" p2.err &&
	test_cmp p.json p2.json &&
	test ! -e runs/plat/bench
'

test_expect_success '--set wins over the tuned value; fp32 halves the elements' '
	herd render ds_zero3 --tune three.yaml --platform plat.json \
		--set reduce_bucket_size=12345 >s.json 2>s.err &&
	grep "^herd: tune: --set reduce_bucket_size=12345 wins" s.err &&
	jq -e ".zero_optimization.reduce_bucket_size == 12345 and .zero_optimization.allgather_bucket_size == 42000000" s.json &&
	herd render ds_zero3 --tune three.yaml --platform plat.json \
		--set bf16=false >f.json 2>f.err &&
	jq -e ".zero_optimization.reduce_bucket_size == 21000000" f.json
'

test_expect_success 'errors: no job, a bad or untrusted platform file, one node' '
	test_expect_code 2 herd render ds_zero3 --tune 2>err &&
	grep "^herd: --tune needs a job file (JOB.yaml)" err &&
	test_expect_code 2 herd render ds_zero3 --platform plat.json 2>err &&
	grep "^herd: render: --platform goes with --tune JOB.yaml" err &&
	printf "{\"network\": {\n  \"nics\": [,]}}\n" >bad.json &&
	test_expect_code 2 herd render ds_zero3 --tune three.yaml --platform bad.json 2>err &&
	grep "^herd: render: --tune: bad.json:2:[0-9]*: " err &&
	printf "{\"network\": {\"nics\": [{\"name\": \"a\", \"rate_gbps\": -1, \"fabric\": \"ib\"}]}}\n" >neg.json &&
	test_expect_code 2 herd render ds_zero3 --tune three.yaml --platform neg.json 2>err &&
	grep "neg.json: network.nics\[0\].rate_gbps: expected the link rate in Gb/s" err &&
	echo "{\"gpus\": []}" >nonet.json &&
	test_expect_code 2 herd render ds_zero3 --tune three.yaml --platform nonet.json 2>err &&
	grep "nonet.json has no \"network\" section" err &&
	cp plat.json open.json && chmod 666 open.json &&
	test_expect_code 2 herd render ds_zero3 --tune three.yaml --platform open.json 2>err &&
	grep "open.json: not trusted" err &&
	job one "$(cluster_node 1)" &&
	test_expect_code 2 herd render ds_zero3 --tune one.yaml 2>err &&
	grep "one.yaml has one node: nothing crosses the network to measure" err &&
	test_expect_code 2 herd render sbatch --tune three.yaml 2>err &&
	grep "^herd: render: --tune: sbatch.sh.tmpl has no {{reduce_bucket_size}}: --tune fills" err &&
	test ! -e runs/three/bench &&
	herd render --help | grep -e "--tune JOB.yaml"
'

test_done
