#!/bin/sh

test_description='projects made by herd init run as made, on 3 nodes of the test cluster (real PyTorch, gloo on CPU): herd init pretrain, its tokenize.yaml and job.yaml; herd init finetune from the newest pretraining checkpoint on other text starts clearly below a from-scratch project (herd init pretrain with the same tokenizer) on the same text; a project that loses a node goes on with the 2 left (nodes.min 1 by default), train.py saying the global batch once; a project with a spare keeps its survivor training while the lost rank starts on the spare; herd stop mid-training leaves a checkpoint at the step reached (train.py checkpoints on SIGTERM)'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

/usr/bin/python3 -c "import sentencepiece" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import sentencepiece (python3-sentencepiece; run 'make deps')"
[ -r /usr/lib/python3.11/argparse.py ] || error "prerequisite /usr/lib/python3.11/*.py (python3.11) is missing"
[ -r /usr/share/common-licenses/GPL-3 ] || error "prerequisite /usr/share/common-licenses (base-files) is missing"

# ssh PROJECT: the test cluster's key and known hosts for tokenize.yaml
# (job.yaml takes them from herd init's --set identity= known_hosts=).
ssh_of() {
	echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}" >>"$1/tokenize.yaml"
}

# KEYS: herd init's values for the test cluster's ssh (set once it is
# up).
KEYS=

# wait_log FILE REGEX [S]: poll FILE until a line matches REGEX.
wait_log() {
	_wl_i=0
	while ! grep -q "$2" "$1" 2>/dev/null; do
		_wl_i=$((_wl_i + 1))
		[ $_wl_i -lt $((${3:-120} * 20)) ] || {
			echo "$1: no line $2 after ${3:-120} s" >&2
			return 1
		}
		sleep 0.05   # poll interval of a bounded wait
	done
}

# first PROJECT NAME: the first loss rank 0 printed.
first() {
	grep "^step [0-9]*/[0-9]* loss " "$1/runs/$2/latest/attempt-1/rank-0.log" |
		awk 'NR == 1 { print $4 }'
}

test_expect_success 'cluster of 3 nodes' '
	cluster_up 3 &&
	HOSTS="$HERD_CLUSTER_PREFIX[1-3]" &&
	KEYS="--set identity=$HERD_CLUSTER_KEY --set known_hosts=$HERD_CLUSTER_KNOWN_HOSTS" &&
	test -n "$HERD_CLUSTER_KEY" && test -n "$HERD_CLUSTER_KNOWN_HOSTS"
'

test_expect_success 'herd init pretrain; tokenize.yaml and job.yaml run on the 3 nodes as made' '
	herd init pretrain pre --set "corpus=/usr/lib/python3.11/[a-c]*.py" \
		--set tokenizer=512 --set steps=60 --set ckpt_every=20 \
		--set batch=4 --set "hosts=$HOSTS" $KEYS \
		--set "extra_args=--seq-len 64 --log-every 10" >out &&
	ssh_of pre &&
	herd validate pre/job.yaml &&
	herd run pre/tokenize.yaml >out.tok 2>err.tok &&
	jq -e ".dtype == \"uint16\" and .vocab_size == 512" pre/data/index.json &&
	herd run pre/job.yaml >out.pre 2>err.pre &&
	test -e pre/ckpt/step_00000060/COMPLETE &&
	grep "^step 60/60 loss " pre/runs/pretrain/latest/attempt-1/rank-0.log &&
	# Every rank from a warm interpreter: nothing of the project
	# (tokenize_corpus.py, train.py) shadows a module torch imported.
	ev_all pre/runs/pretrain/latest/events.jsonl rank_start ".warm == true" &&
	! grep "starts cold" err.pre
'

test_expect_success 'herd init finetune from step 60 on the licenses; herd init pretrain on the same text from scratch: fine-tuning starts clearly lower' '
	herd init finetune ft --set "corpus=/usr/share/common-licenses" \
		--set "base=$PWD/pre/ckpt/step_00000060" \
		--set "tokenizer=$PWD/pre/data/tokenizer.model" \
		--set steps=10 --set batch=4 --set "hosts=$HOSTS" $KEYS \
		--set "extra_args=--seq-len 64 --log-every 1" >out &&
	herd init pretrain scratch --set "corpus=/usr/share/common-licenses" \
		--set "tokenizer=$PWD/pre/data/tokenizer.model" \
		--set steps=10 --set batch=4 --set "hosts=$HOSTS" $KEYS \
		--set "extra_args=--seq-len 64 --log-every 1" >out &&
	ssh_of ft && ssh_of scratch &&
	herd run ft/tokenize.yaml >/dev/null 2>&1 &&
	herd run ft/job.yaml >out.ft 2>err.ft &&
	herd run scratch/tokenize.yaml >/dev/null 2>&1 &&
	herd run scratch/job.yaml >out.sc 2>err.sc &&
	f=$(first ft finetune) && s=$(first scratch pretrain) &&
	echo "first loss: fine-tuning $f, from scratch $s" &&
	awk -v f="$f" -v s="$s" "BEGIN { exit !(f + 1.0 < s) }"
'

test_expect_success 'a project as made loses node 3 at step 20: it goes on with the 2 left from its newest checkpoint (nodes.min 1), train.py says once that the global batch goes from 12 to 8' '
	herd init pretrain shrink --set "corpus=/usr/lib/python3.11/[a-c]*.py" \
		--set "tokenizer=$PWD/pre/data/tokenizer.model" --set steps=60 \
		--set ckpt_every=10 --set batch=4 --set "hosts=$HOSTS" $KEYS \
		--set name=shrink \
		--set "extra_args=--seq-len 64 --log-every 5 --step-sleep 0.1" >out &&
	cp -r pre/data shrink/data &&
	run_bg shrink/job.yaml out.sh err.sh &&
	wait_log shrink/runs/shrink/latest/attempt-1/rank-0.log "^step 20/60 " &&
	cluster_kill_node 3 &&
	wait_exit $HERD_PID 300 &&
	cat err.sh &&
	test "$WAIT_RC" = 0 &&
	! grep "giving up" err.sh &&
	grep "continuing with 2 of 3 nodes (nodes.min 1)" err.sh &&
	# The survivors, left in a failed group, end on the SIGTERM of herd at
	# once (signal 15), not at health.grace by SIGKILL (signal 9).
	jq -c "select(.event == \"rank_exit\" and .attempt == 1)" shrink/runs/shrink/latest/events.jsonl &&
	test "$(jq -n "[inputs | select(.event == \"rank_exit\" and .attempt == 1 and .signal == 15)] | length" shrink/runs/shrink/latest/events.jsonl)" = 2 &&
	ev_all shrink/runs/shrink/latest/events.jsonl attempt_start ".attempt != 2 or .world_size == 2" &&
	log2=shrink/runs/shrink/latest/attempt-2/rank-0.log &&
	grep "^train.py: 3 ranks wrote step_000000[0-9]0, 2 resume it: the global batch goes from 12 to 8 sequences per step (--batch 4 per rank)$" $log2 &&
	test $(cat shrink/runs/shrink/latest/attempt-*/rank-0.log | grep -c "global batch") = 1 &&
	grep "^step 60/60 loss" $log2 &&
	cluster_start_node 3 &&
	cluster_wait_ssh 3 60
'

# The project passes --deepspeed ds_zero3.json always; without deepspeed
# (Debian has none) train.py runs plain DDP and must speak herd.elastic:
# it did not (it counted the flag, not the module), and every lost node
# restarted every rank from disk.
test_expect_success 'a project as made with a spare loses node 2 at step 20: its rank starts on the spare, the survivor keeps its process and trains on, one attempt' '
	herd init pretrain keep --set "corpus=/usr/lib/python3.11/[a-c]*.py" \
		--set "tokenizer=$PWD/pre/data/tokenizer.model" --set steps=60 \
		--set ckpt_every=10 --set batch=4 \
		--set "hosts=$HERD_CLUSTER_PREFIX[1-2]" --set "spares=$(cluster_node 3)" $KEYS \
		--set name=keep \
		--set "extra_args=--seq-len 64 --log-every 5 --step-sleep 0.1" >out &&
	cp -r pre/data keep/data &&
	run_bg keep/job.yaml out.kp err.kp &&
	log0=keep/runs/keep/latest/attempt-1/rank-0.log &&
	wait_log $log0 "^step 20/60 " &&
	ev=keep/runs/keep/latest/events.jsonl &&
	cluster_kill_node 2 &&
	wait_exit $HERD_PID 300 &&
	cat err.kp &&
	test "$WAIT_RC" = 0 &&
	jq -e -s "any(.[]; .event == \"rejoin\" and .fell_back == false and .replacement == [\"$(cluster_node 3)\"])" $ev &&
	test $(jq -c "select(.event == \"attempt_start\")" $ev | wc -l) = 1 &&
	test $(jq -c "select(.event == \"rank_start\" and .rank == 0)" $ev | wc -l) = 1 &&
	grep -q "rank 0: rejoined at step" $log0 &&
	grep -q "rank 1: joined at step" keep/runs/keep/latest/attempt-1/rank-1.log &&
	# The replacement on the spare, from its warm interpreter.
	jq -e -s "any(.[]; .event == \"rank_start\" and .rank == 1 and .generation == 1 and .warm == true)" $ev &&
	grep "^step 60/60 loss" $log0 &&
	cluster_start_node 2 &&
	cluster_wait_ssh 2 60
'

test_expect_success 'herd stop at step 15 of a project checkpointing every 1000 steps: train.py checkpoints the step it reached on SIGTERM and stops; herd run resumes from it' '
	herd init pretrain stop --set "corpus=/usr/lib/python3.11/[a-c]*.py" \
		--set "tokenizer=$PWD/pre/data/tokenizer.model" --set steps=400 \
		--set ckpt_every=1000 --set batch=4 --set "hosts=$HOSTS" $KEYS \
		--set name=stopme \
		--set "extra_args=--seq-len 64 --log-every 5 --step-sleep 0.1" >out &&
	cp -r pre/data stop/data &&
	run_bg stop/job.yaml out.st err.st &&
	log=stop/runs/stopme/latest/attempt-1/rank-0.log &&
	wait_log $log "^step 15/400 " &&
	herd stop stopme >stop.out 2>&1 &&
	wait_exit $HERD_PID 120 &&
	cat stop.out err.st &&
	test "$WAIT_RC" = 143 &&
	ls stop/ckpt >ckpts &&
	cat ckpts &&
	test $(wc -l <ckpts) = 1 &&
	at=$(( $(sed "s/^step_0*//" ckpts) )) &&
	test $at -ge 15 && test $at -lt 400 &&
	test "$(cat stop/ckpt/step_*/COMPLETE)" = $at &&
	grep -x "rank 0: SIGTERM at step $at: checkpointed; stopping" $log &&
	sed -i "s/--steps 400/--steps $((at + 5))/" stop/job.yaml &&
	herd run stop/job.yaml >out.st2 2>err.st2 &&
	grep -x "rank 0: resumed from $PWD/stop/ckpt/step_$(printf %08d $at) at step $at" \
		stop/runs/stopme/latest/attempt-1/rank-0.log
'

test_done
