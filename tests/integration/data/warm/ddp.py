# ddp.py OUTDIR: a gloo process group over every rank, one all-reduce;
# OUTDIR/ddp.RANK gets the wall clock (ms) of the first statement, of
# the group being up, and the sum.
import time
T0 = time.time()
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t_up = time.time()
x = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(x)
rank = dist.get_rank()
with open(os.path.join(sys.argv[1], "ddp.%d" % rank), "w") as f:
    f.write("first_ms %d\nup_ms %d\nsum %d\n" % (T0 * 1000, t_up * 1000,
                                                 int(x.item())))
print("rank", rank, "sum", int(x.item()), flush=True)
dist.destroy_process_group()
