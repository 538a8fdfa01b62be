#!/bin/sh

test_description='herd hosts: host sources, count and spares, every format, errors'

. "$(dirname "$0")/test-lib.sh"

require_cmd sed grep date

DATA=$HERD_TEST_DIR/data/hosts

# job FILE: writes a job file whose nodes: section is stdin.
job() {
	mkdir -p "$(dirname "$1")" &&
	{ echo "nodes:"; sed 's/^/  /'; echo "launch:"; echo "  command: true"; } >"$1"
}

# pid_dead PID: true once PID is gone or a zombie (PID 1 of a container
# may not reap orphans); polls, bounded at 5 s.
pid_dead() {
	i=0
	while kill -0 "$1" 2>/dev/null; do
		grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null && return 0
		i=$((i + 1))
		test $i -lt 500 || { echo "pid $1 still running" >&2; return 1; }
		sleep 0.01   # poll interval of a bounded wait
	done
}

test_expect_success 'no source gives localhost' '
	job none.yaml </dev/null &&
	herd hosts none.yaml >out &&
	echo localhost >expect &&
	test_cmp expect out
'

test_expect_success 'hosts: expression, plain by default' '
	echo "hosts: node[01-03],gpu7" | job hosts.yaml &&
	herd hosts hosts.yaml >out &&
	printf "node01\nnode02\nnode03\ngpu7\n" >expect &&
	test_cmp expect out
'

test_expect_success 'hosts: as a YAML list' '
	printf "hosts:\n  - a[1-2]\n  - b\n" | job list.yaml &&
	herd hosts list.yaml >out &&
	printf "a1\na2\nb\n" >expect &&
	test_cmp expect out
'

test_expect_success '--format for each format, slots from nodes.slots' '
	printf "hosts: n[1-3]\nslots: 4\n" | job slots.yaml &&
	herd hosts slots.yaml --format plain >out &&
	printf "n1\nn2\nn3\n" >expect && test_cmp expect out &&
	herd hosts slots.yaml --format slurm >out &&
	echo "n[1-3]" >expect && test_cmp expect out &&
	herd hosts --format deepspeed slots.yaml >out &&
	printf "n1 slots=4\nn2 slots=4\nn3 slots=4\n" >expect &&
	test_cmp expect out &&
	herd hosts slots.yaml --format=openmpi >out &&
	printf "n1 slots=4 max_slots=4\nn2 slots=4 max_slots=4\nn3 slots=4 max_slots=4\n" >expect &&
	test_cmp expect out &&
	herd hosts slots.yaml --format mpich >out &&
	printf "n1:4\nn2:4\nn3:4\n" >expect && test_cmp expect out
'

test_expect_success 'slots unknown are written as 1' '
	herd hosts hosts.yaml --format mpich >out &&
	printf "node01:1\nnode02:1\nnode03:1\ngpu7:1\n" >expect &&
	test_cmp expect out
'

test_expect_success 'hostfile: deepspeed, slots from the file' '
	echo "hostfile: $DATA/deepspeed.txt" | job ds.yaml &&
	herd hosts ds.yaml --format mpich >out &&
	printf "worker-1:8\nworker-2:8\nworker-3:4\n" >expect &&
	test_cmp expect out
'

test_expect_success 'hostfile: openmpi (bare hosts and options in either order)' '
	echo "hostfile: $DATA/openmpi.txt" | job ompi.yaml &&
	herd hosts ompi.yaml --format deepspeed >out &&
	printf "gpu01 slots=4\ngpu02 slots=2\ngpu03 slots=1\n" >expect &&
	test_cmp expect out
'

test_expect_success 'hostfile: mpich' '
	echo "hostfile: $DATA/mpich.txt" | job mpich.yaml &&
	herd hosts mpich.yaml --format openmpi >out &&
	printf "m1 slots=2 max_slots=2\nm2 slots=2 max_slots=2\nm3 slots=1 max_slots=1\n" >expect &&
	test_cmp expect out
'

test_expect_success 'hostfile: plain' '
	echo "hostfile: $DATA/plain.txt" | job plain.yaml &&
	herd hosts plain.yaml --format slurm >out &&
	herd hosts plain.yaml >out2 &&
	printf "host-a\nhost-b\nhost-c\n" >expect &&
	test_cmp expect out2 &&
	test "$(wc -l <out)" -eq 1
'

test_expect_success 'hostfile: slurm expression over two lines' '
	echo "hostfile: $DATA/slurm.txt" | job slurm.yaml &&
	herd hosts slurm.yaml >out &&
	printf "n01\nn02\nn03\nn07\nn08\n" >expect &&
	test_cmp expect out &&
	herd hosts slurm.yaml --format slurm >out &&
	echo "n[01-03,07-08]" >expect &&
	test_cmp expect out
'

test_expect_success 'nodes.slots overrides the hostfile slots' '
	printf "hostfile: $DATA/deepspeed.txt\nslots: 2\n" | job ds2.yaml &&
	herd hosts ds2.yaml --format mpich >out &&
	printf "worker-1:2\nworker-2:2\nworker-3:2\n" >expect &&
	test_cmp expect out
'

test_expect_success 'hostfile: relative to the job file directory' '
	mkdir -p sub/dir && cp "$DATA/mpich.txt" sub/dir/my-hosts &&
	echo "hostfile: my-hosts" | job sub/dir/rel.yaml &&
	herd hosts sub/dir/rel.yaml >out &&
	printf "m1\nm2\nm3\n" >expect &&
	test_cmp expect out &&
	(cd sub && herd hosts dir/rel.yaml >../out2) &&
	test_cmp expect out2
'

test_expect_success 'count takes the first N, the rest become spares before nodes.spares' '
	printf "hostfile: $DATA/slurm.txt\ncount: 2\nspares: s[1-2]\n" | job count.yaml &&
	herd hosts count.yaml >out &&
	printf "n01\nn02\n" >expect && test_cmp expect out &&
	herd hosts count.yaml --spares >out &&
	printf "n01\nn02\n# spares\nn03\nn07\nn08\ns1\ns2\n" >expect &&
	test_cmp expect out &&
	herd hosts count.yaml --spares --format slurm >out &&
	printf "n[01-02]\nn[03,07-08],s[1-2]\n" >expect &&
	test_cmp expect out &&
	herd hosts count.yaml --spares --format deepspeed >out &&
	printf "n01 slots=1\nn02 slots=1\n# spares\nn03 slots=1\nn07 slots=1\nn08 slots=1\ns1 slots=1\ns2 slots=1\n" >expect &&
	test_cmp expect out
'

test_expect_success '--spares without spares adds nothing' '
	herd hosts hosts.yaml --spares >out &&
	printf "node01\nnode02\nnode03\ngpu7\n" >expect &&
	test_cmp expect out
'

test_expect_success 'count above what the source gives names both numbers' '
	printf "hostfile: $DATA/mpich.txt\ncount: 5\n" | job toomany.yaml &&
	test_expect_code 2 herd hosts toomany.yaml 2>err &&
	grep "^herd: .*nodes.count is 5 but nodes.hostfile gives 3 hosts" err
'

test_expect_success 'a host both node and spare is an error' '
	printf "hostfile: $DATA/mpich.txt\nspares: m[3-4]\n" | job both.yaml &&
	test_expect_code 2 herd hosts both.yaml 2>err &&
	grep "host .m3. is both a node and a spare" err
'

test_expect_success 'hostfile errors carry file:line and what was expected' '
	echo "hostfile: $DATA/bad-slots.txt" | job bad.yaml &&
	test_expect_code 2 herd hosts bad.yaml 2>err &&
	grep "^herd: .*bad-slots.txt:2: bad slots value .zero." err &&
	echo "hostfile: $DATA/dup.txt" | job dup.yaml &&
	test_expect_code 2 herd hosts dup.yaml 2>err &&
	grep "dup.txt:4: host .a. listed twice (first on line 1)" err &&
	echo "hostfile: $DATA/empty.txt" | job empty.yaml &&
	test_expect_code 2 herd hosts empty.yaml 2>err &&
	grep "no hosts in .*empty.txt" err &&
	echo "hostfile: missing.txt" | job missing.yaml &&
	test_expect_code 2 herd hosts missing.yaml 2>err &&
	grep "cannot open hostfile missing.txt: No such file" err
'

test_expect_success 'command: discovery script runs in the job directory' '
	mkdir -p cmd &&
	cat >cmd/discover <<-\EOF &&
	#!/bin/sh
	echo "discovering" >&2
	echo "# found"
	echo "d[1-2]"
	test -f marker && echo "d9"
	EOF
	chmod +x cmd/discover && : >cmd/marker &&
	echo "command: ./discover" | job cmd/job.yaml &&
	herd hosts cmd/job.yaml >out 2>err &&
	printf "d1\nd2\nd9\n" >expect &&
	test_cmp expect out &&
	grep "^discovering$" err
'

test_expect_success 'command: output with slots' '
	printf "echo c1 slots=3\necho c2 slots=3\n" >slots.sh &&
	echo "command: sh slots.sh" | job slotcmd.yaml &&
	herd hosts slotcmd.yaml --format mpich >out &&
	printf "c1:3\nc2:3\n" >expect &&
	test_cmp expect out
'

test_expect_success 'command: non-zero exit quotes the status and the last stderr line' '
	cat >fail.sh <<-\EOF &&
	echo n1
	echo "first complaint" >&2
	echo "inventory service unreachable" >&2
	exit 3
	EOF
	echo "command: sh fail.sh" | job fail.yaml &&
	test_expect_code 1 herd hosts fail.yaml >out 2>err &&
	grep "^herd: .*exited with status 3: inventory service unreachable$" err &&
	grep "^first complaint$" err &&
	test_must_be_empty out
'

test_expect_success 'command: empty output is an error' '
	echo "command: \"true\"" | job none-out.yaml &&
	test_expect_code 1 herd hosts none-out.yaml 2>err &&
	grep "no hosts in nodes.command output" err
'

test_expect_success 'command: hang is killed at command_timeout with no leftover process' '
	cat >hang.sh <<-\EOF &&
	sleep 300 &
	echo $! >sleeper.pid
	echo $$ >shell.pid
	wait
	EOF
	printf "command: sh hang.sh\ncommand_timeout: 500ms\n" | job hang.yaml &&
	start=$(date +%s%N) &&
	test_expect_code 1 herd hosts hang.yaml 2>err &&
	end=$(date +%s%N) &&
	ms=$(( (end - start) / 1000000 )) &&
	echo "took $ms ms" &&
	test $ms -ge 450 && test $ms -lt 2500 &&
	grep "^herd: .*timed out after 500ms (nodes.command_timeout)" err &&
	test -s sleeper.pid && test -s shell.pid &&
	pid_dead "$(cat sleeper.pid)" &&
	pid_dead "$(cat shell.pid)"
'

test_expect_success 'slurm: from SLURM_JOB_NODELIST, else a clear error' '
	echo "slurm: true" | job slurm-src.yaml &&
	SLURM_JOB_NODELIST="sn[1-2]" herd hosts slurm-src.yaml >out &&
	printf "sn1\nsn2\n" >expect &&
	test_cmp expect out &&
	(unset SLURM_JOB_NODELIST; test_expect_code 1 herd hosts slurm-src.yaml 2>err) &&
	grep "nodes.slurm is resolved inside a Slurm allocation" err
'

test_expect_success 'usage errors exit 2; --help exits 0' '
	test_expect_code 2 herd hosts 2>err &&
	grep "^try .herd hosts --help.$" err &&
	test_expect_code 2 herd hosts hosts.yaml --format yaml 2>err &&
	grep "^herd: hosts: unknown format .yaml." err &&
	test_expect_code 2 herd hosts hosts.yaml --bogus 2>err &&
	grep "unknown option" err &&
	test_expect_code 2 herd hosts hosts.yaml --format 2>err &&
	test_expect_code 2 herd hosts hosts.yaml other.yaml 2>err &&
	herd hosts --help >out &&
	grep -- "--spares" out && grep -- "mpich" out
'

test_expect_success 'spec errors exit 2' '
	printf "nodes:\n  hostz: a\nlaunch:\n  command: x\n" >typo.yaml &&
	test_expect_code 2 herd hosts typo.yaml 2>err &&
	grep "^herd: typo.yaml:" err &&
	test_expect_code 2 herd hosts does-not-exist.yaml
'

test_done
