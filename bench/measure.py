#!/usr/bin/python3
"""measure.py — run launch commands interleaved, print medians as a table.

Usage: measure.py PLAN.json [RAW.tsv]

PLAN.json: {"runs": 7, "warmup": 1, "timeout": 120, "reference": "herd",
            "cases": [{"nodes": 4, "tool": "herd", "argv": [...],
                       "env": {...}}, ...]}

For every node count, each tool gets `warmup` unrecorded runs, then `runs`
recorded rounds; within a round the tools run one after another, the order
rotating from round to round so that slow drift on the machine is shared.
Per run: wall time (monotonic clock from spawn until the tool exits) and
controller CPU: user+sys of the launching process and all its descendants
on this machine.  The harness is a child subreaper, so descendants a tool
leaves behind (mpirun exits without waiting for its ssh children) are
reparented to it and reaped too; CPU is the growth of its RUSAGE_CHILDREN.
Remote processes (sshd, shells, agents, orted on the nodes) are not
controller CPU.  A benchmark, not a test: failures are counted and printed,
and the exit status is 0 whenever the table could be printed.
"""
import ctypes
import json
import resource
import os
import signal
import statistics
import sys
import tempfile
import time


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _kill_all():
    """SIGKILL and reap every child left (ours are only the tool's)."""
    for pid in _children():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        while True:
            os.wait4(-1, 0)
    except ChildProcessError:
        pass


def _children():
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def run_once(case, timeout):
    """Run one case; return (wall_ms, cpu_ms, status, stderr_tail)."""
    env = dict(os.environ)
    env.update(case.get("env", {}))
    err = tempfile.TemporaryFile()
    devnull = os.open(os.devnull, os.O_RDWR)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    pid = os.posix_spawnp(
        case["argv"][0], case["argv"], env,
        file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0),
                      (os.POSIX_SPAWN_DUP2, devnull, 1),
                      (os.POSIX_SPAWN_DUP2, err.fileno(), 2)],
        setpgroup=0)
    os.close(devnull)
    status = None
    # Blocking wait4, so the harness burns no CPU while the tool runs; a
    # one-shot timer bounds it.
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        _, status, _ = os.wait4(pid, 0)
        wall = (time.monotonic() - t0) * 1000.0
        status = os.waitstatus_to_exitcode(status)
        # Descendants it left running (mpirun does not wait for its ssh
        # children) were reparented to us, the subreaper: let them finish
        # within the same timer, so their CPU counts too.
        while True:
            os.wait4(-1, 0)
    except ChildProcessError:
        pass
    except _Timeout:
        if status is None:
            wall = (time.monotonic() - t0) * 1000.0
            status = "timeout"
        _kill_all()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((after.ru_utime - before.ru_utime) +
           (after.ru_stime - before.ru_stime)) * 1000.0
    err.seek(0)
    tail = err.read()[-400:].decode(errors="replace").strip()
    err.close()
    return wall, cpu, status, tail


def main():
    # PR_SET_CHILD_SUBREAPER: orphaned descendants of a tool become our
    # children, so their CPU is counted when we reap them.
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
    plan = json.load(open(sys.argv[1]))
    raw = open(sys.argv[2], "w") if len(sys.argv) > 2 else None
    if raw:
        raw.write("nodes\ttool\trun\twall_ms\tcpu_ms\tstatus\n")
    runs, warmup = plan["runs"], plan["warmup"]
    timeout = plan.get("timeout", 120)
    ref = plan.get("reference", "herd")
    groups = {}
    for c in plan["cases"]:
        groups.setdefault(c["nodes"], []).append(c)
    results = {}     # (nodes, tool) -> list of (wall, cpu)
    failures = {}    # (nodes, tool) -> (count, last stderr)
    for n in sorted(groups):
        cases = groups[n]
        print(f"launch: {n} node(s): {warmup} warm-up + {runs} runs of "
              f"{', '.join(c['tool'] for c in cases)}", file=sys.stderr,
              flush=True)
        for c in cases:
            for _ in range(warmup):
                run_once(c, timeout)
        for r in range(runs):
            order = cases[r % len(cases):] + cases[:r % len(cases)]
            for c in order:
                wall, cpu, st, tail = run_once(c, timeout)
                key = (n, c["tool"])
                if raw:
                    raw.write(f"{n}\t{c['tool']}\t{r + 1}\t{wall:.1f}\t"
                              f"{cpu:.1f}\t{st}\n")
                if st == 0:
                    results.setdefault(key, []).append((wall, cpu))
                else:
                    cnt, _ = failures.get(key, (0, ""))
                    failures[key] = (cnt + 1, tail)
    if raw:
        raw.close()

    hdr = ("nodes", "tool", "wall ms", "min-max ms", "ctl CPU ms",
           "CPU ms/node", "wall/herd", "CPU/herd", "ok")
    rows = []
    med = {}
    for n in sorted(groups):
        for c in groups[n]:
            xs = results.get((n, c["tool"]), [])
            if xs:
                med[(n, c["tool"])] = (statistics.median(w for w, _ in xs),
                                       statistics.median(u for _, u in xs))
    for n in sorted(groups):
        for c in groups[n]:
            key = (n, c["tool"])
            xs = results.get(key, [])
            ok = f"{len(xs)}/{runs}"
            if key not in med:
                rows.append((str(n), c["tool"], "-", "-", "-", "-", "-", "-",
                             ok))
                continue
            w, u = med[key]
            walls = [x for x, _ in xs]
            r = med.get((n, ref))
            rw = f"{w / r[0]:.2f}x" if r else "-"
            ru = f"{u / r[1]:.2f}x" if r and r[1] > 0 else "-"
            rows.append((str(n), c["tool"], f"{w:.0f}",
                         f"{min(walls):.0f}-{max(walls):.0f}", f"{u:.1f}",
                         f"{u / n:.1f}", rw, ru, ok))
    width = [max(len(h), *(len(r[i]) for r in rows)) for i, h in
             enumerate(hdr)]
    line = "| " + " | ".join(h.ljust(width[i]) for i, h in enumerate(hdr)) + " |"
    print(line)
    print("|" + "|".join("-" * (x + 2) for x in width) + "|")
    for r in rows:
        print("| " + " | ".join(v.rjust(width[i]) if i >= 2 else
                                v.ljust(width[i]) for i, v in enumerate(r))
              + " |")
    print()
    print(f"medians of {runs} runs after {warmup} warm-up; ctl CPU = user+sys "
          f"of the launching process and all its descendants on the controller, orphans included; "
          f"wall/herd, CPU/herd: median over herd's median")
    for (n, tool), (cnt, tail) in sorted(failures.items()):
        print(f"FAILED {cnt}x: {tool} on {n} node(s): {tail}")

    # The targets, reported (not asserted).
    big = max(groups)
    h, p = med.get((big, ref)), med.get((big, "pdsh"))
    if h and p:
        print(f"target herd wall <= 0.5x pdsh at {big} nodes: "
              f"{h[0] / p[0]:.2f}x ({'met' if h[0] <= 0.5 * p[0] else 'not met'})")
    if h:
        print(f"target herd controller CPU <= 5 ms/node at {big} nodes: "
              f"{h[1] / big:.1f} ms/node "
              f"({'met' if h[1] / big <= 5 else 'not met'})")


if __name__ == "__main__":
    main()
