#!/usr/bin/env python3
"""steps.py SECONDS DELAY [SLOW_NODE SLOW_DELAY] [--send BYTES PORT]: a
rank that makes training steps for SECONDS and reports each to herd
through $HERD_METRICS ({"step", "loss", "tokens"}).  A step sleeps DELAY
(SLOW_DELAY on node rank SLOW_NODE).  --send: each step also sends BYTES
over TCP to MASTER_ADDR:PORT, where rank 0 runs a sink that acknowledges
them (a rank on a rate-limited link steps slower).  Rank 0 prints "step N" every 10 steps."""
import json
import os
import socket
import sys
import threading
import time

args = sys.argv[1:]
send = None
if "--send" in args:
    i = args.index("--send")
    send = (int(args[i + 1]), int(args[i + 2]))
    del args[i:i + 3]
seconds, delay = float(args[0]), float(args[1])
if len(args) >= 4 and os.environ["NODE_RANK"] == args[2]:
    delay = float(args[3])
rank = int(os.environ["RANK"])


def sink(srv):
    while True:
        c, _ = srv.accept()
        threading.Thread(target=drain, args=(c,), daemon=True).start()


def drain(c):
    """Acknowledges every BYTES received with one byte."""
    got = 0
    while True:
        data = c.recv(65536)
        if not data:
            break
        got += len(data)
        while got >= send[0]:
            got -= send[0]
            c.sendall(b"k")
    c.close()


if send and rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", send[1]))
    srv.listen(64)
    threading.Thread(target=sink, args=(srv,), daemon=True).start()

out = open(os.environ["HERD_METRICS"], "a", buffering=1)
payload = b"x" * (send[0] if send else 0)
conn = None
if send:
    deadline = time.time() + 30
    while conn is None:  # rank 0's sink may not listen yet
        try:
            conn = socket.create_connection((os.environ["MASTER_ADDR"],
                                             send[1]), timeout=30)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
t0 = time.time()
step = 0
while time.time() - t0 < seconds:
    step += 1
    if conn:
        # A step's data is all through the link before the next step.
        conn.sendall(payload)
        if conn.recv(1) != b"k":
            sys.exit("the sink went away")
    time.sleep(delay)
    out.write(json.dumps({"step": step, "loss": 4.0 / step,
                          "tokens": 2048}) + "\n")
    if rank == 0 and step % 10 == 0:
        print("step %d" % step, flush=True)
if conn:
    conn.close()
    if rank == 0:
        time.sleep(3)  # the sink outlives every other rank's last step
