# lib.sh — helpers shared by the t0800-failover-*.t tests (POSIX sh).
# Source after test-lib.sh, tests/cluster/lib.sh and data/run/lib.sh.
#
#   FO_DATA                      this directory
#   FO_TRAIN                     examples/torch-ddp/train.py
#   fo_require                   the prerequisites every failover test has
#   fo_job NAME HOSTS [SPARES] [MIN] [RESTARTS] [CMD...]
#                                writes NAME.yaml: train.py for 40 steps,
#                                checkpoints every 5 into ./ckpt-NAME, short
#                                health timings, restart.survivors: restart
#                                (FO_SURVIVORS): these tests are about the
#                                restart; extra YAML (top level) on
#                                stdin when it is not a terminal
#   fo_step_line ATTEMPT N       the "step N/" line of rank 0 in that attempt
#   fo_wait_step NAME ATTEMPT N [S]
#                                poll rank 0's log until it printed step N
#   fo_wait_steps NAME ATTEMPT K [S]
#                                poll rank 0's log until it printed K steps
#                                in that attempt, whatever step it resumed at
#   fo_wait_event NAME EVENT [JQ] [S]
#                                poll events.jsonl for EVENT (JQ must hold)
#   fo_has NAME EVENT [JQ]       the same, without waiting
#   fo_ns I                      the network namespace of node I
#   fo_train_pids [I...]         pids of train.py in the nodes' namespaces
#                                (all nodes when none given)
#   fo_job_pids [I...]           the same, with any shell around train.py
#   fo_wait_gone I S             poll until no process of the job is left
#                                on node I
#   fo_no_train_left [S]         poll until no process of the job is left
#                                in any node's namespace
#   fo_loss NAME ATTEMPT first|last
#                                rank 0's first or last loss in an attempt
#   fo_resumed_well NAME         attempt 2 resumed from the newest complete
#                                checkpoint (not step 0), its first loss is
#                                close to attempt 1's last, and the job
#                                reached step 40

FO_DATA=$HERD_TEST_DIR/data/failover
FO_TRAIN=$HERD_ROOT/examples/torch-ddp/train.py
FO_STEPS=${FO_STEPS:-40}

fo_require() {
	require_root
	require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq awk ps
	[ -x /usr/sbin/sshd ] ||
		error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
	[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"
	/usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
		error "prerequisite: /usr/bin/python3 cannot import torch.distributed"
}

fo_job() {
	_fj_name=$1 _fj_hosts=$2 _fj_spares=${3:-} _fj_min=${4:-} _fj_max=${5:-3}
	if [ $# -gt 5 ]; then shift 5; else set --; fi
	[ $# -gt 0 ] || set -- /usr/bin/python3 "$FO_TRAIN"
	mkdir -p "ckpt-$_fj_name" &&
	{
		echo "name: $_fj_name"
		printf 'nodes: {hosts: "%s", slots: 1' "$_fj_hosts"
		[ -z "$_fj_spares" ] || printf ', spares: "%s"' "$_fj_spares"
		[ -z "$_fj_min" ] || printf ', min: %s' "$_fj_min"
		echo "}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 2s${FO_HEALTH_EXTRA:-}}"
		echo "restart: {max: $_fj_max, backoff: 500ms, survivors: ${FO_SURVIVORS:-restart}}"
		echo "checkpoint: {dir: \"$PWD/ckpt-$_fj_name\", pattern: \"step_*\", complete_marker: COMPLETE}"
		echo "launch:"
		printf '  command: %s\n' "$(yaml_cmd "$@" --steps "$FO_STEPS" \
			--step-sleep 0.1 --ckpt "$PWD/ckpt-$_fj_name" --ckpt-every 5)"
		echo "  workdir: \"$PWD\""
		echo '  env: {OMP_NUM_THREADS: "1"}'
		[ -t 0 ] || cat
	} >"$_fj_name.yaml"
}

fo_log() { echo "runs/$1/latest/attempt-$2/rank-0.log"; }

# _fo_poll NAME ATTEMPT S WHAT CMD...: poll until CMD succeeds (at most S
# s, while herd runs); WHAT says what was waited for when it did not.
_fo_poll() {
	_fpl_name=$1 _fpl_att=$2 _fpl_s=$3 _fpl_what=$4 _fpl_i=0
	shift 4
	until "$@"; do
		_fpl_i=$((_fpl_i + 1))
		[ $_fpl_i -lt $((_fpl_s * 20)) ] || {
			echo "$_fpl_name attempt $_fpl_att: no $_fpl_what after $_fpl_s s" >&2
			return 1
		}
		kill -0 "$HERD_PID" 2>/dev/null || {
			echo "$_fpl_name: herd exited before $_fpl_what of attempt $_fpl_att" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

_fo_has_step() { grep -q "^step $2/" "$1" 2>/dev/null; }
_fo_has_steps() { [ "$(cat "$1" 2>/dev/null | grep -c "^step [0-9]*/")" -ge "$2" ]; }

fo_wait_step() {
	_fo_poll "$1" "$2" "${4:-60}" "step $3" _fo_has_step "$(fo_log "$1" "$2")" "$3"
}

fo_wait_steps() {
	_fo_poll "$1" "$2" "${4:-60}" "$3 steps" _fo_has_steps "$(fo_log "$1" "$2")" "$3"
}

fo_wait_event() {
	_fe_i=0
	while ! jq -e -n --arg e "$2" \
		"[inputs | select(.event == \$e) | select(${3:-true})] | length > 0" \
		"runs/$1/latest/events.jsonl" >/dev/null 2>&1; do
		_fe_i=$((_fe_i + 1))
		[ $_fe_i -lt $((${4:-30} * 20)) ] || {
			echo "$1: no event $2 ($3) after ${4:-30} s" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

fo_has() { fo_wait_event "$1" "$2" "${3:-true}" 0; }

fo_ns() { echo "herd-$HERD_CLUSTER_ID-n$1"; }

# fo_same_pids BEFORE NODE...: the training processes on NODEs are the
# ones listed in BEFORE (sorted, one per line).  Polls (bounded: 10 s)
# while fewer are listed: a full make check once missed one survivor
# for a moment right after a rejoin (the job ended fine with it).  A pid
# not in BEFORE fails at once; on failure the namespaces' processes are
# printed.
fo_same_pids() {
	_fs_want=$1
	shift
	_fs_i=0
	while :; do
		_fs_got=$(fo_train_pids "$@" | sort)
		[ "$_fs_got" = "$_fs_want" ] && { echo "survivors after: " $_fs_got; return 0; }
		for _fs_p in $_fs_got; do
			echo "$_fs_want" | grep -qx "$_fs_p" || break 2
		done
		_fs_i=$((_fs_i + 1))
		[ $_fs_i -lt 200 ] || break
		sleep 0.05   # poll interval of a bounded wait
	done
	echo "survivors after: " $_fs_got "(before:" $_fs_want")"
	for _fs_n; do
		for _fs_p in $(ip netns pids "$(fo_ns $_fs_n)" 2>/dev/null); do
			echo "node $_fs_n pid $_fs_p $(cat /proc/$_fs_p/comm 2>/dev/null): $(tr "\0" " " <"/proc/$_fs_p/cmdline" 2>/dev/null | cut -c1-200)"
		done
	done
	return 1
}

fo_train_pids() {
	[ $# -gt 0 ] || set -- $(seq 1 $(echo $HERD_CLUSTER_NODES | wc -w))
	for _fp_i; do
		for _fp_p in $(ip netns pids "$(fo_ns $_fp_i)" 2>/dev/null); do
			# The interpreter itself, not a shell that started it
			# (fo_job_pids counts those too).
			case ${_fo_any:-}$(cat "/proc/$_fp_p/comm" 2>/dev/null) in
			any* | python*) ;;
			*) continue ;;
			esac
			tr '\0' ' ' <"/proc/$_fp_p/cmdline" 2>/dev/null |
				grep -q "train\.py" && echo "$_fp_p"
		done
	done
	return 0
}

# fo_wait_gone I S: poll until no train.py is left on node I.
fo_wait_gone() {
	_fg_i=0
	while [ -n "$(fo_job_pids "$1")" ]; do
		_fg_i=$((_fg_i + 1))
		[ $_fg_i -lt $(($2 * 20)) ] || {
			echo "train.py still on node $1 after $2 s" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

# Every process of the job: train.py and any shell around it.
fo_job_pids() {
	_fo_any=any
	fo_train_pids "$@"
	_fo_any=
}

fo_no_train_left() {
	_fn_i=0
	while [ -n "$(fo_job_pids)" ]; do
		_fn_i=$((_fn_i + 1))
		[ $_fn_i -lt $((${1:-10} * 20)) ] || {
			echo "train.py still running after ${1:-10} s:" >&2
			for _fn_p in $(fo_job_pids); do
				ps -o pid=,stat=,args= -p "$_fn_p" >&2
			done
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

fo_loss() {
	_fl_sel='NR == 1'
	[ "$3" = first ] || _fl_sel='END'
	grep "^step [0-9]*/[0-9]* loss " "$(fo_log "$1" "$2")" |
		awk "$_fl_sel { print \$4 }"
}

fo_resumed_well() {
	_fr_ev=runs/$1/latest/events.jsonl
	# The newest complete checkpoint attempt 1 wrote before the fault.
	_fr_last=$(grep "^step [0-9]*/" "$(fo_log "$1" 1)" |
		awk -F'[ /]' '{ s = $2 } END { print s - s % 5 }') &&
	_fr_ck=$(jq -r -n '[inputs | select(.event == "checkpoint_found" and
		.attempt == 2)][0].path' "$_fr_ev") &&
	echo "attempt 1 reached step >= $_fr_last; attempt 2 resumes from $_fr_ck" &&
	case $_fr_ck in */step_*) ;; *) return 1 ;; esac &&
	test -e "$_fr_ck/COMPLETE" &&
	_fr_at=$(( $(basename "$_fr_ck" | sed 's/^step_0*//') )) &&
	test "$_fr_at" -gt 0 && test "$_fr_at" -ge $((_fr_last - 5)) &&
	# The same step, from disk or from the memory tier of rank 0's node
	# (memory comes first for a step both hold).
	grep -q "^rank 0: resumed from \\($_fr_ck\\|.*/step_0*$_fr_at\\) at step $_fr_at\$" \
		"$(fo_log "$1" 2)" &&
	_fr_first=$(grep "^step [0-9]*/" "$(fo_log "$1" 2)" | head -n 1) &&
	case $_fr_first in "step $((_fr_at + 1))/"*) ;; *) return 1 ;; esac &&
	_fr_l1=$(fo_loss "$1" 1 last) && _fr_l2=$(fo_loss "$1" 2 first) &&
	_fr_l0=$(fo_loss "$1" 1 first) &&
	echo "loss: attempt 1 first $_fr_l0 last $_fr_l1; attempt 2 first $_fr_l2" &&
	# Close to where it left off, far below the untrained start.
	awk -v a="$_fr_l1" -v b="$_fr_l2" -v z="$_fr_l0" \
		'BEGIN { exit !(b < z / 2 && b < 3 * a + 0.5) }'
}

# fo_done NAME ATTEMPTS: herd exited 0 after ATTEMPTS attempts and the
# last attempt reached the final step.
fo_done() {
	test "$WAIT_RC" = 0 &&
	ev_all "runs/$1/latest/events.jsonl" job_end ".status == 0 and .attempts == $2" &&
	grep -q "^step $FO_STEPS/$FO_STEPS loss" "$(fo_log "$1" "$2")"
}
