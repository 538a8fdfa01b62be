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


def _fingerprint(model):
    """Two sums over a model's state (float64): equal on ranks holding
    the same model, different for a replacement's fresh one."""
    import torch
    a = b = 0.0
    with torch.no_grad():
        for t in model.state_dict().values():
            if t.is_floating_point():
                t = t.detach().double()
                a += float(t.sum())
                b += float((t * t).sum())
    return a, b


# Every tensor of a packed state starts at a multiple of this.
_ALIGN = 8


def _pack(state):
    """state (nested dicts, lists and tensors) as (head, body): body is
    every tensor's bytes, aligned, after the pickled skeleton that names
    them; head is [skeleton bytes, body bytes]."""
    import pickle
    import torch
    parts, off = [], 0

    def walk(v):
        nonlocal off
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu().contiguous().reshape(-1)
            raw = t.view(torch.uint8) if t.numel() else \
                torch.empty(0, dtype=torch.uint8)
            at = off
            pad = -raw.numel() % _ALIGN
            parts.append(raw)
            if pad:
                parts.append(torch.zeros(pad, dtype=torch.uint8))
            off += raw.numel() + pad
            return ("__herd_tensor__", at, str(v.dtype).split(".")[-1],
                    tuple(v.shape))
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(walk(x) for x in v)
        return v

    skel = pickle.dumps(walk(state), protocol=pickle.HIGHEST_PROTOCOL)
    skel += bytes(-len(skel) % _ALIGN)
    sk = torch.frombuffer(bytearray(skel), dtype=torch.uint8)
    body = torch.cat([sk] + parts) if parts else sk
    return torch.tensor([len(skel), body.numel()], dtype=torch.int64), body


def _unpack(head, body):
    """_pack's state back from (head, body)."""
    import pickle
    import torch
    n = int(head[0])
    base = n

    def walk(v):
        if isinstance(v, tuple) and len(v) == 4 and \
                v[0] == "__herd_tensor__":
            _, at, dtype, shape = v
            dt = getattr(torch, dtype)
            count = 1
            for d in shape:
                count *= d
            size = count * torch.empty(0, dtype=dt).element_size()
            raw = body[base + at:base + at + size]
            return raw.view(dt).reshape(shape).clone() if count else \
                torch.empty(shape, dtype=dt)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(walk(x) for x in v)
        return v

    return walk(pickle.loads(bytes(body[:n].numpy())))


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
        """Every rank ends with the state of the lowest rank that has one
        (the source), sent only where it is missing: each rank says
        whether it has a state, its step and a fingerprint of its model;
        the source sends, rank to rank, the model to each rank whose
        fingerprint differs (a replacement; everyone when DDP's rebuild
        broadcast a replacement's model from rank 0) and the optimizer
        to each rank without a state or at another step.  The state goes
        as tensors, one buffer per receiver, not pickled."""
        import torch
        import torch.distributed as dist
        # NCCL carries only the GPU's tensors.
        dev = torch.device("cuda", torch.cuda.current_device()) \
            if self.backend == "nccl" else torch.device("cpu")
        fp = _fingerprint(model)
        mine = torch.tensor([1.0 if have_state else 0.0, float(step),
                             fp[0], fp[1]], dtype=torch.float64, device=dev)
        table = [torch.zeros(4, dtype=torch.float64, device=dev)
                 for _ in range(self.world_size)]
        dist.all_gather(table, mine)
        table = [t.cpu() for t in table]
        src = next((r for r in range(self.world_size) if table[r][0] > 0),
                   None)
        if src is None:
            raise RuntimeError("herd.elastic: no rank holds the state")
        src_step = int(table[src][1])
        need = {}
        for r in range(self.world_size):
            if r == src:
                continue
            m = not torch.equal(table[r][2:], table[src][2:])
            o = optimizer is not None and \
                (table[r][0] == 0 or int(table[r][1]) != src_step)
            if m or o:
                need[r] = (m, o)
        self._t("state source: rank %d (step %d); to %s" % (
            src, src_step, ", ".join(
                "%d:%s" % (r, "+".join(w for w, on in zip(
                    ("model", "optimizer"), need[r]) if on))
                for r in sorted(need)) or "none"))
        if self.rank == src:
            packed = {}
            works = []
            for r in sorted(need):
                if need[r] not in packed:
                    m, o = need[r]
                    head, body = _pack({
                        "model": model.state_dict() if m else None,
                        "opt": optimizer.state_dict() if o else None})
                    packed[need[r]] = (head.to(dev), body.to(dev))
                head, body = packed[need[r]]
                works.append(dist.isend(head, r))
                works.append(dist.isend(body, r))
            for w in works:
                w.wait()
        elif self.rank in need:
            head = torch.zeros(2, dtype=torch.int64, device=dev)
            dist.recv(head, src)
            body = torch.empty(int(head[1]), dtype=torch.uint8, device=dev)
            dist.recv(body, src)
            got = _unpack(head.cpu(), body.cpu())
            if got["model"] is not None:
                model.load_state_dict(got["model"])
            if got["opt"] is not None:
                optimizer.load_state_dict(got["opt"])
        self._t("state synced at step %d" % src_step)
        return src_step

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
        collectives must come in the same order; the model DDP's
        constructor broadcasts from rank 0, perhaps a replacement, is
        undone on the survivors).
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
            # DDP's constructor broadcasts rank 0's model to every rank:
            # a replacement's when rank 0's node was the one lost.  The
            # survivor keeps its own (the state _sync compares and sends).
            kept = {k: v.detach().clone()
                    for k, v in model.state_dict().items()}
            wrap()
            model.load_state_dict(kept)
            del kept
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
