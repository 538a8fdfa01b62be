#!/bin/sh

test_description='herd keys: make a key pair, install it on every node, pin host keys, --mesh'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"

require_root
require_cmd ssh ssh-keygen useradd userdel usermod chpasswd setsid
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"

# The cluster's sshd reads one authorized_keys file in the cluster dir for
# every user, and root's home is this machine's /root.  herd keys writes
# ~/.ssh/authorized_keys the way OpenSSH reads it by default, so the test
# logs in as a user of its own, whose home is in the trash directory; a
# Match block appended to each node's generated sshd_config makes sshd
# read that user's ~/.ssh/authorized_keys (only) and accept its password.
# The user is removed when the script exits.  Like NFS homes on a real
# cluster, that home is the same on every node.
KEYS_USER=herdk$$
KEYS_HOME=$SHARNESS_TRASH_DIRECTORY/remote-home
KEYS_PASSWORD=herd-test-$$-pw

keys_cleanup() {
	userdel "$KEYS_USER" >/dev/null 2>&1
	return 0
}

# strict_ssh NODE CMD...: as the test user with only herd's new key, host
# keys checked against herd's known_hosts.
strict_ssh() {
	ssh -o StrictHostKeyChecking=yes -o BatchMode=yes -o IdentitiesOnly=yes \
		-o "UserKnownHostsFile=\"$HOME/.ssh/known_hosts\"" \
		-o GlobalKnownHostsFile=/dev/null \
		-i "$HOME/.ssh/herd_ed25519" -l "$KEYS_USER" "$@"
}

# old_ssh NODE CMD...: as the test user with the cluster's key.
old_ssh() {
	ssh -o StrictHostKeyChecking=yes -o BatchMode=yes -o IdentitiesOnly=yes \
		-o UserKnownHostsFile="$HERD_CLUSTER_KNOWN_HOSTS" \
		-o GlobalKnownHostsFile=/dev/null \
		-i "$HERD_CLUSTER_KEY" -l "$KEYS_USER" "$@"
}

# fp FILE.pub: its SHA256 fingerprint.
fp() {
	ssh-keygen -lf "$1" | awk '{print $2}'
}

# keyline FILE.pub: "type base64" of a public key file.
keyline() {
	awk '{print $1, $2}' "$1"
}

# herd_keys ARGS...: herd keys without a controlling terminal, so no
# password prompt can wait for input.
herd_keys() {
	setsid -w herd keys "$@" </dev/null
}

test_expect_success 'cluster of 2 nodes and a test user with a private home' '
	cluster_up 2 &&
	trap "_rc=\$?; keys_cleanup; (exit \$_rc); _herd_cluster_exit; die" EXIT &&
	useradd -M -d "$KEYS_HOME" -s /bin/sh "$KEYS_USER" &&
	mkdir -p "$KEYS_HOME/.ssh" &&
	echo "# a line herd must keep" >"$KEYS_HOME/.ssh/authorized_keys" &&
	cat "$HERD_CLUSTER_KEY.pub" >>"$KEYS_HOME/.ssh/authorized_keys" &&
	cp "$KEYS_HOME/.ssh/authorized_keys" authorized_keys.orig &&
	chown -R "$KEYS_USER:" "$KEYS_HOME" &&
	echo "$KEYS_USER:$KEYS_PASSWORD" | chpasswd &&
	for n in $HERD_CLUSTER_NODES; do
		cat >>"$HERD_CLUSTER_DIR/nodes/$n/sshd_config" <<-EOF || return 1
		Match User $KEYS_USER
			AuthorizedKeysFile .ssh/authorized_keys
			PasswordAuthentication yes
		EOF
		cluster_kill_node $n && cluster_start_node $n || return 1
	done &&
	for n in $HERD_CLUSTER_NODES; do
		old_ssh $n true || return 1
	done
'

N1=
N2=
test_expect_success 'job spec and an ssh config that names the cluster key' '
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	cat >job.yaml <<-EOF &&
	nodes:
	  hosts: $HERD_CLUSTER_HOSTLIST
	ssh:
	  user: $KEYS_USER
	launch:
	  command: hostname
	EOF
	mkdir -m 700 "$HOME/.ssh" &&
	cat >"$HOME/.ssh/config" <<-EOF
	Host $HERD_CLUSTER_PREFIX*
		IdentityFile $HERD_CLUSTER_KEY
	EOF
'

test_expect_success '--help documents the default identity' '
	herd keys --help >help &&
	grep "~/.ssh/herd_ed25519" help &&
	grep -- "--accept-new" help && grep -- "--mesh" help &&
	grep HERD_PASSWORD help
'

test_expect_success 'a bad spec exits 2' '
	printf "nodes:\n  hosts: [\n" >bad.yaml &&
	test_expect_code 2 herd_keys bad.yaml 2>err &&
	grep "bad.yaml:" err &&
	test_expect_code 2 herd_keys job.yaml --bogus
'

test_expect_success 'unknown host keys are refused without --accept-new' '
	test_expect_code 1 herd_keys job.yaml >out 2>err &&
	cat out err &&
	for n in $N1 $N2; do
		grep "^herd: $n: host key SHA256:.* is not pinned" err &&
		grep "^herd: $n: .*--accept-new" err || return 1
	done &&
	grep "2 nodes: 0 key installed, 0 already present, 2 failed" out &&
	test_cmp authorized_keys.orig "$KEYS_HOME/.ssh/authorized_keys" &&
	test ! -s "$HOME/.ssh/known_hosts"
'

test_expect_success 'the key pair was made with the right modes' '
	test "$(stat -c %a "$HOME/.ssh")" = 700 &&
	test "$(stat -c %a "$HOME/.ssh/herd_ed25519")" = 600 &&
	test "$(stat -c %a "$HOME/.ssh/herd_ed25519.pub")" = 644 &&
	ssh-keygen -y -f "$HOME/.ssh/herd_ed25519" >derived.pub &&
	test "$(keyline derived.pub)" = "$(keyline "$HOME/.ssh/herd_ed25519.pub")" &&
	grep "^ssh-ed25519 " "$HOME/.ssh/herd_ed25519.pub" &&
	! ls "$HOME/.ssh" | grep herd-tmp
'

test_expect_success '--accept-new pins host keys and installs the key' '
	herd_keys job.yaml --accept-new >out 2>err &&
	cat out err &&
	grep "^using key pair $HOME/.ssh/herd_ed25519 (SHA256:" out &&
	for n in $N1 $N2; do
		grep -E "^$n: key (installed|already present)\$" out &&
		grep "^$n: host key SHA256:.* pinned" out &&
		grep "^$n " "$HOME/.ssh/known_hosts" || return 1
	done &&
	grep "key installed" out &&
	grep "herd keys: 2 nodes: .* 0 failed" out &&
	test $(wc -l <"$HOME/.ssh/known_hosts") -eq 2
'

test_expect_success 'the key is installed once and the old lines are kept' '
	ak=$KEYS_HOME/.ssh/authorized_keys &&
	test $(grep -cF "$(keyline "$HOME/.ssh/herd_ed25519.pub")" "$ak") -eq 1 &&
	grep -Fx "# a line herd must keep" "$ak" &&
	grep -F "$(keyline "$HERD_CLUSTER_KEY.pub")" "$ak" &&
	test $(wc -l <"$ak") -eq 3 &&
	test "$(stat -c %a "$ak")" = 600 &&
	! ls -a "$KEYS_HOME/.ssh" | grep herd-tmp
'

test_expect_success 'strict ssh with only the new key works on every node' '
	for n in $N1 $N2; do
		strict_ssh $n hostname >host &&
		echo $n >expect &&
		test_cmp expect host || return 1
	done
'

test_expect_success 'a second run adds nothing' '
	cp "$KEYS_HOME/.ssh/authorized_keys" ak.before &&
	cp "$HOME/.ssh/known_hosts" kh.before &&
	cp "$HOME/.ssh/herd_ed25519" key.before &&
	herd_keys job.yaml >out 2>err &&
	cat out err &&
	grep "^$N1: key already present\$" out &&
	grep "^$N2: key already present\$" out &&
	grep "2 nodes: 0 key installed, 2 already present, 0 failed" out &&
	test_cmp ak.before "$KEYS_HOME/.ssh/authorized_keys" &&
	test_cmp kh.before "$HOME/.ssh/known_hosts" &&
	test_cmp key.before "$HOME/.ssh/herd_ed25519"
'

test_expect_success 'a changed host key is refused, naming both fingerprints' '
	cp "$HOME/.ssh/known_hosts" kh.good &&
	test_when_finished "cp kh.good \"\$HOME/.ssh/known_hosts\"" &&
	key2=$(awk -v n=$N2 "\$1 == n {print \$2, \$3}" kh.good) &&
	awk -v n=$N1 -v k="$key2" "\$1 == n {print n, k; next} {print}" kh.good >"$HOME/.ssh/known_hosts" &&
	line=$(grep -n "^$N1 " "$HOME/.ssh/known_hosts" | cut -d: -f1) &&
	fp1=$(fp "$HERD_CLUSTER_DIR/nodes/$N1/ssh_host_ed25519_key.pub") &&
	fp2=$(fp "$HERD_CLUSTER_DIR/nodes/$N2/ssh_host_ed25519_key.pub") &&
	test_expect_code 1 herd_keys job.yaml --accept-new >out 2>err &&
	cat out err &&
	grep "^herd: $N1: HOST KEY CHANGED" err >msg &&
	grep -F "$fp1" msg && grep -F "$fp2" msg &&
	grep -F "$HOME/.ssh/known_hosts line $line " msg &&
	grep -F "ssh-keygen -R $N1" msg &&
	grep "^$N2: key already present" out &&
	grep "failed: $N1 (" err
'

test_expect_success 'without a key the node accepts and no password: exit 1 naming the fix' '
	mv "$HOME/.ssh/config" config.saved &&
	cp authorized_keys.orig "$KEYS_HOME/.ssh/authorized_keys" &&
	(unset HERD_PASSWORD SSH_AUTH_SOCK; test_expect_code 1 herd_keys job.yaml >out 2>err) &&
	cat out err &&
	for n in $N1 $N2; do
		grep "^herd: $n: authentication failed for user $KEYS_USER.*HERD_PASSWORD" err ||
			return 1
	done
'

test_expect_success 'a wrong HERD_PASSWORD is refused' '
	(unset SSH_AUTH_SOCK; HERD_PASSWORD=wrong test_expect_code 1 herd_keys job.yaml >out 2>err) &&
	cat out err &&
	grep "^herd: $N1: .*password was refused" err
'

test_expect_success 'HERD_PASSWORD logs in and installs the key' '
	(unset SSH_AUTH_SOCK; HERD_PASSWORD=$KEYS_PASSWORD herd_keys job.yaml >out 2>err) &&
	cat out err &&
	grep "herd keys: 2 nodes: .* 0 failed" out &&
	test $(grep -cF "$(keyline "$HOME/.ssh/herd_ed25519.pub")" "$KEYS_HOME/.ssh/authorized_keys") -eq 1 &&
	strict_ssh $N2 true
'

test_expect_success '--mesh copies the pair and pins every node on every node' '
	herd_keys job.yaml --mesh >out 2>err &&
	cat out err &&
	grep "^$N1: mesh key pair and host keys installed" out &&
	grep "^$N2: mesh key pair and host keys installed" out &&
	test_cmp "$HOME/.ssh/herd_ed25519" "$KEYS_HOME/.ssh/id_herd_ed25519" &&
	test "$(stat -c %a "$KEYS_HOME/.ssh/id_herd_ed25519")" = 600 &&
	test "$(stat -c %a "$KEYS_HOME/.ssh/id_herd_ed25519.pub")" = 644 &&
	test "$(stat -c %U "$KEYS_HOME/.ssh/id_herd_ed25519")" = "$KEYS_USER" &&
	test $(wc -l <"$KEYS_HOME/.ssh/known_hosts") -eq 2 &&
	strict_ssh $N1 "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -i ~/.ssh/id_herd_ed25519 $N2 hostname" >host &&
	echo $N2 >expect &&
	test_cmp expect host
'

test_expect_success '--mesh twice adds nothing on the nodes' '
	cp "$KEYS_HOME/.ssh/known_hosts" nkh.before &&
	herd_keys job.yaml --mesh >out 2>err &&
	test_cmp nkh.before "$KEYS_HOME/.ssh/known_hosts" &&
	test $(grep -cF "$(keyline "$HOME/.ssh/herd_ed25519.pub")" "$KEYS_HOME/.ssh/authorized_keys") -eq 1
'

test_expect_success 'ssh.identity names another pair, made where asked' '
	mv config.saved "$HOME/.ssh/config" &&
	cat >job2.yaml <<-EOF &&
	nodes:
	  hosts: $N1
	ssh:
	  user: $KEYS_USER
	  identity: ~/keys/other
	  host_keys: accept-new
	  known_hosts: ~/kh2
	launch:
	  command: hostname
	EOF
	herd_keys job2.yaml >out 2>err &&
	cat out err &&
	grep "^created key pair $HOME/keys/other " out &&
	test "$(stat -c %a "$HOME/keys")" = 700 &&
	test "$(stat -c %a "$HOME/keys/other")" = 600 &&
	grep "^$N1: key installed" out &&
	grep "^$N1 " "$HOME/kh2" &&
	ssh -o StrictHostKeyChecking=yes -o BatchMode=yes -o IdentitiesOnly=yes \
		-o "UserKnownHostsFile=\"$HOME/kh2\"" -i "$HOME/keys/other" \
		-l "$KEYS_USER" $N1 true
'

test_expect_success 'remove the test user' '
	userdel "$KEYS_USER" &&
	! getent passwd "$KEYS_USER"
'

test_done
