#!/usr/bin/env python3
"""Writes the fixture run directories of t0570-views.t from the issue-12
contract (events.jsonl as herd writes it, metrics.jsonl as the contract
describes it).  Deterministic; run it again after changing it and commit
the output:  python3 make-fixtures.py  (in this directory).

  ended/      4 nodes + 1 spare, 2 attempts: node3 fails in attempt 1
              (a reason with HTML in it), spare node5 replaces it, attempt
              2 resumes from /ckpt/step-100 and completes.  node2 is the
              slowest in attempt 2.  metrics.jsonl has one bad line and
              job-only (downsampled) lines.
  running/    no job_end; metrics.jsonl ends in a partial line; one bad
              line in events.jsonl.
  eventsonly/ events.jsonl only (a run from before metrics.jsonl).
"""
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = 1764550000000
HOSTILE = 'lost <script>alert("x")</script> & \'gone\''


def write(path, lines, partial=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for l in lines:
            f.write(l if isinstance(l, str) else json.dumps(l, separators=(",", ":")))
            f.write("\n")
        if partial:
            f.write(partial)


def ev(t, name, **kw):
    d = {"t": T0 + t, "event": name}
    d.update(kw)
    return d


def node_obj(name, t, step, rate, loss, gpu, rx, tx, drops=0):
    return {"node": name, "state": "up", "load1": 3.1, "cpu_pct": 390.0 + gpu / 10,
            "rss_kib": 2_000_000 + step * 10, "rx_bytes_per_s": rx,
            "tx_bytes_per_s": tx, "rx_bytes": int(rx * t / 1000),
            "tx_bytes": int(tx * t / 1000), "drops": drops, "errors": 0,
            "step": step, "steps_per_s": rate, "loss": loss,
            "tokens_per_s": rate * 16384.0,
            "gpus": [{"gpu": g, "util_pct": int(gpu), "mem_used": 60_000_000_000 + g,
                      "mem_total": 80_000_000_000, "temp_c": 60, "power_w": 300.5,
                      "sm_mhz": 1980, "ecc_uncorrected": 0, "throttle": 0}
                     for g in range(1)]}


def metrics_line(t, attempt, nodes_up, nodes, slowest, with_nodes=True):
    steps = [n["step"] for n in nodes]
    rates = [n["steps_per_s"] for n in nodes]
    gpus = [n["gpus"][0]["util_pct"] for n in nodes]
    job = {"step": min(steps), "loss": nodes[0]["loss"],
           "tokens_total": min(steps) * 65536,
           "tokens_per_s": sum(n["tokens_per_s"] for n in nodes),
           "steps_per_s": min(rates), "gpu_util_min": min(gpus),
           "gpu_util_avg": sum(gpus) / len(gpus),
           "rx_bytes_per_s": sum(n["rx_bytes_per_s"] for n in nodes),
           "tx_bytes_per_s": sum(n["tx_bytes_per_s"] for n in nodes),
           "drops": sum(n["drops"] for n in nodes)}
    if slowest:
        job["slowest"] = slowest
    d = {"t": T0 + t, "attempt": attempt, "elapsed_ms": t, "nodes_up": nodes_up,
         "spares": 1, "job": job}
    if with_nodes:
        d["nodes"] = nodes
    return d


def ended():
    d = os.path.join(HERE, "ended")
    run = "20251201-004640.000-ab12"
    e = [ev(0, "job_start", job="train", run=run, nodes=4, spares=1, mode="torch",
            transport="local")]
    for i, h in enumerate(["node1", "node2", "node3", "node4"]):
        e.append(ev(200 + i * 10, "node_up", host=h, hostname=h))
    e.append(ev(300, "attempt_start", attempt=1, nodes=4, world_size=8,
                master_addr="10.0.0.1", checkpoint=None))
    for r in range(8):
        e.append(ev(300, "rank_start", attempt=1, rank=r,
                    host="node%d" % (r // 2 + 1), local_rank=r % 2, node_rank=r // 2))
    e.append(ev(120_000, "node_failed", host="node3", reason=HOSTILE, attempt=1))
    e.append(ev(120_010, "attempt_end", attempt=1, reason="node node3 failed", status=1))
    e.append(ev(121_000, "spare_used", host="node5", attempt=2))
    e.append(ev(121_500, "node_up", host="node5", hostname="node5"))
    e.append(ev(122_000, "checkpoint_found", path="/ckpt/step-100", source="checkpoint.dir",
                attempt=2))
    e.append(ev(122_100, "attempt_start", attempt=2, nodes=4, world_size=8,
                master_addr="10.0.0.1", checkpoint="/ckpt/step-100"))
    e.append(ev(250_000, "rank_hung", attempt=2, rank=3, host="node2", silent_ms=30000))
    e.append(ev(300_000, "attempt_end", attempt=2, reason="completed", status=0))
    e.append(ev(300_010, "job_end", status=0, attempts=2, log_bytes_lost=0, cpu_ms=1200,
                children_cpu_ms=0, peak_rss_kib=9000))
    write(os.path.join(d, "events.jsonl"), e)

    m = []
    for s in range(1, 300):
        t = s * 1000
        if 120 <= s <= 122:
            continue
        attempt = 1 if s < 120 else 2
        names = ["node1", "node2", "node3", "node4"] if attempt == 1 else \
                ["node1", "node2", "node4", "node5"]
        base = s if attempt == 1 else 100 + (s - 122)
        loss = 4.0 * math.exp(-base / 120.0) + 0.5 + 0.05 * math.sin(s / 7.0)
        nodes = []
        for n in names:
            slow = (n == "node3" and attempt == 1) or (n == "node2" and attempt == 2)
            rate = round((0.7 if slow else 1.0) + 0.03 * math.sin(s / 9.0), 3)
            gpu = 55 + (s % 5) if slow else 90 + (s % 7)
            rx = (1.5e8 if slow else 3.0e8) + 1e7 * math.sin(s / 11.0)
            nodes.append(node_obj(n, t, int(base * rate), rate, round(loss, 4), gpu,
                                  rx, rx * 0.95, drops=(s // 100) if n == "node4" else 0))
        slowest = "node3" if attempt == 1 else "node2"
        # Per-node detail every 2nd sample, after 200 s every 5th only
        # (the downsampling of the contract); the job line always.
        m.append(metrics_line(t, attempt, 4, nodes, slowest,
                              with_nodes=(s < 200 and s % 2 == 0) or s % 5 == 0 or s == 299))
        if s == 50:
            m.append('{"t": 1764550050500, "job": {"step": ')  # a torn line
        if s == 60:
            m.append('not json at all')
    write(os.path.join(d, "metrics.jsonl"), m)


def running():
    d = os.path.join(HERE, "running")
    run = "20251201-010000.000-cd34"
    e = [ev(0, "job_start", job="live", run=run, nodes=2, spares=0, mode="plain",
            transport="ssh")]
    e.append(ev(100, "node_up", host="alpha", hostname="alpha"))
    e.append(ev(110, "node_up", host="beta", hostname="beta"))
    e.append('{"t": 1764550000200, "event": ')
    e.append(ev(300, "attempt_start", attempt=1, nodes=2, world_size=2,
                master_addr="10.0.0.2", checkpoint=None))
    write(os.path.join(d, "events.jsonl"), e)
    m = []
    for s in range(1, 31):
        t = s * 1000
        nodes = [node_obj("alpha", t, s, 1.0, round(3.0 - s * 0.05, 4), 97, 2e8, 2e8),
                 node_obj("beta", t, s, 0.9, round(3.0 - s * 0.05, 4), 40, 1e8, 1e8)]
        nodes[1]["drops"] = 7
        m.append(metrics_line(t, 1, 2, nodes, "beta"))
    write(os.path.join(d, "metrics.jsonl"), m,
          partial='{"t": 1764550031000, "attempt": 1, "job": {"step": 999')


def eventsonly():
    d = os.path.join(HERE, "eventsonly")
    e = [ev(0, "job_start", job="old", run="20251201-020000.000-ef56", nodes=1,
            spares=0, mode="torch", transport="local"),
         ev(100, "node_up", host="solo", hostname="solo"),
         ev(200, "attempt_start", attempt=1, nodes=1, world_size=1,
            master_addr="127.0.0.1", checkpoint=None),
         ev(900, "attempt_end", attempt=1, reason="rank 0 exited with status 3",
            status=3),
         ev(910, "job_end", status=3, attempts=1, log_bytes_lost=0)]
    write(os.path.join(d, "events.jsonl"), e)


ended()
running()
eventsonly()
