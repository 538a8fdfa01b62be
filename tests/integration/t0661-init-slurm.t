#!/bin/sh
test_description='a herd init pretrain project with the real train.py and tokenize_corpus.py under Slurm: tokenize.yaml and job.yaml through herd sbatch --wait, then srun-pmix.sbatch (no herd) resumes from the newest checkpoint'
. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

test_expect_success 'cluster of 2 nodes with Slurm' 'cluster_up 2 && slurm_up'

test_expect_success 'pretrain project: tokenize.yaml and job.yaml through herd sbatch --wait' '
	herd init pretrain real --set "corpus=/usr/lib/python3.11/a*.py" \
		--set tokenizer=256 --set steps=30 --set ckpt_every=10 \
		--set batch=4 --set "extra_args=--seq-len 32 --log-every 5" >out &&
	cat out &&
	timeout 300 herd sbatch --wait real/tokenize.yaml >out 2>err || { cat err real/runs/*/slurm-*.out; false; } &&
	cat real/runs/pretrain-tokenize/slurm-*.out | tail -5 &&
	ls real/data | head &&
	timeout 300 herd sbatch --wait real/job.yaml >out 2>err || { cat err real/runs/pretrain/slurm-*.out; false; } &&
	tail -8 real/runs/pretrain/slurm-*.out &&
	ls real/ckpt && test -e real/ckpt/step_00000030/COMPLETE &&
	herd status real/job.yaml
'

test_expect_success 'srun-pmix.sbatch with the real train.py resumes from step 30 to 40' '
	sed -i "s/--steps 30/--steps 40/" real/srun-pmix.sbatch &&
	timeout 300 sbatch --wait --parsable real/srun-pmix.sbatch >out || { cat real/slurm-*.out; false; } &&
	cat real/slurm-pretrain-$(cat out).out | tail -8 &&
	test -e real/ckpt/step_00000040/COMPLETE
'

test_done
