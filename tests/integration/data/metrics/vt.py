#!/usr/bin/env python3
"""vt.py ROWS COLS FILE: a tiny VT100 interpreter, enough for what herd
writes to a terminal (printable text, CR, LF, BS, ESC 7 / ESC 8, CSI A B
H K J r m).  Prints a JSON object:
  lines    every line as a person saw it: those scrolled off the top, then
           the final screen, trailing blanks cut, empty lines left out
  status   what the bottom row held each time the scroll region was set
           back to the whole screen (herd's last status line), or null
  draws    how many times the bottom row was written while a region that
           excludes it was set (status redraws)
  region   [top, bottom] at the end (1-based), or null when none is set
  bottom   the bottom row at the end
"""
import json
import re
import sys

rows, cols = int(sys.argv[1]), int(sys.argv[2])
data = open(sys.argv[3], "rb").read().decode("utf-8", "replace")
screen = [[" "] * cols for _ in range(rows)]
history = []
r = c = 0
top, bot = 0, rows - 1
saved = (0, 0)
status = None
draws = 0
region_set = False
wrap = False


def text(row):
    return "".join(row).rstrip()


def lf():
    global r
    if r == bot:
        if top == 0:
            history.append(text(screen[top]))
        del screen[top]
        screen.insert(bot, [" "] * cols)
    elif r < rows - 1:
        r += 1


i = 0
while i < len(data):
    ch = data[i]
    i += 1
    if ch == "\x1b":
        if i < len(data) and data[i] == "[":
            m = re.match(r"\[([0-9;?]*)([A-Za-z])", data[i:])
            if not m:
                break
            i += m.end()
            params = [int(p) if p.isdigit() else 0
                      for p in m.group(1).lstrip("?").split(";")]
            n = params[0] or 1
            f = m.group(2)
            wrap = False
            if f == "A":
                r = max(top if r >= top else 0, r - n)
            elif f == "B":
                r = min(bot if r <= bot else rows - 1, r + n)
            elif f in "Hf":
                r = min(rows - 1, max(0, (params[0] or 1) - 1))
                c = min(cols - 1, max(0, ((params[1] if len(params) > 1
                                           else 0) or 1) - 1))
                if region_set and r == rows - 1 and bot < rows - 1:
                    draws += 1
            elif f == "K":
                if params[0] == 0:
                    screen[r][c:] = [" "] * (cols - c)
                elif params[0] == 1:
                    screen[r][:c + 1] = [" "] * (c + 1)
                else:
                    screen[r] = [" "] * cols
            elif f == "J" and params[0] == 2:
                screen = [[" "] * cols for _ in range(rows)]
            elif f == "r":
                t = (params[0] or 1) - 1
                b = ((params[1] if len(params) > 1 else 0) or rows) - 1
                if t == 0 and b == rows - 1:
                    if region_set:
                        status = text(screen[rows - 1])
                    region_set = False
                else:
                    region_set = True
                top, bot = t, b
                r = c = 0
        elif i < len(data):
            e = data[i]
            i += 1
            if e == "7":
                saved = (r, c)
            elif e == "8":
                r, c = saved
                wrap = False
    elif ch == "\r":
        c = 0
        wrap = False
    elif ch == "\n":
        lf()
        wrap = False
    elif ch == "\b":
        c = max(0, c - 1)
    elif ch >= " ":
        if wrap:
            c = 0
            lf()
            wrap = False
        screen[r][c] = ch
        if c == cols - 1:
            wrap = True
        else:
            c += 1

lines = [l for l in history + [text(row) for row in screen] if l]
print(json.dumps({"lines": lines, "status": status, "draws": draws,
                  "region": [top + 1, bot + 1] if region_set else None,
                  "bottom": text(screen[rows - 1])}, indent=1))
