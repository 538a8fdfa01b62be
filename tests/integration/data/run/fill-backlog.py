#!/usr/bin/python3
"""fill-backlog.py SOCK READY: connects to the Unix socket SOCK until its
listener's backlog is full (a connect that would wait: EAGAIN), writes the
number of connections held to READY, and holds them until killed.  A
controller that is stopped or hung never accepts: this is what a client
of it then meets."""
import errno
import os
import signal
import socket
import sys

sock, ready = sys.argv[1], sys.argv[2]
held = []
while True:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(sock)
    except OSError as e:
        s.close()
        if e.errno != errno.EAGAIN:
            raise
        break
    held.append(s)
    if len(held) > 4096:
        sys.exit("fill-backlog: no full backlog after 4096 connections")
with open(ready + ".tmp", "w") as f:
    f.write("%d\n" % len(held))
os.rename(ready + ".tmp", ready)
while True:
    signal.pause()
