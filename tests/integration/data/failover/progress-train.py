#!/usr/bin/python3
"""Runs a training script (argv[1], the rest are its arguments) and
touches $HERD_PROGRESS_FILE after every dist.barrier(), that is once a
step in examples/torch-ddp/train.py.  That script prints a line a step
on rank 0 only, so without this the other ranks would look hung to
health.progress_timeout while they train.  Until the first step is done
(imports, rendezvous: slow on a loaded machine) a child process touches
the file every 0.5 s, so that only a stall in training counts as a hang
(a thread would not do: loading torch's libraries holds the GIL)."""
import os
import runpy
import select
import sys

PROGRESS = os.environ.get("HERD_PROGRESS_FILE", "")


def touch():
    if PROGRESS:
        with open(PROGRESS, "a"):
            pass
        os.utime(PROGRESS)


# The child touches until the write end of the pipe closes: at the first
# step, or when this process dies.
_rd, _wr = os.pipe()
if os.fork() == 0:
    os.close(_wr)
    while not select.select([_rd], [], [], 0.5)[0]:
        touch()
    os._exit(0)
os.close(_rd)

import torch.distributed as dist  # noqa: E402 (after the child starts)

_barrier = dist.barrier


def barrier(*args, **kwargs):
    global _wr
    out = _barrier(*args, **kwargs)
    if _wr >= 0:
        os.close(_wr)
        _wr = -1
    touch()
    return out


dist.barrier = barrier
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
