#!/bin/sh

test_description='MPI start-up under herd (4 nodes x 2, Open MPI): every rank loads the node topology its agent gives (PMIX_LOCAL_TOPO, kept 0600 in the agent cache for the next start) instead of discovering it; on a node without an RDMA device the ranks get OMPI_MCA_pml=ob1 (Open MPI would probe its fabric transports first), and launch.env still decides'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

pmix_require

# job NAME ENV: the allreduce program through pmlenv.sh, with launch.env ENV.
job() {
	cat >"$1.yaml" <<-EOF
	name: $1
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 2}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	restart: {max: 0}
	launch:
	  mode: pmix
	  command: "'$PWD/pmlenv.sh'"
	  workdir: "$PWD"
	  env: {$2}
	EOF
}

test_expect_success 'cluster of 4 nodes, the program' '
	own_binaries &&
	pmix_prog &&
	printf "%s\n" "#!/bin/sh" \
		"echo \"pml=\${OMPI_MCA_pml-unset}\"" \
		"exec \"\$(dirname \"\$0\")/allreduce\"" >pmlenv.sh &&
	chmod +x pmlenv.sh &&
	cluster_up 4
'

# ran FILE: all 8 ranks printed their right sum and ring.
ran() {
	test "$(grep -c "^\[\([0-7]\)\] rank \1 of 8 on [^ ]*: allreduce 36 (ok), ring got [0-7] (ok)\$" "$1")" = 8 || {
		cat "$1" >&2
		return 1
	}
}

# The node has an RDMA device (then the agent leaves Open MPI to choose).
fabric() {
	ls /sys/class/infiniband/* /sys/class/cxi/* /dev/hfi1* /dev/ipath* \
		>/dev/null 2>&1
}

test_expect_success 'every rank loads the topology from its agent (XML), not from the machine' '
	job topo "OMPI_MCA_hwloc_base_verbose: \"100\"" &&
	timeout 120 herd run topo.yaml >out.topo 2>err.topo || {
		cat out.topo err.topo >&2
		return 1
	} &&
	ran out.topo &&
	test "$(grep -c "hwloc:base loading topology from XML" err.topo)" = 8
'

test_expect_success 'the topology is kept in the agent cache, 0600, one per node' '
	for n in $HERD_CLUSTER_NODES; do
		f=$(ls /tmp/herd-agent-$(id -u)/topo-$n-*.xml) &&
		test "$(echo "$f" | wc -l)" = 1 &&
		test "$(stat -c %a "$f")" = 600 &&
		grep -q "<topology" "$f" || return 1
	done
'

test_expect_success 'OMPI_MCA_pml: ob1 on a node without an RDMA device, else unset; launch.env wins' '
	job pml "" &&
	timeout 120 herd run pml.yaml >out 2>err &&
	ran out &&
	if fabric; then w=unset; else w=ob1; fi &&
	test "$(grep -c "^\[\([0-7]\)\] pml=$w\$" out)" = 8 &&
	job pmlset "OMPI_MCA_pml: \"ob1,cm\"" &&
	timeout 120 herd run pmlset.yaml >out 2>err &&
	ran out &&
	test "$(grep -c "^\[\([0-7]\)\] pml=ob1,cm\$" out)" = 8
'

test_done
