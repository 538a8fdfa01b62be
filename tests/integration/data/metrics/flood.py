#!/usr/bin/env python3
"""flood.py PORT N QUEUED: a hostile local user against metrics.listen
(issue 23).  Opens N connections to 127.0.0.1:PORT, each with a request
that never ends, waits (20 s at most) until the listening socket's accept
queue holds QUEUED connections (the server took all it will take and
stopped accepting), then closes them all.  Exits 1 when the queue never
filled."""
import socket
import sys
import time

port, n, queued = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])


def accept_queue():
    """Recv-Q of the listening socket on port: connections not accepted."""
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, queues = fields[1], fields[3], fields[4]
                if state == "0A" and int(local.split(":")[1], 16) == port:
                    return int(queues.split(":")[1], 16)
    return -1


socks = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    socks.append(s)
deadline = time.monotonic() + 20
while accept_queue() < queued:
    if time.monotonic() > deadline:
        sys.exit("accept queue of port %d: %d, never %d" %
                 (port, accept_queue(), queued))
    time.sleep(0.05)  # poll interval of a bounded wait
for s in socks:
    s.close()
