#!/usr/bin/python3
"""doclinks.py — every relative link of the documentation leads somewhere.

    doclinks.py FILE.md...          check the links of each file
    doclinks.py --anchors FILE.md   print the anchors of FILE's headings

A relative link (not http:, https:, mailto:, not a bare #fragment of
another scheme) must name a file or directory that exists, relative to
the file that holds it; a #fragment must be one of the target's headings
as GitHub makes their anchors (lower case, punctuation but - and _
dropped, blanks as -, -1, -2, ... for repeats).  Links inside code
(fenced blocks, `spans`) are not links.  Each bad link is one line,
FILE:LINE: LINK: why; the exit status is 1 when there was one.
"""

import os
import re
import sys

LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"\!\[[^\]]*\]\(([^()\s]+)\)")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code, with code
    spans blanked."""
    fence = None
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            m = re.match(r"^\s*(```+|~~~+)", line)
            if m:
                if fence is None:
                    fence = m.group(1)[0] * 3
                elif m.group(1).startswith(fence):
                    fence = None
                continue
            if fence is None:
                yield n, re.sub(r"`+[^`]*`+", "``", line.rstrip("\n"))


def slug(title):
    s = title.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    fence = None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            m = re.match(r"^\s*(```+|~~~+)", line)
            if m:
                fence = None if fence else m.group(1)[0]
                continue
            if fence:
                continue
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else "%s-%d" % (s, k))
    return out


def check(path):
    bad = []
    base = os.path.dirname(path)
    for n, text in prose_lines(path):
        for m in list(LINK.finditer(text)) + list(IMAGE.finditer(text)):
            link = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", link):
                continue
            target, _, frag = link.partition("#")
            dest = os.path.normpath(os.path.join(base, target)) if target else path
            if not os.path.exists(dest):
                bad.append("%s:%d: %s: no such file" % (path, n, link))
                continue
            if frag and dest.endswith(".md"):
                if frag not in anchors(dest):
                    bad.append("%s:%d: %s: %s has no heading #%s" %
                               (path, n, link, dest, frag))
    return bad


def main(argv):
    if len(argv) == 2 and argv[0] == "--anchors":
        for a in sorted(anchors(argv[1])):
            print(a)
        return 0
    if not argv:
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    bad = []
    for p in argv:
        bad += check(p)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
