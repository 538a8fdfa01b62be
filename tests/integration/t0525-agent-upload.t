#!/bin/sh

test_description='the agent cache on the nodes: upload without SFTP (exec channel), ssh.agent_dir, a full or read-only cache, and a cache that another user can write'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen stat cmp find \
	mount umount mountpoint useradd userdel id
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# Each node runs its sshd in a private mount namespace, so a tmpfs
# mounted there over /root/.cache gives that node, and only it, its own
# ~/.cache: the default ~/.cache/herd is tested without touching the
# /root/.cache/herd that other tests on this machine share.
mkdir -p /root/.cache || error "cannot make /root/.cache"

# job NAME HOST [AGENT_DIR]: NAME.yaml running `echo up` on HOST (1 rank);
# AGENT_DIR, already YAML-quoted (yq), sets ssh.agent_dir.
job() {
	{
		echo "name: $1"
		echo "nodes: {hosts: \"$2\", slots: 1}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS${3:+, agent_dir: $3}}"
		echo "restart: {max: 0}"
		echo "launch: {command: echo up, workdir: \"$PWD\"}"
	} >"$1.yaml"
}

# yq TEXT: TEXT as a single-quoted YAML scalar.
yq() {
	printf "'%s'" "$(printf %s "$1" | sed "s/'/''/g")"
}

# cache NODE [MOUNT OPTIONS]: a new, empty tmpfs over /root/.cache on NODE
# (mode 0700 unless the options say otherwise), unmounted again when the
# test ends.
cache() {
	cluster_exec "$1" mount -t tmpfs -o "mode=0700,size=16m${2:+,$2}" \
		herd-t0525 /root/.cache &&
	test_when_finished "cluster_exec $1 umount /root/.cache"
}

# on NODE CMD: run the shell command CMD in NODE's mount namespace (from
# its root directory: paths must be absolute).
on() {
	cluster_exec "$1" sh -c "$2"
}

# err_has PATTERN: herd's stderr (err) has exactly one line matching
# PATTERN (BRE); else show what it had.
err_has() {
	test "$(grep -c -- "$1" err)" -eq 1 || {
		echo "not one line matching: $1; stderr was:" >&2
		cat err >&2
		return 1
	}
}

# plant NODE FILE: an executable "agent" at FILE on NODE that, if anything
# ever runs it, leaves $PWD/PLANTED-RAN behind.
plant() {
	printf '#!/bin/sh\ntouch "%s"\nexit 3\n' "$PWD/PLANTED-RAN" >planted &&
	chmod 755 planted &&
	cluster_exec "$1" cp "$PWD/planted" "$2"
}

test_expect_success 'cluster of 2 nodes; node 2 has no SFTP server' '
	cluster_up 2 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	sed -i "/^Subsystem[[:space:]]*sftp/d" "$HERD_CLUSTER_DIR/nodes/$N2/sshd_config" &&
	! grep -i "^Subsystem" "$HERD_CLUSTER_DIR/nodes/$N2/sshd_config" &&
	cluster_kill_node 2 &&
	cluster_start_node 2 &&
	cluster_ssh 1 -s sftp </dev/null &&
	test_must_fail cluster_ssh 2 -s sftp </dev/null
'

test_expect_success 'a fresh ~/.cache: the agent is uploaded into ~/.cache/herd, 0700, no temporary file left' '
	cache 1 &&
	job first "$N1" &&
	herd run first.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	on 1 "ls -A /root/.cache/herd" >names &&
	test $(wc -l <names) -eq 1 &&
	AGENT=$(cat names) &&
	case $AGENT in agent-*) ;; *) false ;; esac &&
	test "$(on 1 "stat -c %a /root/.cache/herd /root/.cache/herd/$AGENT")" = "700
700" &&
	on 1 "cmp \"$HERD_ROOT/bin/herd-agent\" /root/.cache/herd/$AGENT"
'

test_expect_success 'no SFTP on the node: the agent goes through the exec channel, then is reused' '
	cache 2 &&
	job nosftp "$N2" &&
	herd run nosftp.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	test "$(on 2 "ls -A /root/.cache/herd")" = "$AGENT" &&
	test "$(on 2 "stat -c %a /root/.cache/herd/$AGENT")" = 700 &&
	on 2 "cmp \"$HERD_ROOT/bin/herd-agent\" /root/.cache/herd/$AGENT" &&
	on 2 "stat -c %i.%Y /root/.cache/herd/$AGENT" >before &&
	herd run nosftp.yaml >out 2>err &&
	test_cmp expect out &&
	on 2 "stat -c %i.%Y /root/.cache/herd/$AGENT" >after &&
	test_cmp before after
'

test_expect_success 'ssh.agent_dir: a new directory whose name holds spaces, quotes and $(...) is made 0700 and used as one literal path' '
	inj=/tmp/herd-t0525-injected-$$ &&
	dir="$PWD/odd/it'\''s a \$(touch $inj);\`touch $inj\`" &&
	test_when_finished "rm -rf odd $inj" &&
	job odd "$N2" "$(yq "$dir")" &&
	herd validate odd.yaml --print >printed.yaml &&
	herd validate printed.yaml &&
	grep "^  agent_dir: " printed.yaml &&
	herd run odd.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	cmp "$HERD_ROOT/bin/herd-agent" "$dir/$AGENT" &&
	test "$(stat -c %a "$PWD/odd" "$dir" "$dir/$AGENT")" = "700
700
700" &&
	test ! -e "$inj" &&
	test -z "$(find odd -name ".agent-*")"
'

test_expect_success 'read-only ~/.cache: one line naming the node and the directory, nothing left' '
	cache 1 ro &&
	job ro "$N1" &&
	test_expect_code 1 herd run ro.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: cannot upload herd-agent: cannot create /root/.cache/herd: Read-only file system; set ssh.agent_dir" &&
	test -z "$(on 1 "ls -A /root/.cache")"
'

test_expect_success 'read-only ~/.cache/herd that exists: one line naming the node and the directory' '
	cache 1 &&
	on 1 "mkdir -m 700 /root/.cache/herd && mount -o remount,ro /root/.cache" &&
	job ro2 "$N1" &&
	test_expect_code 1 herd run ro2.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: cannot upload herd-agent to /root/.cache/herd: Read-only file system; set ssh.agent_dir" &&
	test -z "$(on 1 "ls -A /root/.cache/herd")"
'

test_expect_success 'full ~/.cache: one line naming the node and the directory, no partial file left' '
	cache 1 size=64k &&
	job full "$N1" &&
	test_expect_code 1 herd run full.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: cannot upload herd-agent to /root/.cache/herd: No space left on device; make room there or set ssh.agent_dir" &&
	on 1 "find /root/.cache -type f" >left &&
	test_must_be_empty left
'

test_expect_success 'a cache on a noexec file system: one line that says so' '
	cache 1 noexec &&
	job noexec "$N1" &&
	test_expect_code 1 herd run noexec.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: herd-agent exited at once (status 126): .*/root/.cache/herd/$AGENT: Permission denied (is ssh.agent_dir on a noexec file system?)"
'

test_expect_success 'another local user' '
	HT_USER=herd-t-$$ &&
	useradd --no-create-home --shell /usr/sbin/nologin "$HT_USER" &&
	HT_UID=$(id -u "$HT_USER")
'
# userdel once the script ends, whatever happened: sharness has no
# script-wide cleanup, so this joins the EXIT trap that cluster_up set,
# keeping the exit status that sharness' die reports.
ht_exit() {
	_ht_rc=$?
	[ -z "${HT_USER:-}" ] || userdel "$HT_USER" 2>/dev/null
	return $_ht_rc
}
trap '_rc=$?; ht_exit; (exit $_rc); _herd_cluster_exit; die' EXIT

test_expect_success 'cache directory owned by another user: refused in one line, the planted agent never runs' '
	cache 1 &&
	on 1 "mkdir -m 700 /root/.cache/herd" &&
	plant 1 "/root/.cache/herd/$AGENT" &&
	on 1 "chown -R $HT_USER /root/.cache/herd" &&
	job other "$N1" &&
	test_expect_code 1 herd run other.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: refusing the herd-agent cache /root/.cache/herd: /root/.cache/herd belongs to uid $HT_UID, not to the job user (uid 0) or root; set ssh.agent_dir" &&
	test ! -e PLANTED-RAN &&
	on 1 "cmp \"$PWD/planted\" /root/.cache/herd/$AGENT"
'

test_expect_success 'cache directory writable by group/other (0777): refused in one line, the planted agent never runs' '
	cache 1 &&
	on 1 "mkdir -m 777 /root/.cache/herd" &&
	plant 1 "/root/.cache/herd/$AGENT" &&
	on 1 "chown $HT_USER /root/.cache/herd/$AGENT" &&
	job world "$N1" &&
	test_expect_code 1 herd run world.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: refusing the herd-agent cache /root/.cache/herd: /root/.cache/herd is writable by group/other (mode 0777); fix with chmod go-w /root/.cache/herd or set ssh.agent_dir" &&
	test ! -e PLANTED-RAN
'

test_expect_success 'a directory above the cache writable by group/other: refused, naming it' '
	cache 1 mode=0777 &&
	on 1 "mkdir -m 700 /root/.cache/herd" &&
	plant 1 "/root/.cache/herd/$AGENT" &&
	job above "$N1" &&
	test_expect_code 1 herd run above.yaml >out 2>err &&
	err_has "$N1: refusing the herd-agent cache /root/.cache/herd: /root/.cache is writable by group/other (mode 0777); fix with chmod go-w /root/.cache or set ssh.agent_dir" &&
	test ! -e PLANTED-RAN
'

test_expect_success 'ssh.agent_dir through a symlink into a directory of another user: refused, nothing made there' '
	evil=/tmp/herd-t0525-evil-$$ &&
	test_when_finished "rm -rf $evil" &&
	mkdir -m 700 $evil &&
	chown "$HT_USER" $evil &&
	ln -s $evil "$PWD/via" &&
	job via "$N1" "$(yq "$PWD/via/herd")" &&
	test_expect_code 1 herd run via.yaml >out 2>err &&
	err_has "$N1: refusing the herd-agent cache $PWD/via/herd: $evil belongs to uid $HT_UID" &&
	test -z "$(ls -A $evil)"
'

test_expect_success 'ssh.agent_dir through a symlink into a safe directory: the agent runs from the real path' '
	mkdir -m 700 real &&
	ln -s "$PWD/real" "$PWD/alias" &&
	job alias "$N1" "$(yq "$PWD/alias/herd")" &&
	herd run alias.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	cmp "$HERD_ROOT/bin/herd-agent" "real/herd/$AGENT"
'

test_expect_success 'a root-owned sticky directory above the cache (like /tmp) is accepted' '
	cache 1 mode=1777 &&
	job sticky "$N1" &&
	herd run sticky.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out
'

test_expect_success 'a safe cache holding another program under the agent name: replaced by the real agent, which runs' '
	cache 1 &&
	on 1 "mkdir -m 700 /root/.cache/herd" &&
	plant 1 "/root/.cache/herd/$AGENT" &&
	on 1 "chmod 700 /root/.cache/herd/$AGENT" &&
	job swapped "$N1" &&
	herd run swapped.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	test ! -e PLANTED-RAN &&
	on 1 "cmp \"$HERD_ROOT/bin/herd-agent\" /root/.cache/herd/$AGENT" &&
	test "$(on 1 "stat -c %a /root/.cache/herd/$AGENT")" = 700
'

test_expect_success 'a safe cache holding a symlink under the agent name: replaced by a regular file, the target left alone' '
	cache 1 &&
	on 1 "mkdir -m 700 /root/.cache/herd" &&
	plant 1 /root/.cache/target &&
	on 1 "ln -s /root/.cache/target /root/.cache/herd/$AGENT" &&
	job link "$N1" &&
	herd run link.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	test ! -e PLANTED-RAN &&
	test "$(on 1 "stat -c %F /root/.cache/herd/$AGENT")" = "regular file" &&
	on 1 "cmp \"$PWD/planted\" /root/.cache/target"
'

test_expect_success 'the agent name is a hard link to a file of another user: replaced, that file left alone and never run' '
	cache 1 &&
	on 1 "mkdir -m 700 /root/.cache/herd" &&
	plant 1 /root/.cache/theirs &&
	on 1 "chown $HT_USER /root/.cache/theirs && chmod 700 /root/.cache/theirs" &&
	on 1 "ln /root/.cache/theirs /root/.cache/herd/$AGENT" &&
	job hard "$N1" &&
	herd run hard.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	test ! -e PLANTED-RAN &&
	on 1 "cmp \"$HERD_ROOT/bin/herd-agent\" /root/.cache/herd/$AGENT" &&
	test "$(on 1 "stat -c %h.%U /root/.cache/herd/$AGENT /root/.cache/theirs")" = "1.root
1.$HT_USER" &&
	on 1 "cmp \"$PWD/planted\" /root/.cache/theirs"
'

test_expect_success 'a FIFO under the agent name: nothing hangs on it, it is replaced' '
	cache 1 &&
	on 1 "mkdir -m 700 /root/.cache/herd && mkfifo -m 700 /root/.cache/herd/$AGENT" &&
	job fifo "$N1" &&
	timeout 60 herd run fifo.yaml >out 2>err &&
	echo "[0] up" >expect &&
	test_cmp expect out &&
	test "$(on 1 "stat -c %F /root/.cache/herd/$AGENT")" = "regular file"
'

test_expect_success 'a sticky directory that another user owns above the cache (their own /tmp): refused, nothing made' '
	sd=/tmp/herd-t0525-sticky-$$ &&
	test_when_finished "rm -rf $sd" &&
	mkdir -m 1777 $sd &&
	chown "$HT_USER" $sd &&
	mkdir -m 700 $sd/mine &&
	job usticky "$N1" "$(yq "$sd/mine/herd")" &&
	test_expect_code 1 herd run usticky.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: refusing the herd-agent cache $sd/mine/herd: $sd belongs to uid $HT_UID, not to the job user (uid 0) or root" &&
	test -z "$(ls -A $sd/mine)"
'

test_expect_success 'a newline in a path that another user names cannot forge the reason: one line, the real one' '
	ev=/tmp/herd-t0525-nl-$$ &&
	test_when_finished "rm -rf $ev" &&
	mkdir -m 755 $ev &&
	nd="$ev/x
herd-agent-error: all is well" &&
	mkdir -m 700 "$nd" &&
	chown -R "$HT_USER" $ev &&
	ln -s "$nd" "$PWD/nl" &&
	job nl "$N1" "$(yq "$PWD/nl/herd")" &&
	test_expect_code 1 herd run nl.yaml >out 2>err &&
	test_must_be_empty out &&
	test $(grep -c "all is well" err) -eq 1 &&
	err_has "$N1: refusing the herd-agent cache $PWD/nl/herd: $ev/x?herd-agent-error: all is well belongs to uid $HT_UID" &&
	test -z "$(ls -A "$nd")"
'

test_expect_success 'two runs upload into the same new cache at once: both run, one agent, no temporary file' '
	mkdir -m 700 shared &&
	job both1 "$N1" "$(yq "$PWD/shared/herd")" &&
	job both2 "$N1" "$(yq "$PWD/shared/herd")" &&
	{ herd run both1.yaml >out1 2>err1 & p1=$!; } &&
	herd run both2.yaml >out2 2>err2 &&
	wait $p1 &&
	echo "[0] up" >expect &&
	test_cmp expect out1 &&
	test_cmp expect out2 &&
	test "$(ls -A shared/herd)" = "$AGENT" &&
	cmp "$HERD_ROOT/bin/herd-agent" "shared/herd/$AGENT"
'

test_expect_success 'the connection drops in the middle of an upload: the temporary file goes' '
	mkdir -m 700 slow &&
	veth=$(ip -o route get "$("$HERD_CLUSTER_TOOLS/node" addr 1)" | sed -n "s/.* dev \([^ ]*\).*/\1/p") &&
	test -n "$veth" &&
	tc qdisc add dev "$veth" root tbf rate 400kbit burst 16kb latency 400ms &&
	test_when_finished "tc qdisc del dev $veth root" &&
	job slow "$N1" "$(yq "$PWD/slow/herd")" &&
	{ herd run slow.yaml >out 2>err & hp=$!; } &&
	i=0 && while [ -z "$(find slow -name ".agent-*" -size +8k)" ] && [ $i -lt 200 ]; do
		sleep 0.05; i=$((i + 1)); done &&
	test -n "$(find slow -name ".agent-*" -size +8k)" &&
	kill -9 $hp && { wait $hp; true; } &&
	i=0 && while [ -n "$(find slow -name ".agent-*")" ] && [ $i -lt 200 ]; do
		sleep 0.05; i=$((i + 1)); done &&
	test -z "$(ls -A slow/herd)"
'

test_expect_success 'ssh.agent_dir in a root-owned sticky directory where another user planted a symlink to a safe directory: refused, nothing written there' '
	sd=/tmp/herd-t0525-tmp-$$ &&
	test_when_finished "rm -rf $sd" &&
	mkdir -m 1777 $sd &&
	mkdir -m 700 steered &&
	ln -s "$PWD/steered" $sd/cache &&
	chown -h "$HT_USER" $sd/cache &&
	job steer "$N1" "$(yq "$sd/cache/herd")" &&
	test_expect_code 1 herd run steer.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: refusing the herd-agent cache .*: $sd/cache belongs to uid $HT_UID, not to the job user (uid 0) or root" &&
	test -z "$(ls -A steered)" &&
	job steer2 "$N1" "$(yq "$sd/cache")" &&
	test_expect_code 1 herd run steer2.yaml >out 2>err &&
	err_has "$N1: refusing the herd-agent cache $PWD/steered: $sd/cache belongs to uid $HT_UID" &&
	test -z "$(ls -A steered)"
'

test_expect_success 'a cache more than 64 directories deep: refused in one line (the check would cost the node O(depth^2))' '
	deep="$PWD/deep$(printf "/d%.0s" $(seq 70))" &&
	mkdir -p -m 700 "$deep" &&
	ln -s "$deep" "$PWD/deeplink" &&
	job deep "$N1" "$(yq "$PWD/deeplink/herd")" &&
	test_expect_code 1 herd run deep.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N1: refusing the herd-agent cache $PWD/deeplink/herd: $PWD/deep/d/.*/d is more than 64 directories deep; set ssh.agent_dir to a shorter path" &&
	test ! -e "$deep/herd"
'

test_expect_success 'HOME empty on the node and ssh.agent_dir under ~: refused in one line, nothing made under /' '
	test ! -e /.cache &&
	test_when_finished "rm -rf /.cache" &&
	echo "SetEnv HOME=" >>"$HERD_CLUSTER_DIR/nodes/$N2/sshd_config" &&
	test_when_finished "sed -i /^SetEnv.HOME=/d \"$HERD_CLUSTER_DIR/nodes/$N2/sshd_config\" && cluster_kill_node 2 && cluster_start_node 2" &&
	cluster_kill_node 2 &&
	cluster_start_node 2 &&
	test "$(cluster_ssh 2 "echo \"[\$HOME]\"" </dev/null)" = "[]" &&
	job nohome "$N2" &&
	test_expect_code 1 herd run nohome.yaml >out 2>err &&
	test_must_be_empty out &&
	err_has "$N2: ssh.agent_dir ~/.cache/herd needs HOME, which is not an absolute path there; set ssh.agent_dir to an absolute path" &&
	test ! -e /.cache
'

# Issue 22 (t0680 under prove -j): the cached file an agent runs from can
# go while it runs: a second job that uploads the same build renames a new
# file over the name, or the user clears the cache.  The agent's
# /proc/self/exe then reads "PATH (deleted)", and a rank's "$HERD_AGENT"
# (herd bench's probe) was not found: exit 127.  The first attempt
# removes the file; the second, on the same agent, runs "$HERD_AGENT".
test_expect_success 'the cached agent removed while it runs: $HERD_AGENT still runs' '
	mkdir -m 700 repl &&
	cat >repl.yaml <<-EOF &&
	name: repl
	nodes: {hosts: "$N1", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS, agent_dir: $(yq "$PWD/repl/herd")}
	restart: {max: 1, backoff: 0s}
	launch:
	  workdir: "$PWD"
	  command: if [ ! -e removed ]; then rm repl/herd/$AGENT && touch removed; exit 1; fi; exec "\$HERD_AGENT" --version
	EOF
	herd run repl.yaml >out 2>err || { cat out err; false; } &&
	test -e removed &&
	grep -x "\[0\] herd-agent [0-9.]*" out
'

test_done
