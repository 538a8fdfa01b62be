#!/usr/bin/python3
"""agent-name.py HERD-AGENT VERSION: prints the name herd gives the agent in
ssh.agent_dir (agent-VERSION-HASH, the first 12 hex digits of the SHA-256 of
the file), so a test can remove exactly this build's copy."""
import hashlib
import sys

with open(sys.argv[1], "rb") as f:
    h = hashlib.sha256(f.read()).hexdigest()
print("agent-%s-%s" % (sys.argv[2], h[:12]))
