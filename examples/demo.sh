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
trap 'cleanup' EXIT
trap 'exit 130' INT TERM
. "$dir/env"

# The job runs as a demo user whose home is in the work directory, so
# that `herd keys` installs its key there and nothing of this machine's
# own accounts changes.
user=herd-demo-$$
useradd -M -d "$work/home" -s /bin/sh -p "*" "$user"   # "*": no password, not locked
cleanup() {
	[ -z "${agent_pid:-}" ] || kill "$agent_pid" 2>/dev/null || true
	"$top/tests/cluster/down" "$dir" >/dev/null 2>&1 || true
	userdel "$user" 2>/dev/null || true
	rm -rf "$work"
}
# sshd reads a user's authorized keys as that user: let the demo user
# reach the cluster's shared authorized_keys (the cluster's private key
# stays 0600).
chmod 711 "$dir" "$dir/nodes" "$dir"/nodes/*
chmod 644 "$dir"/nodes/*/authorized_keys
mkdir -p "$work/home" "$work/job"
# train.py imports herd.metrics: the agent puts the herd package on every
# rank's PYTHONPATH.
cp "$top/examples/torch-ddp/train.py" "$work/job/"
chown -R "$user:" "$work/home" "$work/job"
chmod 755 "$work"
cat >"$work/job.yaml" <<JOB
name: demo
nodes:
  hosts: $HERD_CLUSTER_HOSTLIST
  slots: 1
ssh:
  user: $user
  identity: $work/herd_ed25519
  known_hosts: $work/known_hosts
launch:
  command: /usr/bin/python3 train.py --steps 30 --ckpt ckpt --ckpt-every 10 {{resume_args}}
  workdir: job
  env: {OMP_NUM_THREADS: "1"}
checkpoint:
  dir: job/ckpt
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

echo "== herd keys --accept-new: a new key pair, installed on every node, host keys pinned"
# First contact goes through an ssh-agent holding the cluster's own key,
# as a user's first contact would go through theirs.
eval "$(ssh-agent -s)" >/dev/null
agent_pid=$SSH_AGENT_PID
ssh-add -q "$HERD_CLUSTER_KEY"
"$herd" keys "$work/job.yaml" --accept-new
echo "== herd keys again: nothing to add"
"$herd" keys "$work/job.yaml"
kill "$agent_pid"
agent_pid=
unset SSH_AUTH_SOCK SSH_AGENT_PID

echo "== herd run (4 nodes x 1 rank, gloo on CPU), with only the new key"
"$herd" run -v "$work/job.yaml"
echo "== events"
cut -c1-160 "$work/runs/demo/latest/events.jsonl"
echo "== demo done: the loss above fell across 4 nodes"
