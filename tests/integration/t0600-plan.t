#!/bin/sh

test_description='herd plan: binding of every rank from real hwloc topologies (golden plans), platform files, errors'

. "$(dirname "$0")/test-lib.sh"

require_cmd sed grep

DATA=$HERD_TEST_DIR/data/plan
TOPO=$DATA/topologies
for f in jureca-dc-gpu jusuf-gpu juropa3-gpu nvidia-dgx2 cpu-only; do
	test -r "$TOPO/$f.xml" || error "missing test topology $TOPO/$f.xml"
done

# job FILE: writes a job file whose top level is stdin plus a command.
job() {
	{ cat; echo "launch:"; echo "  command: true"; } >"$1"
}

# golden NAME TOPOLOGY JOB: herd plan --json must print data/plan/NAME.json.
golden() {
	herd plan "$3" --topology "$TOPO/$2.xml" --json >"$1.out" &&
	test_cmp "$DATA/$1.json" "$1.out"
}

# --- JURECA-DC GPU node --------------------------------------------------
# lstopo: 2 packages x 4 NUMA nodes; NUMA k holds cores 16k..16k+15, PUs
# 16k..16k+15 and their hyperthreads 128+16k..; PCI bus order of the
# NVIDIA GPUs (class 0302 [10de:20b0]; the VGA 62:00.0 is [1a03:2000], an
# ASPEED BMC chip, not a GPU):
#   GPU 0 03:00.0 NUMA 3, behind the switch with 04:00.0 mlx5_1/ib1
#   GPU 1 44:00.0 NUMA 1, behind the switch with 43:00.0 mlx5_0/ib0
#   GPU 2 84:00.0 NUMA 7, behind the switch with 83:00.0 mlx5_3/ib3
#   GPU 3 c4:00.0 NUMA 5, behind the switch with c3:00.0 mlx5_2/ib2
test_expect_success 'jureca: slots = GPUs; each GPU gets its switch NIC and NUMA node' '
	# default slots = 4 GPUs; bind.cpu numa: the whole NUMA node, e.g.
	# rank 0 on GPU 0 gets NUMA 3 = 48-63,176-191.
	printf "nodes:\n  hosts: n1\n" | job j4.yaml &&
	golden jureca-4 jureca-dc-gpu j4.yaml
'

test_expect_success 'jureca: slots = 2x GPUs, cores: pairs share a GPU and split its NUMA node' '
	# rank i -> GPU floor(i*4/8): 0,0,1,1,...; the two ranks of GPU 0
	# split NUMA 3 (16 cores): 48-55 with hyperthreads 176-183, and
	# 56-63 with 184-191; both use mlx5_1, the only NIC behind GPU 0s
	# switch.
	printf "nodes:\n  hosts: n1\n  slots: 8\nbind:\n  cpu: cores\n" |
		job j8.yaml &&
	golden jureca-8-cores jureca-dc-gpu j8.yaml
'

test_expect_success 'jureca: bind.gpu none: CPU-only ranks spread over NUMA nodes by blocks' '
	# slots default to the 4 GPUs found; rank i -> NUMA floor(i*8/4) =
	# 0, 2, 4, 6 (cores 0-15, 32-47, 64-79, 96-111 with their
	# hyperthreads).  No NIC shares a NUMA node with them: the nearest
	# class is "same package" (mlx5_0, mlx5_1 in package 0; mlx5_2,
	# mlx5_3 in package 1), spread: least used, then by name.
	printf "nodes:\n  hosts: n1\nbind:\n  gpu: none\n  cpu: cores\n" |
		job jcpu.yaml &&
	golden jureca-cpu-only jureca-dc-gpu jcpu.yaml
'

test_expect_success 'jureca: two nodes: ranks continue over nodes' '
	printf "nodes:\n  hosts: n[1-2]\n" | job j2.yaml &&
	herd plan j2.yaml --topology "$TOPO/jureca-dc-gpu.xml" --json >out &&
	grep -c "\"rank\"" out >count && echo 8 >expect && test_cmp expect count &&
	grep "\"rank\": 4," out | grep -q "\"node\": 1, \"host\": \"n2\", \"local_rank\": 0, \"gpu\": 0,"
'

# --- JUSUF GPU node ------------------------------------------------------
# lstopo: the only GPU, 01:00.0 [10de:1eb8], hangs under NUMA 3 (cores
# 48-63, hyperthreads 176-191); both NICs are functions of 21:00 under
# NUMA 2: 21:00.0 mlx5_0 with netdev enp33s0f0 (Ethernet/RoCE), 21:00.1
# mlx5_1 with ib0.  Neither shares a bridge or NUMA node with the GPU;
# both are in package 0 (class 3): equally near.
test_expect_success 'jusuf: one rank gets the first of the equally near NICs' '
	printf "nodes:\n  hosts: n1\n" | job s1.yaml &&
	golden jusuf-1 jusuf-gpu s1.yaml
'

test_expect_success 'jusuf: two ranks on the one GPU spread over both NICs' '
	# rank 0 -> mlx5_0 (first by name), rank 1 -> mlx5_1 (least used);
	# bind.cpu numa: both get all of NUMA 3.
	printf "nodes:\n  hosts: n1\n  slots: 2\n" | job s2.yaml &&
	golden jusuf-2 jusuf-gpu s2.yaml
'

# --- JUROPA3 GPU node ----------------------------------------------------
# lstopo: both host bridges hang off the Machine (the export has no
# locality for them), so a GPU's "NUMA nodes" are both of them: 0-31.
# GPU 0 01:00.0 and mlx4_0 (02:00.0, ib0) share a host bridge (class 1);
# GPU 1 82:00.0 is on the other host bridge: mlx4_0 is the only NIC.
test_expect_success 'juropa3: slots = GPUs: the machine-wide domain, the one NIC' '
	printf "nodes:\n  hosts: n1\n" | job p2.yaml &&
	golden juropa3-2 juropa3-gpu p2.yaml
'

test_expect_success 'juropa3: 4 ranks, cores: the 16 cores split 4 ways, whole cores' '
	# All 4 ranks share one domain (PUs 0-31; core k = PUs k, k+16):
	# rank j gets cores 4j..4j+3 with their hyperthreads.
	printf "nodes:\n  hosts: n1\n  slots: 4\nbind:\n  cpu: cores\n" |
		job p4.yaml &&
	golden juropa3-4-cores juropa3-gpu p4.yaml
'

test_expect_success 'juropa3: the table has aligned columns' '
	herd plan p2.yaml --topology "$TOPO/juropa3-gpu.xml" >out &&
	test_cmp "$DATA/juropa3-2.txt" out
'

# --- DGX-2H --------------------------------------------------------------
# lstopo: GPUs only as NVML OS devices nvml0..15 under PCI devices
# 34:00.0 .. e7:00.0 [10de:1db8]: 16 GPUs, not 32 (the OS device and its
# PCI parent are one GPU).  No NICs in this export.  Package 0 (NUMA 0)
# has PUs 0-1, package 1 (NUMA 1) PUs 24-25; GPUs 0-7 are local to
# NUMA 0, 8-15 to NUMA 1.  NVSwitches (class 0680) are not GPUs.
test_expect_success 'dgx2: 16 NVML GPUs, 8 ranks per NUMA node sharing it' '
	printf "nodes:\n  hosts: n1\n" | job d16.yaml &&
	golden dgx2-16 nvidia-dgx2 d16.yaml
'

test_expect_success 'dgx2: 32 ranks, cores: more ranks than PUs share PUs' '
	# 16 ranks per NUMA node, 2 cores of 1 PU each: rank j of the 16
	# gets PU floor(j*2/16), at least one PU: 8 ranks on each PU.
	printf "nodes:\n  hosts: n1\n  slots: 32\nbind:\n  cpu: cores\n" |
		job d32.yaml &&
	golden dgx2-32-cores nvidia-dgx2 d32.yaml
'

# --- a node without GPUs -------------------------------------------------
# cpu-only.xml: 2 packages x 2 NUMA nodes x 4 cores x 2 PUs: NUMA k holds
# PUs 8k..8k+7, core c PUs 2c, 2c+1.
test_expect_success 'cpu-only: default slots is 1: rank 0 on NUMA 0' '
	printf "nodes:\n  hosts: n1\n" | job c1.yaml &&
	golden cpu-only-1 cpu-only c1.yaml
'

test_expect_success 'cpu-only: 8 ranks, cores: two per NUMA node, two whole cores each' '
	# rank i -> NUMA floor(i*4/8); the two ranks of a NUMA node split
	# its 4 cores: 0-3, 4-7, 8-11, ...
	printf "nodes:\n  hosts: n1\n  slots: 8\nbind:\n  cpu: cores\n" |
		job c8.yaml &&
	golden cpu-only-8-cores cpu-only c8.yaml
'

test_expect_success 'bind.cpu none and bind.nic none leave cpus and nic null' '
	printf "nodes:\n  hosts: n1\nbind:\n  cpu: none\n  nic: none\n" |
		job none.yaml &&
	golden jureca-none jureca-dc-gpu none.yaml
'

# --- the operator's word -------------------------------------------------
test_expect_success 'bind.nic list: rank i gets list[i mod n]' '
	printf "nodes:\n  hosts: n1\nbind:\n  nic: [mlx5_3, \"mlx5_2:1\"]\n" |
		job list.yaml &&
	herd plan list.yaml --topology "$TOPO/jureca-dc-gpu.xml" --json >out &&
	grep -o "\"nic\": \"[^\"]*\"" out >nics &&
	printf "\"nic\": \"%s\"\n" mlx5_3:1 mlx5_2:1 mlx5_3:1 mlx5_2:1 >expect &&
	test_cmp expect nics
'

test_expect_success 'topology_file wins over discovery for the GPUs it names' '
	# GPU 0 (short bus id 03:00.0) is given mlx5_2 port 2 on netdev
	# ib3 and cores 0-3; the other GPUs keep discovery (jureca-4).
	cat >plat.json <<-\EOF &&
	{"gpus": [
	  {"bus_id": "03:00.0", "nic": "mlx5_2", "port": 2, "netdev": "ib3",
	   "cpus": "0-3"}
	]}
	EOF
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: plat.json\n" |
		job plat.yaml &&
	golden jureca-platform jureca-dc-gpu plat.yaml
'

test_expect_success 'topology_file naming a GPU the node lacks: exit 2, clear error' '
	echo "{\"gpus\": [{\"bus_id\": \"0000:99:00.0\"}]}" >nogpu.json &&
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: nogpu.json\n" |
		job nogpu.yaml &&
	test_expect_code 2 herd plan nogpu.yaml --topology "$TOPO/jureca-dc-gpu.xml" 2>err &&
	grep "node n1: .*nogpu.json: gpus\[0\]: GPU 0000:99:00.0 is not on this node" err
'

test_expect_success 'topology_file naming a NIC the node lacks: exit 2, clear error' '
	echo "{\"gpus\": [{\"bus_id\": \"0000:03:00.0\", \"nic\": \"mlx5_9\"}]}" >nonic.json &&
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: nonic.json\n" |
		job nonic.yaml &&
	test_expect_code 2 herd plan nonic.yaml --topology "$TOPO/jureca-dc-gpu.xml" 2>err &&
	grep "nonic.json: gpus\[0\]: NIC mlx5_9 is not on this node (it has 4 RDMA NICs" err
'

test_expect_success 'topology_file with CPUs the node lacks, or an unknown key' '
	echo "{\"gpus\": [{\"bus_id\": \"0000:03:00.0\", \"cpus\": \"0-999\"}]}" >nocpu.json &&
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: nocpu.json\n" |
		job nocpu.yaml &&
	test_expect_code 2 herd plan nocpu.yaml --topology "$TOPO/jureca-dc-gpu.xml" 2>err &&
	grep "gpus\[0\]: cpus name CPUs this node does not have (it has 0-255)" err &&
	echo "{\"gpus\": [{\"bus_id\": \"0000:03:00.0\", \"hca\": \"x\"}]}" >key.json &&
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: key.json\n" |
		job key.yaml &&
	test_expect_code 2 herd plan key.yaml --topology "$TOPO/jureca-dc-gpu.xml" 2>err &&
	grep "key.json: gpus\[0\]: unknown key .hca." err
'

test_expect_success 'malformed topology_file: exit 2 with line:col from jansson' '
	printf "{\"gpus\": [\n  {\"bus_id\": \"03:00.0\",}\n]}\n" >bad.json &&
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: bad.json\n" |
		job bad.yaml &&
	test_expect_code 2 herd plan bad.yaml --topology "$TOPO/jureca-dc-gpu.xml" 2>err &&
	grep "bad.json:2:[0-9]*: " err
'

test_expect_success 'missing topology_file: exit 2' '
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: nowhere.json\n" |
		job nowhere.yaml &&
	test_expect_code 2 herd plan nowhere.yaml --topology "$TOPO/jureca-dc-gpu.xml" 2>err &&
	grep "cannot open topology file .*nowhere.json: No such file" err
'

test_expect_success 'bind.nic list naming a NIC the node lacks: exit 2' '
	printf "nodes:\n  hosts: n1\nbind:\n  nic: [mlx5_7]\n" | job badlist.yaml &&
	test_expect_code 2 herd plan badlist.yaml --topology "$TOPO/jureca-dc-gpu.xml" 2>err &&
	grep "bind.nic: NIC mlx5_7 is not on this node" err
'

# --- topology input ------------------------------------------------------
test_expect_success 'missing --topology file: exit 2, no crash' '
	test_expect_code 2 herd plan j4.yaml --topology nowhere.xml 2>err &&
	grep "cannot open topology nowhere.xml: No such file" err
'

test_expect_success 'malformed topology XML: exit 2, no crash' '
	printf "<topology><object type=\"Machine\"" >bad.xml &&
	test_expect_code 2 herd plan j4.yaml --topology bad.xml 2>err &&
	grep "topology bad.xml: not an hwloc XML topology" err &&
	echo "not xml at all" >text.xml &&
	test_expect_code 2 herd plan j4.yaml --topology text.xml 2>err &&
	grep "topology text.xml: not an hwloc XML topology" err &&
	: >empty.xml &&
	test_expect_code 2 herd plan j4.yaml --topology empty.xml 2>err &&
	grep "topology empty.xml: not an hwloc XML topology" err
'

# Without --topology remote nodes are planned from what their agents
# report (t0610 checks that on the cluster); a node nobody can reach is
# named, and nothing is printed.
test_expect_success 'remote nodes without --topology: herd asks their agents; an unreachable one is named' '
	test_expect_code 1 herd plan j2.yaml >out 2>err &&
	grep "n1: cannot connect" err &&
	test_must_be_empty out
'

test_expect_success 'remote nodes without --topology: bind.topology_file is next to the job file, whatever the current directory' '
	mkdir -p sub &&
	cp plat.json sub/ &&
	printf "nodes:\n  hosts: n1\nbind:\n  topology_file: plat.json\n" | job sub/rel.yaml &&
	mkdir -p elsewhere &&
	(cd elsewhere && test_expect_code 1 herd plan ../sub/rel.yaml >../out 2>../err) &&
	grep "n1: cannot connect" err &&
	! grep "topology_file" err
'

test_expect_success 'remote nodes without --topology: a discovery command runs once (nodes are resolved once for the whole command)' '
	cat >discover.sh <<-\EOF &&
	echo ran >>discover.count
	echo n1
	EOF
	printf "nodes:\n  command: sh discover.sh\n" | job disc.yaml &&
	test_expect_code 1 herd plan disc.yaml 2>err &&
	grep "n1: cannot connect" err &&
	test "$(wc -l <discover.count)" = 1
'

test_expect_success 'localhost without --topology: this machine (HWLOC_XMLFILE redirects hwloc)' '
	printf "nodes:\n  hosts: localhost\n" | job local.yaml &&
	HWLOC_XMLFILE=$TOPO/jureca-dc-gpu.xml herd plan local.yaml --json >out &&
	sed "s/\"host\": \"n1\"/\"host\": \"localhost\"/" "$DATA/jureca-4.json" >expect &&
	test_cmp expect out &&
	herd plan local.yaml >out &&
	head -n 1 out | grep -q "^RANK  NODE  HOST       LOCAL  GPU" &&
	grep -q "^0     0     localhost  0 " out
'

test_expect_success 'agents (transport local): the plan, and no "resumes from" line for a checkpoint' '
	mkdir -p ck/step_1 && touch ck/step_1/COMPLETE &&
	printf "name: p\nnodes: {hosts: \"sim[1-2]\", transport: local}\ncheckpoint: {dir: ck, pattern: \"step_*\", complete_marker: COMPLETE}\n" |
		job ck.yaml &&
	herd plan ck.yaml >out 2>err &&
	grep -q "^1     1     sim2 " out &&
	! grep "resumes from" err &&
	test_must_be_empty err
'

test_expect_success 'usage errors: exit 2' '
	test_expect_code 2 herd plan 2>err &&
	grep "^try .herd plan --help.$" err &&
	test_expect_code 2 herd plan j4.yaml --bogus 2>err &&
	grep "unknown option" err &&
	test_expect_code 2 herd plan j4.yaml --topology 2>err &&
	grep "needs a file" err &&
	herd plan --help | grep -q "null where none"
'

test_done
