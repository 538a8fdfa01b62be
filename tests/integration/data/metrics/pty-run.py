#!/usr/bin/env python3
"""pty-run.py [--stall S] [--term T] ROWS COLS OUT CMD...: runs CMD on a
new pseudo-terminal of ROWS x COLS (its stdin, stdout and stderr) with
TERM=T (vt100: what vt.py reads), writes every byte it printed to OUT and
exits with its exit status (128+N for signal N).
--stall S: a slow terminal; stops reading for S seconds once it has read
64 KiB (CMD's writes then find the terminal full).
--touch-when REGEX FILE: creates FILE once what was read matches REGEX
(bytes, . matching newlines too): CMD can wait for what the terminal
shows instead of for a time."""
import fcntl
import os
import pty
import re
import struct
import sys
import termios
import time

stall = 0.0
term = "vt100"
touch = None
while sys.argv[1] in ("--stall", "--term", "--touch-when"):
    if sys.argv[1] == "--stall":
        stall = float(sys.argv[2])
    elif sys.argv[1] == "--term":
        term = sys.argv[2]
    else:
        touch = (re.compile(sys.argv[2].encode(), re.S), sys.argv[3])
        del sys.argv[1]
    del sys.argv[1:3]

rows, cols, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    os.environ["TERM"] = term
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
    if touch and touch[0].search(data):
        open(touch[1], "w").close()
        touch = None
    if stall and len(data) >= 65536:
        time.sleep(stall)
        stall = 0.0
with open(out, "wb") as f:
    f.write(data)
_, status = os.waitpid(pid, 0)
sys.exit(os.WEXITSTATUS(status) if os.WIFEXITED(status)
         else 128 + os.WTERMSIG(status))
