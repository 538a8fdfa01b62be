# lib.sh — helpers shared by the t07xx Slurm tests (POSIX sh).  Source
# after test-lib.sh and data/run/lib.sh.
#
#   spare_job NAME COMMAND   writes NAME.yaml: 3 nodes of a 4-node
#                            allocation and the 4th as the spare, fast
#                            health (failure seen within ~4 s), one
#                            restart; COMMAND runs in $PWD; logs in
#                            runs/NAME
#   run_spare_job NAME       runs it with -v inside `salloc -N4 --no-kill`
#                            (bounded: 80 s) in the background, stdout to
#                            out, stderr to err; sets HERD_PID

spare_job() {
	cat >"$1.yaml" <<-EOF
	name: $1
	nodes: {slurm: true, count: 3, min: 3, slots: 1}
	health: {heartbeat: 500ms, timeout: 3s, grace: 2s}
	restart: {max: 1, backoff: 500ms}
	launch:
	  workdir: "$PWD"
	  command: $2
	log: {dir: "$PWD/runs/$1"}
	EOF
}

run_spare_job() {
	timeout 80 salloc -N4 --no-kill herd run -v "$1.yaml" >out 2>err &
	HERD_PID=$!
}
