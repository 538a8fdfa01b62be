#!/bin/sh

test_description='the project'"'"'s Python end to end on 3 nodes of the test cluster (real PyTorch, gloo on CPU): tokenize_corpus.py trains a SentencePiece model on the Python standard library'"'"'s sources and writes token shards in parallel over the ranks (idempotent: a second run skips); train.py pretrains a tiny GPT, a node is killed in the middle and the job resumes from the newest complete checkpoint on the 2 left; fine-tuning with --init-from on the licenses starts clearly below a from-scratch run (--parallel fsdp: on CPU the sharded-optimizer fallback)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"
. "$HERD_TEST_DIR/data/failover/lib.sh"

fo_require
/usr/bin/python3 -c "import sentencepiece" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import sentencepiece (python3-sentencepiece; run 'make deps')"
PRE_CORPUS=/usr/lib/python3.11
FT_CORPUS=/usr/share/common-licenses
[ -r "$PRE_CORPUS/argparse.py" ] || error "prerequisite $PRE_CORPUS/*.py (python3.11) is missing"
[ -r "$FT_CORPUS/GPL-3" ] || error "prerequisite $FT_CORPUS (base-files) is missing"

COMMON=$HERD_ROOT/templates/init/common
PY=/usr/bin/python3
STEPS=200

# job PROJECT NAME MIN [CKPT] -- COMMAND...: PROJECT/NAME.yaml runs
# COMMAND in PROJECT on the 3 nodes (one rank each; the job may shrink
# to MIN nodes), checkpoints in CKPT (none when empty).
job() {
	_j_dir=$1 _j_name=$2 _j_min=$3 _j_ckpt=$4
	shift 5
	{
		echo "name: $_j_name"
		echo "nodes: {hosts: \"$HERD_CLUSTER_PREFIX[1-3]\", slots: 1, min: $_j_min}"
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}"
		echo "health: {heartbeat: 500ms, timeout: 3s, grace: 2s}"
		echo "restart: {max: 2, backoff: 500ms}"
		[ -z "$_j_ckpt" ] ||
			echo "checkpoint: {dir: \"$_j_ckpt\", pattern: \"step_*\", complete_marker: COMPLETE}"
		echo "launch:"
		printf '  command: %s\n' "$(yaml_cmd "$@")"
		echo "  workdir: \"$_j_dir\""
		echo '  env: {OMP_NUM_THREADS: "1"}'
	} >"$_j_dir/$_j_name.yaml"
}

# make_project DIR: the training project `herd init` makes (swap this
# function for `herd init pretrain/finetune` once it exists): the two
# scripts and the job files tokenize (the Python sources), pretrain,
# tokenize-ft (the licenses, with the pretrained tokenizer), finetune
# (--init-from the pretraining checkpoints) and scratch (the same data,
# from random weights; --parallel fsdp, which is DDP with the optimizer
# state sharded on CPU).
make_project() {
	mkdir -p "$1" &&
	cp "$COMMON/train.py" "$COMMON/tokenize_corpus.py" "$1/" &&
	mkdir -p "$1/ckpt-pre" "$1/ckpt-ft" &&
	job "$1" tokenize 3 "" -- $PY tokenize_corpus.py --corpus "$PRE_CORPUS/*.py" \
		--out "$1/data-pre" --vocab-size 512 --max-sentences 30000 &&
	job "$1" pretrain 2 "$1/ckpt-pre" -- $PY train.py \
		--data "$1/data-pre" --steps $STEPS --ckpt-dir "$1/ckpt-pre" \
		--ckpt-every 25 --model-size tiny --batch 4 --seq-len 64 \
		--lr 3e-3 --seed 1 --log-every 10 --parallel ddp &&
	job "$1" tokenize-ft 3 "" -- $PY tokenize_corpus.py --corpus $FT_CORPUS \
		--out "$1/data-ft" --tokenizer "$1/data-pre/tokenizer.model" &&
	job "$1" finetune 3 "$1/ckpt-ft" -- $PY train.py --data "$1/data-ft" \
		--init-from "$1/ckpt-pre" --steps 20 --ckpt-dir "$1/ckpt-ft" \
		--batch 4 --seq-len 64 --lr 1e-3 --log-every 5 &&
	job "$1" scratch 3 "" -- $PY train.py --data "$1/data-ft" \
		--steps 20 --batch 4 --seq-len 64 --lr 1e-3 --log-every 5 \
		--parallel fsdp
}

rank0() { echo "runs/$1/latest/attempt-$2/rank-0.log"; }

# loss NAME ATTEMPT first|last: the loss rank 0 printed.
loss() {
	_l_sel='NR == 1'
	[ "$3" = first ] || _l_sel='END'
	grep "^step [0-9]*/[0-9]* loss " "$(rank0 "$1" "$2")" |
		awk "$_l_sel { print \$4 }"
}

test_expect_success 'cluster of 3 nodes, the project' '
	own_binaries &&
	cluster_up 3 &&
	P=$PWD/proj &&
	make_project "$P" &&
	t_start=$(date +%s)
'

test_expect_success 'tokenize_corpus.py under herd on 3 nodes: rank 0 trains the tokenizer, every rank encodes its third of the files, index.json lists them all (uint16)' '
	herd run "$P/tokenize.yaml" >out.tok 2>err.tok &&
	n=$(ls $PRE_CORPUS/*.py | wc -l) &&
	grep "tokenize_corpus.py: trained $P/data-pre/tokenizer.model (512 pieces)" $(rank0 tokenize 1) &&
	for r in 0 1 2; do
		c=$(( (n - r + 2) / 3 )) &&
		grep "^tokenize_corpus.py: rank $r/3: $c shards, $c written, 0 complete already" \
			runs/tokenize/latest/attempt-1/rank-$r.log || return 1
	done &&
	jq -e --argjson n $n ".shards | length == \$n" "$P/data-pre/index.json" &&
	jq -e ".dtype == \"uint16\" and .vocab_size == 512 and .tokens > 1000000" \
		"$P/data-pre/index.json" &&
	f=$(jq -r ".shards[0].file" "$P/data-pre/index.json") &&
	t=$(jq -r ".shards[0].tokens" "$P/data-pre/index.json") &&
	test "$(stat -c %s "$P/data-pre/$f")" = $((t * 2)) &&
	jq -e ".source == \"$PRE_CORPUS/__future__.py\"" "$P/data-pre/shard_00000.json" &&
	! ls "$P"/data-pre/*.tmp-* "$P"/data-pre/.tokenizer-* 2>/dev/null
'

test_expect_success 'tokenize_corpus.py again (by hand, 2 processes): the tokenizer is not trained again and every shard is skipped; a shard without its marker is made again' '
	touch -d "2000-01-01" "$P/data-pre/shard_00007.bin" &&
	(cd "$P" && $PY tokenize_corpus.py --corpus $PRE_CORPUS/*.py --out "$P/data-pre" \
		--vocab-size 512 --workers 2) >again &&
	grep "tokenizer.model exists: not trained again" again &&
	grep "^tokenize_corpus.py: rank 0/1: $n shards, 0 written, $n complete already" again &&
	test "$(stat -c %Y "$P/data-pre/shard_00007.bin")" = "$(date -d 2000-01-01 +%s)" &&
	rm "$P/data-pre/shard_00007.json" &&
	(cd "$P" && $PY tokenize_corpus.py --corpus $PRE_CORPUS/*.py --out "$P/data-pre" \
		--vocab-size 512 --workers 2) >again2 &&
	grep "^tokenize_corpus.py: rank 0/1: $n shards, 1 written, $((n - 1)) complete already" again2 &&
	test -e "$P/data-pre/shard_00007.json"
'

test_expect_success 'python checks: the dtype follows the vocabulary; the tokenize_corpus.py of a project does not shadow the standard library'"'"'s tokenize' '
	$PY - "$COMMON/tokenize_corpus.py" <<-\EOF &&
	import importlib.util, sys
	spec = importlib.util.spec_from_file_location("herd_tokenize", sys.argv[1])
	m = importlib.util.module_from_spec(spec)
	spec.loader.exec_module(m)
	assert m.dtype_for(512) == "uint16", m.dtype_for(512)
	assert m.dtype_for(65535) == "uint16"
	assert m.dtype_for(65536) == "uint32"
	assert m.dtype_for(200000) == "uint32"
	EOF
	(cd "$P" && $PY -c "import tokenize, linecache; assert tokenize.open and tokenize.__file__.startswith(\"/usr/lib/python3\"), tokenize.__file__")
'

test_expect_success "pretrain $STEPS steps on 3 nodes; node 3 killed at step 80: the job goes on with 2 nodes from the newest complete checkpoint and ends with a lower loss than it started" '
	run_bg "$P/pretrain.yaml" out.pre err.pre &&
	fo_wait_step pretrain 1 80 120 &&
	cluster_kill_node 3 &&
	wait_exit $HERD_PID 240 &&
	test "$WAIT_RC" = 0 &&
	ev_all runs/pretrain/latest/events.jsonl job_end ".status == 0 and .attempts == 2" &&
	fo_has pretrain node_failed ".host == \"$(cluster_node 3)\" and .attempt == 1" &&
	fo_has pretrain attempt_start ".attempt == 2 and .world_size == 2" &&
	ck=$(jq -r -n "[inputs | select(.event == \"checkpoint_found\" and .attempt == 2)][0].path" \
		runs/pretrain/latest/events.jsonl) &&
	echo "attempt 2 resumes from $ck" &&
	case $ck in "$P/ckpt-pre/step_"*) ;; *) false ;; esac &&
	at=$(( $(basename "$ck" | sed "s/^step_0*//") )) &&
	test $at -ge 75 &&
	# That step, from disk or from the memory tier of the node of rank 0
	# (memory comes first for a step both hold).
	grep -x "rank 0: resumed from \\($ck\\|.*/step_0*$at\\) at step $at" $(rank0 pretrain 2) &&
	grep "^step $((at + 1))/$STEPS loss" $(rank0 pretrain 2) &&
	grep "^step $STEPS/$STEPS loss" $(rank0 pretrain 2) &&
	l0=$(loss pretrain 1 first) && l1=$(loss pretrain 1 last) &&
	l2=$(loss pretrain 2 first) && l3=$(loss pretrain 2 last) &&
	echo "loss: attempt 1 $l0 -> $l1, attempt 2 $l2 -> $l3" &&
	awk -v a="$l0" -v b="$l3" -v c="$l2" -v d="$l1" \
		"BEGIN { exit !(b < a - 1.5 && c < a - 1 && c < d + 0.7) }" &&
	fo_no_train_left
'

test_expect_success 'the checkpoints: step_NNNNNNNN with state.pt, config.json and COMPLETE; the newest 3 kept; no temporary directory left' '
	ls "$P/ckpt-pre" >ckpts &&
	printf "step_00000150\nstep_00000175\nstep_00000200\n" >expect &&
	test_cmp expect ckpts &&
	for f in state.pt config.json COMPLETE; do
		test -s "$P/ckpt-pre/step_00000200/$f" || return 1
	done &&
	test "$(cat "$P/ckpt-pre/step_00000200/COMPLETE")" = 200 &&
	test -z "$(find "$P/ckpt-pre" -mindepth 1 -maxdepth 1 -name ".*")" &&
	jq -e ".step == 200 and .model.vocab == 512 and .model.layers == 2 and .world_size == 2" \
		"$P/ckpt-pre/step_00000200/config.json"
'

test_expect_success 'the metrics reached herd: loss and tokens in metrics.jsonl' '
	jq -e -s "map(select(.job.loss != null)) | length > 0" runs/pretrain/latest/metrics.jsonl &&
	jq -e -s "map(.job.tokens_total // 0) | max > 0" runs/pretrain/latest/metrics.jsonl
'

test_expect_success 'node 3 back; the licenses tokenized with the pretrained tokenizer' '
	cluster_start_node 3 &&
	herd run "$P/tokenize-ft.yaml" >out.tokft 2>err.tokft &&
	cmp "$P/data-pre/tokenizer.model" "$P/data-ft/tokenizer.model" &&
	jq -e ".vocab_size == 512 and (.shards | length) == $(ls $FT_CORPUS | wc -l)" \
		"$P/data-ft/index.json"
'

test_expect_success 'fine-tuning --init-from the pretrained checkpoint: its first loss is clearly below a from-scratch run'"'"'s on the same data' '
	herd run "$P/finetune.yaml" >out.ft 2>err.ft &&
	herd run "$P/scratch.yaml" >out.sc 2>err.sc &&
	grep -x "rank 0: fine-tuning from $P/ckpt-pre (2 layers, width 64)" $(rank0 finetune 1) &&
	grep -x "train.py: FSDP in this PyTorch needs CUDA; on CPU DDP with ZeroRedundancyOptimizer (optimizer state sharded over the ranks)" \
		$(rank0 scratch 1) &&
	grep "^step 20/20 loss" $(rank0 scratch 1) &&
	ft=$(loss finetune 1 first) && sc=$(loss scratch 1 first) &&
	echo "first loss: fine-tuning $ft, from scratch $sc" &&
	grep "^step 1/20 loss $ft" $(rank0 finetune 1) &&
	awk -v f="$ft" -v s="$sc" "BEGIN { exit !(f < s - 1) }" &&
	test -e "$P/ckpt-ft/step_00000020/COMPLETE" &&
	echo "the whole script: $(( $(date +%s) - t_start )) s after the cluster came up"
'

test_done
