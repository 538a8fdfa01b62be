#!/usr/bin/env python3
"""png-colours.py FILE.png #rrggbb...: prints, for each colour, how many
pixels of the PNG have exactly it ("#1f77b4 1234"), and a last line
"total W*H distinct N".  A PNG decoder in a few lines of zlib (8-bit RGB
or RGBA, not interlaced: what Chromium's screenshots are), since no image
library is installed."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("%s: not a PNG" % path)
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, inter = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    if depth != 8 or ctype not in (2, 6) or inter:
        sys.exit("%s: depth %d colour type %d interlace %d not handled"
                 % (path, depth, ctype, inter))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    i = 0
    LOW7 = int.from_bytes(b"\x7f" * stride, "big")
    HIGH1 = int.from_bytes(b"\x80" * stride, "big")
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if f == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif f == 2:
            # Bytewise add without carries, on one big integer (SWAR):
            # the low 7 bits add, the top bit is xored in.
            a = int.from_bytes(line, "big")
            b = int.from_bytes(prev, "big")
            s = ((a & LOW7) + (b & LOW7)) ^ ((a ^ b) & HIGH1)
            line = bytearray(s.to_bytes(stride, "big"))
        elif f == 3:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((a + prev[x]) >> 1)) & 255
        elif f == 4:
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b = prev[x]
                c = prev[x - bpp] if x >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    w, h, bpp, rows = decode(sys.argv[1])
    want = {}
    for c in sys.argv[2:]:
        want[bytes.fromhex(c.lstrip("#"))] = c
    counts = dict((c, 0) for c in sys.argv[2:])
    seen = set()
    for row in rows:
        for x in range(0, w * bpp, bpp):
            px = row[x:x + 3]
            seen.add(px)
            c = want.get(px)
            if c:
                counts[c] += 1
    for c in sys.argv[2:]:
        print(c, counts[c])
    print("total", w * h, "distinct", len(seen))


main()
