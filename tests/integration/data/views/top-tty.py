#!/usr/bin/env python3
"""top-tty.py MODE herd top ARGS...: runs the command on a pseudo-terminal
and drives it as a person would.  MODE:
  keys    wait for the first frame, press s (sort moves on to "state"),
          wait for it, press q; the command must exit 0
  sigterm wait for the first frame, send SIGTERM; it must exit
Then checks that the terminal was given back: canonical mode and echo on
(tcgetattr of the pty), cursor shown and the alternate screen left (the
last escape sequences written).  Prints what it saw; exits 1 on failure.
Every wait is bounded (20 s)."""
import os
import select
import signal
import subprocess
import sys
import termios
import time

mode, cmd = sys.argv[1], sys.argv[2:]
master, slave = os.openpty()
os.set_blocking(master, False)
import fcntl, struct
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
before = termios.tcgetattr(slave)
p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave,
                     start_new_session=True,
                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
out = b""


def read_until(pred, what, limit=20.0):
    global out
    end = time.time() + limit
    while not pred(out):
        if time.time() > end:
            print("FAIL: no %s in %s s; output: %r" % (what, limit, out[-2000:]))
            sys.exit(1)
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                out += os.read(master, 65536)
            except OSError:
                pass


def fail(msg):
    print("FAIL:", msg)
    print("output tail:", repr(out[-1500:]))
    sys.exit(1)


read_until(lambda o: b"sorted by node" in o, "first frame")
raw = termios.tcgetattr(slave)
if raw[3] & termios.ICANON or raw[3] & termios.ECHO:
    fail("terminal not in non-canonical no-echo mode while running")
if b"\x1b[?1049h" not in out:
    fail("alternate screen not entered")
if mode == "keys":
    os.write(master, b"s")
    read_until(lambda o: b"sorted by state" in o, "sort by state after s")
    os.write(master, b"q")
else:
    p.send_signal(signal.SIGTERM)
try:
    rc = p.wait(20)
except subprocess.TimeoutExpired:
    p.kill()
    fail("still running 20 s after %s" % ("q" if mode == "keys" else "SIGTERM"))
# What was written before it exited.
try:
    while True:
        r, _, _ = select.select([master], [], [], 0.2)
        if not r:
            break
        chunk = os.read(master, 65536)
        if not chunk:
            break
        out += chunk
except OSError:
    pass
after = termios.tcgetattr(slave)
if rc != 0:
    fail("exit status %d" % rc)
if after[3] != before[3]:
    fail("local modes not restored: %o != %o" % (after[3], before[3]))
if not out.rstrip().endswith(b"\x1b[?25h\x1b[?1049l"):
    fail("cursor/alternate screen not restored at the end")
print("top-tty passed: %s, exit %d, terminal restored, %d bytes" % (mode, rc, len(out)))
