#!/usr/bin/env python3
"""report-check.py REPORT.html [MAX_BYTES]: checks what herd report
promises about the file itself: one self-contained page (no script, no
external resource: no src=, href=, url(, @import; the only "http" is the
SVG namespace), every <svg> element well-formed XML, every polyline at
most 1000 points, and at most MAX_BYTES bytes.  Prints the number of
charts and of polylines; exits 1 naming what is wrong."""
import re
import sys
import xml.etree.ElementTree as ET

path = sys.argv[1]
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 0
html = open(path, encoding="utf-8").read()
bad = []
if limit and len(html.encode()) > limit:
    bad.append("%d bytes > %d" % (len(html.encode()), limit))
low = html.lower()
for needle in ("<script", " src=", " href=", "url(", "@import", "<link", "<iframe"):
    if needle in low:
        bad.append("has %r" % needle)
for m in re.finditer(r"https?://[^\"' >]+", html):
    if m.group(0) != "http://www.w3.org/2000/svg":
        bad.append("external address %s" % m.group(0))
svgs = re.findall(r"<svg .*?</svg>", html, re.S)
lines = 0
for s in svgs:
    try:
        root = ET.fromstring(s)
    except ET.ParseError as e:
        bad.append("svg not well-formed: %s: %s" % (e, s[:200]))
        continue
    for pl in root.iter("{http://www.w3.org/2000/svg}polyline"):
        lines += 1
        n = len(pl.get("points").split())
        if n > 1000:
            bad.append("a polyline of %d points" % n)
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("charts %d polylines %d bytes %d" % (len(svgs), lines, len(html.encode())))
