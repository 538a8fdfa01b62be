# lib.sh — local test cluster helpers for tests/integration/*.t (POSIX sh).
# Source after test-lib.sh:   . "$HERD_ROOT/tests/cluster/lib.sh"
#
#   cluster_up N [DIR]        bring up N nodes, export HERD_CLUSTER_* (DIR/env)
#                             and tear the cluster down when the script exits,
#                             whatever the outcome (EXIT trap, chained to sharness)
#   cluster_down [DIR]        tear down now (default: the current cluster)
#   cluster_node I            name of node I (1-based)
#   cluster_addr NODE         address of NODE (name or index)
#   cluster_ssh NODE CMD...   ssh as root with strict host key checking
#   cluster_exec NODE CMD...  run CMD in the node's namespaces, no ssh
#   cluster_kill_node NODE    SIGKILL every process in the node's namespace
#   cluster_start_node NODE   start its sshd again and wait until it answers
#   cluster_partition NODE    take its link down;  cluster_heal NODE: up again
#   cluster_node_back NODE    up and answering, whatever a failed test left
#                             (partitioned, killed, or up already)
#   cluster_wait_ssh NODE [S] poll until ssh to NODE works (at most S s, 10)
#
# All of them return non-zero on failure and never exit the caller.

HERD_CLUSTER_TOOLS=${HERD_CLUSTER_TOOLS:-${HERD_ROOT:?HERD_ROOT must be set}/tests/cluster}
_herd_cluster_dirs=

# Tear down every cluster this script brought up; keeps the exit status.
_herd_cluster_exit() {
	_herd_cluster_rc=$?
	# Slurm first (its daemons run in the nodes' namespaces), also when
	# the script failed or was signalled before its own slurm_down.
	for _herd_cluster_d in $_herd_slurm_dirs; do
		"$HERD_CLUSTER_TOOLS/slurm" down "$_herd_cluster_d" >/dev/null 2>&1
	done
	_herd_slurm_dirs=
	for _herd_cluster_d in $_herd_cluster_dirs; do
		HC_QUIET=1 "$HERD_CLUSTER_TOOLS/down" "$_herd_cluster_d" >&2
	done
	_herd_cluster_dirs=
	return $_herd_cluster_rc
}

_herd_cluster_trap() {
	[ -z "$_herd_cluster_trapped" ] || return 0
	_herd_cluster_trapped=t
	if command -v die >/dev/null 2>&1; then
		# sharness' own EXIT trap is 'die'; run it after our teardown.
		trap '_herd_cluster_exit; die' EXIT
	else
		trap '_herd_cluster_exit' EXIT
	fi
	trap 'exit 130' INT
	trap 'exit 143' TERM
}
_herd_cluster_trapped=

cluster_up() {
	[ $# -ge 1 ] || { echo "usage: cluster_up N [DIR]" >&2; return 2; }
	_herd_cluster_trap
	_herd_cluster_new=$("$HERD_CLUSTER_TOOLS/up" "$@") || return 1
	_herd_cluster_dirs="$_herd_cluster_dirs $_herd_cluster_new"
	. "$_herd_cluster_new/env"
}

cluster_down() {
	_herd_cluster_d=${1:-$HERD_CLUSTER_DIR}
	"$HERD_CLUSTER_TOOLS/down" "$_herd_cluster_d" || return 1
	_herd_cluster_left=
	for _herd_cluster_x in $_herd_cluster_dirs; do
		[ "$_herd_cluster_x" = "$_herd_cluster_d" ] ||
			_herd_cluster_left="$_herd_cluster_left $_herd_cluster_x"
	done
	_herd_cluster_dirs=$_herd_cluster_left
}

cluster_node() {
	echo "$HERD_CLUSTER_NODES" | tr ' ' '\n' | sed -n "${1}p" | grep .
}

_herd_cluster_name() {
	case $1 in
	*[!0-9]*) echo "$1" ;;
	*) cluster_node "$1" ;;
	esac
}

cluster_addr() { "$HERD_CLUSTER_TOOLS/node" addr "$1"; }

cluster_ssh() {
	_herd_cluster_n=$(_herd_cluster_name "$1") || return 1
	shift
	ssh -F "$HERD_CLUSTER_SSH_CONFIG" "$_herd_cluster_n" "$@"
}

cluster_exec() {
	_herd_cluster_n=$1
	shift
	"$HERD_CLUSTER_TOOLS/node" exec "$_herd_cluster_n" "$@"
}

cluster_kill_node() { "$HERD_CLUSTER_TOOLS/node" kill "$1"; }
cluster_start_node() { "$HERD_CLUSTER_TOOLS/node" start "$1"; }
cluster_partition() { "$HERD_CLUSTER_TOOLS/node" partition "$1"; }
cluster_heal() { "$HERD_CLUSTER_TOOLS/node" heal "$1"; }
cluster_node_back() {
	cluster_heal "$1" && cluster_kill_node "$1" && cluster_start_node "$1"
}

cluster_wait_ssh() {
	_herd_cluster_end=$(($(date +%s) + ${2:-10}))
	while ! cluster_ssh "$1" -o ConnectTimeout=1 true 2>/dev/null; do
		[ "$(date +%s)" -lt $_herd_cluster_end ] || return 1
		sleep 0.1   # poll interval of a bounded wait
	done
}

# ---- Slurm on the cluster (tests/cluster/slurm) ----------------------------
#   slurm_up [DIR]            munged, slurmctld and one slurmd per node on the
#                             cluster in DIR (default: the current one); waits
#                             until every node is idle; exports SLURM_CONF and
#                             HERD_SLURM_* (DIR/slurm/env); the EXIT trap takes
#                             Slurm down before the cluster
#   slurm_down [DIR]          tear Slurm down now (the node cluster stays)
#   slurm_kill_node NODE      SIGKILL the node's slurmd and its job steps
#   slurm_start_node NODE     start its slurmd again, wait until it registers
#   slurm_node_state NODE     the node's state as sinfo prints it (idle, idle*, down*...)
#   slurm_wait_state NODE PATTERN [S]  poll until the state matches the case
#                             PATTERN (at most S s, 10)

_herd_slurm_dirs=

# Tear down every Slurm this script brought up; keeps the exit status.
_herd_slurm_exit() {
	_herd_slurm_rc=$?
	for _herd_slurm_d in $_herd_slurm_dirs; do
		HC_QUIET=1 "$HERD_CLUSTER_TOOLS/slurm" down "$_herd_slurm_d" >&2
	done
	_herd_slurm_dirs=
	return $_herd_slurm_rc
}

_herd_slurm_trap() {
	[ -z "$_herd_slurm_trapped" ] || return 0
	_herd_slurm_trapped=t
	_herd_cluster_trap   # once installed, cluster_up leaves the trap alone
	if command -v die >/dev/null 2>&1; then
		trap '_herd_slurm_exit; _herd_cluster_exit; die' EXIT
	else
		trap '_herd_slurm_exit; _herd_cluster_exit' EXIT
	fi
}
_herd_slurm_trapped=

slurm_up() {
	_herd_slurm_d=${1:-$HERD_CLUSTER_DIR}
	[ -n "$_herd_slurm_d" ] || { echo "usage: slurm_up [DIR]" >&2; return 2; }
	_herd_slurm_trap
	_herd_slurm_dirs="$_herd_slurm_dirs $_herd_slurm_d"
	"$HERD_CLUSTER_TOOLS/slurm" up "$_herd_slurm_d" >/dev/null || return 1
	. "$_herd_slurm_d/slurm/env"
}

slurm_down() {
	_herd_slurm_d=${1:-$HERD_CLUSTER_DIR}
	"$HERD_CLUSTER_TOOLS/slurm" down "$_herd_slurm_d" || return 1
	_herd_slurm_left=
	for _herd_slurm_x in $_herd_slurm_dirs; do
		[ "$_herd_slurm_x" = "$_herd_slurm_d" ] ||
			_herd_slurm_left="$_herd_slurm_left $_herd_slurm_x"
	done
	_herd_slurm_dirs=$_herd_slurm_left
}

slurm_kill_node() { "$HERD_CLUSTER_TOOLS/slurm" kill "$1"; }
slurm_start_node() { "$HERD_CLUSTER_TOOLS/slurm" start "$1"; }

slurm_node_state() {
	_herd_slurm_n=$(_herd_cluster_name "$1") || return 1
	timeout 5 sinfo -h -N -n "$_herd_slurm_n" -o %T | head -n 1 | grep .
}

slurm_wait_state() {
	_herd_slurm_end=$(($(date +%s) + ${3:-10}))
	while :; do
		_herd_slurm_st=$(slurm_node_state "$1")
		# shellcheck disable=SC2254
		case $_herd_slurm_st in $2) return 0 ;; esac
		if [ "$(date +%s)" -ge $_herd_slurm_end ]; then
			echo "slurm_wait_state: $1 is '$_herd_slurm_st', not $2" >&2
			return 1
		fi
		sleep 0.1   # poll interval of a bounded wait
	done
}
