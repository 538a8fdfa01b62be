# lib.sh — helpers shared by the t09xx PMIx tests (POSIX sh).
# Source after test-lib.sh, tests/cluster/lib.sh and data/run/lib.sh.
#
#   PMIX_PROG                   ./allreduce: a copy of build/examples/allreduce
#                               in the trash directory (pmix_prog makes it), so
#                               a rebuild of the tree cannot swap it mid-test
#   pmix_require                the prerequisites every PMIx test has
#   pmix_prog                   copies the program (fails when it is not built)
#   pmix_job NAME [ARGS...]     writes NAME.yaml: launch.mode pmix, the program
#                               with ARGS (shell words, may use $HERD_ATTEMPT);
#                               the nodes: and any other top-level YAML come
#                               from stdin
#   pmix_expect SIZE HOST...    the lines every rank prints when all is well,
#                               "[R] rank R of SIZE on HOST: allreduce ...",
#                               rank R on the R+1st HOST, sorted
#   pmix_lines FILE             the "[R] rank R of ..." lines of herd's stdout,
#                               sorted
#   pmix_ns I                   the network namespace of node I
#   pmix_left                   the allreduce processes left in any node's
#                               namespace ("NS PID" lines)
#   pmix_none_left [S]          poll until pmix_left is empty (at most S s, 5)
#   pmix_procs NAME...          processes whose comm is one of NAME left in
#                               any node's namespace ("NS PID COMM" lines)
#   pmix_gone S NAME...         poll until pmix_procs NAME... is empty (at
#                               most S s; else lists them and fails)
#   now_ms                      wall clock, ms
#   pmix_srun S OUT ERR ARGS... the reference: timeout S srun --mpi=pmix
#                               ARGS >OUT 2>ERR, tried a second time (and
#                               said so) when Open MPI and Slurm alone fail
#   pmix_agent_comm             the agent's comm on the nodes (its name in
#                               ~/.cache/herd, cut to 15 characters)

PMIX_DATA=$HERD_TEST_DIR/data/pmix
PMIX_PROG=$PWD/allreduce

pmix_require() {
	require_root
	require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq awk
	[ -x /usr/sbin/sshd ] ||
		error "prerequisite /usr/sbin/sshd is missing (run 'make deps')"
	[ -x "$HERD_ROOT/build/examples/allreduce" ] ||
		error "prerequisite build/examples/allreduce is missing (run 'make examples')"
}

pmix_prog() {
	cp "$HERD_ROOT/build/examples/allreduce" "$PMIX_PROG"
}

pmix_job() {
	_pj_name=$1
	shift
	{
		echo "name: $_pj_name"
		cat
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "launch:"
		echo "  mode: pmix"
		# The trash directory has blanks in its path.
		printf "  command: '\"%s\" %s'\n" "$PMIX_PROG" "$*"
		echo "  workdir: \"$PWD\""
	} >"$_pj_name.yaml"
}

pmix_expect() {
	_pe_size=$1
	shift
	_pe_r=0
	for _pe_h; do
		_pe_sum=$((_pe_size * (_pe_size + 1) / 2))
		_pe_left=$(((_pe_r + _pe_size - 1) % _pe_size))
		echo "[$_pe_r] rank $_pe_r of $_pe_size on $_pe_h: allreduce $_pe_sum (ok), ring got $_pe_left (ok)"
		_pe_r=$((_pe_r + 1))
	done | sort
}

pmix_lines() {
	grep '^\[[0-9]*\] rank ' "$1" | sort
}

pmix_ns() { echo "herd-$HERD_CLUSTER_ID-n$1"; }

pmix_left() {
	for _pl_ns in $(ip netns list | awk '{print $1}' |
		grep "^herd-$HERD_CLUSTER_ID-n[0-9]*$"); do
		for _pl_p in $(ip netns pids "$_pl_ns" 2>/dev/null); do
			[ "$(cat "/proc/$_pl_p/comm" 2>/dev/null)" = allreduce ] &&
				echo "$_pl_ns $_pl_p"
		done
	done
	return 0
}

pmix_none_left() {
	_pn_i=0
	while [ -n "$(pmix_left)" ]; do
		_pn_i=$((_pn_i + 1))
		[ $_pn_i -lt $((${1:-5} * 20)) ] || {
			echo "allreduce still running after ${1:-5} s:" >&2
			pmix_left >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

pmix_procs() {
	for _pp_ns in $(ip netns list | awk '{print $1}' |
		grep "^herd-$HERD_CLUSTER_ID-n[0-9]*$"); do
		for _pp_p in $(ip netns pids "$_pp_ns" 2>/dev/null); do
			_pp_c=$(cat "/proc/$_pp_p/comm" 2>/dev/null) || continue
			for _pp_n; do
				[ "$_pp_c" = "$_pp_n" ] && echo "$_pp_ns $_pp_p $_pp_c"
			done
		done
	done
	return 0
}

pmix_gone() {
	_pg_s=$1
	shift
	_pg_i=0
	while [ -n "$(pmix_procs "$@")" ]; do
		_pg_i=$((_pg_i + 1))
		[ $_pg_i -lt $((_pg_s * 10)) ] || {
			echo "still running after $_pg_s s:" >&2
			pmix_procs "$@" >&2
			return 1
		}
		sleep 0.1   # poll interval of a bounded wait
	done
}

now_ms() { date +%s%3N; }

# pmix_srun: the srun reference is Open MPI and Slurm alone, before herd
# has a part in it.  On a loaded machine their start sometimes fails
# ("PML add procs failed" in the direct modex; "connect() ... failed:
# Operation now in progress" in the TCP BTL), so a failed run gets one
# more try, and the first failure is printed.
pmix_srun() {
	_ps_s=$1 _ps_out=$2 _ps_err=$3
	shift 3
	timeout "$_ps_s" srun --mpi=pmix "$@" >"$_ps_out" 2>"$_ps_err" && return 0
	echo "the srun reference failed once; again:" >&2
	cat "$_ps_err" >&2
	timeout "$_ps_s" srun --mpi=pmix "$@" >"$_ps_out" 2>"$_ps_err"
}

# pmix_agent_comm: the comm of this test's agent as it runs on a node,
# where herd runs it by its name in the node's agent cache (~/.cache/herd:
# agent-VERSION-HASH, cut to the kernel's 15 characters), never as
# "herd-agent".  Call after own_binaries.
pmix_agent_comm() {
	/usr/bin/python3 "$HERD_TEST_DIR/data/run/agent-name.py" \
		"$(command -v herd-agent)" \
		"$(herd-agent --version | cut -d" " -f2)" | cut -c1-15
}
