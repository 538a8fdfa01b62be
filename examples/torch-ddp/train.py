#!/usr/bin/python3
"""A small PyTorch DDP job on CPU (gloo) for herd's demo and tests.

Reads the torchrun-style variables herd sets (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), trains a tiny regression model for --steps
steps, checks every step that all ranks hold identical parameters (the
proof that gradients were all-reduced across nodes), writes a checkpoint
every --ckpt-every steps as DIR/step_N/ with a COMPLETE marker written
last, and resumes from --resume PATH when given.
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ckpt", default="")
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--resume", default="")
    p.add_argument("--step-sleep", type=float, default=0.0)
    return p.parse_args()


def main():
    args = parse()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    start = 0
    if args.resume:
        state = torch.load(os.path.join(args.resume, "model.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        print(f"rank {rank}: resumed from {args.resume} at step {start}",
              flush=True)
    gen = torch.Generator().manual_seed(1000 + rank)
    for step in range(start, args.steps):
        x = torch.randn(32, 16, generator=gen)
        y = x.sum(dim=1, keepdim=True)
        loss = ((ddp(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        ref = flat.clone()
        dist.broadcast(ref, src=0)
        if not torch.equal(flat, ref):
            print(f"rank {rank}: parameters diverged at step {step + 1}",
                  file=sys.stderr, flush=True)
            return 1
        if rank == 0:
            print(f"step {step + 1}/{args.steps} loss {loss.item():.4f}",
                  flush=True)
        if args.ckpt and rank == 0 and (step + 1) % args.ckpt_every == 0:
            d = os.path.join(args.ckpt, f"step_{step + 1:06d}")
            os.makedirs(d, exist_ok=True)
            torch.save({"model": model.state_dict(),
                        "opt": opt.state_dict(), "step": step + 1},
                       os.path.join(d, "model.pt"))
            open(os.path.join(d, "COMPLETE"), "w").close()
        if args.step_sleep:
            time.sleep(args.step_sleep)
        dist.barrier()
    print(f"rank {rank}/{world} on {socket.gethostname()}: done", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
