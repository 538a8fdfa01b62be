# lib.sh — helpers shared by the t05xx `herd run` tests (POSIX sh).
# Source after test-lib.sh.
#
#   RUN_DATA                    this directory
#   wait_file FILE [S]          poll until FILE exists (at most S s, 10)
#   wait_files N PATTERN [S]    poll until N files match the glob PATTERN
#   group_live PGID             print the live (non-zombie) processes of a group
#   groups_gone PGID... [-t S]  poll until no live process is left in any
#                               of the groups (at most S s, 5); names the
#                               survivors on failure
#   run_bg FILE OUT ERR         start `herd run FILE` in the background,
#                               stdout/stderr to OUT/ERR; sets HERD_PID
#   wait_exit PID [S]           wait (bounded, S s, 20) for a background
#                               job; sets WAIT_RC to its exit status

RUN_DATA=$HERD_TEST_DIR/data/run

wait_file() {
	_wf_i=0
	while [ ! -e "$1" ]; do
		_wf_i=$((_wf_i + 1))
		[ $_wf_i -lt $((${2:-10} * 20)) ] || {
			echo "no $1 after ${2:-10} s" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

wait_files() {
	_wf_i=0
	while [ "$(ls -d $2 2>/dev/null | wc -l)" -lt "$1" ]; do
		_wf_i=$((_wf_i + 1))
		[ $_wf_i -lt $((${3:-10} * 20)) ] || {
			echo "fewer than $1 files $2 after ${3:-10} s" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

group_live() {
	ps -e -o pgid=,pid=,stat=,args= | awk -v g="$1" '$1 == g && $3 !~ /^Z/'
}

groups_gone() {
	_gg_t=5
	_gg_groups=
	while [ $# -gt 0 ]; do
		case $1 in
		-t) _gg_t=$2; shift 2 ;;
		*) _gg_groups="$_gg_groups $1"; shift ;;
		esac
	done
	_gg_i=0
	while :; do
		_gg_left=
		for _gg_g in $_gg_groups; do
			_gg_left="$_gg_left$(group_live $_gg_g)"
		done
		[ -n "$_gg_left" ] || return 0
		_gg_i=$((_gg_i + 1))
		[ $_gg_i -lt $((_gg_t * 20)) ] || {
			echo "still alive after $_gg_t s:" >&2
			for _gg_g in $_gg_groups; do group_live $_gg_g >&2; done
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

run_bg() {
	herd run "$1" >"$2" 2>"$3" &
	HERD_PID=$!
}

wait_exit() {
	_we_i=0
	while kill -0 "$1" 2>/dev/null &&
		! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; do
		_we_i=$((_we_i + 1))
		[ $_we_i -lt $((${2:-20} * 20)) ] || {
			echo "pid $1 still running after ${2:-20} s" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
	wait "$1"
	WAIT_RC=$?
}

# yaml_cmd WORD...: a YAML single-quoted scalar for launch.command that
# runs the words, each double-quoted for the shell (trash directories
# have blanks in their paths).  Words must not hold quotes or '$'.
yaml_cmd() {
	printf "'"
	_yc_sep=
	for _yc_w; do
		printf '%s"%s"' "$_yc_sep" "$_yc_w"
		_yc_sep=' '
	done
	printf "'"
}

# ev_all FILE EVENT JQ-EXPR: true when events.jsonl FILE has EVENT lines
# and JQ-EXPR holds for every one of them.
ev_all() {
	jq -e -n --arg e "$2" \
		"[inputs | select(.event == \$e)] | length > 0 and all(.[]; $3)" \
		"$1" >/dev/null
}

# own_binaries: copies bin/herd and bin/herd-agent into ./bin and puts it
# first on PATH, so that a rebuild of the tree while the test runs cannot
# swap the agent under a running job (herd finds herd-agent next to
# itself).
own_binaries() {
	mkdir -p bin &&
	cp "$HERD_ROOT/bin/herd" "$HERD_ROOT/bin/herd-agent" bin/ &&
	PATH=$PWD/bin:$PATH &&
	export PATH &&
	test "$(command -v herd)" = "$PWD/bin/herd"
}

# wait_ticks NAME N: both ranks of job NAME (HERD_PID its herd) printed
# "tick N" in their logs (bounded: 20 s); t0546 and t0547.
wait_ticks() {
	_wt_i=0
	while ! { grep -q "^tick $2\$" "runs/$1/latest/attempt-1/rank-0.log" &&
		grep -q "^tick $2\$" "runs/$1/latest/attempt-1/rank-1.log"; } 2>/dev/null; do
		_wt_i=$((_wt_i + 1))
		[ $_wt_i -lt 400 ] || { echo "$1: no tick $2 in 20 s" >&2; return 1; }
		kill -0 "$HERD_PID" 2>/dev/null || { echo "$1: herd exited" >&2; return 1; }
		sleep 0.05   # poll interval of a bounded wait
	done
}
