#!/usr/bin/env python3
"""pty-run.py ROWS COLS OUT CMD...: runs CMD on a new pseudo-terminal of
ROWS x COLS (its stdin, stdout and stderr), writes every byte it printed to
OUT and exits with its exit status (128+N for signal N)."""
import fcntl
import os
import pty
import struct
import sys
import termios

rows, cols, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.execvp(sys.argv[4], sys.argv[4:])
data = bytearray()
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:  # EIO: the terminal's last writer is gone
        break
    if not chunk:
        break
    data += chunk
with open(out, "wb") as f:
    f.write(data)
_, status = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status)
         else 128 + os.WTERMSIG(status))
