# warm_boot.py -- the warm interpreter of one slot (agent/warm.c says what
# it is for; keeper/warm.c is the keeper that starts it).
#
# Run as `PYTHON BOOT PRELOAD` by a keeper in warm mode: cwd /, an
# environment without PYTHONPATH, sys.path[0] the agent's private
# directory (never the job's).  It imports the modules of PRELOAD (a
# comma-separated list, may be empty) and nothing else of the job's: no
# CUDA, no process group.  fd 3 is its channel to its keeper (a socket
# pair: nobody else holds it or can open it):
#   us -> keeper   "R\n" once preloaded, or "F why\n" and exit 1
#   keeper -> us   the rank, NUL-separated, to EOF: workdir, cpus ("A-B,C"
#                  or ""), NUMA node or "", flags ("u", "B"), the
#                  interpreter's path, the command's word for it, script,
#                  argc, args..., then every NAME=VALUE of its environment
#   us -> keeper   "K" (this process is the rank now) or "C why\n" (run
#                  the rank cold: something here cannot be made the same)
# Then it runs the script as `python3 SCRIPT ARGS` would.
import os
import sys

CHAN = 3
# PYTHON* variables a rank's environment may hold that this process
# follows once it knows them; any other one whose value differs from
# ours at start is read by the interpreter before any code runs, so the
# rank goes cold.
FOLLOWED = {
    "PYTHONPATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
    "PYTHONFAULTHANDLER", "PYTHONNOUSERSITE", "PYTHONBREAKPOINT",
    "PYTHONASYNCIODEBUG", "PYTHONSTARTUP",
}


def send(msg):
    data = msg.encode("utf-8", "replace")
    while data:
        n = os.write(CHAN, data)
        data = data[n:]


def fail(why):
    try:
        send("F " + why.replace("\n", " ")[:400] + "\n")
    finally:
        os._exit(1)


def preload(names):
    import importlib
    for name in names:
        try:
            importlib.import_module(name)
        except BaseException as e:  # noqa: B902 - any failure is reported
            fail("cannot import %s: %s: %s" % (name, type(e).__name__, e))
    torch = sys.modules.get("torch")
    if torch is not None:
        # A child of a process that initialised CUDA is broken, and a
        # process group belongs to one rank: neither may exist yet.
        cuda = getattr(torch, "cuda", None)
        if cuda is not None and cuda.is_initialized():
            fail("a preloaded module initialised CUDA")
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            fail("a preloaded module created a process group")


def read_rank():
    chunks = []
    while True:
        b = os.read(CHAN, 1 << 20)
        if not b:
            break
        chunks.append(b)
    f = b"".join(chunks).split(b"\0")
    if f and f[-1] == b"":
        f.pop()
    f = [os.fsdecode(x) for x in f]
    workdir, cpus, mem, flags, python, word, script = f[0:7]
    argc = int(f[7])
    args = f[8:8 + argc]
    env = {}
    for e in f[8 + argc:]:
        k, sep, v = e.partition("=")
        if sep and k:
            env[k] = v
    return workdir, cpus, mem, flags, python, word, script, args, env


def cpu_list(text):
    cpus = set()
    for item in text.split(","):
        a, _, b = item.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def bind(cpus, mem):
    # Back from SCHED_IDLE (the keeper's choice for the import) to the
    # keeper's policy, the one a cold rank inherits: every thread.
    if os.sched_getscheduler(0) == os.SCHED_IDLE:
        policy = os.sched_getscheduler(os.getppid())
        param = os.sched_getparam(os.getppid())
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setscheduler(int(tid), policy, param)
            except ProcessLookupError:
                pass
    if cpus:
        want = cpu_list(cpus)
        # Every thread: an import may have started some.
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), want)
            except ProcessLookupError:
                pass
    if mem:
        import ctypes
        node = int(mem)
        words = node // 64 + 1
        mask = (ctypes.c_ulong * words)()
        mask[node // 64] = 1 << (node % 64)
        libc = ctypes.CDLL(None, use_errno=True)
        # set_mempolicy(MPOL_PREFERRED = 1, mask, maxnode): the keeper's
        # own call for a cold rank; x86_64 and aarch64 numbers.
        nr = {"x86_64": 238, "aarch64": 237}.get(os.uname().machine)
        if nr is not None:
            libc.syscall(nr, 1, mask, ctypes.c_ulong(words * 64 + 1))


def set_cmdline(words):
    """/proc/PID/cmdline (ps, pgrep -f) as a cold rank's: the words
    written over our own argv, and over the environment strings behind
    it when longer (os.environ no longer points there); the kernel then
    shows them up to the first NUL, as for setproctitle(3)."""
    import ctypes
    with open("/proc/self/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    arg_start, arg_end, env_start, env_end = (
        int(fields[i - 3]) for i in (48, 49, 50, 51))
    new = b"\0".join(os.fsencode(w) for w in words) + b"\0"
    room = arg_end - arg_start
    if len(new) > room and env_start == arg_end:
        # One string (NUL only at its end), at most a page: what the
        # kernel reads past arg_end.
        new = b" ".join(os.fsencode(w) for w in words)
        new = new[:min(env_end - arg_start, 4096) - 1] + b"\0"
        if len(new) <= room:
            new = new[:-1] + b" " * (room - len(new) + 1) + b"\0"
        room = env_end - arg_start
    elif len(new) > room:
        new = new[:room - 1] + b"\0"
    ctypes.memmove(arg_start, new + b"\0" * (room - len(new)), room)


def stdio(unbuffered):
    import io
    for fd, name in ((1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        old.flush()
        raw = io.FileIO(fd, "wb", closefd=False)
        if unbuffered or fd == 2:
            buf = raw
        else:
            buf = io.BufferedWriter(raw)
        new = io.TextIOWrapper(buf, encoding=old.encoding,
                               errors=old.errors,
                               line_buffering=(fd == 2 and not unbuffered
                                               and old.line_buffering),
                               write_through=unbuffered or fd == 2)
        setattr(sys, name, new)
        setattr(sys, "__%s__" % name, new)


def shadowed(first, pythonpath):
    """A module already imported here that a file in a directory a cold
    rank puts before the interpreter's own (first: the script's, then
    pythonpath) would have replaced, or a sitecustomize or usercustomize
    that a cold rank's site would import from pythonpath (site runs
    before the script's directory is on the path): its file, or None."""
    from importlib.machinery import EXTENSION_SUFFIXES
    loaded = {n.partition(".")[0] for n in sys.modules}
    for d in first + pythonpath:
        names = set(loaded)
        if d in pythonpath:
            names |= {"sitecustomize", "usercustomize"}
        try:
            files = os.listdir(d)
        except OSError:
            continue
        for f in files:
            for suffix in [".py", ".pyc"] + EXTENSION_SUFFIXES:
                if f.endswith(suffix) and f[:-len(suffix)] in names:
                    return os.path.join(d, f)
            if f in names and os.path.isfile(
                    os.path.join(d, f, "__init__.py")):
                return os.path.join(d, f)
    return None


def become(workdir, cpus, mem, flags, python, word, script, args, env):
    ours = dict(os.environ)
    for k in set(ours) | set(env):
        if (k.startswith("PYTHON") and k not in FOLLOWED and
                ours.get(k, "") != env.get(k, "")):
            return None, "%s differs from the warm interpreter's" % k
    if "PYTHONHASHSEED" in env or "PYTHONHOME" in env:
        return None, "PYTHONHASHSEED or PYTHONHOME is set"
    try:
        if workdir:
            os.chdir(workdir)
        bind(cpus, mem)
        script_path = os.path.abspath(script)
        if not os.path.isfile(script_path):
            return None, "no script %s" % script
    except (OSError, ValueError) as e:
        return None, "%s: %s" % (type(e).__name__, e)

    # What the cold path's sh -c and interpreter start add: PWD for the
    # workdir (sh keeps one that names it), and LC_CTYPE=C.UTF-8 where
    # the locale is C (PEP 538).  A locale other than ours was read at
    # our start: cold.
    pwd = env.get("PWD", "")
    try:
        same = os.path.isabs(pwd) and os.path.samefile(pwd, ".")
    except OSError:
        same = False
    if not same:
        env["PWD"] = os.getcwd()
    if (env.get("PYTHONCOERCECLOCALE") != "0" and not env.get("LC_ALL") and
            (env.get("LC_CTYPE") or env.get("LANG") or "C") in ("C", "POSIX")):
        env["LC_CTYPE"] = "C.UTF-8"
    for k in ("LC_ALL", "LC_CTYPE", "LANG"):
        if env.get(k, "") != ours.get(k, ""):
            return None, "%s differs from the warm interpreter's" % k

    os.environ.clear()
    os.environ.update(env)
    unbuffered = "u" in flags or bool(env.get("PYTHONUNBUFFERED"))
    if unbuffered != bool(ours.get("PYTHONUNBUFFERED")):
        stdio(unbuffered)
    sys.dont_write_bytecode = ("B" in flags or
                               bool(env.get("PYTHONDONTWRITEBYTECODE")))
    if env.get("PYTHONFAULTHANDLER"):
        import faulthandler
        faulthandler.enable(all_threads=True)

    # sys.path as `python3 SCRIPT` builds it: the script's directory
    # (symlinks resolved), then PYTHONPATH (made absolute against the
    # workdir; an empty entry is the workdir), then the interpreter's
    # own, without the user site when PYTHONNOUSERSITE says so.
    base = sys.path[1:]
    if env.get("PYTHONNOUSERSITE"):
        import site
        user = site.getusersitepackages()
        base = [p for p in base if p != user]
    first = []
    if not env.get("PYTHONSAFEPATH"):
        first.append(os.path.dirname(os.path.realpath(script_path)))
    pythonpath = []
    if "PYTHONPATH" in env:
        for p in env["PYTHONPATH"].split(os.pathsep):
            pythonpath.append(os.path.abspath(p) if p else os.getcwd())
    path = first + pythonpath
    hidden = shadowed(first, pythonpath)
    if hidden:
        return None, "%s would be imported instead of a preloaded module" % hidden
    sys.path[:] = path + base
    sys.argv[:] = [script] + args
    sys.executable = python
    sys.orig_argv[:] = [word] + ["-" + c for c in flags] + [script] + args
    try:
        set_cmdline(sys.orig_argv)
    except (OSError, ValueError, IndexError):
        pass

    # Values torch read when it was imported, from the process as it was
    # then: intra-op threads follow OMP_NUM_THREADS, or the cpus the rank
    # may use, as a fresh import would.
    torch = sys.modules.get("torch")
    if torch is not None:
        n = env.get("OMP_NUM_THREADS", "")
        try:
            threads = int(n) if n else len(os.sched_getaffinity(0))
        except ValueError:
            threads = 0
        if threads > 0:
            torch.set_num_threads(threads)
    return script_path, None


def run(script):
    # What `python3 SCRIPT` does (runpy.run_path would leave argv[0]
    # absolute and __main__ a temporary module): a new __main__ for
    # good, the file compiled under its absolute name, run in it.
    import builtins
    import io
    import types
    from importlib.machinery import SourceFileLoader
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__cached__ = None
    main.__package__ = None
    main.__spec__ = None
    main.__loader__ = SourceFileLoader("__main__", script)
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    with io.open_code(script) as f:
        source = f.read()
    try:
        code = compile(source, script, "exec", dont_inherit=True)
        del source
        exec(code, main.__dict__)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as e:  # noqa: B902 - printed as Python prints it
        # The traceback starts at the script, as a cold rank's does.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != script:
            tb = tb.tb_next
        sys.excepthook(type(e), e, tb or e.__traceback__)
        del tb, e
        sys.exit(1)


def main():
    names = [n for n in sys.argv[1].split(",") if n] if len(sys.argv) > 1 else []
    preload(names)
    send("R\n")
    rank = read_rank()
    script, why = become(*rank)
    if why is not None:
        send("C " + why.replace("\n", " ")[:400] + "\n")
        os._exit(0)
    send("K")
    os.close(CHAN)
    del rank
    run(script)


main()
