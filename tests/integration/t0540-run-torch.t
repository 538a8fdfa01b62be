#!/bin/sh

test_description='herd run of the PyTorch DDP example (gloo on CPU) across 4 nodes x 1 slot of the test cluster'

. "$(dirname "$0")/test-lib.sh"
. "$HERD_ROOT/tests/cluster/lib.sh"
. "$HERD_TEST_DIR/data/run/lib.sh"

require_root
require_cmd ip nsenter unshare setsid flock ssh ssh-keygen jq
[ -x /usr/bin/python3 ] || error "prerequisite /usr/bin/python3 is missing"
/usr/bin/python3 -c "import torch.distributed" 2>/dev/null ||
	error "prerequisite: /usr/bin/python3 cannot import torch.distributed"

test_expect_success 'cluster of 4 nodes' '
	own_binaries &&
	cluster_up 4
'

test_expect_success 'train.py --steps 20 completes on 4 nodes: loss printed, every rank done' '
	cat >torch.yaml <<-EOF &&
	name: torch
	nodes: {hosts: "$HERD_CLUSTER_HOSTLIST", slots: 1}
	ssh: {identity: $HERD_CLUSTER_KEY, known_hosts: $HERD_CLUSTER_KNOWN_HOSTS}
	health: {grace: 2s}
	launch:
	  command: /usr/bin/python3 train.py --steps 20
	  workdir: $HERD_ROOT/examples/torch-ddp
	  env: {OMP_NUM_THREADS: "1"}
	EOF
	herd run torch.yaml >out 2>err &&
	grep -E "^\[0\] step 20/20 loss [0-9]+\.[0-9]+" out &&
	test $(grep -c "^\[0\] step [0-9]*/20 loss" out) = 20 &&
	for r in 0 1 2 3; do
		grep -x "\[$r\] rank $r/4 on $(cluster_node $((r + 1))): done" out || return 1
	done &&
	! grep diverged out err &&
	ev_all runs/torch/latest/events.jsonl rank_exit ".status == 0" &&
	ev_all runs/torch/latest/events.jsonl attempt_start ".world_size == 4 and .master_addr == \"$(cluster_addr 1)\"" &&
	ev_all runs/torch/latest/events.jsonl job_end ".status == 0"
'

test_done
