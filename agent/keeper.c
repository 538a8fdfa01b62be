/* keeper.c — the rank keeper: one process per rank between the agent and
 * the rank, run as its own program (`herd-agent --keeper --rank R`).
 *
 * The keeper leads the rank's process group, gets SIGUSR1 when the agent
 * dies (PR_SET_PDEATHSIG, set by proc_spawn and kept across exec) and
 * then kills the whole group, so a `kill -9` of the agent leaves no rank
 * behind.  It keeps the stop signals the agent sends to the group blocked
 * (they are for the rank), forks the rank, hands on those that came
 * before the rank existed, waits for it and exits with its status,
 * re-raising its signal.
 *
 * Why a program and not code run after fork: the agent may have threads
 * (PMIx's), so between its fork and exec only async-signal-safe calls are
 * allowed; proc_spawn does exactly its fixed set-up there and execs.  The
 * keeper is a fresh single-threaded image, free to fork its rank and
 * prepare it.
 *
 * Which image: /proc/self/exe, resolved by the agent's child before its
 * exec.  That names the inode the agent runs from, not a path: the cached
 * binary (~/.cache/herd/agent-...) may be renamed over by a new upload or
 * removed while the agent runs, and the keeper must still be the agent's
 * own version (the spec below is a private contract between the two).
 *
 * What the keeper gets (proc_spawn with keep_report):
 *   fd 0  the spec: a memfd the agent wrote (below); the keeper reads it
 *         and puts /dev/null in its place.  The rank's environment may
 *         hold secrets (PMIx's, the job's), so it never travels on the
 *         keeper's command line, which `ps` shows;
 *   fd 1, 2  the rank's output pipes;
 *   fd 3  the report pipe (proc.h), open across the keeper's exec; the
 *         rank's set-up failures are reported on it, and its exec closes
 *         it (close-on-exec from here on);
 *   every signal blocked (so nothing sent to the new group is lost
 *   before the rank exists), PDEATHSIG SIGUSR1.
 *
 * The spec: NUL-terminated strings, in this order:
 *   KEEPER_MAGIC, the agent's pid, the program to exec (/bin/sh), the
 *   workdir ("" none), the cpu list ("" none, bind.h syntax), the NUMA
 *   node to prefer ("" none), argc, argv[0..argc-1], then every
 *   environment entry of the rank to the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "herd/bind.h"

#define KEEPER_MAGIC "herd-keeper/1"
/* The spec holds at most a LAUNCH frame's command and environment plus
 * the agent's own environment: twice a frame is far above it, and far
 * below what would hurt a node. */
#define KEEPER_SPEC_MAX (2 * (size_t)PROTO_FRAME_MAX)

/* ---- in the agent -------------------------------------------------------- */

static void put_str(FILE *f, const char *s)
{
	fputs(s ? s : "", f);
	fputc('\0', f);
}

/* The spec in a memfd, offset 0; -1 with err. */
static int spec_write(const struct keeper_rank *k, struct herd_err *err)
{
	char *buf = NULL, num[32];
	size_t len = 0, off = 0;
	FILE *f = open_memstream(&buf, &len);
	int fd = -1, argc = 0, ok;

	if (!f)
		return herd_errprintf(err, "out of memory");
	put_str(f, KEEPER_MAGIC);
	snprintf(num, sizeof(num), "%d", (int)getpid());
	put_str(f, num);
	put_str(f, k->path);
	put_str(f, k->workdir);
	put_str(f, k->cpus);
	num[0] = '\0';
	if (k->mem_node >= 0)
		snprintf(num, sizeof(num), "%d", k->mem_node);
	put_str(f, num);
	while (k->argv[argc])
		argc++;
	snprintf(num, sizeof(num), "%d", argc);
	put_str(f, num);
	for (int i = 0; i < argc; i++)
		put_str(f, k->argv[i]);
	for (char *const *e = k->envp; *e; e++)
		put_str(f, *e);
	ok = fclose(f) == 0;
	if (!ok || len > KEEPER_SPEC_MAX) {
		free(buf);
		return ok ? herd_errprintf(err,
					   "rank %d: its command and "
					   "environment are %zu bytes (at most "
					   "%zu)",
					   k->rank, len, KEEPER_SPEC_MAX)
			  : herd_errprintf(err, "out of memory");
	}
	fd = memfd_create("herd-keeper", MFD_CLOEXEC);
	while (fd >= 0 && off < len) {
		ssize_t n = write(fd, buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			fd = -1;
			break;
		}
		off += (size_t)n;
	}
	if (fd < 0)
		herd_errprintf(err, "cannot hand rank %d to its keeper: %s",
			       k->rank, strerror(errno));
	free(buf);
	return fd;
}

pid_t keeper_spawn(struct loop *loop, const struct keeper_rank *k,
		   proc_exit_fn on_exit, void *arg, int out[2],
		   struct herd_err *err)
{
	char rank[16];
	char *argv[] = {(char *)(k->self && *k->self ? k->self : "herd-agent"),
			KEEPER_ARG, "--rank", rank, NULL};
	/* Born with every signal blocked (see keeper_main); SIGUSR1 when
	 * the agent dies: the keeper then kills the group. */
	struct proc_opts opts = {.path = "/proc/self/exe",
				 .pdeathsig = SIGUSR1,
				 .keep_report = true};
	sigset_t all;
	pid_t pid;
	int spec;

	snprintf(rank, sizeof(rank), "%d", k->rank);
	spec = spec_write(k, err);
	if (spec < 0)
		return -1;
	sigfillset(&all);
	opts.sigmask = &all;
	opts.io[0] = (struct proc_fd){.kind = PROC_FD_DUP, .fd = spec};
	opts.io[1].kind = opts.io[2].kind = PROC_FD_PIPE;
	pid = proc_spawn(loop, argv, &opts, on_exit, arg, err);
	close(spec);
	if (pid < 0)
		return -1;
	out[0] = opts.io[1].fd;
	out[1] = opts.io[2].fd;
	return pid;
}

/* ---- in the keeper ------------------------------------------------------- */

/* The spec, split. */
struct keeper_spec {
	char *buf;
	pid_t agent;
	struct proc_opts rank; /* path, workdir, cpus, envp */
	cpu_set_t cpus;
	bool has_mem;
	unsigned long mem_mask[KEEPER_MEM_NODES / (8 * sizeof(long)) + 1];
	char **argv;
	char **envp;
};

static long spec_num(const char *s, long lo, long hi)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

/* Reads and checks the spec on fd 0.  Returns 0, or -1 with errno. */
static int spec_read(struct keeper_spec *k)
{
	struct stat st;
	char *p, *end, *field[7];
	size_t off = 0;
	long argc, n_env = 0;

	if (fstat(0, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (size_t)st.st_size > KEEPER_SPEC_MAX) {
		errno = EINVAL;
		return -1;
	}
	k->buf = malloc((size_t)st.st_size);
	if (!k->buf)
		return -1;
	while (off < (size_t)st.st_size) {
		ssize_t n = pread(0, k->buf + off, (size_t)st.st_size - off,
				  (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			errno = n < 0 ? errno : EINVAL;
			return -1;
		}
		off += (size_t)n;
	}
	errno = EINVAL;
	if (k->buf[off - 1] != '\0')
		return -1;
	p = k->buf;
	end = k->buf + off;
	for (int i = 0; i < 7; i++) {
		if (p >= end)
			return -1;
		field[i] = p;
		p += strlen(p) + 1;
	}
	argc = spec_num(field[6], 1, 1L << 20);
	if (strcmp(field[0], KEEPER_MAGIC) || argc < 0 || !field[2][0] ||
	    (k->agent = (pid_t)spec_num(field[1], 1, 1L << 30)) < 0)
		return -1;
	for (char *q = p; q < end; q += strlen(q) + 1)
		n_env++;
	if (n_env < argc)
		return -1;
	n_env -= argc;
	k->argv = calloc((size_t)argc + 1, sizeof(*k->argv));
	k->envp = calloc((size_t)n_env + 1, sizeof(*k->envp));
	if (!k->argv || !k->envp)
		return -1;
	for (long i = 0; i < argc; i++, p += strlen(p) + 1)
		k->argv[i] = p;
	for (long i = 0; i < n_env; i++, p += strlen(p) + 1)
		k->envp[i] = p;
	k->rank.path = field[2];
	k->rank.workdir = field[3][0] ? field[3] : NULL;
	k->rank.envp = k->envp;
	if (field[4][0]) {
		struct bind_rank br = {.cpus = field[4]};

		if (bind_rank_cpu_set(&br, &k->cpus) < 0)
			return -1;
		k->rank.cpus = &k->cpus;
	}
	if (field[5][0]) {
		long node = spec_num(field[5], 0, KEEPER_MEM_NODES - 1);

		if (node < 0)
			return -1;
		k->mem_mask[(size_t)node / (8 * sizeof(long))] |=
		    1UL << ((size_t)node % (8 * sizeof(long)));
		k->has_mem = true;
	}
	return 0;
}

static void keeper_on_parent_death(int sig)
{
	(void)sig;
	kill(0, SIGKILL); /* the whole group: the rank and this keeper */
	_exit(137);
}

static void __attribute__((noreturn)) keeper_fail(enum proc_step step, int e)
{
	proc_report_write(3, step, e);
	_exit(127);
}

/* Was this program started by an agent as a keeper?  fd 3 is the report
 * pipe then; run by hand, it may be anything, and nothing is written
 * to it. */
static bool started_by_agent(void)
{
	struct stat st;

	return fstat(3, &st) == 0 && S_ISFIFO(st.st_mode);
}

int keeper_main(int argc, char **argv)
{
	static const int stop_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
	struct keeper_spec k;
	struct sigaction sa;
	sigset_t stopset, pending;
	int go[2], status = 0, devnull;
	pid_t pid;

	(void)argc;
	if (!started_by_agent()) {
		fprintf(stderr, "herd-agent: " KEEPER_ARG " is started by "
				"herd-agent itself for each rank, not by "
				"hand\n");
		return 2;
	}
	/* Exec'd through /proc/self/exe, its name (ps, top, pgrep) would be
	 * "exe": it takes the agent's, as a forked keeper had. */
	prctl(PR_SET_NAME,
	      strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0]);
	memset(&k, 0, sizeof(k));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = keeper_on_parent_death;
	sigaction(SIGUSR1, &sa, NULL);
	/* The report pipe goes with the rank's exec (its EOF says the rank
	 * runs) and with the keeper's close below. */
	fcntl(3, F_SETFD, FD_CLOEXEC);
	if (spec_read(&k) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	close(devnull);
	/* Signals the agent sends to the group are for the rank: the keeper
	 * keeps them blocked for good and hands on those that came before
	 * the rank was forked (a child does not inherit pending signals).
	 * SIGUSR1 (the agent died) is unblocked here: one already pending
	 * runs its handler now. */
	sigemptyset(&stopset);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		sigaddset(&stopset, stop_sigs[i]);
	sigprocmask(SIG_SETMASK, &stopset, NULL);
	if (getppid() != k.agent)
		keeper_on_parent_death(SIGUSR1);
	if (pipe2(go, O_CLOEXEC) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);

	pid = fork();
	if (pid < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	if (pid == 0) {
		sigset_t none;
		char b;

		sa.sa_handler = SIG_DFL;
		for (int s = 1; s < NSIG; s++)
			sigaction(s, &sa, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* Stop signals stay blocked until the keeper has handed on
		 * the early ones: one that reached both of us merges. */
		close(go[1]);
		while (read(go[0], &b, 1) < 0 && errno == EINTR)
			;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Memory policy: prefer the NUMA node of the rank's cpus
		 * (falls back to others when it is full); kept across
		 * exec. */
		if (k.has_mem)
			syscall(SYS_set_mempolicy, MPOL_PREFERRED, k.mem_mask,
				(unsigned long)KEEPER_MEM_NODES + 1);
		proc_child_exec(&k.rank, k.argv, 3);
	}
	close(3); /* only the rank holds the report pipe now */
	close(go[0]);
	sigpending(&pending);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		if (sigismember(&pending, stop_sigs[i]))
			kill(pid, stop_sigs[i]);
	close(go[1]);
	/* The keeper keeps no copy of the output pipes: EOF must come
	 * when the rank (and whatever it started) is gone.  (fd 0 is
	 * /dev/null.) */
	dup2(0, 1);
	dup2(0, 2);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status)) {
		struct rlimit no_core = {0, 0};
		int sig = WTERMSIG(status);
		sigset_t one;

		setrlimit(RLIMIT_CORE, &no_core);
		sa.sa_handler = SIG_DFL;
		sigaction(sig, &sa, NULL);
		prctl(PR_SET_PDEATHSIG, 0);
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		kill(getpid(), sig);
		_exit(128 + sig);
	}
	_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}
