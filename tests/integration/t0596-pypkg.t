#!/bin/sh

test_description='the herd Python package on every rank'"'"'s PYTHONPATH with no set-up: import herd.metrics works on every node (ssh, localhost, Slurm); the copy is 0700/0600, owned by the user, reused while it verifies; a PYTHONPATH of the job follows it; a TMPDIR/herd-agent-UID of another user (a directory or a symlink) or a changed copy is refused in one line and never written through'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/slurm/lib.sh"

require_root
require_cmd ip nsenter unshare setsid ssh-keygen jq stat useradd userdel \
	mount umount sinfo salloc srun
[ -x /usr/sbin/sshd ] || error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"

RANK_PY=$HERD_TEST_DIR/data/pypkg/rank.py
U=herd-t-$$
HEX32='[0-9a-f]\{32\}'

# job NAME HOSTS SLOTS [ENV]: NAME.yaml running rank.py (no PYTHONPATH
# unless ENV, a YAML flow mapping, sets one).
job() {
	{
		echo "name: $1"
		case $2 in
		localhost) echo "nodes: {hosts: localhost, slots: $3}" ;;
		slurm) echo "nodes: {slurm: true, count: 2, slots: $3}" ;;
		*) echo "nodes: {hosts: \"$2\", slots: $3}"
		   echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}" ;;
		esac
		echo "restart: {max: 0}"
		echo "launch:"
		echo "  command: $(yaml_cmd /usr/bin/python3 "$RANK_PY")"
		echo "  workdir: \"$PWD\""
		[ -z "${4:-}" ] || echo "  env: $4"
		echo "log: {dir: \"$PWD/runs/$1\"}"
	} >"$1.yaml"
}

# ranks_ok N DIR: out has N ranks that imported herd.metrics from
# DIR/herd (DIR a BRE), wrote their metrics line, and saw no planted
# module.
ranks_ok() {
	test "$(grep -c "^\[[0-9]*\] file $2/herd/metrics.py\$" out)" -eq "$1" &&
	test "$(grep -c "^\[[0-9]*\] metrics {\"step\":7,\"loss\":0.25}\$" out)" -eq "$1" &&
	test "$(grep -c "^\[[0-9]*\] planted False\$" out)" -eq "$1" || {
		cat out err >&2
		return 1
	}
}

# err_has PATTERN: herd's stderr has exactly one line matching PATTERN.
err_has() {
	test "$(grep -c -- "$1" err)" -eq 1 || {
		echo "not one line matching: $1; stderr was:" >&2
		cat err >&2
		return 1
	}
}

# Each node'"'"'s sessions get a TMPDIR of their own (sshd SetEnv), so the
# agents there work under T/nN/herd-agent-0, which this test may squat
# without touching the /tmp that other tests share.
T=$(mktemp -d /tmp/herd-t0596.XXXXXX) || error "mktemp failed"
chmod 755 "$T"

test_expect_success 'cluster of 2 nodes, each with a TMPDIR of its own; another local user' '
	own_binaries &&
	cluster_up 2 &&
	N1=$(cluster_node 1) && N2=$(cluster_node 2) &&
	for n in 1 2; do
		mkdir -m 1777 "$T/n$n" &&
		echo "SetEnv TMPDIR=$T/n$n" >>"$HERD_CLUSTER_DIR/nodes/$(cluster_node $n)/sshd_config" &&
		cluster_kill_node $n &&
		cluster_start_node $n &&
		cluster_wait_ssh $n || return 1
	done &&
	test "$(cluster_ssh 1 printenv TMPDIR)" = "$T/n1" &&
	useradd -M -s /bin/sh "$U"
'
ht_exit() {
	_ht_rc=$?
	rm -rf "$T"
	userdel "$U" 2>/dev/null
	return $_ht_rc
}
trap '_rc=$?; ht_exit; (exit $_rc); _herd_cluster_exit; die' EXIT

test_expect_success 'ssh: every rank on every node imports herd.metrics with no PYTHONPATH in the job; the copy is 0700/0600 and the user'"'"'s' '
	job two "$N1,$N2" 2 &&
	herd run two.yaml >out 2>err &&
	ranks_ok 4 "$T/n[12]/herd-agent-0/python-$HEX32" &&
	test "$(grep -c "^\[[0-9]*\] path $T/n[12]/herd-agent-0/python-$HEX32\$" out)" -eq 4 &&
	! grep herd-agent err &&
	for n in 1 2; do
		d=$(ls -d $T/n$n/herd-agent-0/python-*) &&
		test "$(cluster_exec $n stat -c "%a %u" "$d" "$d/herd")" = "700 0
700 0" &&
		cluster_exec $n stat -c "%a %u %n" "$d/herd/__init__.py" "$d/herd/metrics.py" >modes &&
		test "$(grep -c "^600 0 " modes)" = 2 &&
		cluster_exec $n cmp "$d/herd/metrics.py" "$HERD_ROOT/python/herd/metrics.py" || return 1
	done
'

test_expect_success 'ssh: the next run reuses the copy (not written again); the job'"'"'s PYTHONPATH follows it' '
	d=$(ls -d $T/n1/herd-agent-0/python-*) &&
	before=$(cluster_exec 1 stat -c "%i %Y" "$d/herd/metrics.py") &&
	job env "$N1,$N2" 1 "{PYTHONPATH: /opt/mine}" &&
	herd run env.yaml >out 2>err &&
	ranks_ok 2 "$T/n[12]/herd-agent-0/python-$HEX32" &&
	test "$(grep -c "^\[[0-9]*\] path $T/n[12]/herd-agent-0/python-$HEX32:/opt/mine\$" out)" -eq 2 &&
	test "$(cluster_exec 1 stat -c "%i %Y" "$d/herd/metrics.py")" = "$before" &&
	test "$(ls $T/n1/herd-agent-0 | grep -c "^python-")" = 1
'

test_expect_success 'ssh: a copy that no longer holds the image'"'"'s bytes is not used nor rewritten: one line, ranks get a private copy' '
	d=$(ls -d $T/n1/herd-agent-0/python-*) &&
	echo "PLANTED = True" >>"$d/herd/__init__.py" &&
	job changed "$N1" 1 &&
	herd run changed.yaml >out 2>err &&
	ranks_ok 1 "$T/n1/herd-agent-0/[0-9]*-....../python" &&
	err_has "herd-agent@$N1: herd-agent: $d is not this build'"'"'s herd Python package (changed, or not a private directory of this user): not used; ranks get a private copy" &&
	grep -q "^PLANTED = True" "$d/herd/__init__.py" &&
	# the private copy went with the agent
	test "$(ls $T/n1/herd-agent-0 | grep -v -e "^topo-" -e "^python-")" = "" &&
	rm -r "$d"
'

test_expect_success 'ssh: TMPDIR/herd-agent-UID of another user (open to all, with a planted package): refused in one line, nothing written there' '
	h=$T/n1/herd-agent-0 &&
	rm -rf "$h" &&
	mkdir -p "$h/p/herd" &&
	cp "$HERD_ROOT"/python/herd/*.py "$h/p/herd/" &&
	echo "PLANTED = True" >>"$h/p/herd/__init__.py" &&
	chmod -R 777 "$h" &&
	chown -R "$U" "$h" &&
	ls -A "$h" >before &&
	job other "$N1" 2 "{PYTHONPATH: $h/p}" &&
	herd run other.yaml >out 2>err &&
	ranks_ok 2 "$T/n1/herd-agent-[0-9]*-....../python" &&
	err_has "herd-agent@$N1: herd-agent: \$TMPDIR/herd-agent-0 is not a private directory of this user: not used; ranks get a private copy of the herd Python package" &&
	ls -A "$h" >after &&
	test_cmp before after &&
	test "$(stat -c %U "$h")" = "$U"
'

test_expect_success 'ssh: TMPDIR/herd-agent-UID a symlink to another user'"'"'s directory: refused in one line, nothing written through it' '
	h=$T/n1/herd-agent-0 &&
	rm -rf "$h" "$T/victim" &&
	mkdir -m 777 "$T/victim" &&
	chown "$U" "$T/victim" &&
	ln -s "$T/victim" "$h" &&
	job link "$N1" 1 &&
	herd run link.yaml >out 2>err &&
	ranks_ok 1 "$T/n1/herd-agent-[0-9]*-....../python" &&
	err_has "herd-agent@$N1: herd-agent: \$TMPDIR/herd-agent-0 is not a private directory of this user" &&
	test -z "$(ls -A "$T/victim")" &&
	test -h "$h" &&
	rm "$h"
'

test_expect_success 'localhost: the same package on the local transport (TMPDIR of its own)' '
	mkdir -p tmpl &&
	job local localhost 2 &&
	TMPDIR=$PWD/tmpl herd run local.yaml >out 2>err &&
	ranks_ok 2 "$PWD/tmpl/herd-agent-0/python-$HEX32" &&
	test "$(stat -c %a tmpl/herd-agent-0/python-*)" = 700
'

test_expect_success 'Slurm: the same package on the ranks srun starts' '
	slurm_up &&
	# slurm_up set the EXIT trap anew: ours first again.
	trap '"'"'_rc=$?; ht_exit; (exit $_rc); _herd_slurm_exit; _herd_cluster_exit; die'"'"' EXIT &&
	job sl slurm 1 &&
	timeout 120 salloc -N2 herd run sl.yaml >out 2>err &&
	ranks_ok 2 "/tmp/herd-agent-0/python-$HEX32"
'

test_done
