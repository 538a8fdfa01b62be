#!/usr/bin/python3
"""idle-flood.py ADDR:PORT N READY STATS — what a hostile local user can do
with the --connect address it read from srun's argv (ps): hold N idle TCP
connections to herd's slurm listener, never saying a word, and open a new
one whenever herd closes one (at most RATE a second, so the flood keeps up
its pressure without eating the test machine's cores).

Writes READY once N connections were established (herd may have
closed some of them already); on SIGTERM writes STATS ("connects N"
"established N" "closed_by_herd N" "open N") and exits.  Its own pid is the process to kill."""
import errno
import os
import resource
import selectors
import signal
import socket
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
port = int(port)
want = int(sys.argv[2])
ready_file, stats_file = sys.argv[3], sys.argv[4]
RATE = 400  # new connections a second, at most, after the first N

# A login session's soft limit (often 1024) is no bound for an attacker.
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

sel = selectors.DefaultSelector()
stats = {"connects": 0, "established": 0, "closed_by_herd": 0}
pending = set()  # connect() in progress
live = set()


def stop(*_):
    with open(stats_file, "w") as f:
        for k, v in stats.items():
            f.write("%s %d\n" % (k, v))
        f.write("open %d\n" % len(live))
    os._exit(0)


signal.signal(signal.SIGTERM, stop)


def open_one():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    rc = s.connect_ex((host, port))
    if rc not in (0, errno.EINPROGRESS):
        s.close()
        return
    stats["connects"] += 1
    pending.add(s)
    sel.register(s, selectors.EVENT_WRITE | selectors.EVENT_READ)


def drop(s):
    sel.unregister(s)
    pending.discard(s)
    live.discard(s)
    s.close()


for _ in range(want):
    open_one()
announced = False
budget, budget_at = RATE, time.monotonic()
while True:
    for key, ev in sel.select(timeout=0.05):
        s = key.fileobj
        if s in pending:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                drop(s)
                continue
            pending.discard(s)
            live.add(s)
            stats["established"] += 1
            sel.modify(s, selectors.EVENT_READ)
            if not ev & selectors.EVENT_READ:
                continue
        try:
            data = s.recv(4096)  # the challenge: read, never answered
        except OSError:
            data = b""
        if not data:
            stats["closed_by_herd"] += 1
            drop(s)
    if not announced and stats["established"] >= want:
        with open(ready_file + ".tmp", "w") as f:
            f.write("%d\n" % stats["established"])
        os.rename(ready_file + ".tmp", ready_file)
        announced = True
    now = time.monotonic()
    budget = min(RATE, budget + (now - budget_at) * RATE)
    budget_at = now
    while len(live) + len(pending) < want and budget >= 1:
        open_one()
        budget -= 1
