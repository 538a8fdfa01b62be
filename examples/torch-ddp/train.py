#!/usr/bin/python3
"""A small PyTorch DDP job on CPU (gloo) for herd's demo and tests.

Reads the torchrun-style variables herd sets (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), trains a tiny regression model for --steps
steps, checks every step that all ranks hold identical parameters (the
proof that gradients were all-reduced across nodes), checkpoints every
--ckpt-every steps and resumes from --resume PATH, else from
$HERD_RESUME_FROM when herd sets it.  Under herd every rank saves each
checkpoint in its node's memory tier (herd.ckpt: herd copies it to
another node and persists it to checkpoint.dir every
checkpoint.persist_every); rank 0 also writes DIR/step_N/ on disk every
--disk-every steps (default: every checkpoint), and every checkpoint
that found no memory tier (run without herd, or the tier full).  A disk
checkpoint is written under a temporary name, COMPLETE marker inside,
then renamed into place, so it is either whole or absent; rank 0 writes
it before its memory copy, so a step in every rank's memory is on disk
too when it is due there.  Rank 0 prints loss and steps/s
("step N/M loss X R steps/s", which examples/spec/metrics-torch-ddp.yaml
matches); every rank reports step, loss, samples and tokens (a sample's 16
inputs stand in for a sequence's tokens) to herd through herd.metrics
($HERD_METRICS; the package herd puts on every rank's PYTHONPATH).
Under herd it speaks herd.elastic: when a node is lost the other
ranks keep their processes and their step, the failed ranks start on a
spare and get the state from a survivor (doc/failures.md: "Survivors keep
training"); without it, torch's env:// as before.  At the end every rank
prints a checksum of its parameters ("rank R params SUM SUMSQ").
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

# herd puts its package on every rank's PYTHONPATH (python/herd in the
# sources); run without herd there is no $HERD_METRICS to write to.
try:
    from herd.metrics import log
except ImportError:
    def log(**values):
        pass

try:  # herd's package (on PYTHONPATH under herd); a plain script without
    from herd import elastic  # noqa: E402
    from herd import ckpt as herd_ckpt  # noqa: E402
except ImportError:
    elastic = herd_ckpt = None


class _Plain:
    """Membership without herd.elastic: torch's env:// rendezvous."""
    enabled = False

    def init_process_group(self, backend):
        dist.init_process_group(backend, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]))

    def join(self, model, opt, step):
        return step

    def changed(self):
        return False

    def stepped(self, step):
        pass


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ckpt", default="")
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--disk-every", type=int, default=0,
                   help="rank 0's disk checkpoints, in steps (0: every "
                   "--ckpt-every)")
    p.add_argument("--resume", default="")
    p.add_argument("--step-sleep", type=float, default=0.0)
    return p.parse_args()


def save(root, step, model, opt):
    """Writes root/step_NNNNNN atomically: a temporary directory holding
    model.pt and the COMPLETE marker is renamed into place."""
    os.makedirs(root, exist_ok=True)
    final = os.path.join(root, f"step_{step:06d}")
    tmp = os.path.join(root, f".tmp-step_{step:06d}-{os.getpid()}")
    os.makedirs(tmp, exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                "step": step}, os.path.join(tmp, "model.pt"))
    with open(os.path.join(tmp, "COMPLETE"), "w") as f:
        f.write(f"{step}\n")
        f.flush()
        os.fsync(f.fileno())
    if os.path.exists(final):
        return
    os.rename(tmp, final)


def checkpoint(args, rank, step, model, opt):
    """Rank 0 on disk when due (or with no memory tier), then every rank
    into its memory tier (herd.ckpt)."""
    disk_every = args.disk_every or args.ckpt_every
    tier = herd_ckpt is not None and herd_ckpt.memory_dir() is not None
    if rank == 0 and (step % disk_every == 0 or not tier):
        save(args.ckpt, step, model, opt)
    if tier and herd_ckpt.save(step, {"model": model.state_dict(),
                                      "opt": opt.state_dict(),
                                      "step": step},
                               name="model.pt") is None and rank == 0 \
            and step % disk_every:
        save(args.ckpt, step, model, opt)  # no room in memory: disk


def main():
    args = parse()
    # Survivors keep training (herd.elastic): a node lost mid-step costs
    # a rejoin, not a restart; without herd this is torch's env://.
    m = elastic.Membership() if elastic else _Plain()
    m.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if not args.resume:
        args.resume = os.environ.get("HERD_RESUME_FROM", "")
    if args.resume:
        state = torch.load(os.path.join(args.resume, "model.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
        print(f"rank {rank}: resumed from {args.resume} at step {start}",
              flush=True)
    # A replacement for a failed rank gets the state from a survivor
    # (before DDP, whose constructor is a collective of its own).
    joining = m.enabled and os.environ.get("HERD_GENERATION", "0") != "0"
    start = m.join(model, opt, start)
    if joining:
        print(f"rank {rank}: joined at step {start}", flush=True)
    ddp = nn.parallel.DistributedDataParallel(model)
    gen = torch.Generator().manual_seed(1000 + rank)
    t_last = time.monotonic()
    step = start
    while step < args.steps:
        if m.changed():
            step = m.rejoin(model, opt, step)
            rank, world = dist.get_rank(), dist.get_world_size()
            ddp = nn.parallel.DistributedDataParallel(model)
            print(f"rank {rank}: rejoined at step {step}", flush=True)
            continue
        try:
            x = torch.randn(32, 16, generator=gen)
            y = x.sum(dim=1, keepdim=True)
            loss = ((ddp(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            flat = torch.cat([p.detach().flatten()
                              for p in model.parameters()])
            ref = flat.clone()
            dist.broadcast(ref, src=0)
            dist.barrier()
        except RuntimeError as e:
            if not m.enabled:
                raise
            elastic.trace(f"step failed: {str(e)[:160]}")
            # A peer died mid-collective: herd tells the new membership.
            step = m.rejoin(model, opt, step)
            rank, world = dist.get_rank(), dist.get_world_size()
            ddp = nn.parallel.DistributedDataParallel(model)
            print(f"rank {rank}: rejoined at step {step}", flush=True)
            continue
        if not torch.equal(flat, ref):
            print(f"rank {rank}: parameters diverged at step {step}",
                  file=sys.stderr, flush=True)
            return 1
        m.stepped(step)
        log(step=step, loss=loss.item(), samples=x.shape[0],
            tokens=x.numel())
        if rank == 0:
            now = time.monotonic()
            rate = 1.0 / max(now - t_last, 1e-9)
            t_last = now
            print(f"step {step}/{args.steps} loss {loss.item():.4f} "
                  f"{rate:.1f} steps/s", flush=True)
        if args.ckpt and step % args.ckpt_every == 0:
            checkpoint(args, rank, step, model, opt)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    # Every rank ends on the same parameters: their checksum, compared
    # by the tests.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    print(f"rank {rank} params {float(flat.double().sum()):.10f} "
          f"{float((flat.double() ** 2).sum()):.10f}", flush=True)
    try:
        dist.barrier()
    except RuntimeError:
        if not m.enabled:
            raise
    print(f"rank {rank}/{world} on {socket.gethostname()}: done", flush=True)
    return 0


if __name__ == "__main__":
    status = main()
    # Leave without running destructors: PyTorch 1.13 (Debian 12's) can
    # deadlock at exit when the DDP reducer drops the last reference to
    # the gloo process group (its destructor joins a gloo thread that
    # waits for the GIL the destructor holds); seen as a rank that printed
    # "done" and never exited, once in about ten runs on a loaded machine.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
