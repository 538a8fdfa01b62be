#!/bin/sh

test_description='the rank keeper is its own program (no work after fork but exec, issue 11): the small libc-only program the agent carries, run from a sealed memfd (a quarter of the cost of an exec of the agent, and the agent itself loads no libpmix or libcrypto outside launch.mode pmix), still the agent'"'"'s own version after the cached binary is replaced, and kill -9 of the agent still leaves no rank'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_cmd ps readlink

# The ranks write their keeper's pid (their parent) and group to
# pids/R, say which attempt they are in, and in attempt 1 wait (bounded)
# for the file "go", then fail; attempt 2 succeeds.
cat >rank.sh <<EOF
echo "\$PPID \$(ps -o pgid= -p \$\$ | tr -d " ")" >"pids/\$RANK.tmp" &&
mv "pids/\$RANK.tmp" "pids/\$RANK"
echo "attempt \$HERD_ATTEMPT"
[ "\$HERD_ATTEMPT" = 1 ] || exit 0
sh "$HERD_TEST_DIR/data/slurm/wait-go.sh" "\$PWD/go" >/dev/null
exit 3
EOF

test_expect_success 'a job of 2 ranks whose attempt 1 fails on cue' '
	cat >k.yaml <<-EOF
	name: k
	nodes: {hosts: localhost, slots: 2}
	health: {grace: 1s}
	restart: {max: 1}
	launch:
	  workdir: "$PWD"
	  command: exec sh rank.sh
	EOF
	herd validate k.yaml
'

test_expect_success 'each keeper is the embedded program run from a memfd: /proc/KEEPER/cmdline is the keeper mode, exe is the memfd, it maps no library but libc (no libcrypto, libpmix, hwloc, jansson), comm is the agent'"'"'s, and it leads the rank'"'"'s group' '
	rm -rf pids go && mkdir pids &&
	run_bg k.yaml out err &&
	wait_files 2 "pids/?" 20 &&
	for r in 0 1; do
		read keeper pgid <"pids/$r" &&
		test "$keeper" = "$pgid" &&
		agent=$(ps -o ppid= -p $keeper | tr -d " ") &&
		tr "\0" " " <"/proc/$keeper/cmdline" >cmdline &&
		echo "keeper $keeper of rank $r: $(cat cmdline)" &&
		grep -x ".*herd-agent --keeper --rank $r " cmdline &&
		readlink /proc/$keeper/exe >exe &&
		echo "its exe: $(cat exe)" &&
		grep -x "/memfd:herd-keeper (deleted)" exe &&
		awk "\$6 ~ /\\.so/ {print \$6}" /proc/$keeper/maps | sort -u >libs &&
		echo "its libraries:" && cat libs &&
		! grep -v -e "/libc\.so" -e "/ld-linux" -e "/libasan" -e "/libubsan" \
			-e "/libstdc++" -e "/libgcc_s" -e "/libm\.so" libs &&
		test "$(cat /proc/$keeper/comm)" = "$(cat /proc/$agent/comm)" &&
		# the agent of a job that is not launch.mode pmix loads
		# neither libpmix nor libcrypto (opened only when needed)
		! grep -e libpmix -e libcrypto /proc/$agent/maps &&
		tr "\0" " " <"/proc/$agent/cmdline" | grep -q "herd-agent --stdio" || return 1
	done &&
	touch go &&
	wait_exit $HERD_PID 30 &&
	test "$WAIT_RC" = 0
'

test_expect_success 'the cached agent replaced while it runs: the keepers of attempt 2 are still the agent'"'"'s own image' '
	mkdir b &&
	cp "$HERD_ROOT/bin/herd" "$HERD_ROOT/bin/herd-agent" b/ &&
	rm -rf pids go && mkdir pids &&
	{ b/herd run k.yaml >out 2>err & } &&
	HERD_PID=$! &&
	wait_files 2 "pids/?" 20 &&
	# What a new upload does: another file renamed over the name.
	printf "#!/bin/sh\ntouch \"%s/WRONG\"\nexit 1\n" "$PWD" >b/new &&
	chmod +x b/new &&
	mv b/new b/herd-agent &&
	rm pids/? &&
	touch go &&
	wait_exit $HERD_PID 30 &&
	test "$WAIT_RC" = 0 &&
	grep -x "\[0\] attempt 2" out &&
	grep -x "\[1\] attempt 2" out &&
	test ! -e WRONG
'

test_expect_success 'kill -9 of the agent: no rank is alive 5 s later' '
	rm -rf pids go && mkdir pids &&
	run_bg k.yaml out err &&
	wait_files 2 "pids/?" 20 &&
	read keeper pgid0 <pids/0 &&
	read keeper1 pgid1 <pids/1 &&
	agent=$(ps -o ppid= -p $keeper | tr -d " ") &&
	kill -9 $agent &&
	groups_gone -t 5 $pgid0 $pgid1 &&
	wait_exit $HERD_PID 30 &&
	test "$WAIT_RC" != 0
'

test_expect_success 'herd-agent --keeper run by hand refuses and exits 2' '
	test_expect_code 2 herd-agent --keeper --rank 0 </dev/null 3>&- 2>err &&
	grep "herd-agent: --keeper is started by herd-agent itself for each rank, not by hand" err
'

test_done
