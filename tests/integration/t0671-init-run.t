#!/bin/sh

test_description='projects made by herd init run as made, on 3 nodes of the test cluster (real PyTorch, gloo on CPU): herd init pretrain, its tokenize.yaml and job.yaml; herd init finetune from the newest pretraining checkpoint on other text starts clearly below a from-scratch project (herd init pretrain with the same tokenizer) on the same text'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

/usr/bin/python3 -c "import sentencepiece" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import sentencepiece (python3-sentencepiece; run 'make deps')"
[ -r /usr/lib/python3.11/argparse.py ] || error "prerequisite /usr/lib/python3.11/*.py (python3.11) is missing"
[ -r /usr/share/common-licenses/GPL-3 ] || error "prerequisite /usr/share/common-licenses (base-files) is missing"

# ssh PROJECT: the test cluster's key and known hosts for both job files
# of a project (herd init writes no ssh section: a site's ssh config or
# defaults do).
ssh_of() {
	for f in "$1/job.yaml" "$1/tokenize.yaml"; do
		echo "ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}" >>"$f" || return 1
	done
}

# first PROJECT NAME: the first loss rank 0 printed.
first() {
	grep "^step [0-9]*/[0-9]* loss " "$1/runs/$2/latest/attempt-1/rank-0.log" |
		awk 'NR == 1 { print $4 }'
}

test_expect_success 'cluster of 3 nodes' '
	cluster_up 3 &&
	HOSTS="$HERD_CLUSTER_PREFIX[1-3]"
'

test_expect_success 'herd init pretrain; tokenize.yaml and job.yaml run on the 3 nodes as made' '
	herd init pretrain pre --set "corpus=/usr/lib/python3.11/[a-c]*.py" \
		--set tokenizer=512 --set steps=60 --set ckpt_every=20 \
		--set batch=4 --set "hosts=$HOSTS" \
		--set "extra_args=--seq-len 64 --log-every 10" >out &&
	ssh_of pre &&
	herd validate pre/job.yaml &&
	herd run pre/tokenize.yaml >out.tok 2>err.tok &&
	jq -e ".dtype == \"uint16\" and .vocab_size == 512" pre/data/index.json &&
	herd run pre/job.yaml >out.pre 2>err.pre &&
	test -e pre/ckpt/step_00000060/COMPLETE &&
	grep "^step 60/60 loss " pre/runs/pretrain/latest/attempt-1/rank-0.log
'

test_expect_success 'herd init finetune from step 60 on the licenses; herd init pretrain on the same text from scratch: fine-tuning starts clearly lower' '
	herd init finetune ft --set "corpus=/usr/share/common-licenses" \
		--set "base=$PWD/pre/ckpt/step_00000060" \
		--set "tokenizer=$PWD/pre/data/tokenizer.model" \
		--set steps=10 --set batch=4 --set "hosts=$HOSTS" \
		--set "extra_args=--seq-len 64 --log-every 1" >out &&
	herd init pretrain scratch --set "corpus=/usr/share/common-licenses" \
		--set "tokenizer=$PWD/pre/data/tokenizer.model" \
		--set steps=10 --set batch=4 --set "hosts=$HOSTS" \
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

test_done
