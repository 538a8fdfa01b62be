#!/usr/bin/python3
"""sink.py ADDR PORTFILE — the straggler tests' TCP sink: takes every
connection, reads CHUNK-byte messages and answers each with one byte (so
a sender's step includes the transfer).  Writes its port to PORTFILE once
it listens; runs until killed."""
import socket
import sys
import threading

CHUNK = 256 * 1024


def serve(conn):
    with conn:
        while True:
            left = CHUNK
            while left:
                data = conn.recv(min(left, 65536))
                if not data:
                    return
                left -= len(data)
            conn.sendall(b"k")


def main():
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((sys.argv[1], 0))
    srv.listen(64)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    import os
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


main()
