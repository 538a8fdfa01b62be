#!/usr/bin/python3
"""idle-one.py ADDR:PORT — one idle connection to herd's slurm listener.
Prints how long the challenge took to come ("challenge 36 bytes after
0.001 s") and how long herd kept the silent connection open ("closed
after 3.0 s")."""
import socket
import sys
import time

host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
t0 = time.monotonic()
s.settimeout(20)
got = b""
while len(got) < 36:
    chunk = s.recv(36 - len(got))
    if not chunk:
        break
    got += chunk
print("challenge %d bytes after %.3f s" % (len(got), time.monotonic() - t0))
while s.recv(4096):
    pass
print("closed after %.1f s" % (time.monotonic() - t0))
