"""gloo_allreduce.py SIZES ITERS — the peer of `herd bench` in bench/probe:
torch.distributed's gloo all-reduce (float32 sums) timed per size, as a
rank started by `herd run` (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
Rank 0 prints one line per size: "gloo BYTES TIME_US"."""
import sys
import time

import torch
import torch.distributed as dist

sizes = [int(s) for s in sys.argv[1].split(",")]
iters = int(sys.argv[2])
dist.init_process_group("gloo")
n = dist.get_world_size()
for size in sizes:
    t = torch.empty(size // 4, dtype=torch.float32)
    spent = 0.0
    for it in range(-1, iters):
        t.fill_(dist.get_rank() + 1)
        t0 = time.perf_counter()
        dist.all_reduce(t)
        if it >= 0:
            spent += time.perf_counter() - t0
    assert bool((t == n * (n + 1) / 2).all())
    if dist.get_rank() == 0:
        print(f"gloo {size} {spent / iters * 1e6:.1f}", flush=True)
dist.destroy_process_group()
