#!/bin/sh

test_description='binding applied to running ranks on the local cluster: each rank'"'"'s real affinity (Cpus_allowed_list) equals the plan, its environment carries the computed variables, bind.cpu: none leaves the mask whole'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare ssh jq awk nproc

# job NAME CPU: 2 nodes x 2 slots, bind.cpu CPU; each rank writes its
# affinity and binding variables to aff.RANK.
job() {
	cat >"$1.yaml" <<-EOF
	name: $1
	nodes: {hosts: "${HERD_CLUSTER_PREFIX}[1-2]", slots: 2}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	restart: {max: 0}
	bind: {cpu: $2}
	launch:
	  workdir: $PWD
	  command: 'grep Cpus_allowed_list /proc/self/status | awk "{print \\\$2}" >aff.\$RANK; echo "omp=\${OMP_NUM_THREADS:-unset}" >>aff.\$RANK'
	EOF
}

test_expect_success 'cluster of 2 nodes' '
	own_binaries &&
	cluster_up 2
'

test_expect_success 'bind.cpu: cores: every rank runs on exactly its planned cpus' '
	job cores cores &&
	herd plan --json cores.yaml >plan.json &&
	test "$(jq length plan.json)" = 4 &&
	rm -f aff.* &&
	herd run cores.yaml &&
	for r in 0 1 2 3; do
		want=$(jq -r ".[$r].cpus" plan.json) &&
		test -n "$want" && test "$want" != null &&
		test "$(head -n 1 aff.$r)" = "$want" || return 1
	done &&
	# two ranks share a node: their cores differ when it has two or more
	if [ "$(nproc)" -ge 2 ]; then
		test "$(head -n 1 aff.0)" != "$(head -n 1 aff.1)"
	fi
'

test_expect_success 'OMP_NUM_THREADS carries the rank'"'"'s share of cores' '
	for r in 0 1 2 3; do
		grep -x "omp=[1-9][0-9]*" aff.$r || return 1
	done
'

test_expect_success 'bind.cpu: numa: ranks share their NUMA node'"'"'s cpus, as planned' '
	job numa numa &&
	herd plan --json numa.yaml >plan.json &&
	rm -f aff.* &&
	herd run numa.yaml &&
	for r in 0 1 2 3; do
		test "$(head -n 1 aff.$r)" = "$(jq -r ".[$r].cpus" plan.json)" ||
			return 1
	done
'

test_expect_success 'bind.cpu: none leaves the mask whole and sets no OMP_NUM_THREADS' '
	job none none &&
	rm -f aff.* &&
	herd run none.yaml &&
	whole=$(cluster_exec 1 grep Cpus_allowed_list /proc/self/status | awk "{print \$2}") &&
	for r in 0 1 2 3; do
		test "$(head -n 1 aff.$r)" = "$whole" &&
		grep -x "omp=unset" aff.$r || return 1
	done
'

# mem_job MODE: each rank writes the memory policy it runs under.
mem_job() {
	cat >"mem-$1.yaml" <<-EOF
	name: mem-$1
	nodes: {hosts: "${HERD_CLUSTER_PREFIX}[1-2]", slots: 2}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	restart: {max: 0}
	bind: {cpu: $1}
	launch:
	  workdir: $PWD
	  command: 'grep -m1 -o "prefer:[0-9]*\\|default" /proc/self/numa_maps >pol.\$RANK'
	EOF
}

test_expect_success 'memory: a bound rank prefers its NUMA node, an unbound one keeps the default policy' '
	mem_job cores && mem_job none &&
	rm -f pol.* &&
	herd run mem-cores.yaml &&
	for r in 0 1 2 3; do
		grep -x "prefer:[0-9][0-9]*" pol.$r || return 1
	done &&
	rm -f pol.* &&
	herd run mem-none.yaml &&
	for r in 0 1 2 3; do
		grep -x default pol.$r || return 1
	done
'

test_expect_success 'launch.env wins over a computed binding variable' '
	job over cores &&
	printf "  env: {OMP_NUM_THREADS: \"7\"}\n" >>over.yaml &&
	rm -f aff.* &&
	herd run over.yaml &&
	for r in 0 1 2 3; do
		grep -x "omp=7" aff.$r || return 1
	done
'

test_done
