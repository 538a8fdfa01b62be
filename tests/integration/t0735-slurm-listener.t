#!/bin/sh

test_description='herd run on real Slurm while another local user attacks the slurm listener: it reads the --connect address from srun'"'"'s argv (ps); a silent connection gets the challenge at once and is closed after 3 s; with 600 idle connections held open a node is killed, the spare'"'"'s agent is still admitted at once, the job completes, and stderr holds a few "rejected a connection" lines with the count of the rest'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/slurm/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh-keygen timeout jq pgrep ps \
	useradd userdel runuser sinfo salloc srun
for c in /usr/sbin/sshd /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
	[ -x $c ] || error "prerequisite $c is missing (run 'make deps')"
done
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"

# The hostile user: a fresh account of its own, gone at the end.
U=herd-t-$$
CONNS=${T0735_CONNS:-600}

flood_pids() { pgrep -u "$U" -f idle-flood.py; }

test_expect_success 'cluster of 4 nodes with Slurm; another local user' '
	own_binaries &&
	cluster_up 4 &&
	slurm_up &&
	useradd -M -s /bin/sh "$U" &&
	mkdir flood &&
	cp "$HERD_TEST_DIR/data/slurm/idle-flood.py" flood/ &&
	chown "$U" flood
'

test_expect_success 'a job with a spare runs; the other user reads the listener address from ps; its silent connection gets the challenge at once and is closed after 3 s' '
	cat >rank.sh <<-EOF &&
	#!/bin/sh
	# Attempt 1 says it runs and waits to be stopped; attempt 2 ends.
	if [ "\$HERD_ATTEMPT" -ge 2 ]; then
		echo "rank \$RANK attempt \$HERD_ATTEMPT done"
		exit 0
	fi
	: >"$PWD/up.\$RANK"
	sleep 60
	EOF
	chmod 755 rank.sh &&
	spare_job fl "$(yaml_cmd "$PWD/rank.sh")" &&
	run_spare_job fl &&
	wait_files 3 "up.*" 30 &&
	# What the other user sees: srun of our herd, with the address.
	addr=$(runuser -u "$U" -- ps -e -o args= |
		sed -n "s|^.*srun .* $PWD/bin/herd-agent --connect \([0-9.]*:[0-9]*\)\$|\1|p" |
		head -n 1) &&
	echo "listener (from ps, as $U): $addr" &&
	grep -q "^herd: slurm: agents connect back to $addr\$" err &&
	runuser -u "$U" -- /usr/bin/python3 \
		"$HERD_TEST_DIR/data/slurm/idle-one.py" "$addr" >one.out &&
	cat one.out &&
	awk "/^challenge 36 bytes after/ { ok = \$5 < 1 } END { exit !ok }" one.out &&
	awk "/^closed after/ { ok = \$3 >= 2.5 && \$3 < 5 } END { exit !ok }" one.out &&
	grep "^herd: slurm: rejected a connection from [0-9.:]*: no response within 3 s\$" err
'

test_expect_success "$CONNS idle connections from the other user; node 2 killed: spare node 4 admitted at once, attempt 2 completes; a few rejected lines with the count of the rest" '
	test_when_finished "userdel -f $U" &&
	test_when_finished "kill \$(flood_pids) 2>/dev/null; :" &&
	test -n "$addr" &&
	{ runuser -u "$U" -- /usr/bin/python3 flood/idle-flood.py "$addr" \
		"$CONNS" flood/ready flood/stats & } &&
	wait_file flood/ready 20 &&
	echo "flood: $(cat flood/ready) connections established" &&
	kill -0 $HERD_PID &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 70 &&
	kill -TERM $(flood_pids) &&
	wait_file flood/stats 10 &&
	sed "s/^/flood: /" flood/stats &&
	cat err &&
	test "$WAIT_RC" = 0 &&
	ev=runs/fl/latest/events.jsonl &&
	spare=$(cluster_node 4) && victim=$(cluster_node 2) &&
	ev_all $ev job_start ".nodes == 3 and .spares == 1 and .transport == \"slurm\"" &&
	jq -e -n "[inputs | select(.event == \"node_failed\" and .host == \"$victim\")] | length > 0" $ev &&
	jq -e -n "[inputs | select(.event == \"spare_used\" and .host == \"$spare\")] | length == 1" $ev &&
	t_used=$(jq -n "[inputs | select(.event == \"spare_used\" and .host == \"$spare\") | .t][0]" $ev) &&
	t_up=$(jq -n "[inputs | select(.event == \"node_up\" and .host == \"$spare\") | .t][0]" $ev) &&
	test "$t_up" != null &&
	echo "spare $spare admitted $((t_up - t_used)) ms after it was called in, with $CONNS idle connections" &&
	ev_all $ev attempt_start ".attempt <= 2" &&
	jq -e -n "[inputs | select(.event == \"attempt_start\" and .attempt == 2 and .nodes == 3)] | length == 1" $ev &&
	ev_all $ev job_end ".status == 0 and .attempts == 2" &&
	test $(grep -c "^\[[^]]*:[0-9]\] rank [0-9] attempt 2 done\$" out) -eq 3 &&
	! grep "herd-agent: --connect" err &&
	# The strangers were dropped (herd holds at most 64 from one
	# address) and said so in a few lines with the count of the rest
	# (the silent one above is the first line).
	test $(sed -n "s/^closed_by_herd //p" flood/stats) -ge $((CONNS / 2)) &&
	grep "^herd: slurm: rejected " err >rejected &&
	test $(wc -l <rejected) -le 8 &&
	left_out=$(sed -n -e "s/^herd: slurm: rejected \([0-9][0-9]*\) more connections .*/\1/p" \
		-e "s/^herd: slurm: rejected a connection .* (and \([0-9][0-9]*\) more not shown since the last such line)\$/\1/p" rejected |
		awk "{ n += \$1 } END { print n + 0 }") &&
	echo "rejected: $(wc -l <rejected) lines, $left_out more counted" &&
	test "$left_out" -ge $((CONNS / 2))
'

test_done
