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
# The key of torch.distributed's store-based barrier (distributed_c10d:
# STORE_BASED_BARRIER_PREFIX), and the key set beside it when every rank
# has arrived.
BARRIER_KEY = "store_based_barrier_key"
BARRIER_DONE = "herd-all-arrived"
# How long a rank waits for herd's membership after a collective failed;
# herd's own bound is health.rejoin_timeout, after which it restarts
# every rank anyway.
WAIT_S = float(os.environ.get("HERD_REJOIN_WAIT", "120"))
# One line of the channel is at most this (agent/control.c).
LINE_MAX = 512 * 1024
# HERD_ELASTIC_TRACE=1: every stage of a join or a rejoin, with the wall
# clock, one line on stderr (the rank's log): where a failure's time goes.
TRACE = os.environ.get("HERD_ELASTIC_TRACE", "") not in ("", "0")


def _proc_start():
    """The wall clock of this process's start (its fork), or None."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f
                         if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def trace(what, rank=None, generation=None):
    """One line of HERD_ELASTIC_TRACE (nothing when it is not set)."""
    if TRACE:
        os.write(2, ("herd.elastic %.3f rank %s gen %s: %s\n" % (
            time.time(), os.environ.get("RANK", "?") if rank is None
            else rank, os.environ.get("HERD_GENERATION", "?")
            if generation is None else generation, what)).encode())


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
        seconds (0: only what is already there; None: no bound).  EOF
        raises."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if deadline is None else \
                max(deadline - time.monotonic(), 0)
            r, _, _ = select.select([self.sock], [], [], left)
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
                     timeout=datetime.timedelta(seconds=300),
                     world_size=0):
            super().__init__()
            self._ch = _Channel(path)
            self._gen = generation
            self._world = world_size
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

        def _traced(self, cmd, **kw):
            if not TRACE:
                return self._call(cmd, **kw)
            trace("store %s %s" % (cmd, kw.get("key", kw.get("keys", ""))),
                  generation=self._gen)
            msg = self._call(cmd, **kw)
            trace("store %s answered" % cmd, generation=self._gen)
            return msg

        def set(self, key, value):
            self._traced("set", key=key, value=_b64(value))

        def get(self, key):
            return base64.b64decode(self._traced("get", key=key)["value"])

        def add(self, key, amount):
            v = int(self._traced("add", key=key, amount=int(amount))
                    ["value"])
            if self._world and BARRIER_KEY in key:
                # torch's store-based barrier at the end of
                # init_process_group polls add(key, 0) every 10 ms until
                # every rank added 1: here the last rank to arrive says
                # so, and the others wait for that in herd (no polling).
                done = key + "/" + BARRIER_DONE
                if amount and v == self._world:
                    self.set(done, b"1")
                elif not amount and v < self._world:
                    self.wait([done])
                    v = self._world
            return v

        def compare_set(self, key, expected, desired):
            return base64.b64decode(self._call(
                "compare_set", key=key, expected=_b64(expected),
                value=_b64(desired))["value"])

        def delete_key(self, key):
            return bool(self._traced("delete", key=key)["ok"])

        def num_keys(self):
            return int(self._traced("num_keys")["value"])

        def check(self, keys):
            return bool(self._traced("check", keys=list(keys))["ok"])

        def wait(self, keys, timeout=None):
            t = timeout.total_seconds() if timeout is not None else None
            self._traced("wait", keys=list(keys), timeout=t)

        def set_timeout(self, timeout):
            self._timeout = timeout.total_seconds()

    return HerdStore


_store_class = None


def store(path, generation, world_size=0):
    """A HerdStore for generation (torch.distributed imported here);
    world_size: the barrier of init_process_group waits without polling."""
    global _store_class
    if _store_class is None:
        _store_class = _make_store_class()
    return _store_class(path, generation, world_size=world_size)


def _sockets():
    """{fd: "socket:[inode]"} of this process's open sockets."""
    out = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for name in names:
        try:
            link = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue
        if link.startswith("socket:["):
            out[int(name)] = link
    return out


def _connected_tcp(fd):
    """Whether fd is a connected TCP socket (a gloo pair, not its
    listener, not a Unix socket)."""
    try:
        s = socket.socket(fileno=os.dup(fd))
    except OSError:
        return False
    try:
        if s.family not in (socket.AF_INET, socket.AF_INET6) or \
                s.type != socket.SOCK_STREAM:
            return False
        s.getpeername()
        return True
    except OSError:
        return False
    finally:
        s.close()


def _hang_up(socks):
    """Shuts down each socket of socks ({fd: inode}) still open as that
    socket: every collective on them, ours and the peers', fails at once
    instead of waiting for gloo's timeout.  The fds stay gloo's."""
    for fd, link in socks.items():
        try:
            if os.readlink("/proc/self/fd/%d" % fd) != link:
                continue  # closed, and the number taken again
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            s.close()


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
        # The group's TCP connections ({fd: inode}): hung up on when the
        # rank leaves the group, so that a peer blocked on this rank in a
        # collective fails at once.
        self._group_socks = {}
        self._cv = threading.Condition()
        self._closed = False
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
        if self.enabled:
            # herd's messages are read as they come, not between steps: a
            # new membership hangs up on the group at once, so that a
            # rank blocked in a collective on a silent peer (a node that
            # lost power sends no reset) leaves it without a timeout.
            threading.Thread(target=self._listen, name="herd.elastic",
                             daemon=True).start()
        if TRACE:
            t = _proc_start()
            self._t("process started %s, membership up" %
                    ("%.3f" % t if t else "?"))

    def _t(self, what):
        trace(what, self.rank, self.generation)

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
        self._t("init_process_group")
        before = _sockets()
        dist.init_process_group(backend, store=store(self.path,
                                                     self.generation,
                                                     self.world_size),
                                rank=self.rank, world_size=self.world_size,
                                **kw)
        # gloo connects every pair in its constructor: the group's
        # connections are the TCP sockets that came with it.
        self._group_socks = {fd: link for fd, link in _sockets().items()
                             if before.get(fd) != link and
                             _connected_tcp(fd)}
        self._t("process group formed")

    def _listen(self):
        """The channel's reader (a thread): memberships wake the rank."""
        while True:
            try:
                msg = self._ch.recv(None)
            except (OSError, ValueError):
                msg = None
            if msg is None:
                with self._cv:
                    self._closed = True
                    self._cv.notify_all()
                return
            if msg.get("op") == "leave":
                # herd restarts every rank (its SIGTERM follows): the
                # group is over, and a rank blocked in a collective with
                # a dead peer must leave it to act on the signal.
                self._t("herd restarts the job: leaving the group")
                _hang_up(self._group_socks)
                continue
            if msg.get("op") != "membership" or \
                    int(msg.get("generation", -1)) <= self.generation:
                continue
            # The group the rank is in now, taken before the rank can
            # wake and form the next one.
            socks = self._group_socks
            with self._cv:
                self._pending = msg
                self._cv.notify_all()
            self._t("membership of generation %s came" %
                    msg.get("generation"))
            _hang_up(socks)
            if TRACE:
                # Where the rank is, should it not leave its step within
                # 5 s (faulthandler's own thread: no GIL needed).
                import faulthandler
                faulthandler.dump_traceback_later(5, exit=False)

    def changed(self):
        """True when herd announced a new generation (never blocks)."""
        if not self.enabled:
            return False
        return self._pending is not None

    def wait(self, timeout=WAIT_S):
        """Blocks until herd announces a new generation; False when none
        came in timeout seconds."""
        if not self.enabled:
            return False
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._pending is None and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
            return self._pending is not None

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
        self._t("state source: rank %d" % src)
        dist.broadcast_object_list(obj, src=src)
        if self.rank != src:
            model.load_state_dict(obj[0]["model"])
            if optimizer is not None and obj[0]["opt"] is not None:
                optimizer.load_state_dict(obj[0]["opt"])
        self._t("state synced at step %d" % int(obj[0]["step"]))
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
        self._t("rejoin: step %d abandoned, %s" % (
            step, "membership here" if self._pending else "waiting for it"))
        if TRACE:
            import faulthandler
            faulthandler.cancel_dump_traceback_later()
        # Peers blocked on this rank in the abandoned step fail now.
        _hang_up(self._group_socks)
        if not self.wait():
            raise RuntimeError("herd.elastic: no new membership from herd")
        with self._cv:
            msg, self._pending = self._pending, None
        self._t("membership of generation %s" % msg.get("generation"))
        try:
            self._graveyard.append(dist.distributed_c10d._get_default_group())
            dist.destroy_process_group()
        except Exception:
            pass
        self._t("old group left")
        self.generation = int(msg["generation"])
        self.rank = int(msg["rank"])
        self.world_size = int(msg["world_size"])
        self.init_process_group(self.backend)
        if wrap is not None:
            wrap()
            self._t("wrapped")
        return self._sync(model, optimizer, step, True)

    def stepped(self, step):
        """Call after every completed step: herd hears of the first one
        in each generation (the rejoin is over when every rank steps)."""
        if not self.enabled or self._stepped_gen == self.generation:
            return
        self._stepped_gen = self.generation
        self._t("stepping at step %d" % int(step))
        try:
            self._ch.send({"op": "stepping", "generation": self.generation,
                           "step": int(step)})
        except OSError:
            pass
