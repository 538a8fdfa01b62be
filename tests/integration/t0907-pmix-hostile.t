#!/bin/sh

test_description='another local user against a job'"'"'s PMIx server: libpmix 4.2 listens on loopback TCP and believes the uid a client writes into its handshake, so a process of user nobody that fakes getuid() (LD_PRELOAD) and names a rank of the job was taken for that rank and could PMIx_Spawn a command as the job'"'"'s user; the agent now asks the kernel who owns each connection (/proc/net/tcp) and refuses the stranger'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/pmix/lib.sh"

require_root
require_cmd cc pkg-config setpriv ss timeout
id nobody >/dev/null 2>&1 || error "prerequisite: a user nobody"

# The programs of the stranger, in a directory nobody can read.
EVIL=$(mktemp -d /tmp/herd-t0907.XXXXXX) || error "mktemp"
chmod 755 "$EVIL"
trap '_rc=$?; rm -rf "$EVIL"; (exit $_rc); die' EXIT

test_expect_success 'the stranger'"'"'s programs' '
	own_binaries &&
	cc -O2 -Wall -Werror $(pkg-config --cflags pmix) \
		"$PMIX_DATA/evil.c" -o "$EVIL/evil" $(pkg-config --libs pmix) &&
	cc -O2 -Wall -Werror -shared -fPIC "$PMIX_DATA/fakeid.c" -o "$EVIL/fakeid.so" &&
	chmod 755 "$EVIL/evil" "$EVIL/fakeid.so"
'

test_expect_success 'uid nobody, faking uid 0, cannot connect as rank 0 nor spawn; the agent says so' '
	# the rank: says where its server is, then waits for the test
	cat >rank.sh <<-\EOF &&
	env | grep ^PMIX_ >pmix.env.tmp && mv pmix.env.tmp pmix.env
	i=0
	while ! test -e release && test $i -lt 600; do
		sleep 0.1
		i=$((i + 1))
	done
	EOF
	cat >victim.yaml <<-EOF &&
	name: victim
	nodes: {hosts: "v1", slots: 1, transport: local}
	restart: {max: 0}
	launch: {mode: pmix, workdir: "$PWD", command: "sh rank.sh"}
	EOF
	{ timeout 120 herd run victim.yaml >out 2>err & } &&
	i=0 &&
	while ! test -s pmix.env; do
		i=$((i + 1)) && test $i -lt 600 || { cat err; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done &&
	uri=$(sed -n "s/^PMIX_SERVER_URI41=//p" pmix.env) &&
	ns=$(sed -n "s/^PMIX_NAMESPACE=//p" pmix.env) &&
	test -n "$uri" && test -n "$ns" &&
	timeout 60 setpriv --reuid=nobody --regid=nogroup --clear-groups \
		env -i PATH=/usr/bin:/bin LD_PRELOAD="$EVIL/fakeid.so" \
		PMIX_RANK=0 PMIX_NAMESPACE="$ns" PMIX_SERVER_URI41="$uri" \
		PMIX_SERVER_URI4="$uri" PMIX_SECURITY_MODE=native \
		PMIX_GDS_MODULE=hash PMIX_MCA_gds=hash \
		"$EVIL/evil" "$PWD/pwned" >evil.out 2>evil.err;
	touch release &&
	cat evil.out &&
	grep "^init: " evil.out &&
	! grep "^init: SUCCESS" evil.out &&
	! grep "^spawn: " evil.out &&
	i=0 &&
	while ! grep -q "refused: a process of uid 65534" err; do
		i=$((i + 1)) && test $i -lt 100 || { cat err; return 1; }
		sleep 0.1   # poll interval of a bounded wait
	done &&
	sleep 1 &&   # a spawn would have run by now (it took 0.1 s)
	test ! -e pwned
'

test_expect_success 'the job itself is not disturbed: a PMIx program runs on the same agents'"'"' code' '
	pmix_prog &&
	cat >ok.yaml <<-EOF &&
	name: ok
	nodes: {hosts: "a[1-2]", slots: 1, transport: local}
	restart: {max: 0}
	# Both ranks run in this namespace, where other tests add and
	# remove their cluster bridges: Open MPI keeps to loopback.
	launch: {mode: pmix, command: "\"$PMIX_PROG\"", workdir: "$PWD",
	         env: {OMPI_MCA_btl_tcp_if_include: lo}}
	EOF
	timeout 60 herd run ok.yaml >out.ok 2>err.ok &&
	test "$(grep -c "allreduce 3 (ok)" out.ok)" = 2
'

test_done
