# show.py OUTDIR [TAG]: what a rank sees, one "key value" a line, into
# OUTDIR/show.RANK (t0736: a warm rank must see what a cold one sees).
# The first line is the wall clock (ms) of the script's first statement.
import time
T0 = time.time()
import json, os, sys

out = {}
out["argv"] = sys.argv
out["orig_argv"] = sys.orig_argv
out["executable"] = sys.executable
out["cwd"] = os.getcwd()
out["path"] = sys.path
out["affinity"] = sorted(os.sched_getaffinity(0))
out["sched"] = [os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)]
pgid = os.getpgid(0)
out["own_group"] = pgid == os.getpid()
with open("/proc/%d/comm" % pgid) as f:
    out["group_leader"] = f.read().strip()
with open("/proc/%d/stat" % pgid) as f:
    leader_parent = int(f.read().rpartition(")")[2].split()[1])
with open("/proc/%d/cmdline" % leader_parent) as f:
    out["leader_parent_is_agent"] = "--keeper" not in f.read()
out["name"] = __name__
out["file"] = __file__
out["main_is_globals"] = sys.modules["__main__"].__dict__ is globals()
out["spec"] = repr(__spec__)
out["stdout"] = [type(sys.stdout.buffer).__name__, sys.stdout.write_through,
                 sys.stdout.line_buffering]
out["stderr"] = [type(sys.stderr.buffer).__name__, sys.stderr.write_through,
                 sys.stderr.line_buffering]
out["dont_write_bytecode"] = sys.dont_write_bytecode
import faulthandler
out["faulthandler"] = faulthandler.is_enabled()
# HERD_AGENT: /proc/PID/exe when a concurrent upload replaced the cached
# agent (the test nodes share one file system).
skip = ("HERD_PROGRESS_FILE", "HERD_METRICS", "HERD_AGENT", "SSH_CLIENT",
        "SSH_CONNECTION",
        "_")
out["env"] = sorted("%s=%s" % kv for kv in os.environ.items()
                    if kv[0] not in skip)
t = time.time()
import torch
out["torch_threads"] = torch.get_num_threads()
out["cuda_initialized"] = torch.cuda.is_initialized()
out["dist_initialized"] = torch.distributed.is_initialized()
rank = os.environ["RANK"]
with open(os.path.join(sys.argv[1], "show.%s" % rank), "w") as f:
    for k in sorted(out):
        f.write("%s %s\n" % (k, json.dumps(out[k])))
with open(os.path.join(sys.argv[1], "time.%s" % rank), "w") as f:
    f.write("first_ms %d\nimport_torch_ms %d\n" %
            (T0 * 1000, (time.time() - t) * 1000))
print("rank", rank, "pid", os.getpid(), "agent_dir",
      os.path.dirname(os.environ["HERD_PROGRESS_FILE"]), flush=True)
if len(sys.argv) > 2 and sys.argv[2] == "sleep":
    while True:
        time.sleep(1)
if len(sys.argv) > 2 and sys.argv[2] == "exit3":
    # Once every rank wrote its files: the first exit stops the others.
    for _ in range(600):
        if all(os.path.exists(os.path.join(sys.argv[1], "time.%d" % r))
               for r in range(int(os.environ["WORLD_SIZE"]))):
            break
        time.sleep(0.05)
    sys.exit(3)
