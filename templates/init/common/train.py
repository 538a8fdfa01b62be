#!/usr/bin/python3
"""train.py: a small GPT trained on token shards, data-parallel (DDP or
FSDP), for projects made by `herd init` (pretrain from scratch, or
fine-tune from a base checkpoint with --init-from).

Pure PyTorch (Debian's python3-torch).  Started once per rank with the
torchrun-style variables herd sets (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT); without them it trains alone (one process).
gloo on CPU, NCCL on GPUs (the GPU is LOCAL_RANK among the visible ones).

Data: the directory tokenize_corpus.py wrote (index.json and shard_NNNNN.bin);
each step every rank reads --batch random windows of --seq-len + 1
tokens, drawn from a generator seeded by (seed, step, rank): a resumed
run sees the batches it would have seen, and no two ranks share one.

Checkpoints: CKPT_DIR/step_NNNNNNNN/ (the step, 8 digits) holding
state.pt (model, optimizer, step, RNG states, the model's config and the
arguments), config.json (the same config, readable) and COMPLETE, written
last; the directory is written under a temporary name and renamed into
place, so a step_* directory either is whole or does not exist.  With
FSDP the full (unsharded) state is gathered on rank 0, which writes it:
the model's weights load into any world size and into DDP or FSDP alike
(the optimizer's state when resumed with the same --parallel).  Under
herd, with plain DDP, every rank also keeps each checkpoint in its
node's memory tier (herd.ckpt: a memory copy, copied by herd to another
node and persisted to checkpoint.dir every checkpoint.persist_every);
--disk-every N then writes CKPT_DIR only every N steps, at the end and
on SIGTERM (default: every checkpoint), and herd resumes from memory
when memory holds a newer step than CKPT_DIR.  A step that not every
rank could keep in memory goes to CKPT_DIR.

Resume: from $HERD_RESUME_FROM when set and non-empty (herd sets it to
the newest complete checkpoint), else from --resume.  --init-from PATH
loads only the model's weights (a step_* directory, or a checkpoint
directory whose newest complete step_* is taken): fine-tuning starts at
step 0 with a new optimizer.  A resume wins over --init-from (a
fine-tuning run that restarts continues itself).

Stopping: on SIGTERM (herd stop, herd stopping the ranks after a node
failed elsewhere, scancel, a preemption, Slurm's --signal=TERM@SECONDS)
the step under way is finished and checkpointed, then the process ends
as SIGTERM would have ended it; the ranks agree on the step (a flag
all-reduced after every step), so all of them save the same one.  herd
waits health.grace (10 s by default) before SIGKILL: a step and a
checkpoint must fit in it.  A SIGTERM that finds the rank leaving a
failed group (a peer died mid-collective, herd.elastic's rejoin) ends it
at once: its group is gone, there is no step to agree on, and its newest
checkpoint is already in memory or on disk.

Shrinking: resumed on another number of ranks than the checkpoint's
(herd goes on with fewer nodes after losing some, nodes.min), rank 0
says once that the global batch (--batch per rank times the ranks)
changes, with the old and new sizes.

Metrics: every step one JSON line {"step", "loss", "tokens",
"step_time"} is appended to $HERD_METRICS (through herd.metrics, the
package herd puts on every rank's PYTHONPATH) and $HERD_PROGRESS_FILE is
touched (both only when herd sets them); rank 0 prints
"step N/M loss X tokens/s Y" every --log-every steps.

DeepSpeed: with --deepspeed CONFIG and the `deepspeed` module importable,
the model is trained by a DeepSpeed engine with that config (the ZeRO-3
JSON herd renders); its checkpoints are DeepSpeed's own, inside the same
step_NNNNNNNN/ + COMPLETE layout.  DeepSpeed is not packaged in Debian:
that path is not tested by herd's test suite.  Without the module, the
config is ignored with a note and --parallel is used.
"""
import argparse
import contextlib
import importlib.util
import json
import math
import os
import shutil
import signal
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

try:  # herd's package, on PYTHONPATH under herd: survivors keep training,
    # checkpoints in memory
    from herd import elastic
    from herd import ckpt as herd_ckpt
except ImportError:
    elastic = herd_ckpt = None

SIZES = {
    # name: (layers, heads, embedding width)
    "tiny": (2, 2, 64),
    "small": (4, 4, 256),
    "base": (12, 12, 768),
}


def parse(argv=None):
    p = argparse.ArgumentParser(
        description="Train a small GPT on token shards (DDP/FSDP; "
        "checkpoints CKPT_DIR/step_NNNNNNNN with COMPLETE; resumes from "
        "$HERD_RESUME_FROM).")
    p.add_argument("--data", required=True,
                   help="directory of token shards (tokenize_corpus.py --out)")
    p.add_argument("--steps", type=int, default=1000,
                   help="train until this step (default 1000)")
    p.add_argument("--ckpt-dir", default="",
                   help="write checkpoints here (default: none)")
    p.add_argument("--ckpt-every", type=int, default=100,
                   help="checkpoint every N steps and at the end")
    p.add_argument("--disk-every", type=int, default=0,
                   help="with herd's memory tier, write to --ckpt-dir only "
                   "every N steps (and at the end; default: every "
                   "checkpoint)")
    p.add_argument("--keep", type=int, default=3,
                   help="complete checkpoints to keep (0: all)")
    p.add_argument("--parallel", choices=("ddp", "fsdp"), default="ddp",
                   help="DistributedDataParallel, or FullyShardedDataParallel"
                   " (ZeRO-3's equivalent; needs CUDA in PyTorch 1.13: on "
                   "CPU, DDP with the optimizer state sharded)")
    p.add_argument("--model-size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--batch", type=int, default=8,
                   help="sequences per rank per step")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=-1,
                   help="warm-up steps (default: a tenth of --steps, at "
                   "most 100)")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--init-from", default="",
                   help="fine-tune: the base model's weights from this "
                   "checkpoint (step_* directory or checkpoint directory)")
    p.add_argument("--resume", default="",
                   help="resume from this checkpoint when $HERD_RESUME_FROM"
                   " is not set")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"),
                   default="auto",
                   help="auto: bf16 autocast on GPUs that support it, "
                   "else fp32")
    p.add_argument("--deepspeed", default="", metavar="CONFIG",
                   help="train with DeepSpeed and this JSON config when the "
                   "deepspeed module is importable")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help=argparse.SUPPRESS)  # tests: slow the loop down
    a = p.parse_args(argv)
    if a.steps < 0 or a.ckpt_every < 1 or a.batch < 1 or a.seq_len < 1 \
            or a.log_every < 1 or a.keep < 0:
        p.error("--steps must be >= 0; --ckpt-every, --batch, --seq-len, "
                "--log-every >= 1; --keep >= 0")
    if a.warmup < 0:
        a.warmup = min(100, a.steps // 10)
    return a


# ---- the model --------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, width, heads, seq_len):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        # Not a buffer: DDP broadcasts buffers, and gloo has no bool.
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        y = att.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, pre-norm transformer blocks with
    causal self-attention, a final layer norm and a head tied to the token
    embedding."""

    def __init__(self, vocab, layers, heads, width, seq_len):
        super().__init__()
        self.config = {"vocab": vocab, "layers": layers, "heads": heads,
                       "width": width, "seq_len": seq_len}
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(seq_len, width)
        self.blocks = nn.ModuleList(
            Block(width, heads, seq_len) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                               targets.reshape(-1))


# ---- data -------------------------------------------------------------------

class Shards:
    """The token shards of a tokenize_corpus.py directory, memory-mapped."""

    def __init__(self, root, need):
        path = os.path.join(root, "index.json")
        try:
            with open(path) as f:
                index = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"train.py: {path}: {e} (run tokenize_corpus.py "
                             f"--out {root} first)")
        self.vocab = int(index["vocab_size"])
        dtype = np.dtype(index["dtype"])
        self.maps, self.sizes = [], []
        for s in index["shards"]:
            if s["tokens"] < need:
                continue
            m = np.memmap(os.path.join(root, s["file"]), dtype=dtype,
                          mode="r")
            if m.shape[0] != s["tokens"]:
                raise SystemExit(f"train.py: {root}/{s['file']}: "
                                 f"{m.shape[0]} tokens, index says "
                                 f"{s['tokens']}")
            self.maps.append(m)
            self.sizes.append(s["tokens"])
        if not self.maps:
            raise SystemExit(f"train.py: {root}: no shard holds {need} "
                             f"tokens (--seq-len + 1)")
        self.weights = torch.tensor(self.sizes, dtype=torch.float64)
        self.tokens = sum(self.sizes)

    def batch(self, seed, step, rank, batch, seq_len):
        """--batch windows of seq_len + 1 tokens: the same ones for the
        same (seed, step, rank), whatever happened before."""
        g = torch.Generator().manual_seed(
            (seed * 1_000_003 + step) * 65_537 + rank)
        which = torch.multinomial(self.weights, batch, replacement=True,
                                  generator=g)
        rows = []
        for i in which.tolist():
            start = int(torch.randint(self.sizes[i] - seq_len, (1,),
                                      generator=g))
            rows.append(np.asarray(self.maps[i][start:start + seq_len + 1],
                                   dtype=np.int64))
        x = torch.from_numpy(np.stack(rows))
        return x[:, :-1], x[:, 1:]


# ---- checkpoints ------------------------------------------------------------

def step_dir(root, step):
    return os.path.join(root, f"step_{step:08d}")


def newest_complete(path):
    """PATH itself when it is a complete step_* directory, else the newest
    complete step_* inside it; None when there is none."""
    if os.path.exists(os.path.join(path, "COMPLETE")):
        return path
    best = None
    try:
        names = os.listdir(path)
    except OSError:
        return None
    for n in names:
        if n.startswith("step_") and n[5:].isdigit() and \
                os.path.exists(os.path.join(path, n, "COMPLETE")):
            if best is None or int(n[5:]) > int(best[5:]):
                best = n
    return os.path.join(path, best) if best else None


def write_checkpoint(root, step, state, config, keep, extra=None):
    """Rank 0: root/step_NNNNNNNN written under a temporary name (state.pt,
    config.json, COMPLETE last, each synced) and renamed into place."""
    os.makedirs(root, exist_ok=True)
    final = step_dir(root, step)
    if os.path.exists(os.path.join(final, "COMPLETE")):
        return final
    tmp = os.path.join(root, f".tmp-step_{step:08d}-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    if extra:
        os.rename(extra, tmp)  # DeepSpeed wrote its files here
    else:
        os.makedirs(tmp)
    if state is not None:
        torch.save(state, os.path.join(tmp, "state.pt"))
    for name, text in (("config.json", json.dumps(config, indent=1) + "\n"),
                       ("COMPLETE", f"{step}\n")):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    if os.path.exists(final):  # an incomplete leftover of a crash
        shutil.rmtree(final)
    os.rename(tmp, final)
    dfd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    if keep:
        done = sorted(n for n in os.listdir(root) if n.startswith("step_")
                      and n[5:].isdigit()
                      and os.path.exists(os.path.join(root, n, "COMPLETE")))
        for n in done[:-keep]:
            shutil.rmtree(os.path.join(root, n), ignore_errors=True)
    return final


def load_state(path):
    """state.pt of a checkpoint; for a DeepSpeed checkpoint (no state.pt)
    only its config and step."""
    pt = os.path.join(path, "state.pt")
    if os.path.exists(pt) or not os.path.isdir(os.path.join(path,
                                                             "deepspeed")):
        try:
            return torch.load(pt, map_location="cpu")
        except (OSError, RuntimeError, EOFError) as e:
            raise SystemExit(f"train.py: {pt}: {e}")
    with open(os.path.join(path, "config.json")) as f:
        meta = json.load(f)
    return {"config": meta["model"], "step": meta["step"], "deepspeed": True}


# ---- herd's metrics and progress --------------------------------------------

# herd puts its package (herd.metrics) on every rank's PYTHONPATH; run
# elsewhere (python3 train.py) the same lines go to $HERD_METRICS, if set.
try:
    from herd import metrics as herd_metrics  # noqa: E402
except ImportError:
    herd_metrics = None


class Herd:
    """$HERD_METRICS: one JSON line per step (herd.metrics); and
    $HERD_PROGRESS_FILE: touched every step.  Nothing when herd did not
    set them."""

    def __init__(self):
        path = os.environ.get("HERD_METRICS")
        self.metrics = (open(path, "a", buffering=1)
                        if path and herd_metrics is None else None)
        self.progress = os.environ.get("HERD_PROGRESS_FILE") or None

    def step(self, **values):
        if herd_metrics is not None:
            herd_metrics.log(**values)
        elif self.metrics:
            line = {k: v for k, v in values.items()
                    if isinstance(v, (int, float)) and math.isfinite(v)}
            self.metrics.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.metrics.flush()
        if self.progress:
            try:
                os.utime(self.progress)
            except FileNotFoundError:
                open(self.progress, "a").close()


# ---- stopping on SIGTERM ------------------------------------------------------

class Stop:
    """SIGTERM noted, acted on at the end of a step (Stop.agreed)."""

    def __init__(self):
        self.signum = 0
        self.flag = None
        self.old_flags = []
        # In a rejoin (leaving a failed group, waiting for herd's new
        # membership): a SIGTERM is herd restarting every rank instead,
        # and nothing can be agreed on or saved with a broken group.
        self.leaving = False
        signal.signal(signal.SIGTERM, self._on)

    def new_group(self):
        """A new process group (herd.elastic's rejoin): the old group's
        tensor may still be written by its failed collective; it is kept
        (see agreed) and a fresh one used."""
        if self.flag is not None:
            self.old_flags.append(self.flag)
        self.flag = None

    def _on(self, signum, frame):
        self.signum = signum
        if self.leaving:
            Stop.exit(signum)

    def agreed(self, world, device):
        """The signal any rank got (0: none); every rank must call it."""
        if world == 1:
            return self.signum
        # One tensor for the whole run, held by STOP until the process
        # ends: a tensor Python dropped while gloo's thread still held it
        # is freed in that thread, which then needs the GIL, and PyTorch
        # 1.13's ProcessGroupGloo destructor joins that thread holding
        # the GIL (a hang at exit).
        if self.flag is None:
            self.flag = torch.zeros(1, dtype=torch.int32, device=device)
        self.flag.fill_(self.signum)
        dist.all_reduce(self.flag, op=dist.ReduceOp.MAX)
        return int(self.flag.item())

    @staticmethod
    def exit(signum):
        """Ends the process as the signal would have: herd and Slurm see
        it stopped, not finished."""
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        signal.pause()


def said_world(resume, world, batch, was=None):
    """Rank 0, on resume: the global batch changes when the checkpoint was
    written by another number of ranks (was: the state's world_size, as
    herd's memory tier holds it; else config.json's)."""
    try:
        if was is None:
            with open(os.path.join(resume, "config.json")) as f:
                was = json.load(f).get("world_size", world)
        was = int(was)
    except (OSError, ValueError, TypeError, AttributeError):
        return
    if was != world:
        print(f"train.py: {was} rank{'s' if was != 1 else ''} wrote "
              f"{os.path.basename(resume)}, "
              f"{world} resume it: the global batch goes from {was * batch}"
              f" to {world * batch} sequences per step (--batch {batch} "
              f"per rank)", flush=True)


# ---- parallelism --------------------------------------------------------------

def import_fsdp():
    """torch.distributed.fsdp of PyTorch 1.13 fails to import on Python
    3.11 (a dataclass default that 3.11 calls mutable); the classes of
    torch.distributed._shard are made hashable while it imports."""
    import dataclasses
    orig = dataclasses.dataclass

    def patched(cls=None, **kw):
        def wrap(c):
            if c.__module__.startswith("torch.distributed._shard") and \
                    "__hash__" not in c.__dict__ and \
                    "unsafe_hash" not in kw and not kw.get("frozen"):
                return orig(c, unsafe_hash=True, **kw)
            return orig(c, **kw)
        return wrap if cls is None else wrap(cls)

    dataclasses.dataclass = patched
    try:
        import torch.distributed.fsdp as fsdp
    finally:
        dataclasses.dataclass = orig
    return fsdp


class Parallel:
    """The model wrapped for data parallelism and its optimizer, with
    checkpoint state that is the same whatever the wrapping."""

    def __init__(self, args, model, device, world):
        self.kind, self.model, self.device = args.parallel, model, device
        self.world = world
        self.zero = None
        decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
        other = [p for n, p in model.named_parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": args.weight_decay},
                  {"params": other, "weight_decay": 0.0}]
        if world == 1:
            self.wrapped = model
        elif self.kind == "fsdp" and device.type == "cuda":
            fsdp = import_fsdp()
            self.fsdp = fsdp
            # One flat parameter for the whole (small) model; tied
            # weights must stay in one FSDP unit.
            self.wrapped = fsdp.FullyShardedDataParallel(
                model, device_id=device,
                sharding_strategy=fsdp.ShardingStrategy.FULL_SHARD)
            groups = [{"params": list(self.wrapped.parameters()),
                       "weight_decay": args.weight_decay}]
        else:
            if self.kind == "fsdp":
                if dist.get_rank() == 0:
                    print("train.py: FSDP in this PyTorch needs CUDA; on CPU"
                          " DDP with ZeroRedundancyOptimizer (optimizer "
                          "state sharded over the ranks)", flush=True)
                self.zero = True
            self.wrapped = nn.parallel.DistributedDataParallel(
                model, device_ids=[device] if device.type == "cuda" else None)
        if self.zero:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            self.opt = ZeroRedundancyOptimizer(
                decay, optimizer_class=torch.optim.AdamW, lr=args.lr,
                betas=(0.9, 0.95), weight_decay=args.weight_decay)
            self.opt.add_param_group({"params": other, "weight_decay": 0.0})
        else:
            self.opt = torch.optim.AdamW(groups, lr=args.lr,
                                         betas=(0.9, 0.95))

    def rewrap(self):
        """DDP again, on the process group of a new generation (its
        broadcast from rank 0, a replacement's model when rank 0's node
        was lost, is undone: herd.elastic's rejoin puts the survivor's
        own back, and the replacements get it from a survivor)."""
        self.wrapped = nn.parallel.DistributedDataParallel(
            self.model,
            device_ids=[self.device] if self.device.type == "cuda" else None)

    def clip(self, norm):
        if self.kind == "fsdp" and self.zero is None and self.world > 1:
            return self.wrapped.clip_grad_norm_(norm)
        return nn.utils.clip_grad_norm_(self.model.parameters(), norm)

    def load_optimizer(self, state):
        if self.kind == "fsdp" and self.zero is None and self.world > 1:
            state = self.fsdp.FullyShardedDataParallel.shard_full_optim_state_dict(
                state, self.wrapped, optim=self.opt)
        self.opt.load_state_dict(state)

    def state(self, rank):
        """Model and optimizer state, full, on rank 0 (None elsewhere);
        every rank must call it."""
        if self.kind == "fsdp" and self.zero is None and self.world > 1:
            F_ = self.fsdp.FullyShardedDataParallel
            cfg = self.fsdp.FullStateDictConfig(offload_to_cpu=True,
                                                rank0_only=True)
            with F_.state_dict_type(self.wrapped,
                                    self.fsdp.StateDictType.FULL_STATE_DICT,
                                    cfg):
                model = self.wrapped.state_dict()
            opt = F_.full_optim_state_dict(self.wrapped, self.opt,
                                           rank0_only=True)
        else:
            if self.zero:
                self.opt.consolidate_state_dict(to=0)
            model = self.model.state_dict() if rank == 0 else None
            opt = self.opt.state_dict() if rank == 0 else None
        if rank != 0:
            return None, None
        model = {k: v.detach().cpu() for k, v in model.items()}
        return model, opt


# ---- main ---------------------------------------------------------------------

STOP = None  # main()'s Stop: module-level, so it outlives main()'s locals


def main(argv=None):
    global STOP
    args = parse(argv)
    stop = STOP = Stop()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    # Survivors keep training when a node is lost (herd.elastic): plain
    # DDP only; FSDP, ZeRO and DeepSpeed shard their state and take the
    # classic restart from a checkpoint.  --deepspeed counts only where
    # deepspeed is importable: the project passes it always, and without
    # deepspeed train.py runs plain DDP.
    ds_on = bool(args.deepspeed) and \
        importlib.util.find_spec("deepspeed") is not None
    m = elastic.Membership(speak=world > 1 and not ds_on and
                           args.parallel == "ddp") if elastic else None
    if world > 1:
        if m is not None:
            m.init_process_group(backend)
        else:
            dist.init_process_group(backend, rank=rank, world_size=world)
    elastic_on = m is not None and m.enabled
    bf16 = args.precision == "bf16" or (
        args.precision == "auto" and device.type == "cuda"
        and torch.cuda.is_bf16_supported())

    data = Shards(args.data, args.seq_len + 1)
    torch.manual_seed(args.seed)
    resume = os.environ.get("HERD_RESUME_FROM", "") or args.resume
    base = None
    if resume:
        state = load_state(resume)
        config = state["config"]
    elif args.init_from:
        src = newest_complete(args.init_from)
        if src is None:
            raise SystemExit(f"train.py: --init-from {args.init_from}: no "
                             f"complete checkpoint there")
        base = load_state(src)
        config = dict(base["config"])
    else:
        layers, heads, width = SIZES[args.model_size]
        config = {"vocab": data.vocab, "layers": layers, "heads": heads,
                  "width": width, "seq_len": args.seq_len}
    if config["seq_len"] < args.seq_len:
        raise SystemExit(f"train.py: --seq-len {args.seq_len} exceeds the "
                         f"checkpoint's model ({config['seq_len']})")
    if config["vocab"] != data.vocab:
        raise SystemExit(f"train.py: the data's vocabulary has {data.vocab}"
                         f" tokens, the model's {config['vocab']}: tokenize "
                         f"with the base model's tokenizer (--tokenizer)")
    model = GPT(config["vocab"], config["layers"], config["heads"],
                config["width"], config["seq_len"])
    start = 0
    if resume:
        if "model" in state:
            model.load_state_dict(state["model"])
        elif not args.deepspeed:
            raise SystemExit(f"train.py: {resume} is a DeepSpeed checkpoint:"
                             f" resume it with --deepspeed CONFIG")
        start = state["step"]
    elif base is not None:
        model.load_state_dict(base["model"])
        del base
    model.to(device)

    ds = None
    if args.deepspeed:
        try:
            import deepspeed  # not in Debian: untested by herd's tests
        except ImportError:
            deepspeed = None
            if rank == 0:
                print(f"train.py: deepspeed is not importable; "
                      f"{args.deepspeed} unused, --parallel {args.parallel}",
                      flush=True)
        if deepspeed is None and resume and "model" not in state:
            raise SystemExit(f"train.py: {resume} is a DeepSpeed checkpoint"
                             f" and deepspeed is not importable")
        if deepspeed is not None:
            ds, _, _, _ = deepspeed.initialize(
                model=model, model_parameters=model.parameters(),
                config=args.deepspeed)
            if resume and "model" not in state:
                ds.load_checkpoint(os.path.join(resume, "deepspeed"),
                                   tag="state")
    par = None
    if ds is None:
        par = Parallel(args, model, device, world)
        if resume:
            try:
                par.load_optimizer(state["optimizer"])
            except (ValueError, KeyError, RuntimeError) as e:
                # Saved with another --parallel: the weights are there,
                # the optimizer's moments start again.
                if rank == 0:
                    print(f"train.py: {resume}: optimizer state not loaded"
                          f" ({type(e).__name__}: {e}); a new optimizer",
                          flush=True)
            torch.set_rng_state(state["rng"]["cpu"])
        opt = par.opt
    else:
        opt = ds.optimizer
    if resume:
        was = state.get("world_size") if isinstance(state, dict) else None
        del state
        if rank == 0:
            print(f"rank 0: resumed from {resume} at step {start}",
                  flush=True)
            said_world(resume, world, args.batch, was)
    elif args.init_from and rank == 0:
        print(f"rank 0: fine-tuning from {args.init_from} "
              f"({config['layers']} layers, width {config['width']})",
              flush=True)
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"rank 0: {n} parameters, world {world}, {device.type}, "
              f"{'deepspeed' if ds else args.parallel}, "
              f"{'bf16' if bf16 else 'fp32'}, {data.tokens} tokens of data",
              flush=True)

    if elastic_on and m.joining:
        # A replacement for a lost rank: model, optimizer and step from
        # the lowest surviving rank (after DDP: the survivors rebuild it
        # before they send, Parallel.rewrap).
        start = m.join(model, opt, start)
        print(f"rank {rank}: joined at step {start}", flush=True)

    herd = Herd()
    autocast = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) \
        if bf16 else contextlib.nullcontext
    net = ds if ds is not None else par.wrapped
    step_tokens = args.batch * args.seq_len
    t_log, tok_log, loss_sum, loss_n = time.monotonic(), 0, 0.0, 0
    def rejoin(at):
        nonlocal net
        stop.new_group()
        if stop.signum:
            Stop.exit(stop.signum)
        stop.leaving = True
        try:
            at = m.rejoin(model, opt, at, wrap=par.rewrap)
        finally:
            stop.leaving = False
        net = par.wrapped
        if rank == 0:
            print(f"rank 0: rejoined at step {at} (generation "
                  f"{m.generation})", flush=True)
        return at

    # Every rank logs the first step after it (re)joined: the log's
    # all_reduce must be in every rank's sequence of collectives.
    step = first = start
    while step < args.steps:
        if elastic_on and m.changed():
            step = first = rejoin(step)
            continue
        done = step
        try:
            t0 = time.monotonic()
            lr = args.lr * min(1.0, (step + 1) / max(1, args.warmup))
            if step >= args.warmup and args.steps > args.warmup:
                frac = (step - args.warmup) / (args.steps - args.warmup)
                lr *= 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac))
            for g in opt.param_groups:
                g["lr"] = lr
            x, y = data.batch(args.seed, step, rank, args.batch,
                              args.seq_len)
            x, y = x.to(device), y.to(device)
            with autocast():
                loss = net(x, y)
            if ds is not None:
                ds.backward(loss)
                ds.step()
            else:
                opt.zero_grad(set_to_none=True)
                loss.backward()  # DDP/FSDP all-reduce inside
                par.clip(1.0)
                opt.step()
            done = step + 1  # a failure from here on resumes after it
            lv = loss.item()
            herd.step(step=step + 1, loss=lv, tokens=step_tokens,
                      step_time=time.monotonic() - t0)
            loss_sum += lv
            loss_n += 1
            tok_log += step_tokens * world
            if (step + 1) % args.log_every == 0 or step + 1 == args.steps \
                    or step == first:
                mean = torch.tensor([loss_sum / loss_n], device=device)
                if world > 1:
                    dist.all_reduce(mean)
                    mean /= world
                now = time.monotonic()
                if rank == 0:
                    print(f"step {step + 1}/{args.steps} "
                          f"loss {mean.item():.4f} "
                          f"tokens/s {tok_log / max(now - t_log, 1e-9):.0f} "
                          f"lr {lr:.2e}", flush=True)
                t_log, tok_log, loss_sum, loss_n = now, 0, 0.0, 0
            due = args.ckpt_dir and ((step + 1) % args.ckpt_every == 0
                                     or step + 1 == args.steps)
            if due:
                checkpoint(args, config, step + 1, rank, world, par, ds,
                           disk=step + 1 == args.steps)
            sig = stop.agreed(world, device)
            if sig:
                if args.ckpt_dir and not due:
                    checkpoint(args, config, step + 1, rank, world, par, ds,
                               disk=True)
                if rank == 0:
                    print(f"rank 0: {signal.Signals(sig).name} at step "
                          f"{step + 1}: "
                          f"{'checkpointed' if args.ckpt_dir else 'no --ckpt-dir, nothing saved'}"
                          f"; stopping", flush=True)
                Stop.exit(sig)
            if args.step_sleep:
                time.sleep(args.step_sleep)
        except RuntimeError:
            if not elastic_on:
                raise
            # A peer died mid-collective: herd tells the new membership.
            step = first = rejoin(done)
            continue
        step += 1
        if elastic_on:
            m.stepped(step)
    if rank == 0:
        print(f"rank 0: done at step {max(start, args.steps)} on "
              f"{socket.gethostname()}", flush=True)
    if world > 1:
        try:
            dist.barrier()
        except RuntimeError:
            if not elastic_on:
                raise
        if not elastic_on:  # herd.elastic keeps old groups alive
            dist.destroy_process_group()
    return 0


def in_memory(args, config, step, world, par):
    """Plain DDP under herd: every rank holds the whole state and saves it
    in its node's memory tier (herd.ckpt, $HERD_CKPT_MEM: herd copies it
    to another node, persists it to checkpoint.dir every
    checkpoint.persist_every and resumes from it).  True when every rank
    did (a collective: every rank calls it)."""
    ok = herd_ckpt is not None and herd_ckpt.memory_dir() is not None \
        and par.kind == "ddp" and par.zero is None
    if ok:
        state = {"model": {k: v.detach().cpu()
                           for k, v in par.model.state_dict().items()},
                 "optimizer": par.opt.state_dict(), "step": step,
                 "config": config, "args": vars(args),
                 "world_size": world,
                 "rng": {"cpu": torch.get_rng_state()}}
        ok = herd_ckpt.save(step, state) is not None
    if world > 1:
        flag = torch.tensor([1 if ok else 0], device=par.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)
        ok = bool(flag.item())
    return ok


def checkpoint(args, config, step, rank, world, par, ds, disk=False):
    """The step's checkpoint: on disk (rank 0 writes the whole state to
    --ckpt-dir) when disk is asked (the last step, a SIGTERM: the memory
    tier goes with the job), every --disk-every steps, or when not every
    rank could keep it in memory; in memory besides (in_memory).  Rank 0
    writes its disk copy first: a step in every rank's memory is on disk
    too when it was due there."""
    meta = {"model": config, "step": step, "args": vars(args),
            "world_size": world}
    disk = disk or step % (args.disk_every or args.ckpt_every) == 0
    if ds is not None:
        # Every rank writes its DeepSpeed shards into one temporary
        # directory (shared file system); rank 0 completes and renames it.
        tmp = os.path.join(args.ckpt_dir, f".ds-step_{step:08d}")
        ds.save_checkpoint(os.path.join(tmp, "deepspeed"), tag="state")
        if world > 1:
            dist.barrier()
        if rank == 0:
            write_checkpoint(args.ckpt_dir, step, None, meta, args.keep,
                             extra=tmp)
    else:
        if disk:
            to_disk(args, config, step, rank, par, meta)
        if not in_memory(args, config, step, world, par):
            if not disk:
                to_disk(args, config, step, rank, par, meta)
        elif rank == 0 and not disk:
            print(f"rank 0: checkpoint step {step} in memory", flush=True)
    if world > 1:
        dist.barrier()


def to_disk(args, config, step, rank, par, meta):
    model, opt = par.state(rank)
    if rank == 0:
        state = {"model": model, "optimizer": opt, "step": step,
                 "config": config, "args": vars(args),
                 "rng": {"cpu": torch.get_rng_state()}}
        path = write_checkpoint(args.ckpt_dir, step, state, meta, args.keep)
        print(f"rank 0: checkpoint {path}", flush=True)


if __name__ == "__main__":
    status = main()
    # Leave without running destructors: PyTorch 1.13 (Debian 12's) can
    # deadlock at exit when the last reference to a gloo process group
    # goes (its destructor joins a gloo thread that waits for the GIL the
    # destructor holds): a rank that printed "done" and never exited.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
