# common.bash — shared by tests/cluster/up, down and node (bash only).
#
# One cluster = one state directory DIR holding everything needed to
# tear it down again: DIR/cluster (id, subnet, bridge), DIR/nodes.list
# (one "name addr netns veth" line per node) and DIR/nodes/NAME/ (host key,
# sshd_config, authorized_keys, hosts, pid files, sshd.log).  Every
# kernel object is named after the cluster id, so two clusters coexist and
# teardown touches only what its own cluster made:
#   netns  herd-ID-nI     bridge hbID       root-side veth hvIDnI
#   node   hIDnI          subnet 10.231.X.0/24 (bridge .1, node I is .I+1)

HC_LOCK=/run/lock/herd-test-cluster.lock   # serialises subnet choice and /etc/hosts edits
HC_HOSTS=${HC_HOSTS:-/etc/hosts}
HC_NET_PREFIX=10.231
HC_MAX_NODES=250

hc_die() {
	echo "${0##*/}: $*" >&2
	exit 1
}

hc_log() {
	[ -n "${HC_QUIET:-}" ] || echo "${0##*/}: $*" >&2
}

# hc_now_ms: wall clock in milliseconds (bash 5 EPOCHREALTIME).
hc_now_ms() {
	local t=${EPOCHREALTIME/./}
	echo $((t / 1000))
}

# hc_load DIR: read DIR/cluster into HC_ID, HC_X, HC_BRIDGE...; 1 if absent.
hc_load() {
	HC_DIR=$1
	[ -r "$HC_DIR/cluster" ] || return 1
	# shellcheck disable=SC1091
	. "$HC_DIR/cluster"
}

# hc_ns_inode NETNS: inode of a named namespace, empty when it does not exist.
hc_ns_inode() {
	stat -L -c %i "/run/netns/$1" 2>/dev/null
}

# hc_pid_in_ns PID INODE: true when PID lives in the net namespace INODE
# (guards against killing a recycled pid that is no longer ours).
hc_pid_in_ns() {
	local link
	link=$(readlink "/proc/$1/ns/net" 2>/dev/null) || return 1
	[ "$link" = "net:[$2]" ]
}

# hc_ns_pids NETNS: pids of every process in that namespace.
hc_ns_pids() {
	[ -e "/run/netns/$1" ] || return 0
	ip netns pids "$1" 2>/dev/null
}

# hc_kill_ns NETNS: SIGKILL every process in the namespace and wait (bounded)
# until none is left.  Returns 1 if some survive.
hc_kill_ns() {
	local ns=$1 pids i
	for i in $(seq 1 200); do
		pids=$(hc_ns_pids "$ns")
		[ -n "$pids" ] || return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null
		sleep 0.01   # poll interval of a bounded wait, not a synchronisation
	done
	return 1
}

# hc_node_line NODE: the nodes.list line of NODE, given as a name or a
# 1-based index; sets HC_NODE HC_ADDR HC_NS HC_VETH.
hc_node_line() {
	local want=$1 name addr ns veth i=0
	while read -r name addr ns veth; do
		i=$((i + 1))
		if [ "$want" = "$name" ] || [ "$want" = "$i" ]; then
			HC_NODE=$name HC_ADDR=$addr HC_NS=$ns HC_VETH=$veth
			return 0
		fi
	done <"$HC_DIR/nodes.list"
	return 1
}

# /etc/hosts is edited in place, keeping its inode (a rename would
# silently drop every node's bind mount of its own copy), and never
# truncated while other clusters use it: scripts run side by side, and a
# resolver that reads the file while it is rewritten finds no names
# ("Failed to resolve hostname"), so a block is appended in one write and
# removed by overwriting its bytes with '#' (a comment), in place.  Dead
# lines at the end of the file are cut off (that moves no live line).
#
# hc_hosts_append FILE: appends FILE (one cluster's block) to /etc/hosts.
hc_hosts_append() {
	if [ -s "$HC_HOSTS" ] && [ "$(tail -c 1 "$HC_HOSTS" | od -An -c | tr -d ' ')" != '\n' ]; then
		printf '\n' >>"$HC_HOSTS" || return 1
	fi
	cat "$1" >>"$HC_HOSTS"
}

# hc_hosts_remove ID: blanks the block of cluster ID in /etc/hosts.
hc_hosts_remove() {
	/usr/bin/python3 - "$HC_HOSTS" "$1" <<-'PY'
	import sys
	path, cid = sys.argv[1], sys.argv[2]
	begin = ("# BEGIN herd-test-cluster " + cid).encode()
	end = ("# END herd-test-cluster " + cid).encode()
	with open(path, "r+b") as f:
	    data = f.read()
	    pos, start, stop = 0, None, None
	    for line in data.splitlines(keepends=True):
	        text = line.rstrip(b"\n")
	        if start is None and (text == begin or text.startswith(begin + b" ")):
	            start = pos
	        if start is not None and text == end:
	            stop = pos + len(line)
	            break
	        pos += len(line)
	    if start is None:
	        sys.exit(0)
	    if stop is None:
	        stop = len(data)
	    blank = bytes(c if c == 0x0A else 0x23 for c in data[start:stop])
	    f.seek(start)
	    f.write(blank)
	    f.flush()
	    data = data[:start] + blank + data[stop:]
	    keep = len(data)
	    lines = data.splitlines(keepends=True)
	    while lines and lines[-1].rstrip(b"\n") and not lines[-1].rstrip(b"\n").strip(b"#"):
	        keep -= len(lines.pop())
	    f.truncate(keep)
	PY
}

# hc_hosts_without ID: /etc/hosts on stdout, minus the block of cluster ID.
hc_hosts_without() {
	awk -v b="# BEGIN herd-test-cluster $1 " -v e="# END herd-test-cluster $1" '
		index($0, b) == 1 || $0 == substr(b, 1, length(b) - 1) { skip = 1; next }
		skip && $0 == e { skip = 0; next }
		!skip { print }' "$HC_HOSTS"
}

# hc_start_sshd NODE-DIR NAME NETNS: start the node's sshd in the background
# in its own UTS and mount namespaces (own hostname, own /etc/hosts, own
# /dev/shm: a tmpfs of 512 MiB that dies with the node's processes, as a
# real node's memory does) inside the node's net namespace; records its
# pid in NODE-DIR/pid.
#
# On the node, the ~/.bashrc of the user who brings the cluster up is an
# empty file (a bind mount in the node's mount namespace; the real file is
# untouched).  bash runs ~/.bashrc for every command sshd starts, and on
# this kind of machine root's runs `pyenv init`: 0.3 s per session, and a
# login shell killed midway (a test that kills herd while it connects)
# leaves pyenv's lock file behind, after which every login of every later
# test waits 60 s for it.  That made CI take 73 minutes and fail 30 tests.
hc_start_sshd() {
	local nd=$1 name=$2 ns=$3 rc= home
	: >"$nd/sshd.log"
	rm -f "$nd/sshd.pid"
	# The home directory of passwd, which sshd uses: tests run with HOME
	# set to their own trash directory.
	home=$(getent passwd "$(id -u)" | cut -d: -f6)
	if [ -n "$home" ] && [ -f "$home/.bashrc" ]; then
		rc=$home/.bashrc
		echo "# empty on test node $name (tests/cluster/common.bash)" >"$nd/bashrc"
	fi
	# setsid: not a job of whoever ran up, so a Ctrl-C there does not reach it.
	# Neither nsenter (no --fork) nor unshare (no --fork) nor sh (exec)
	# forks, so $! is sshd's own pid.
	setsid nsenter --net="/run/netns/$ns" -- \
		unshare --uts --mount --propagation private -- \
		/bin/sh -c 'echo "$1" >/proc/sys/kernel/hostname &&
			mount --bind "$2" /etc/hosts &&
			mount -t tmpfs -o size=512m,mode=1777 herd-shm /dev/shm &&
			{ [ -z "$5" ] || mount --bind "$6" "$5"; } &&
			exec /usr/sbin/sshd -D -f "$3" -E "$4"' \
		sh "$name" "$nd/hosts" "$nd/sshd_config" "$nd/sshd.log" "$rc" "$nd/bashrc" \
		</dev/null >>"$nd/sshd.log" 2>&1 &
	echo $! >"$nd/pid"
}

# hc_wait_sshd ADDR PIDFILE DEADLINE-MS: poll until ADDR:22 accepts a TCP
# connection; fail when the sshd exits or the deadline passes.
hc_wait_sshd() {
	local addr=$1 pid deadline=$3
	pid=$(cat "$2")
	while :; do
		if (exec 3<>"/dev/tcp/$addr/22") 2>/dev/null; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		[ "$(hc_now_ms)" -lt "$deadline" ] || return 1
		sleep 0.01   # poll interval of a bounded wait
	done
}
