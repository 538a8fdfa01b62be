"""A rank that imports the herd package herd put on its PYTHONPATH (the
job sets none) and prints where it came from, its PYTHONPATH, and the
line herd.metrics wrote to $HERD_METRICS."""
import os

import herd
import herd.metrics

herd.metrics.log(step=7, loss=0.25, bad=float("nan"))
print("file", herd.metrics.__file__, flush=True)
print("path", os.environ.get("PYTHONPATH", ""), flush=True)
with open(os.environ["HERD_METRICS"]) as f:
    print("metrics", f.read().strip(), flush=True)
print("planted", getattr(herd, "PLANTED", False), flush=True)
