#!/usr/bin/env python3
"""check-raw.py FILE MARKER: what herd wrote to a terminal (FILE, raw
bytes) has a status line drawn after the last MARKER, and its last scroll
region command gives the whole screen back (ESC [ r).  MARKER - checks
only the scroll region."""
import re
import sys

raw = open(sys.argv[1], "rb").read()
after = raw[raw.rindex(sys.argv[2].encode()):] if sys.argv[2] != "-" else b""
if sys.argv[2] != "-" and b"attempt 1 | nodes 1 up" not in after:
    sys.exit("no status line after the last %r" % sys.argv[2])
regions = re.findall(rb"\x1b\[([0-9;]*)r", raw)
if not regions or regions[-1] != b"":
    sys.exit("the scroll region is not given back: %r" % regions[-3:])
