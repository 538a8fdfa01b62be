#!/usr/bin/python3
"""bench/chaos_table.py WORK ROWS SECONDS EVERY: bench/chaos's table from
the work directory of a run (BENCH_CHAOS_KEEP=1 keeps it), so that a kept
run can be tabled again.

Goodput = the fault-free wall time for the steps a row reached ÷ the
row's wall time (job_start to the end, its own start-up included), two
ways:
- "goodput": at the row's own fault-free step rate (own_rate_s: its
  clean stretches between failures, around each step), after the
  baseline's start-up.  This machine's speed drifts by tens of percent
  within the hour, so a baseline run minutes earlier is no measure of a
  row's fault-free speed; the "own rate" column says how far each row's
  rate is from the baseline's.
- "goodput (baseline)": at the baseline row's steps (the definition
  the issue gives), for comparison.
The time lost per failure leaves out the row's start-up (job_start to
its first step) beyond the baseline's: a one-time cost, not a failure's;
the "first step" column says what it was.
"""
import glob, json, os, random, re, sys
work, rows, total, every = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), int(sys.argv[4])

def events(row):
    return [json.loads(l) for l in open(os.path.join(work, row, "log/latest/events.jsonl"))]

def herd_steps(row):
    """(ms since job_start, job step) from metrics.jsonl, and job_start t."""
    ev = events(row)
    t0 = next(e["t"] for e in ev if e["event"] == "job_start")
    pts = []
    for l in open(os.path.join(work, row, "log/latest/metrics.jsonl")):
        try:
            m = json.loads(l)
        except ValueError:
            continue
        s = (m.get("job") or {}).get("step")
        if isinstance(s, (int, float)):
            pts.append((m["t"] - t0, s))
    return t0, pts

# The fault-free curve: the time to reach each step, then the steady rate.
t0, base = herd_steps("baseline")
best, curve = -1, []
for t, s in base:
    if s > best:
        best = s
        curve.append((t, s))
half = [p for p in curve if p[0] >= curve[-1][0] / 2] if curve else []
rate = ((half[-1][1] - half[0][1]) / ((half[-1][0] - half[0][0]) / 1000.0)
        if len(half) > 1 and half[-1][0] > half[0][0] else 0.0)

def fault_free_s(n):
    for t, s in curve:
        if s >= n:
            return t / 1000.0
    if not curve or rate <= 0:
        return float("nan")
    return curve[-1][0] / 1000.0 + (n - curve[-1][1]) / rate

def first_step_s(pts):
    """Seconds from the start to a row's first step: the first sample
    that saw one, less the steps it saw past the first at the
    fault-free rate (metrics come once a second)."""
    for t, s in pts:
        if s >= 1:
            return t / 1000.0 - ((s - 1) / rate if rate > 0 else 0.0)
    return float("nan")


base_first = first_step_s(base)


def own_rate_s(pts, kills_ms=()):
    """The row's productive time at its own fault-free rate, in s: each
    step reached for the first time (a redone step is not counted again)
    costs 1 / the row's step rate around it.  That rate is the median
    over the row's clean 10 s windows starting within 45 s (else over
    all of them): windows with no failure in them, where the steps rose
    at every sample at 0.7 of the row's typical rate or more, starting 2
    s or more from a kill (kills_ms: the kill times when known).  So a
    machine that drifts between rows, or within one, drifts the measure
    of every row alike; a mechanism's steady cost, if any, is hidden from
    it, and the fault-free rows of bench/README.md bound it."""
    pts = sorted(pts)
    gaps = [(b[1] - a[1]) / ((b[0] - a[0]) / 1000.0) for a, b in zip(pts, pts[1:])
            if b[0] > a[0]]
    if not gaps:
        return 0.0, 0.0
    typical = sorted(gaps)[len(gaps) // 2]
    bad = [a[0] for a, b in zip(pts, pts[1:]) if b[0] <= a[0] or
           (b[1] - a[1]) / ((b[0] - a[0]) / 1000.0) < 0.7 * typical]
    bad += list(kills_ms)
    wins = []
    for i, (t, s) in enumerate(pts):
        k = i
        while k + 1 < len(pts) and pts[k + 1][0] <= t + 10000:
            k += 1
        if pts[k][0] - t < 8000 or any(t - 2000 <= b <= pts[k][0] + 2000 for b in bad):
            continue
        wins.append((t, (pts[k][1] - s) / ((pts[k][0] - t) / 1000.0)))
    if not wins:
        return 0.0, 0.0
    every = sorted(r for _, r in wins)

    def local(t):
        v = sorted(r for tt, r in wins if abs(tt - t) <= 45000) or every
        return v[len(v) // 2]

    best, prod = 0, 0.0
    for (ta, sa), (tb, sb) in zip(pts, pts[1:]):
        new = sb - max(best, sa, 1)
        best = max(best, sb)
        if new > 0:
            prod += new / local(ta)
    return prod, every[len(every) // 2]


def read_lines(path):
    try:
        return [l for l in open(path).read().split() if l.strip()]
    except OSError:
        return []


def by_time_since_kill(pts, kill_at, period):
    """Where a failure's time goes, by the time since each kill: for
    stretches after it, the mean step rate over every kill, and the time
    lost there (s per failure) against the stretch that ran fastest.
    The kill is at 0; the node comes back at +DOWN s and herd readmits
    it at +readmit_after (a new agent and warm interpreter beside the
    training).  Also (lo, hi): the 5th and 95th percentiles of the loss
    in all over 2000 resamples of the kills (a bootstrap): how far one
    run's kills can be from the next run's."""
    edges = sorted({e for e in (0, 3, 10, 20, 30, 45) if e < period} | {period})
    pts = sorted(pts)

    def step_at(t):
        # the highest step reached by t: right after a rejoin the
        # job's step can read lower for a sample (a replacement rank
        # not yet given the state)
        best = None
        for tt, s in pts:
            if tt > t:
                break
            best = s if best is None else max(best, s)
        return best

    # per kill, the step rate in each stretch (None: past the end)
    per_kill = []
    for k in kill_at:
        row = []
        for a, b in zip(edges, edges[1:]):
            s1, s2 = step_at(k + a * 1000), step_at(k + b * 1000)
            ok = s1 is not None and s2 is not None and k + b * 1000 <= pts[-1][0]
            row.append((s2 - s1) / (b - a) if ok else None)
        per_kill.append(row)

    def table(kills):
        cells = []
        for i, (a, b) in enumerate(zip(edges, edges[1:])):
            rates = [k[i] for k in kills if k[i] is not None]
            if rates:
                cells.append((a, b, sum(rates) / len(rates)))
        ref = max([r for _, _, r in cells] or [0])
        return [(a, b, r, (ref - r) * (b - a) / ref) for a, b, r in cells] if ref > 0 else []

    cells = table(per_kill)
    rnd = random.Random(1)
    spread = sorted(sum(c[3] for c in table([rnd.choice(per_kill) for _ in per_kill]))
                    for _ in range(2000)) if per_kill else []
    band = (spread[len(spread) // 20], spread[-1 - len(spread) // 20]) if spread and cells else None
    return cells, band


after = []
kill_to_failed = {}


def ms(v):
    return "-" if v is None else "%.2f s" % (v / 1000.0)

out = []
for row in rows:
    d = os.path.join(work, row)
    kills = int(open(os.path.join(d, "kills")).read())
    stop = int(open(os.path.join(d, "stop_ms")).read())
    parts = {}
    if row.split("@")[0] == "torchrun":
        start = int(open(os.path.join(d, "start_ms")).read())
        pts = []
        resumes = []
        for f in glob.glob(os.path.join(d, "*.log")):
            for line in open(f, errors="replace"):
                m = re.match(r"(\d+\.\d+) .*?\bstep (\d+)/\d+ loss", line)
                if m:
                    pts.append((float(m.group(1)) * 1000 - start, int(m.group(2))))
                m = re.match(r"(\d+\.\d+) .*rank 0: resumed from .* at step (\d+)", line)
                if m:
                    resumes.append((float(m.group(1)) * 1000 - start, int(m.group(2))))
        pts.sort()
        reached = max([s for t, s in pts if t <= stop - start] or [0])
        wall = (stop - start) / 1000.0
        redone = 0
        for t, s in sorted(set(resumes)):
            before = max([x for tt, x in pts if tt < t] or [s])
            redone += max(0, before - s)
        parts["redone_steps"] = redone / kills if kills else 0
        kill_at = [int(x) - start for x in read_lines(os.path.join(d, "kill_ms"))]
    else:
        ev = events(row)
        tj = next(e["t"] for e in ev if e["event"] == "job_start")
        _, pts = herd_steps(row)
        kill_at = ([int(x) - tj for x in read_lines(os.path.join(d, "kill_ms"))] or
                   [e["t"] - tj for e in ev if e["event"] == "node_failed"])
        reached = max([s for t, s in pts if t <= stop - tj] or [0])
        wall = (stop - tj) / 1000.0
        try:
            st = json.load(open(os.path.join(d, "status.json")))
        except (OSError, ValueError):
            st = {}
        fl = [f for f in st.get("failures", []) if f.get("how") in ("restart", "rejoin")]
        def mean(k):
            v = [f[k] for f in fl if k in f]
            return sum(v) / len(v) if v else None
        parts = {"detect": mean("detect_ms"), "recover": mean("recover_ms"),
                 "restore": mean("restore_ms"), "redone_steps": mean("steps_redone"),
                 "how": "/".join(sorted({f["how"] for f in fl})) or "-"}
        # From the harness's kill to herd's node_failed: herd's own
        # "detect" is how long the node had been silent, which counts
        # the time since its last heartbeat before the kill as well.
        failed_at = sorted(e["t"] for e in ev if e["event"] == "node_failed")
        for k in read_lines(os.path.join(d, "kill_ms")):
            nxt = [t for t in failed_at if t >= int(k)]
            if nxt and nxt[0] - int(k) < 30000:
                kill_to_failed.setdefault(row, []).append(nxt[0] - int(k))
    ff = fault_free_s(reached)
    first = first_step_s(pts)
    # A later first step than the baseline's is the row's start-up (for
    # warm rows: every node's interpreter importing torch at once, on the
    # few cores of this one machine), paid once, not per failure.
    late = max(0.0, first - base_first) if first == first else 0.0
    lost = (wall - ff - late) / kills if kills else 0.0
    prod, own = own_rate_s([p for p in pts if p[0] <= wall * 1000], kill_at)
    own_ff = base_first + prod
    own_lost = (wall - own_ff - late) / kills if kills else 0.0
    out.append((row, kills, reached, wall, ff, lost, parts, first, own, own_ff, own_lost))
    if kills:
        period = int(row.split("@")[1]) if "@" in row else every
        after.append((row, by_time_since_kill([p for p in pts if p[0] <= wall * 1000],
                                              kill_at, period), period))

print()
print(f"fault-free (herd cold, no faults): {rate:.2f} steps/s steady, first step "
      f"{base_first:.1f} s after job_start")
print()
print("| row | failures | steps | wall | own rate | goodput | lost / failure | "
      "goodput (baseline) | lost / failure (baseline) | first step | "
      "detect | rejoin or restart | restore | redone | start-up and the rest |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for row, kills, reached, wall, ff, lost, p, first, own, own_ff, own_lost in out:
    redone_s = (p["redone_steps"] / own if own and p.get("redone_steps") is not None else None)
    known = sum(x for x in (p.get("detect"), p.get("recover"), p.get("restore")) if x) / 1000.0
    rest = own_lost - known - (redone_s or 0)
    if row.split("@")[0] == "torchrun":
        cells = ["-", "-", "-"]
    else:
        cells = [ms(p.get("detect")), ms(p.get("recover")) + f" ({p['how']})", ms(p.get("restore"))]
    redone = ("-" if p.get("redone_steps") is None else
              "%.0f steps (%.1f s)" % (p["redone_steps"], redone_s or 0))
    print(f"| {row} | {kills} | {reached} | {wall:.1f} s | {own:.2f}/s ({own / rate:.2f}x) | "
          f"{100 * own_ff / wall:.1f} % | {own_lost:.1f} s | "
          f"{100 * ff / wall:.1f} % | {lost:.1f} s | {first:.1f} s | {cells[0]} | {cells[1]} | {cells[2]} | "
          f"{redone} | {rest:.1f} s |")

for row, v in kill_to_failed.items():
    v.sort()
    print(f"- {row}: from the kill (as the harness issued it) to herd's node_failed: "
          f"median {v[len(v) // 2]} ms, max {v[-1]} ms over {len(v)} kills")

if after:
    print()
    print("Where a failure's time goes, by the time since the kill (the step rate over")
    print("every kill, and the time lost there against the fastest stretch, s per failure):")
    print()
    for row, (cells, band), period in after:
        if not cells:
            print(f"- {row}: no stretch after a kill ran to its end before the row did")
            continue
        lost = sum(l for _, _, _, l in cells)
        line = (f"- {row}: " + "; ".join(f"+{a}-{b} s {r:.2f}/s ({l:+.2f} s)" for a, b, r, l in cells) +
                f"; in all {lost:.2f} s")
        if band:
            # A failure every period s that costs this much keeps this
            # share of the fastest stretch's rate.
            line += (f" (5-95 %: {band[0]:.2f}-{band[1]:.2f} s), that is "
                     f"{100 * (1 - lost / period):.1f} % goodput at one failure every {period} s "
                     f"({100 * (1 - band[1] / period):.1f}-{100 * (1 - band[0] / period):.1f} %)")
        print(line)
