# ddp.py OUTDIR: a gloo process group over every rank, one all-reduce;
# OUTDIR/ddp.RANK.ATTEMPT gets the wall clock (ms) of the first
# statement, of the group being up, and the sum.  In attempt 1 every
# rank then waits for OUTDIR/go and fails, so that herd restarts the job
# (t0736 measures that restart).
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
attempt = int(os.environ["HERD_ATTEMPT"])
with open(os.path.join(sys.argv[1], "ddp.%d.%d" % (rank, attempt)), "w") as f:
    f.write("first_ms %d\nup_ms %d\nsum %d\n" % (T0 * 1000, t_up * 1000,
                                                 int(x.item())))
print("rank", rank, "attempt", attempt, "sum", int(x.item()), flush=True)
if attempt == 1:
    for _ in range(2400):
        if os.path.exists(os.path.join(sys.argv[1], "go")):
            break
        time.sleep(0.05)
    sys.exit(1)
dist.destroy_process_group()
