# slurm.bash — shared by tests/cluster/slurm (bash only), on top of
# common.bash.  A Slurm cluster lives in DIR/slurm of a node cluster DIR:
#   slurm.conf env ctl_port up_seconds
#   munge/     munge.key munge.socket munged.pid munged.log munged.seed pid out
#   ctld/      state/ slurmctld.log slurmctld.pid pid out
#   nodes/NAME/ spool/ tmp/ slurmd.log slurmd.pid pid out
# Every daemon is started with the path of this cluster's slurm.conf (or,
# for munged, its socket) on its command line; that is how teardown knows a
# pid is still ours before it kills it.

HS_SLURMCTLD=/usr/sbin/slurmctld
HS_SLURMD=/usr/sbin/slurmd
HS_MUNGED=/usr/sbin/munged
HS_PORT_BASE=17000   # SlurmctldPort = base + subnet number X (unique per live cluster)

# hs_paths DIR: set HS_DIR HS_CONF and friends for the cluster in DIR.
hs_paths() {
	HS_DIR=$1/slurm
	HS_CONF=$HS_DIR/slurm.conf
	HS_MUNGE_SOCKET=$HS_DIR/munge/munge.socket
}

# hs_cmdline PID: the command line of PID, arguments separated by spaces.
hs_cmdline() {
	tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline"
}

# hs_ours PID EXE MARK: true when PID runs EXE with MARK among its arguments
# (a recycled pid running something else is not ours).
hs_ours() {
	local pid=$1 cmd
	case $pid in '' | *[!0-9]*) return 1 ;; esac
	cmd=$(hs_cmdline "$pid") || return 1
	case " $cmd" in *" $2 "*" $3 "*) return 0 ;; esac
	return 1
}

# hs_pidfile_pid FILE: the pid in FILE (empty when unreadable).
hs_pidfile_pid() {
	local p
	p=$(head -n 1 "$1" 2>/dev/null) || return 0
	case $p in '' | *[!0-9]*) ;; *) echo "$p" ;; esac
}

# hs_descendants PID...: PID... and every descendant of them.
hs_descendants() {
	ps -e -o pid=,ppid= | awk -v roots="$*" '
		BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) keep[r[i]] = 1 }
		{ parent[$1] = $2 }
		END {
			do {
				grew = 0
				for (p in parent)
					if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; grew = 1 }
			} while (grew)
			for (p in keep) print p
		}'
}

# hs_alive PID: true while PID exists and is not a zombie (a killed daemon
# whose parent is gone waits for init to reap it, which can take a while).
hs_alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# hs_gone_wait PID...: poll (bounded, 5 s) until none of PID... is alive.
hs_gone_wait() {
	local i p left
	for i in $(seq 1 500); do
		left=""
		for p in "$@"; do
			hs_alive "$p" && left="$left $p"
		done
		[ -n "$left" ] || return 0
		sleep 0.01   # poll interval of a bounded wait
	done
	echo "slurm: processes survive:$left" >&2
	return 1
}

# hs_steps NETNS: pids of the slurmstepd processes in a node namespace
# (only our slurmd runs there, so its job steps are ours).
hs_steps() {
	local p
	[ -n "$1" ] || return 0
	for p in $(hc_ns_pids "$1"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] && echo "$p"
	done
}

# hs_kill_slurmd NAME NETNS: SIGKILL the node's slurmd (only while it is
# ours) and its job steps with everything they started; waits until gone.
hs_kill_slurmd() {
	local name=$1 ns=$2 nd=$HS_DIR/nodes/$1 p roots="" all
	for p in $(cat "$nd/pid" 2>/dev/null) $(hs_pidfile_pid "$nd/slurmd.pid"); do
		hs_ours "$p" "$HS_SLURMD" "$HS_CONF" && roots="$roots $p"
	done
	roots="$roots $(hs_steps "$ns")"
	# shellcheck disable=SC2086
	[ -n "${roots// /}" ] || return 0
	# Stop the whole tree first so nothing forks while it is being killed.
	# shellcheck disable=SC2086
	all=$(hs_descendants $roots)
	# shellcheck disable=SC2086
	kill -STOP $all 2>/dev/null
	# shellcheck disable=SC2086
	all=$(hs_descendants $roots)
	# shellcheck disable=SC2086
	kill -KILL $all 2>/dev/null
	# shellcheck disable=SC2086
	hs_gone_wait $all
}

# hs_start_slurmd NAME NETNS: start the node's slurmd in the background the
# way sshd runs there (own hostname, own /etc/hosts, node's net namespace);
# records its pid in nodes/NAME/pid.  $! is slurmd itself: setsid (not a
# group leader here), nsenter and unshare (no --fork) and sh (exec) do not fork.
hs_start_slurmd() {
	local name=$1 ns=$2 nd=$HS_DIR/nodes/$1
	mkdir -p "$nd/spool" "$nd/tmp" || return 1
	rm -f "$nd/slurmd.pid"
	SLURM_CONF=$HS_CONF setsid nsenter --net="/run/netns/$ns" -- \
		unshare --uts --mount --propagation private -- \
		/bin/sh -c 'echo "$1" >/proc/sys/kernel/hostname &&
			mount --bind "$2" /etc/hosts &&
			exec "$3" -D -N "$1" -f "$4"' \
		sh "$name" "$HC_DIR/nodes/$name/hosts" "$HS_SLURMD" "$HS_CONF" \
		</dev/null >>"$nd/out" 2>&1 &
	disown
	echo $! >"$nd/pid"
}

# hs_tail FILE...: the last lines of each FILE, for a failure message.
hs_tail() {
	local f
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "--- tail of $f"
		tail -n 15 "$f"
	done
}

# hs_node_states: "NAME STATE" per node, as slurmctld sees them.
hs_node_states() {
	SLURM_CONF=$HS_CONF timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null
}
