# lib.sh — helpers of t0730-slurm-failover.t (POSIX sh).  Source after
# test-lib.sh, tests/cluster/lib.sh, data/run/lib.sh and data/failover/lib.sh.
#
#   sf_job NAME MIN RESTARTS     writes NAME.yaml: the failover job of
#                                data/failover (train.py, 40 steps, a
#                                checkpoint every 5, 0.1 s a step) on the
#                                nodes of the Slurm allocation, one slot
#                                each, nodes.min MIN, restart.max RESTARTS
#   sf_salloc_bg FILE OUT ERR    `herd run -v FILE` inside a fresh 4-node
#                                allocation that survives a node failure
#                                (salloc --no-kill), in the background;
#                                sets HERD_PID (bounded by timeout)
#   sf_job_field ID KEY          KEY=value of scontrol show job ID
#   sf_steps_sane ERR LEFT       the srun steps herd -v logged in ERR: the
#                                first asks for the whole allocation without
#                                --overlap; each later one has --overlap
#                                and names at most LEFT nodes

sf_job() {
	mkdir -p "ckpt-$1" &&
	cat >"$1.yaml" <<-EOF
	name: $1
	nodes: {slurm: true, slots: 1, min: $2}
	health: {heartbeat: 500ms, timeout: 3s, grace: 2s}
	restart: {max: $3, backoff: 500ms}
	checkpoint: {dir: "$PWD/ckpt-$1", pattern: "step_*", complete_marker: COMPLETE}
	launch:
	  command: $(yaml_cmd /usr/bin/python3 "$FO_TRAIN" --steps "$FO_STEPS" \
		--step-sleep 0.1 --ckpt "$PWD/ckpt-$1" --ckpt-every 5)
	  workdir: "$PWD"
	  env: {OMP_NUM_THREADS: "1"}
	EOF
}

sf_salloc_bg() {
	timeout 150 salloc -N4 --no-kill herd run -v "$1" >"$2" 2>"$3" &
	HERD_PID=$!
}

sf_job_field() {
	timeout 5 scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" |
		head -n 1
}

sf_steps_sane() {
	grep "^herd: slurm: step [0-9]*: " "$1" >steps.log || return 1
	cat steps.log
	awk -v left="$2" -v all="$(echo $HERD_CLUSTER_NODES | wc -w)" '
		{
			nodes = -1; overlap = 0
			for (i = 5; i <= NF; i++) {
				if ($i ~ /^--nodes=/) nodes = substr($i, 9) + 0
				if ($i == "--overlap") overlap = 1
			}
			if (NR == 1 && (nodes != all || overlap)) bad = 1
			if (NR > 1 && (nodes < 1 || nodes > left || !overlap)) bad = 1
		}
		END { exit bad || NR == 0 }' steps.log
}
