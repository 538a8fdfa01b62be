#!/usr/bin/python3
"""step.py MODE SECONDS SINK_ADDR SINK_PORT [CKPT_DIR] — one rank of the
straggler tests: each step sends 256 KiB to the sink and waits for its
one-byte answer, then "computes" for 0.1 s; it touches
$HERD_PROGRESS_FILE every step and, by MODE, reports to $HERD_METRICS:
  full      {"step": n, "step_time": seconds}
  step      {"step": n}
  progress  nothing (touches only)
Runs for SECONDS of wall time.  With CKPT_DIR, rank 0 writes a complete
checkpoint (CKPT_DIR/step_N with a COMPLETE marker) every 2 s."""
import json
import os
import socket
import sys
import time

CHUNK = b"x" * (256 * 1024)


def touch(path):
    """As touch(1) without open: one touch (utime), or a create."""
    if not path:
        return
    try:
        os.utime(path)
    except FileNotFoundError:
        open(path, "a").close()


def main():
    mode, seconds, addr, port = sys.argv[1], float(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    ckpt = sys.argv[5] if len(sys.argv) > 5 else None
    rank = int(os.environ.get("RANK", "0"))
    progress = os.environ.get("HERD_PROGRESS_FILE")
    metrics = os.environ.get("HERD_METRICS")
    sock = socket.create_connection((addr, port))
    start = time.monotonic()
    last_ckpt = start
    step = 0
    while time.monotonic() - start < seconds:
        t0 = time.monotonic()
        sock.sendall(CHUNK)
        if sock.recv(1) != b"k":
            sys.exit("sink went away")
        time.sleep(0.1)
        step += 1
        took = time.monotonic() - t0
        touch(progress)
        if metrics and mode in ("full", "step"):
            rec = {"step": step}
            if mode == "full":
                rec["step_time"] = round(took, 4)
            with open(metrics, "a") as f:
                f.write(json.dumps(rec) + "\n")
        if ckpt and rank == 0 and time.monotonic() - last_ckpt >= 2:
            d = os.path.join(ckpt, "step_%d" % step)
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, "COMPLETE"), "w").close()
            last_ckpt = time.monotonic()
    print("rank %d: %d steps" % (rank, step))


main()
