#!/usr/bin/python3
"""Stands in for train.py in t0660 (srun-pmix.sbatch, no herd): joins the
torch process group from the variables the script set from Slurm's
(env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), all-reduces rank+1
with gloo and prints the sum: WORLD*(WORLD+1)/2 when every rank met."""
import datetime
import os
import socket

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank}/{world} local {os.environ['LOCAL_RANK']} "
      f"on {socket.gethostname()} "
      f"resume '{os.environ.get('HERD_RESUME_FROM', 'unset')}' "
      f"sum {int(t.item())}", flush=True)
dist.destroy_process_group()
