#!/usr/bin/env python3
"""check-pause.py FILE: herd, paused (SIGTSTP) while its status line was
shown, gave the terminal back before it stopped itself (a scroll region
reset between "herd: suspended" and "herd: the ranks continue") and set
it up again with a status line after it was continued."""
import re
import sys

raw = open(sys.argv[1], "rb").read()
a = raw.index(b"herd: suspended")
b = raw.index(b"herd: the ranks continue", a)
if not re.search(rb"\x1b\[r", raw[a:b]):
    sys.exit("no scroll region reset before herd stopped itself")
after = raw[b:]
if not re.search(rb"\x1b\[1;[0-9]+r", after) or b"attempt 1 |" not in after:
    sys.exit("no status line after herd was continued")
