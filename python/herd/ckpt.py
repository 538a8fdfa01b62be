"""herd.ckpt: checkpoints through herd's tiers.

The agent of each node gives every rank a directory in memory that
outlives the rank ($HERD_CKPT_MEM: 0700, the job's user only); herd copies
each complete step to another node and, every checkpoint.persist_every,
to checkpoint.dir on disk.  At a restart $HERD_RESUME_FROM names the
newest step that every rank has, from the rank's node's memory, a peer's
copy or disk.

Layout, in every tier: step_NNNNNNNN/ holding state.pt (any files) and
COMPLETE, written last; the directory is written as .tmp-step_NNNNNNNN
and renamed into place, so a step_* directory is whole or does not exist.

    save(step, obj, name="state.pt") -> path, or None (no tier, no room)
    load(map_location="cpu", name="state.pt") -> (step, obj) or (None, None)
    resume_path() -> $HERD_RESUME_FROM or None
    memory_dir() -> $HERD_CKPT_MEM or None

save returning None means: keep this checkpoint on disk yourself.
"""
import os
import re
import shutil

KEEP = 2  # complete steps kept per rank in memory
_STEP = re.compile(r"^step_(\d+)$")


def memory_dir():
    d = os.environ.get("HERD_CKPT_MEM", "")
    return d or None


def resume_path():
    p = os.environ.get("HERD_RESUME_FROM", "")
    return p or None


def _complete_steps(d):
    out = []
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        m = _STEP.match(n)
        if m and os.path.isfile(os.path.join(d, n, "COMPLETE")):
            out.append((int(m.group(1)), n))
    out.sort()
    return out


def _used(job_dir):
    total = 0
    for root, _dirs, files in os.walk(job_dir):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def _no_room(d, step, nbytes):
    # The agent sees this and says once, for the node, that the tier is
    # full; herd's line goes to the user.
    try:
        with open(os.path.join(d, ".full"), "w") as f:
            f.write("step %d needs %d bytes\n" % (step, nbytes))
    except OSError:
        pass


def save(step, obj, name="state.pt"):
    """Writes obj (torch.save) as step's checkpoint in this rank's memory
    tier; returns the step directory, or None when there is no tier or
    no room in it (checkpoint.memory_max, or memory_dir's filesystem):
    then the caller keeps its checkpoint on disk."""
    import torch

    d = memory_dir()
    if d is None or not os.path.isdir(d):
        return None
    final = os.path.join(d, "step_%08d" % step)
    if os.path.isfile(os.path.join(final, "COMPLETE")):
        return final
    tmp = os.path.join(d, ".tmp-step_%08d" % step)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        os.mkdir(tmp, 0o700)
        torch.save(obj, os.path.join(tmp, name))
        with open(os.path.join(tmp, "COMPLETE"), "w") as f:
            f.write("%d\n" % step)
    except OSError:  # ENOSPC: memory_dir is full
        nbytes = _used(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        _no_room(d, step, nbytes)
        return None
    limit = int(os.environ.get("HERD_CKPT_MEM_MAX", "0") or 0)
    # What the node's tier will hold once the oldest of this rank's
    # steps is gone (the newest KEEP stay, this one among them).
    going = sum(_used(os.path.join(d, n))
                for _s, n in _complete_steps(d)[:-(KEEP - 1) or None])
    if limit > 0 and _used(os.path.dirname(d)) - going > limit:
        nbytes = _used(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        _no_room(d, step, nbytes)
        return None
    try:
        os.rename(tmp, final)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not os.path.isfile(os.path.join(final, "COMPLETE")):
            return None
    for _s, n in _complete_steps(d)[:-KEEP]:
        _remove_step(d, n)
    return final


def _remove_step(d, n):
    """Out of sight first, then gone: under a .tmp- name a step is never
    offered, so no reader (the agent's copies, a resume) sees its
    COMPLETE while its files are going."""
    gone = os.path.join(d, ".tmp-gone-%s-%d" % (n, os.getpid()))
    try:
        os.rename(os.path.join(d, n), gone)
    except OSError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def load(map_location="cpu", name="state.pt"):
    """(step, obj) from $HERD_RESUME_FROM (a complete step directory in
    any tier), or (None, None) when there is nothing to resume."""
    import torch

    p = resume_path()
    if p is None or not os.path.isfile(os.path.join(p, "COMPLETE")):
        return None, None
    m = _STEP.match(os.path.basename(p.rstrip("/")))
    obj = torch.load(os.path.join(p, name), map_location=map_location)
    step = int(m.group(1)) if m else None
    if step is None and isinstance(obj, dict) and "step" in obj:
        step = int(obj["step"])
    return step, obj
