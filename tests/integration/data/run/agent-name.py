#!/usr/bin/python3
"""agent-name.py HERD-AGENT VERSION: prints the name herd gives the agent in
~/.cache/herd (agent-VERSION-HASH, the 48 low bits of FNV-1a 64 of the
file, 12 hex digits), so a test can remove exactly this build's copy."""
import sys

h = 0xcbf29ce484222325
with open(sys.argv[1], "rb") as f:
    for b in f.read():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
print("agent-%s-%012x" % (sys.argv[2], h & 0xFFFFFFFFFFFF))
