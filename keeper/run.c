/* keeper/run.c — the rank keeper's side (agent/keeper.c has the agent's
 * side and says what a keeper is and what it is given).
 *
 * This file and lib/core/proc.c's child half are all of the keeper: linked
 * alone (keeper/main.c) they make the small program the agent embeds and
 * runs for every rank (libc only: an exec of it costs about a quarter of
 * an exec of the agent, which loads libcrypto, libpmix, hwloc...).  The
 * agent links it too, for `herd-agent --keeper`, the fallback where the
 * embedded program cannot be run.
 *
 * Nothing here may need more than libc: no hwloc, jansson or libcrypto
 * call (the Makefile links the keeper without them, so one would not
 * link).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper/keeper.h"

static long spec_num(const char *s, long lo, long hi)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

/* The cpu list the agent wrote (keeper_spec_cpus): "A" or "A-B" items,
 * A <= B < CPU_SETSIZE, comma-separated, nothing else.  0 or -1. */
static int cpus_parse(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s) {
		char *end = NULL;
		long a, b;

		if (*s < '0' || *s > '9')
			return -1;
		errno = 0;
		a = b = strtol(s, &end, 10);
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -1;
			b = strtol(s, &end, 10);
		}
		if (errno || a < 0 || b < a || b >= CPU_SETSIZE ||
		    (*end && *end != ',') || (*end == ',' && !end[1]))
			return -1;
		for (long c = a; c <= b; c++)
			CPU_SET((int)c, set);
		s = *end ? end + 1 : end;
	}
	return 0;
}

/* Reads and checks the spec on fd 0.  Returns 0, or -1 with errno. */
int keeper_spec_read(struct keeper_spec *k)
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
	k->cpus_text = field[4];
	k->mem_text = field[5];
	if (field[4][0]) {
		if (cpus_parse(field[4], &k->cpus) < 0)
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

void keeper_on_parent_death(int sig)
{
	(void)sig;
	kill(0, SIGKILL); /* the whole group: the rank and this keeper */
	_exit(137);
}

void keeper_fail(enum proc_step step, int e)
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

/* Signals the agent sends to the group are for the rank: the keeper
 * keeps them blocked for good and hands on those that came before the
 * rank was forked (a child does not inherit pending signals).  SIGUSR1
 * (the agent died) is not among them. */
static const int stop_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

void keeper_block_stops(void)
{
	sigset_t stopset;

	sigemptyset(&stopset);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		sigaddset(&stopset, stop_sigs[i]);
	sigprocmask(SIG_SETMASK, &stopset, NULL);
}

void keeper_hand_on(pid_t pid)
{
	sigset_t pending;

	sigpending(&pending);
	for (size_t i = 0; i < sizeof(stop_sigs) / sizeof(stop_sigs[0]); i++)
		if (sigismember(&pending, stop_sigs[i]))
			kill(pid, stop_sigs[i]);
}

void keeper_wait(pid_t pid)
{
	struct sigaction sa;
	int status = 0;

	memset(&sa, 0, sizeof(sa));
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

void keeper_cold(struct keeper_spec *k)
{
	struct sigaction sa;
	int go[2];
	pid_t pid;

	memset(&sa, 0, sizeof(sa));
	keeper_block_stops();
	if (getppid() != k->agent)
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
		/* The agent may have gdb look at the rank when it hangs
		 * (stacks.c): under Yama's ptrace_scope 1 only an
		 * ancestor may attach, and gdb is the agent's child, not
		 * the rank's ancestor.  EINVAL without Yama: harmless. */
		prctl(PR_SET_PTRACER, (unsigned long)k->agent, 0, 0, 0);
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
		if (k->has_mem)
			syscall(SYS_set_mempolicy, MPOL_PREFERRED, k->mem_mask,
				(unsigned long)KEEPER_MEM_NODES + 1);
		proc_child_exec(&k->rank, k->argv, 3);
	}
	close(3); /* only the rank holds the report pipe now */
	close(go[0]);
	keeper_hand_on(pid);
	close(go[1]);
	keeper_wait(pid);
}

int keeper_main(int argc, char **argv)
{
	struct keeper_spec k;
	struct sigaction sa;
	int devnull;

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
	/* A warm slot: the interpreter first, the rank at LAUNCH
	 * (keeper/warm.c). */
	if (argc > 2 && !strcmp(argv[2], KEEPER_WARM_ARG))
		return keeper_warm_main(argc, argv);
	if (keeper_spec_read(&k) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	close(devnull);
	keeper_cold(&k);
	return 127;
}
