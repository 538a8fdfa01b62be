#!/usr/bin/python3
"""A small DDP job (gloo, CPU) that checkpoints through herd.ckpt: every
--every steps each rank saves its state in its memory tier; where there
is none (or no room), rank 0 saves to --ckpt on disk (step_N + COMPLETE,
renamed into place).  It resumes from $HERD_RESUME_FROM (herd.ckpt.load)
and prints what it did, for the tests:

  rank R: resumed from PATH at step S
  rank R: saved step S to memory|disk
  step N/M loss X           (rank 0)
  rank R: params SUM        (at the end)

--torn S: at step S rank 0 leaves a torn step in its tier (step_99999999
without COMPLETE, and a .tmp- directory), which must never be offered.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import herd.ckpt

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--every", type=int, default=5)
p.add_argument("--ckpt", default="")
p.add_argument("--sleep", type=float, default=0.1)
p.add_argument("--torn", type=int, default=-1)
p.add_argument("--pad", type=int, default=0,
               help="bytes of padding in each checkpoint")
p.add_argument("--wait-file", default="",
               help="before step --wait-step, wait until this file exists")
p.add_argument("--wait-step", type=int, default=0)
a = p.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(1)
model = nn.Linear(8, 1)
ddp = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
start = 0
step, state = herd.ckpt.load()
if state is not None:
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]
    print("rank %d: resumed from %s at step %d"
          % (rank, herd.ckpt.resume_path(), start), flush=True)
pad = torch.zeros(a.pad // 4, dtype=torch.float32) if a.pad else None


def save_disk(s, obj):
    if rank != 0 or not a.ckpt:
        return
    final = os.path.join(a.ckpt, "step_%08d" % s)
    tmp = os.path.join(a.ckpt, ".tmp-own-step_%08d" % s)
    if os.path.exists(final):
        return
    os.makedirs(tmp, exist_ok=True)
    torch.save(obj, os.path.join(tmp, "state.pt"))
    open(os.path.join(tmp, "COMPLETE"), "w").close()
    try:
        os.rename(tmp, final)
    except OSError:
        pass


w_true = torch.arange(8, dtype=torch.float32)
for s in range(start + 1, a.steps + 1):
    if s == a.wait_step and a.wait_file:
        while not os.path.exists(a.wait_file):
            time.sleep(0.05)
    g = torch.Generator().manual_seed(1000 * s + rank)
    x = torch.randn(16, 8, generator=g)
    y = x @ w_true
    loss = ((ddp(x).squeeze(1) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 0:
        print("step %d/%d loss %.4f" % (s, a.steps, loss.item()), flush=True)
    if s % a.every == 0:
        obj = {"model": model.state_dict(), "opt": opt.state_dict(),
               "step": s, "pad": pad}
        where = "memory" if herd.ckpt.save(s, obj) else "disk"
        if where == "disk":
            save_disk(s, obj)
        print("rank %d: saved step %d to %s" % (rank, s, where), flush=True)
    if s == a.torn and rank == 0 and herd.ckpt.memory_dir():
        d = herd.ckpt.memory_dir()
        os.makedirs(os.path.join(d, "step_99999999"), exist_ok=True)
        with open(os.path.join(d, "step_99999999", "state.pt"), "w") as f:
            f.write("torn")
        os.makedirs(os.path.join(d, ".tmp-step_99999998"), exist_ok=True)
        open(os.path.join(d, ".tmp-step_99999998", "COMPLETE"), "w").close()
        print("rank 0: left a torn step", flush=True)
    time.sleep(a.sleep)
total = sum(float(t.sum()) for t in model.parameters())
print("rank %d: params %.6f" % (rank, total), flush=True)
dist.destroy_process_group()
