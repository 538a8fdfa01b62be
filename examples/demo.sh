#!/bin/sh
# make demo: bring up a 4-node local cluster (network namespaces, one real
# sshd each), install a herd key on it with `herd keys`, run the PyTorch
# DDP example across the 4 nodes with `herd run`, tear everything down.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
herd=$top/bin/herd

[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces)" >&2; exit 1; }

echo "== bringing up a 4-node local cluster"
dir=$("$top/tests/cluster/up" 4)
work=$(mktemp -d /tmp/herd-demo.XXXXXX)
cleanup() {
	"$top/tests/cluster/down" "$dir" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
. "$dir/env"

cp "$top/examples/torch-ddp/train.py" "$work/"
cat >"$work/job.yaml" <<JOB
name: demo
nodes:
  hosts: $HERD_CLUSTER_HOSTLIST
  slots: 1
ssh:
  identity: $work/herd_ed25519
  known_hosts: $work/known_hosts
launch:
  command: /usr/bin/python3 train.py --steps 30 --ckpt ckpt --ckpt-every 10 {{resume_args}}
  workdir: .
  env: {OMP_NUM_THREADS: "1"}
checkpoint:
  dir: ckpt
  pattern: "step_*"
  complete_marker: COMPLETE
  resume_args: "--resume {{checkpoint}}"
log:
  dir: $work/runs/{{name}}
JOB
echo "== job file"
cat "$work/job.yaml"

echo "== herd hosts"
"$herd" hosts "$work/job.yaml"

if "$herd" --help | grep -q '^  herd keys'; then
	echo "== herd keys --accept-new (new key pair, installed on every node, host keys pinned)"
	# The cluster's own client key authorizes the first contact.
	SSH_AUTH_SOCK= HERD_BOOTSTRAP_IDENTITY=$HERD_CLUSTER_KEY \
		"$herd" keys "$work/job.yaml" --accept-new
else
	cp "$HERD_CLUSTER_KEY" "$work/herd_ed25519"
	cp "$HERD_CLUSTER_KNOWN_HOSTS" "$work/known_hosts"
fi

echo "== herd run (4 nodes x 1 rank, gloo on CPU)"
"$herd" run -v "$work/job.yaml"
echo "== events"
cut -c1-160 "$work/runs/demo/events.jsonl"
echo "== demo done: the loss above fell across 4 nodes"
