"""forge.py: a rank that forges faulthandler's traceback (issue 23).  It
prints nothing and waits; on SIGABRT (herd asking for its stack) it
writes a traceback whose function and file names carry escape sequences
(move up, erase the line, set the terminal title) and exits."""
import faulthandler
import os
import signal
import sys
import time

FORGED = (
    "Fatal Python error: Aborted\n\n"
    "Current thread 0x00007f0000000000 (most recent call first):\n"
    '  File "/x/\x1b]0;OWNED\x07evil.py", line 7 in '
    "innocent\x1b[1A\x1b[2K\rherd: all fine\n"
    '  File "/x/main.py", line 1 in <module>\n\n'
    "Extension modules: none\n")


def forge(signum, frame):
    sys.stderr.write(FORGED)
    sys.stderr.flush()
    os._exit(134)


faulthandler.disable()
signal.signal(signal.SIGABRT, forge)
while True:
    time.sleep(0.1)
