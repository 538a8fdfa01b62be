#!/bin/sh

test_description='the control socket directory (issue 23 item 6): another local user who makes /tmp/herd-UID first does not stop herd run --detach of a user without XDG_RUNTIME_DIR (su, sudo, cron): the run listens in a directory of its own (the user'"'"'s, 0700), the registry entry records it, and herd list, status, attach and stop find the job there; an XDG_RUNTIME_DIR too long for a socket path does the same'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd useradd userdel runuser pkill jq stat

# Two local users of this test alone: the one who runs herd (its uid's
# /tmp/herd-UID is taken; never root's, which other tests use) and the
# one who takes it first.
USER_A=herd-sa-$$
USER_B=herd-sb-$$

cleanup() {
	pkill -9 -u "$USER_A" 2>/dev/null
	[ -z "${UID_A:-}" ] || rm -rf "/tmp/herd-$UID_A" /tmp/herd-"$UID_A".*
	userdel "$USER_A" >/dev/null 2>&1
	userdel "$USER_B" >/dev/null 2>&1
	return 0
}

# as_a CMD...: CMD as USER_A with no XDG_RUNTIME_DIR (as su and cron
# leave it), its home here.
as_a() {
	runuser -u "$USER_A" -- env -u XDG_RUNTIME_DIR -u XDG_STATE_HOME \
		HOME="$PWD/home" PATH="$PATH" "$@"
}

# entry ID: USER_A's registry entry of job ID.
entry() { echo "home/.local/state/herd/jobs/$1.json"; }

# until_true S CMD...: polls CMD every 0.1 s for at most S seconds.
until_true() {
	_ut_n=$(($1 * 10))
	shift
	while ! "$@"; do
		_ut_n=$((_ut_n - 1))
		[ $_ut_n -gt 0 ] || { echo "not true in time: $*" >&2; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done
}

listed_ended() {
	as_a herd list --json |
		jq -e --arg id "$1" '.[] | select(.id == $id) | .state == "ended"'
}

test_expect_success 'setup: two local users; the second takes /tmp/herd-UID of the first' '
	own_binaries &&
	trap "_rc=\$?; cleanup; (exit \$_rc); die" EXIT &&
	useradd -M -d /nonexistent -s /bin/sh "$USER_A" &&
	useradd -M -d /nonexistent -s /bin/sh "$USER_B" &&
	UID_A=$(id -u "$USER_A") &&
	UID_B=$(id -u "$USER_B") &&
	rm -rf "/tmp/herd-$UID_A" &&
	runuser -u "$USER_B" -- mkdir -m 0755 "/tmp/herd-$UID_A" &&
	test "$(stat -c %u "/tmp/herd-$UID_A")" = "$UID_B" &&
	mkdir home work && chown "$USER_A" home work &&
	cat >tick.yaml <<-EOF
	name: tick
	nodes: {hosts: localhost, slots: 1}
	health: {grace: 1s}
	restart: {max: 0}
	log: {dir: "$PWD/work/runs"}
	launch: {command: "while :; do echo tick; sleep 0.2; done"}
	EOF
'

test_expect_success 'herd run --detach works: the socket in a directory of its own (the user'"'"'s, 0700), recorded in the registry' '
	as_a herd run --detach tick.yaml >out 2>err &&
	cat out err &&
	ID=$(sed -n "s/^job //p" out) &&
	test -n "$ID" &&
	SOCK=$(jq -r .sock "$(entry "$ID")") &&
	echo "$SOCK" &&
	case $SOCK in "/tmp/herd-$UID_A."*"/$ID.sock") ;; *) false ;; esac &&
	test -S "$SOCK" &&
	test "$(stat -c "%u %a" "$SOCK")" = "$UID_A 600" &&
	SDIR=${SOCK%/*} &&
	test ! -L "$SDIR" &&
	test "$(stat -c "%u %a %F" "$SDIR")" = "$UID_A 700 directory" &&
	# the launching shell is told why, and where
	grep "control socket: /tmp/herd-$UID_A is owned by uid $UID_B.* this job'"'"'s control socket is in $SDIR instead" err &&
	# the other user'"'"'s directory is left as it was
	test "$(stat -c "%u %a" "/tmp/herd-$UID_A")" = "$UID_B 755" &&
	test -z "$(ls -A "/tmp/herd-$UID_A")"
'

test_expect_success 'herd list and status say running (through the socket)' '
	as_a herd list --json >list.json &&
	jq -e --arg id "$ID" ".[] | select(.id == \$id) | .state == \"running\"" list.json &&
	as_a herd status --json "$ID" | jq -e ".state == \"running\""
'

test_expect_success 'herd attach and herd stop --wait find it: the job ends (143); the socket and its directory are removed' '
	{ as_a herd attach "$ID" >attach.out 2>attach.err & } &&
	apid=$! &&
	until_true 20 grep -q "tick" attach.out &&
	test_expect_code 143 as_a herd stop --wait "$ID" >stop.out 2>stop.err &&
	cat stop.out stop.err &&
	grep "^herd: $ID: ended, exit status 143" stop.out &&
	{ wait $apid; echo $? >attach.rc; } &&
	test "$(cat attach.rc)" = 143 &&
	until_true 20 listed_ended "$ID" &&
	until_true 20 test ! -e "$SDIR"
'

test_expect_success 'an XDG_RUNTIME_DIR too long for a socket path: the same, in a directory of its own' '
	LONG=$PWD/rt/$(printf "%0100d" 0) &&
	mkdir -p "$LONG" && chown -R "$USER_A" rt && chmod 700 "$LONG" &&
	runuser -u "$USER_A" -- env -u XDG_STATE_HOME XDG_RUNTIME_DIR="$LONG" \
		HOME="$PWD/home" PATH="$PATH" herd run --detach tick.yaml >out2 2>err2 &&
	cat out2 err2 &&
	ID2=$(sed -n "s/^job //p" out2) &&
	SOCK2=$(jq -r .sock "$(entry "$ID2")") &&
	case $SOCK2 in "/tmp/herd-$UID_A."*"/$ID2.sock") ;; *) false ;; esac &&
	test -S "$SOCK2" &&
	test_expect_code 143 as_a herd stop --wait "$ID2" >stop2.out &&
	grep "^herd: $ID2: ended, exit status 143" stop2.out &&
	until_true 20 test ! -e "${SOCK2%/*}"
'

test_done
