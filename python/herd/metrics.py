"""herd.metrics — report training values to herd, one line:

    from herd import metrics
    metrics.log(step=step, loss=loss.item(), tokens=n_tokens)

Each call appends one JSON line to the node-local file herd names in
$HERD_METRICS (the agent reads it every metrics.interval and sends the
values to herd: the live status line, herd top, metrics.jsonl, the
Prometheus endpoint and the report show them).  Numbers only; "tokens"
and "samples" are the counts of this step (herd adds them up into
tokens/s), every other name is a current value (step, loss, lr, ...).
Without $HERD_METRICS (not run by herd) log() does nothing.  No
dependencies; safe to call from every rank.
"""
import json
import math
import os

_path = os.environ.get("HERD_METRICS")
_file = None


def log(**values):
    """Appends {name: number, ...} as one line and flushes it."""
    global _file
    if not _path:
        return
    line = {}
    for name, v in values.items():
        try:
            v = float(v) if not isinstance(v, int) else v
        except (TypeError, ValueError):
            continue
        if isinstance(v, bool) or (isinstance(v, float) and not math.isfinite(v)):
            continue
        line[name] = v
    if _file is None:
        _file = open(_path, "a", buffering=1)
    _file.write(json.dumps(line, separators=(",", ":")) + "\n")
    _file.flush()
