"""herd.elastic: survivors keep training when a node fails.

Under herd, every rank has a control channel to its agent (HERD_CONTROL, a
Unix socket only this user can reach) and starts in generation
HERD_GENERATION (0 at an attempt's launch).  A rank that says hello on it
speaks herd's elastic protocol: when a node fails, herd does not restart it
but tells it the new membership (generation G+1) and launches the failed
node's ranks on a spare.  Every rank then forms a new process group over a
store herd hosts (HerdStore: its operations go over HERD_CONTROL, so no
other local user can reach it) and the replacements receive the model,
the optimizer and the step from the lowest surviving rank.

Without herd (no HERD_CONTROL) everything here is a no-op around
torch.distributed's own env:// rendezvous, so a script that uses it still
runs as a plain script or under torchrun.

    m = herd.elastic.Membership()
    m.init_process_group("gloo")
    ddp = DDP(model)
    step = m.join(model, opt, step)      # a replacement gets the state
    while step < steps:
        if m.changed():                  # cheap, between steps
            step = m.rejoin(model, opt, step); ddp = DDP(model); continue
        try:
            ...one step on ddp...
        except RuntimeError:             # a peer died mid-collective
            step = m.rejoin(model, opt, step); ddp = DDP(model); continue
        step += 1
        m.stepped(step)
"""
import base64
import datetime
import json
import os
import select
import socket
import threading
import time

PROTOCOL = 1
# How long a rank waits for herd's membership after a collective failed;
# herd's own bound is health.rejoin_timeout, after which it restarts
# every rank anyway.
WAIT_S = float(os.environ.get("HERD_REJOIN_WAIT", "120"))
# One line of the channel is at most this (agent/control.c).
LINE_MAX = 512 * 1024


class _Channel:
    """One connection to HERD_CONTROL: newline-delimited JSON."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def send(self, msg):
        self.sock.sendall(json.dumps(msg, separators=(",", ":")).encode()
                          + b"\n")

    def recv(self, timeout):
        """The next message, or None when none came within timeout
        seconds (0: only what is already there).  EOF raises."""
        deadline = time.monotonic() + (timeout or 0)
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.sock], [], [], max(left, 0))
            if not r:
                return None
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("herd's control channel closed")
            self.buf += chunk
            if len(self.buf) > LINE_MAX:
                raise ConnectionError("control line too long")
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _b64(v):
    if isinstance(v, str):
        v = v.encode()
    return base64.b64encode(bytes(v)).decode()


def _make_store_class():
    import torch.distributed as dist

    class HerdStore(dist.Store):
        """A torch.distributed Store whose table herd holds, one per
        generation, reached only over HERD_CONTROL."""

        def __init__(self, path, generation,
                     timeout=datetime.timedelta(seconds=300)):
            super().__init__()
            self._ch = _Channel(path)
            self._gen = generation
            self._id = 0
            self._lock = threading.Lock()
            self._timeout = timeout.total_seconds()

        def _call(self, cmd, timeout=None, **kw):
            with self._lock:
                self._id += 1
                ident = self._id
                self._ch.send(dict(op="store", id=ident, gen=self._gen,
                                   cmd=cmd, **kw))
                wait = self._timeout if timeout is None else timeout
                deadline = time.monotonic() + wait
                while True:
                    left = deadline - time.monotonic()
                    msg = self._ch.recv(max(left, 0)) if left > 0 else None
                    if msg is None:
                        raise RuntimeError(
                            f"herd store: {cmd} timed out after {wait} s")
                    if msg.get("op") == "store_reply" and \
                            msg.get("id") == ident:
                        break
            if "error" in msg:
                raise RuntimeError(f"herd store: {cmd}: {msg['error']}")
            return msg

        def set(self, key, value):
            self._call("set", key=key, value=_b64(value))

        def get(self, key):
            return base64.b64decode(self._call("get", key=key)["value"])

        def add(self, key, amount):
            return int(self._call("add", key=key, amount=int(amount))
                       ["value"])

        def compare_set(self, key, expected, desired):
            return base64.b64decode(self._call(
                "compare_set", key=key, expected=_b64(expected),
                value=_b64(desired))["value"])

        def delete_key(self, key):
            return bool(self._call("delete", key=key)["ok"])

        def num_keys(self):
            return int(self._call("num_keys")["value"])

        def check(self, keys):
            return bool(self._call("check", keys=list(keys))["ok"])

        def wait(self, keys, timeout=None):
            t = timeout.total_seconds() if timeout is not None else None
            self._call("wait", keys=list(keys), timeout=t)

        def set_timeout(self, timeout):
            self._timeout = timeout.total_seconds()

    return HerdStore


_store_class = None


def store(path, generation):
    """A HerdStore for generation (torch.distributed imported here)."""
    global _store_class
    if _store_class is None:
        _store_class = _make_store_class()
    return _store_class(path, generation)


class Membership:
    """The rank's membership loop.  enabled is False without herd: then
    init_process_group is torch's env:// and the rest does nothing."""

    def __init__(self, speak=True):
        """speak=False: the script cannot rejoin (a sharded optimizer,
        DeepSpeed...): no hello, so herd restarts it as always; the
        store still keeps the rendezvous private."""
        self.path = os.environ.get("HERD_CONTROL") or None
        self.generation = int(os.environ.get("HERD_GENERATION", "0") or 0)
        self.rank = int(os.environ.get("RANK", "0"))
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        # A rank launched into a generation past 0 replaces a failed one:
        # it gets the state from a survivor (join).
        self.joining = self.generation > 0
        self.backend = "gloo"
        self._ch = None
        self._pending = None
        self._stepped_gen = None
        self._graveyard = []   # old groups: never destroyed mid-collective
        self.speaking = bool(speak)
        if self.path:
            try:
                self._ch = _Channel(self.path)
                if self.speaking:
                    self._ch.send({"op": "hello", "protocol": PROTOCOL,
                                   "generation": self.generation})
            except OSError:
                self._ch = None
        if not self.speaking:
            self.joining = False

    @property
    def enabled(self):
        """Under herd, speaking the protocol: a failed collective means
        waiting for the new membership (rejoin)."""
        return self._ch is not None and self.speaking

    def init_process_group(self, backend="gloo", **kw):
        import torch.distributed as dist
        self.backend = backend
        if self._ch is None:
            dist.init_process_group(backend, rank=self.rank,
                                    world_size=self.world_size, **kw)
            return
        dist.init_process_group(backend, store=store(self.path,
                                                     self.generation),
                                rank=self.rank, world_size=self.world_size,
                                **kw)

    def _take(self, msg):
        if msg and msg.get("op") == "membership" and \
                int(msg.get("generation", -1)) > self.generation:
            self._pending = msg

    def changed(self):
        """True when herd announced a new generation (never blocks)."""
        if not self.enabled:
            return False
        while self._pending is None:
            msg = self._ch.recv(0)
            if msg is None:
                break
            self._take(msg)
        return self._pending is not None

    def wait(self, timeout=WAIT_S):
        """Blocks until herd announces a new generation; False when none
        came in timeout seconds."""
        if not self.enabled:
            return False
        deadline = time.monotonic() + timeout
        while self._pending is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._take(self._ch.recv(left))
        return True

    def _sync(self, model, optimizer, step, have_state):
        """Every rank takes the state of the lowest rank that has one."""
        import torch
        import torch.distributed as dist
        t = torch.tensor([self.rank if have_state else self.world_size])
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        src = int(t.item())
        if src >= self.world_size:
            raise RuntimeError("herd.elastic: no rank holds the state")
        obj = [None]
        if self.rank == src:
            obj = [{"model": model.state_dict(),
                    "opt": optimizer.state_dict() if optimizer else None,
                    "step": step}]
        dist.broadcast_object_list(obj, src=src)
        if self.rank != src:
            model.load_state_dict(obj[0]["model"])
            if optimizer is not None and obj[0]["opt"] is not None:
                optimizer.load_state_dict(obj[0]["opt"])
        return int(obj[0]["step"])

    def join(self, model, optimizer, step):
        """After init_process_group: a replacement receives model,
        optimizer and step from a survivor (the survivors, rejoining,
        send them).  Returns the step to go on from."""
        if not self.enabled or not self.joining:
            return step
        self.joining = False
        return self._sync(model, optimizer, step, False)

    def rejoin(self, model, optimizer, step, wrap=None):
        """Leaves the failed generation's group (the step in flight is
        abandoned) and forms the new one with the replacements, which get
        the state from the lowest surviving rank.  Returns the step every
        rank goes on from; the caller rebuilds DDP on the new group: after
        rejoin, or, when the replacements build DDP before join, in wrap()
        (called on the new group before the state is sent: the ranks'
        collectives must come in the same order).
        Raises when herd announces nothing (herd then restarts every
        rank) or without herd."""
        import torch.distributed as dist
        if not self.enabled:
            raise RuntimeError("herd.elastic: no herd to rejoin")
        if not self.wait():
            raise RuntimeError("herd.elastic: no new membership from herd")
        msg, self._pending = self._pending, None
        try:
            self._graveyard.append(dist.distributed_c10d._get_default_group())
            dist.destroy_process_group()
        except Exception:
            pass
        self.generation = int(msg["generation"])
        self.rank = int(msg["rank"])
        self.world_size = int(msg["world_size"])
        self.init_process_group(self.backend)
        if wrap is not None:
            wrap()
        return self._sync(model, optimizer, step, True)

    def stepped(self, step):
        """Call after every completed step: herd hears of the first one
        in each generation (the rejoin is over when every rank steps)."""
        if not self.enabled or self._stepped_gen == self.generation:
            return
        self._stepped_gen = self.generation
        try:
            self._ch.send({"op": "stepping", "generation": self.generation,
                           "step": int(step)})
        except OSError:
            pass
