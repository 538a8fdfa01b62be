#!/usr/bin/python3
"""A small PyTorch job (gloo on CPU) in which one rank hangs: at step
--hang-step, rank --hang-rank calls stuck_in_data_loader(), which never
returns, while the other ranks go on into dist.all_reduce and wait there
for it.  Every rank touches $HERD_PROGRESS_FILE after each step, and a
child process touches it every 0.5 s until the first step is done
(importing torch on a loaded machine is slow; see failover's
progress-train.py), so only the stall in training counts as a hang.

--mark FILE: the hung rank writes the wall-clock time (s) at which it
entered stuck_in_data_loader to FILE (bench/hang); --timeout S: the
process group's own timeout (torch.distributed's hang detection)."""
import argparse
import datetime
import os
import select
import sys
import time

PROGRESS = os.environ.get("HERD_PROGRESS_FILE", "")


def touch():
    if PROGRESS:
        with open(PROGRESS, "a"):
            pass
        os.utime(PROGRESS)


_rd, _wr = os.pipe()
if os.fork() == 0:
    os.close(_wr)
    while not select.select([_rd], [], [], 0.5)[0]:
        touch()
    os._exit(0)
os.close(_rd)

import torch  # noqa: E402 (after the child starts)
import torch.distributed as dist  # noqa: E402


def stuck_in_data_loader(mark):
    if mark:
        with open(mark + ".tmp", "w") as f:
            f.write("%.3f\n" % time.time())
        os.rename(mark + ".tmp", mark)
    while True:
        time.sleep(1)


def main():
    global _wr
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--hang-rank", type=int, default=2)
    p.add_argument("--hang-step", type=int, default=5)
    p.add_argument("--step-sleep", type=float, default=0.1)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--mark", default="")
    a = p.parse_args()
    dist.init_process_group(
        "gloo", timeout=datetime.timedelta(seconds=a.timeout))
    rank = dist.get_rank()
    t = torch.ones(16)
    for step in range(1, a.steps + 1):
        if rank == a.hang_rank and step == a.hang_step:
            stuck_in_data_loader(a.mark)
        dist.all_reduce(t)
        if _wr >= 0:
            os.close(_wr)
            _wr = -1
        touch()
        print("rank %d step %d" % (rank, step), flush=True)
        time.sleep(a.step_sleep)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
