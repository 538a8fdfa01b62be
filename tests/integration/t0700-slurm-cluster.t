#!/bin/sh

test_description='local Slurm on the test cluster: munged, slurmctld, one slurmd per node'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh-keygen bash timeout \
	sinfo sbatch srun scontrol
for c in /usr/sbin/sshd /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
	[ -x $c ] || error "prerequisite $c is missing (run 'make deps')"
done

# ours DIR: our daemons still alive (their command lines name DIR).
ours() {
	ps -e -o stat=,args= | awk -v d="$1" '$1 !~ /^Z/ && index($0, d) &&
		$2 ~ /\/(slurmctld|slurmd|munged)$/'
}

# in_nodes: "NETNS COMM" of every live process in the cluster's node
# namespaces but the sshds.
in_nodes() {
	for ns in $(ip netns list | awk "/^herd-$HERD_CLUSTER_ID-/ {print \$1}"); do
		for p in $(ip netns pids $ns); do
			st=$(cut -d" " -f3 /proc/$p/stat 2>/dev/null) &&
			test "$st" != Z &&
			c=$(cat /proc/$p/comm 2>/dev/null) &&
			test "$c" != sshd &&
			echo "$ns $c"
		done
	done
}

test_expect_success 'cluster of 4 nodes with Slurm, every node idle' '
	cluster_up 4 &&
	start=$(date +%s%N) &&
	slurm_up &&
	end=$(date +%s%N) &&
	say "# slurm up took $(( (end - start) / 1000000 )) ms (slurm itself: $(cat "$HERD_SLURM_DIR/up_seconds") s)" &&
	test "$SLURM_CONF" = "$HERD_CLUSTER_DIR/slurm/slurm.conf" &&
	test "$HERD_SLURM_DIR" = "$HERD_CLUSTER_DIR/slurm" &&
	test "$HERD_SLURM_PARTITION" = debug &&
	test "$HERD_SLURM_NODES" = "$HERD_CLUSTER_NODES" &&
	sinfo -h -N -o "%N %P %T" >out &&
	for n in $HERD_CLUSTER_NODES; do
		echo "$n debug* idle" || return 1
	done | sort >expect &&
	sort out >got &&
	test_cmp expect got
'

test_expect_success 'the daemons are ours: config, state and logs under DIR/slurm' '
	grep "^ClusterName=herd$HERD_CLUSTER_ID\$" "$SLURM_CONF" &&
	grep "^SlurmctldHost=.*($HERD_CLUSTER_GATEWAY)\$" "$SLURM_CONF" &&
	test -S "$HERD_SLURM_DIR/munge/munge.socket" &&
	test -s "$HERD_SLURM_DIR/ctld/slurmctld.log" &&
	for n in $HERD_CLUSTER_NODES; do
		test -s "$HERD_SLURM_DIR/nodes/$n/slurmd.log" &&
		test -d "$HERD_SLURM_DIR/nodes/$n/tmp" || return 1
	done &&
	test $(ours "$HERD_SLURM_DIR" | grep -c " /usr/sbin/slurmd ") -eq 4 &&
	test $(ours "$HERD_SLURM_DIR" | grep -c " /usr/sbin/slurmctld ") -eq 1 &&
	test $(ours "$HERD_SLURM_DIR" | grep -c " /usr/sbin/munged ") -eq 1
'

test_expect_success 'sbatch --wait: srun -N4 hostname runs once on every node' '
	cat >job.sh <<-\EOF &&
	#!/bin/sh
	srun -N4 --ntasks-per-node=1 hostname
	EOF
	timeout 30 sbatch --wait -N4 -o "$PWD/job.out" job.sh >submitted &&
	grep "^Submitted batch job [0-9]*\$" submitted &&
	echo $HERD_CLUSTER_NODES | tr " " "\n" | sort >expect &&
	sort job.out >got &&
	test_cmp expect got
'

test_expect_success 'srun -N2 from the controller side runs in two node namespaces' '
	timeout 20 srun -N2 --ntasks-per-node=1 hostname | sort >got &&
	echo $HERD_CLUSTER_NODES | tr " " "\n" | head -n 2 >expect &&
	test_cmp expect got
'

test_expect_success 'a killed slurmd is seen as not responding, and comes back' '
	n3=$(cluster_node 3) &&
	pid=$(cat "$HERD_SLURM_DIR/nodes/$n3/pid") &&
	kill -0 $pid &&
	start=$(date +%s%N) &&
	kill -KILL $pid &&
	slurm_wait_state 3 "*[*]" 15 &&
	end=$(date +%s%N) &&
	say "# $n3 is $(slurm_node_state 3) $(( (end - start) / 1000000 )) ms after its slurmd died" &&
	test "$(slurm_node_state 1)" = idle &&
	slurm_start_node 3 &&
	slurm_wait_state 3 idle 10
'

test_expect_success 'slurm down: no daemon of ours and no DIR/slurm left; the nodes stay' '
	sdir=$HERD_SLURM_DIR &&
	{ timeout -k 2 30 srun -N4 sleep 300 >/dev/null 2>&1 & } &&
	spid=$! &&
	i=0 &&
	until test $(in_nodes | grep -c " sleep\$") -eq 4; do
		i=$((i + 1)) &&
		test $i -lt 100 || { in_nodes; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done &&
	slurm_down &&
	test -z "$(ours "$sdir")" &&
	test -z "$(in_nodes)" &&
	# srun (ours, in the root namespace) lost its controller: end it.
	kill -KILL $(ps -o pid= --ppid $spid) $spid &&
	{ wait $spid; true; } &&
	test ! -e "$sdir" &&
	test $(ip netns list | grep -c "^herd-$HERD_CLUSTER_ID-") -eq 4 &&
	"$HERD_ROOT/tests/cluster/slurm" down
'

test_expect_success 'slurm up again on the same cluster' '
	slurm_up &&
	timeout 20 srun -N4 hostname >out &&
	test $(wc -l <out) -eq 4
'

test_expect_success 'a script that fails with Slurm up leaves nothing behind' '
	cat >fails.sh <<-\EOF &&
	. "$HERD_ROOT/tests/cluster/lib.sh"
	cluster_up 2 && slurm_up && echo "$HERD_CLUSTER_DIR" >dir && exit 3
	EOF
	test_expect_code 3 sh fails.sh &&
	d=$(cat dir) &&
	test -z "$(ours "$d")" &&
	test ! -e "$d"
'

test_done
