#!/bin/sh

test_description='herd init: finetune and pretrain projects from templates/init, values checked and named at once, no overwrite without --force and no hand edit lost to --force (a checksum of each file written; --force twice keeps FILE.orig), only into a directory of yours; nodes.min 1 and --set min= spares=; the ssh: section from --set identity= known_hosts=, the next steps saying which, herd sbatch --wait first under Slurm; the project under Slurm: herd sbatch --wait, sbatch batch.sbatch, and srun-pmix.sbatch (no herd) with a torch all_reduce across 2 nodes'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd jq stat bash ip nsenter unshare setsid flock ssh-keygen timeout \
	sinfo scontrol sbatch srun
for c in /usr/sbin/sshd /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged; do
	[ -x $c ] || error "prerequisite $c is missing (run 'make deps')"
done
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"
/usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import torch.distributed"

DATA=$HERD_TEST_DIR/data/init
FILES="job.yaml train.py tokenize_corpus.py tokenize.yaml ds_zero3.json batch.sbatch srun-pmix.sbatch README.md"

# mode FILE: its permission bits, octal.
mode() {
	stat -c %a "$1"
}

test_expect_success '--help, --list and a template'\''s values' '
	herd init --help >out &&
	grep "^usage: herd init TEMPLATE DIR \[--set NAME=VALUE ...\] \[--force\]" out &&
	herd --help | grep "herd init " &&
	herd init --list >out &&
	grep "^finetune   continue training a causal language model" out &&
	grep "^pretrain   train a causal language model from scratch" out &&
	test $(wc -l <out) -eq 2 &&
	herd init finetune --help >out &&
	grep "^  base  *the base checkpoint .*(required)$" out &&
	grep "^  parallel  *data parallelism.*(default ddp)$" out &&
	grep "^files: $FILES$" out &&
	grep "^  min  *the fewest nodes .*(default 1)$" out &&
	grep "^  spares  *spare nodes .*(default '\'''\'')$" out &&
	grep "^  identity  *the ssh private key .*(default '\'''\'')$" out &&
	grep "^  known_hosts  *the nodes. host keys .*(default '\'''\'')$" out &&
	herd init --help >out &&
	grep "^  --force --force   replace changed files too, each kept as FILE.orig" out &&
	grep "^  min=N  *nodes.min" out &&
	grep "^  spares=HOSTLIST  *nodes.spares" out &&
	grep "^  identity=FILE, known_hosts=FILE" out &&
	grep "^train.py checkpoints the step it reached on SIGTERM" out &&
	test_expect_code 2 herd init 2>err &&
	grep "^try .herd init --help.$" err &&
	test_expect_code 2 herd init pretrain 2>err &&
	grep "where should the project go" err &&
	test_expect_code 2 herd init nope p 2>err &&
	grep "^herd: init: no template .nope.: herd init.s templates are finetune, pretrain" err &&
	test_expect_code 2 herd init pretrain a b 2>err &&
	test_expect_code 2 herd init pretrain p --bogus 2>err &&
	test ! -e p
'

test_expect_success 'after --, a DIR that starts with "-" is a directory, not an option' '
	mkdir texts-dash &&
	test_expect_code 2 herd init pretrain -p 2>err &&
	grep "unknown option .-p." err &&
	herd init --set corpus=texts-dash --set hosts="node[01-02]" -- pretrain -p >out &&
	test -f ./-p/job.yaml &&
	herd validate ./-p/job.yaml &&
	test_expect_code 2 herd init -- pretrain -p -q 2>err &&
	grep "is a third" err
'

test_expect_success 'pretrain: every file, its mode, absolute paths, a valid job, JSON, scripts bash reads' '
	mkdir texts &&
	herd init pretrain proj --set corpus=texts --set steps=40 \
		--set hosts="node[01-03]" >out 2>err &&
	test_must_be_empty err &&
	for f in $FILES; do
		grep -x "wrote $PWD/proj/$f" out || return 1
	done &&
	grep "^next steps:" out &&
	grep -x "  cd '\''$PWD/proj'\''" out &&
	grep -x "  /usr/bin/python3 tokenize_corpus.py --corpus '\''$PWD/texts'\'' --out data --vocab-size 8000" out &&
	grep -x "  # ssh (job.yaml.s ssh:): key none given (--set identity=): ~/.ssh/config.s, else ~/.ssh/herd_ed25519 (herd keys job.yaml makes it) or the ssh agent.s; host keys checked in ~/.ssh/known_hosts" out &&
	grep -x "  herd run job.yaml" out &&
	! grep "herd sbatch" out &&
	test $(mode proj) = 755 &&
	for f in job.yaml tokenize.yaml ds_zero3.json README.md; do
		test $(mode proj/$f) = 644 || return 1
	done &&
	for f in train.py tokenize_corpus.py batch.sbatch srun-pmix.sbatch; do
		test $(mode proj/$f) = 755 || return 1
	done &&
	test_cmp "$HERD_ROOT/templates/init/common/train.py" proj/train.py &&
	test_cmp "$HERD_ROOT/templates/init/common/tokenize_corpus.py" proj/tokenize_corpus.py &&
	herd validate proj/job.yaml &&
	herd validate proj/tokenize.yaml &&
	grep "^    .*tokenize_corpus.py --corpus '\''$PWD/texts'\'' --out data --vocab-size 8000\$" proj/tokenize.yaml &&
	herd validate --print proj/job.yaml >spec &&
	grep "mode: torch" spec &&
	grep "^  min: 1$" spec &&
	grep "^  host_keys: strict$" spec &&
	grep "^  # spares: not given$" proj/job.yaml &&
	grep "^  # identity: not given$" proj/job.yaml &&
	grep "pattern: \"\\?step_\*" spec &&
	grep "complete_marker: \"\\?COMPLETE" spec &&
	grep "^  command: .*train.py --data data --ckpt-dir ckpt --model-size tiny --steps 40 --batch 8 --lr 3e-3 --ckpt-every 100 --parallel ddp --deepspeed ds_zero3.json  *{{resume_args}}" spec &&
	! grep -- "--init-from" proj/job.yaml &&
	jq -e ".zero_optimization.stage == 3 and .train_micro_batch_size_per_gpu == 8 and .optimizer.params.lr == 0.003" proj/ds_zero3.json &&
	bash -n proj/batch.sbatch &&
	bash -n proj/srun-pmix.sbatch &&
	grep "^exec srun --mpi=pmix" proj/srun-pmix.sbatch &&
	grep -x "#SBATCH --nodes=2" proj/srun-pmix.sbatch &&
	grep "herd init pretrain" proj/README.md &&
	! grep "{{" proj/README.md proj/batch.sbatch proj/srun-pmix.sbatch proj/ds_zero3.json &&
	ls -a proj >got &&
	printf "%s\n" . .. .herd-init.json $FILES | sort >expect &&
	sort got >got.sorted &&
	test_cmp expect got.sorted
'

test_expect_success 'finetune: --init-from the base, the tokenizer model, slurm hosts' '
	herd init finetune ft --set base=base/step_00000100 --set corpus=texts \
		--set tokenizer=tok.model --set parallel=fsdp --set nodes=3 >out &&
	herd validate ft/job.yaml &&
	grep -- "--init-from '\''$PWD/base/step_00000100'\'' .* --parallel fsdp" ft/job.yaml &&
	grep -- "--init-from '\''$PWD/base/step_00000100'\''" ft/srun-pmix.sbatch &&
	grep "^  slurm: true$" ft/job.yaml &&
	grep -x "#SBATCH --nodes=3" ft/batch.sbatch &&
	grep -- "--tokenizer '\''$PWD/tok.model'\''" out &&
	sed -n "/^next steps:/,\$p" out | grep -v "^  cd \|tokenize_corpus.py\|herd validate\|^next steps:\|^  #" | head -1 >first &&
	echo "  herd sbatch --wait job.yaml  # inside an allocation already: herd run job.yaml" >expect &&
	test_cmp expect first &&
	grep -x "  # ssh: not used: in the allocation herd starts its agents with srun" out &&
	! grep "^  herd run" out
'

test_expect_success '--set identity= known_hosts= min= spares=: job.yaml'\''s ssh: and nodes:, the next steps name the key' '
	herd init pretrain keyed --set corpus=texts --set "hosts=node[01-04]" \
		--set identity=keys/id --set known_hosts=/etc/kh --set min=3 \
		--set "spares=node[05-06]" >out &&
	herd validate --print keyed/job.yaml >spec &&
	grep "^  identity: \"\?$PWD/keys/id\"\?$" spec &&
	grep "^  known_hosts: \"\?/etc/kh\"\?$" spec &&
	grep "^  min: 3$" spec &&
	grep "^  spares: \"\?node\[05-06\]\"\?$" spec &&
	grep -x "  # ssh (job.yaml.s ssh:): key $PWD/keys/id; host keys checked in /etc/kh" out &&
	test_expect_code 2 herd init pretrain k2 --set corpus=texts --set "hosts=node[01-04]" --set min=5 2>err &&
	grep "nodes.min (5) is more than the 4 nodes" err &&
	test_expect_code 2 herd init pretrain k2 --set corpus=texts --set "spares=n[1-" 2>err &&
	grep "spares: .n\[1-.: expected a hostlist such as node\[05-06\], or nothing" err &&
	test ! -e k2
'

test_expect_success 'every missing value named at once; nothing written' '
	test_expect_code 2 herd init finetune ft2 2>err &&
	grep "^herd: init: the finetune template needs base, corpus, tokenizer: give --set NAME=VALUE for each" err &&
	test_expect_code 2 herd init finetune ft2 --set corpus=texts 2>err &&
	grep "needs base, tokenizer:" err &&
	test ! -e ft2
'

test_expect_success 'an unknown --set is an error naming what the template takes' '
	test_expect_code 2 herd init pretrain p2 --set corpus=texts \
		--set step=5 --set learning_rate=1 2>err &&
	grep "^herd: init: --set step, learning_rate: the pretrain template takes no such value; it takes corpus, tokenizer, model_size, steps," err &&
	test ! -e p2
'

test_expect_success 'bad values: each named; quotes and control characters refused' '
	test_expect_code 2 herd init pretrain p2 --set corpus=texts \
		--set steps=10x --set parallel=zero --set hosts="n[1-" 2>err &&
	grep "steps: .10x.: expected a number; --set parallel: .zero.: expected one of ddp, fsdp; --set hosts: .n\[1-.: expected slurm or a hostlist" err &&
	test_expect_code 2 herd init pretrain p2 --set "corpus=a'\''b" 2>err &&
	grep "holds a control character or one of" err &&
	test_expect_code 2 herd init pretrain p2 --set "corpus=\$(touch INJ)" 2>err &&
	test_expect_code 2 herd init pretrain p2 --set "corpus=a
b" 2>err &&
	test_expect_code 2 herd init pretrain p2 --set corpus=texts \
		--set "extra_args=--seed 1; touch INJ" 2>err &&
	grep "extra_args: .--seed 1; touch INJ.: expected arguments" err &&
	test ! -e p2 && test ! -e INJ
'

test_expect_success 'existing files: refused without --force (all named, nothing written); --force replaces those herd init wrote, refuses hand edits (nothing written); --force twice keeps them as FILE.orig' '
	cp proj/job.yaml job.before &&
	test_expect_code 2 herd init pretrain proj --set corpus=texts --set steps=7 2>err &&
	grep "^herd: init: proj holds job.yaml, train.py, tokenize_corpus.py, tokenize.yaml, ds_zero3.json, batch.sbatch, srun-pmix.sbatch, README.md already: nothing written; give --force to replace them" err &&
	test_cmp job.before proj/job.yaml &&
	herd init pretrain proj --set corpus=texts --set steps=7 --force >out &&
	grep -x "replaced $PWD/proj/README.md" out &&
	grep -x "replaced $PWD/proj/job.yaml" out &&
	grep -- "--steps 7 " proj/job.yaml &&
	jq -e ".sha256[\"job.yaml\"] == \"$(sha256sum <proj/job.yaml | cut -d" " -f1)\"" proj/.herd-init.json &&
	echo mine >proj/README.md &&
	sed -i "s/^  min: 1$/  min: 2/" proj/job.yaml &&
	echo "# my ssh" >>proj/job.yaml &&
	cp proj/job.yaml job.mine &&
	test_expect_code 2 herd init pretrain proj --set corpus=texts --set steps=9 --force 2>err &&
	grep "^herd: init: proj: job.yaml, README.md changed since herd init wrote them (or herd init did not write them): nothing written; give --force twice to replace them, keeping yours as FILE.orig each" err &&
	test_cmp job.mine proj/job.yaml &&
	test "$(cat proj/README.md)" = mine &&
	herd init pretrain proj --set corpus=texts --set steps=9 --force --force >out &&
	grep -x "replaced $PWD/proj/job.yaml (yours, changed since herd init wrote it, kept as job.yaml.orig)" out &&
	grep -x "replaced $PWD/proj/README.md (yours, changed since herd init wrote it, kept as README.md.orig)" out &&
	grep -x "replaced $PWD/proj/train.py" out &&
	test_cmp job.mine proj/job.yaml.orig &&
	test "$(cat proj/README.md.orig)" = mine &&
	grep -- "--steps 9 " proj/job.yaml &&
	grep "herd init pretrain" proj/README.md &&
	rm proj/README.md proj/job.yaml.orig proj/README.md.orig &&
	herd init pretrain proj --set corpus=texts --force >out &&
	grep -x "wrote $PWD/proj/README.md" out &&
	! ls -a proj | grep "^\.[^.]" | grep -vx ".herd-init.json"
'

test_expect_success 'a DIR that is a symlink, not a directory, not yours or writable by others is refused' '
	mkdir real &&
	ln -s real link &&
	test_expect_code 2 herd init pretrain link --set corpus=texts 2>err &&
	grep "^herd: init: link is a symbolic link" err &&
	test_expect_code 2 herd init pretrain link/ --set corpus=texts 2>err &&
	test -z "$(ls real)" &&
	echo x >afile &&
	test_expect_code 2 herd init pretrain afile --set corpus=texts 2>err &&
	grep "afile is not a directory" err &&
	mkdir theirs && chown nobody theirs &&
	test_expect_code 2 herd init pretrain theirs --set corpus=texts 2>err &&
	grep "^herd: init: theirs belongs to uid [0-9]*, not to you" err &&
	mkdir open && chmod 777 open &&
	test_expect_code 2 herd init pretrain open --set corpus=texts 2>err &&
	grep "open is writable by others (mode 0777)" err &&
	test -z "$(ls -A theirs)" && test -z "$(ls -A open)" &&
	mkdir -p ro/p && ln -s /nonexistent ro/p/job.yaml &&
	test_expect_code 2 herd init pretrain ro/p --set corpus=texts --force 2>err &&
	grep "job.yaml changed since herd init wrote it" err &&
	herd init pretrain ro/p --set corpus=texts --force --force >out &&
	test -f ro/p/job.yaml && ! test -L ro/p/job.yaml &&
	test -L ro/p/job.yaml.orig &&
	test_expect_code 1 herd init pretrain no/such/dir --set corpus=texts 2>err &&
	grep "^herd: init: cannot make no/such/dir: No such file or directory\$" err
'

test_expect_success 'a parent of DIR another user owns, or a link of theirs in a sticky directory (fs.protected_symlinks 0): refused in one line naming the path, nothing written' '
	other=herd-i-$$ &&
	useradd -M -d /nonexistent -s /bin/sh "$other" &&
	test_when_finished "userdel $other" &&
	ft="--set base=b --set corpus=texts --set tokenizer=tok.model" &&
	mkdir hers && chown "$other" hers && chmod 755 hers &&
	test_expect_code 2 herd init finetune hers/proj $ft >out 2>err &&
	cat err &&
	test "$(wc -l <err)" = 1 &&
	grep "^herd: init: $PWD/hers is owned by $other (uid [0-9]*), who could replace the project.s files; put the project on a path owned by root or by you\$" err &&
	test ! -e hers/proj && test ! -s out &&
	was=$(cat /proc/sys/fs/protected_symlinks) &&
	echo 0 >/proc/sys/fs/protected_symlinks &&
	test_when_finished "echo $was >/proc/sys/fs/protected_symlinks" &&
	mkdir -m 1777 sticky && chmod 1777 sticky &&
	mkdir victim &&
	runuser -u "$other" -- ln -s "$PWD/victim" sticky/l &&
	test_expect_code 2 herd init finetune sticky/l/proj $ft >out 2>err &&
	cat err &&
	test "$(wc -l <err)" = 1 &&
	grep "^herd: init: $PWD/sticky/l is a symlink owned by $other (uid [0-9]*); herd follows only links of root or yours: remove it or give the real directory\$" err &&
	test -z "$(ls -A victim)" && test ! -s out &&
	herd init finetune sticky/mine $ft >out &&
	test -f sticky/mine/job.yaml
'

test_expect_success '--tune with a platform file: ds_zero3.json gets the rule'\''s sizes for 2 nodes x 8 ranks at 100 Gb/s InfiniBand (no network run)' '
	cat >net.json <<-\EOF &&
	{"network": {"nics": [{"name": "mlx5_0", "rate_gbps": 100, "fabric": "ib"}]}}
	EOF
	chmod 0644 net.json &&
	herd init pretrain tuned --set corpus=/usr/lib/python3.11 \
		--set "hosts=h[1-2]" --set ranks_per_node=8 \
		--tune --platform net.json >out 2>err &&
	grep "^herd: tune: chose reduce_bucket_size=14000000 allgather_bucket_size=14000000 stage3_prefetch_bucket_size=28000000 stage3_param_persistence_threshold=1000000" err &&
	jq -e ".zero_optimization.reduce_bucket_size == 14000000 and .zero_optimization.allgather_bucket_size == 14000000 and .zero_optimization.stage3_prefetch_bucket_size == 28000000 and .zero_optimization.stage3_param_persistence_threshold == 1000000 and .zero_optimization.stage == 3" tuned/ds_zero3.json &&
	test "$(mode tuned/ds_zero3.json)" = 644 &&
	! ls tuned/.ds_zero3.json.* 2>/dev/null &&
	herd init pretrain tuned --set corpus=/usr/lib/python3.11 \
		--set "hosts=h[1-2]" --set ranks_per_node=8 \
		--tune --platform net.json --force >out 2>err &&
	grep -x "replaced $PWD/tuned/ds_zero3.json" out &&
	test_expect_code 2 herd init pretrain t2 --set corpus=/usr/lib/python3.11 \
		--set "hosts=h[1-2]" --platform net.json 2>err &&
	grep "platform goes with --tune" err
'

test_expect_success 'cluster of 2 nodes with Slurm' '
	cluster_up 2 &&
	slurm_up
'

# The project's train.py is replaced by a stand-in: the real one (the
# pytrain branch) is tested end to end by its own scripts.
test_expect_success 'herd sbatch --wait runs a generated project on the 2 nodes of its allocation' '
	herd init pretrain "sb proj" --set corpus=texts --set nodes=2 \
		--set steps=7 --set name=initsb --set "extra_args=--seq-len 16" >out &&
	cp "$DATA/hello-train.py" "sb proj/train.py" &&
	timeout 120 herd sbatch --wait --parsable "sb proj/job.yaml" >out 2>err ||
		{ cat err "sb proj"/runs/initsb/slurm-*.out; false; } &&
	id=$(cat out) &&
	log="sb proj/runs/initsb/slurm-$id.out" &&
	test $(grep -c "^\[[01]\] rank [01]/2 on .* args --data data --ckpt-dir ckpt --model-size tiny --steps 7 --batch 8 --lr 3e-3 --ckpt-every 100 --parallel ddp --deepspeed ds_zero3.json --seq-len 16\$" "$log") -eq 2 &&
	sed -n "s/^\[[01]\] rank [01]\/2 on \([^ ]*\) .*/\1/p" "$log" | sort -u >nodes &&
	test $(wc -l <nodes) -eq 2 &&
	ev_all "sb proj/runs/initsb/latest/events.jsonl" job_end ".status == 0" &&
	ev_all "sb proj/runs/initsb/latest/events.jsonl" attempt_start ".world_size == 2"
'

test_expect_success 'sbatch batch.sbatch runs the same project through herd run' '
	timeout 120 sbatch --wait --parsable "sb proj/batch.sbatch" >out &&
	id=$(cat out) &&
	log="sb proj/slurm-initsb-$id.out" &&
	test $(grep -c "^\[[01]\] rank [01]/2 on .* args --data data " "$log") -eq 2
'

test_expect_success 'srun-pmix.sbatch (no herd): torch rendezvous from Slurm, gloo all_reduce across 2 nodes, HERD_RESUME_FROM the newest complete checkpoint' '
	herd init pretrain pmix --set corpus=texts --set nodes=2 \
		--set name=initpmix >out &&
	cp "$DATA/allreduce.py" pmix/train.py &&
	mkdir -p pmix/ckpt/step_00000010 pmix/ckpt/step_00000020 pmix/ckpt/step_00000030 &&
	touch pmix/ckpt/step_00000010/COMPLETE pmix/ckpt/step_00000020/COMPLETE &&
	timeout 120 sbatch --wait --parsable pmix/srun-pmix.sbatch >out ||
		{ cat pmix/slurm-*.out; false; } &&
	id=$(cat out) &&
	log=pmix/slurm-initpmix-$id.out &&
	cat "$log" &&
	grep -x "rank 0/2 local 0 on [^ ]* resume .$PWD/pmix/ckpt/step_00000020. sum 3" "$log" &&
	grep -x "rank 1/2 local 0 on [^ ]* resume .$PWD/pmix/ckpt/step_00000020. sum 3" "$log" &&
	sed -n "s/^rank [01]\/2 local 0 on \([^ ]*\) .*/\1/p" "$log" | sort -u >nodes &&
	test $(wc -l <nodes) -eq 2
'

test_done
