#!/usr/bin/python3
"""stray.py ADDR:PORT — a process that is not an agent of the job connects
to herd's slurm listener twice: once answering the challenge with a made-up
HMAC, once with garbage.  Prints what it got back; herd must close both
connections without sending anything after the challenge."""
import os
import socket
import sys

host, port = sys.argv[1].rsplit(":", 1)


def connect():
    s = socket.create_connection((host, int(port)), timeout=15)
    s.settimeout(15)
    return s


def read_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def drain(s):
    got = 0
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return got
        got += len(chunk)


s = connect()
challenge = read_exact(s, 36)
print("challenge: %d bytes %s" % (len(challenge), challenge[:4].decode()))
s.sendall(b"HRDa" + os.urandom(32) + os.urandom(32))
print("wrong-hmac: closed after %d bytes" % drain(s))
s.close()

s = connect()
read_exact(s, 36)
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
s.shutdown(socket.SHUT_WR)
print("garbage: closed after %d bytes" % drain(s))
s.close()
