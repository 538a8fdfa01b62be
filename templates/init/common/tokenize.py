#!/usr/bin/python3
# PLACEHOLDER of the init branch, replaced at merge by the pytrain
# helper's tokenize.py (issue 15).  `herd init` copies this file as it is.
#
# Like the real one, it hands over to the standard library's tokenize
# module when imported under that name (torch imports it, and a script in
# this directory finds this file first).
import os
import sys

if __name__ == "tokenize":
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        del sys.modules["tokenize"]
        import tokenize as std
    finally:
        sys.path[:] = saved
    sys.modules["tokenize"] = std
else:
    sys.exit("tokenize.py: placeholder of the init branch; the real one "
             "comes from the pytrain branch")
