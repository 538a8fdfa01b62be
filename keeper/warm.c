/* keeper/warm.c — the keeper of a warm slot (keeper.h gives its
 * contract; agent/warm.c is the agent's side).
 *
 * It starts the slot's Python interpreter at once, in its own group and
 * under its PDEATHSIG like any rank, with the bootstrap (warm_boot.py)
 * that imports launch.preload and waits.  At LAUNCH the agent hands it
 * the rank's spec, the same a cold keeper gets: the keeper passes the
 * rank's workdir, binding, environment and arguments to the interpreter,
 * which becomes the rank.  Whenever that cannot be made exactly so (the
 * interpreter died or said no), the keeper kills it and runs the rank
 * cold from the same spec: nothing is lost but the time.
 *
 * libc only, like keeper/run.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "herd/fdpass.h"
#include "keeper/keeper.h"

extern char **environ;

/* The interpreter's channel to us is its fd 3. */
#define WARM_CHAN_FD 3
/* A warm argv is a script and its arguments: far below a spec. */
#define WARM_ARGV_MAX ((size_t)PROTO_FRAME_MAX)

static void send_rec(int fd, const char *rec, size_t len)
{
	while (send(fd, rec, len, MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int put(int fd, const char *s)
{
	return write_all(fd, s ? s : "", strlen(s ? s : "") + 1);
}

/* The interpreter: cwd /, this environment without the variables that
 * would put the job's files on its path before LAUNCH, fd 3 its end of
 * chan.  Never returns. */
static void __attribute__((noreturn))
start_python(pid_t agent, const char *python, const char *boot,
	     const char *preload, int chan)
{
	static const char *const drop[] = {
	    "PYTHONPATH=", "PYTHONSTARTUP=", "PYTHONHOME=", "PYTHONSAFEPATH=",
	    "PYTHONINSPECT="};
	struct sigaction sa;
	sigset_t none;
	size_t n = 0, k = 0;
	char **envp;
	char *argv[] = {(char *)python, (char *)boot, (char *)preload, NULL};

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &sa, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_PTRACER, (unsigned long)agent, 0, 0, 0);
	if (dup2(chan, WARM_CHAN_FD) < 0 || chdir("/") < 0)
		_exit(127);
	while (environ[n])
		n++;
	envp = calloc(n + 1, sizeof(*envp));
	if (!envp)
		_exit(127);
	for (size_t i = 0; i < n; i++) {
		bool keep = true;

		for (size_t d = 0; d < sizeof(drop) / sizeof(drop[0]); d++)
			if (!strncmp(environ[i], drop[d], strlen(drop[d])))
				keep = false;
		if (keep)
			envp[k++] = environ[i];
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execve(python, argv, envp);
	{
		char why[160];
		int len = snprintf(why, sizeof(why), "Fcannot run %s: %s",
				   python, strerror(errno));

		if (write(WARM_CHAN_FD, why + 1, (size_t)len - 1) < 0)
			_exit(127);
	}
	_exit(127);
}

/* Reads all of fd (a memfd at offset 0) into a NUL-ended buffer. */
static char *read_memfd(int fd, size_t max, size_t *len)
{
	struct stat st;
	char *buf;
	size_t off = 0;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (size_t)st.st_size > max)
		return NULL;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return NULL;
	while (off < (size_t)st.st_size) {
		ssize_t n =
		    pread(fd, buf + off, (size_t)st.st_size - off, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			return NULL;
		}
		off += (size_t)n;
	}
	buf[off] = '\0';
	*len = off;
	return buf;
}

/* Receives "L" and its two fds.  0, or -1 (EOF, anything else). */
static int recv_launch(int ctl, int *spec, int *wargv)
{
	char tag = 0;
	int fds[2];

	if (fdpass_recv(ctl, &tag, fds, 2) < 0)
		return -1;
	if (tag != 'L') {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	*spec = fds[0];
	*wargv = fds[1];
	return 0;
}

/* Hands the rank of k, whose warm argv is w (len bytes), to the
 * interpreter on chan.  0, or -1 (it is gone). */
static int hand_over(int chan, const struct keeper_spec *k, const char *w,
		     size_t len)
{
	const char *end = w + len;
	const char *f[6];
	char *stop;
	long argc;

	for (int i = 0; i < 6; i++) {
		if (w >= end)
			return -1;
		f[i] = w;
		w += strlen(w) + 1;
	}
	argc = strtol(f[5], &stop, 10);
	if (strcmp(f[0], KEEPER_WARM_MAGIC) || *stop || argc < 0)
		return -1;
	/* warm_boot.py's order: workdir, cpus, NUMA node, flags, python,
	 * its word in the command, script, argc, args, environment. */
	if (put(chan, k->rank.workdir) < 0 || put(chan, k->cpus_text) < 0 ||
	    put(chan, k->mem_text) < 0 || put(chan, f[3]) < 0 ||
	    put(chan, f[1]) < 0 || put(chan, f[2]) < 0 || put(chan, f[4]) < 0 ||
	    put(chan, f[5]) < 0)
		return -1;
	for (long i = 0; i < argc; i++) {
		if (w >= end || put(chan, w) < 0)
			return -1;
		w += strlen(w) + 1;
	}
	for (char **e = k->envp; *e; e++)
		if (put(chan, *e) < 0)
			return -1;
	return shutdown(chan, SHUT_WR);
}

/* The import runs in SCHED_IDLE: a pool refilled while ranks start
 * takes only the cpu time they leave.  Only where the rank can go back
 * to the keeper's policy (unidle, and warm_boot.py at LAUNCH): root, or
 * RLIMIT_NICE allowing nice 0.  Set here, in the keeper, right after
 * the fork, not by the child itself: a LAUNCH that came before the
 * child got so far (a loaded node, the first attempt right after the
 * agent started) would have been unidled first and idled after, and
 * the rank would have waited for a free cpu that a busy node never
 * has. */
static void idle(pid_t pid)
{
	struct rlimit rl;
	struct sched_param sp = {0};

	if (geteuid() == 0 ||
	    (getrlimit(RLIMIT_NICE, &rl) == 0 &&
	     (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 20)))
		sched_setscheduler(pid, SCHED_IDLE, &sp);
}

/* Every thread of pid back to our own scheduling policy: a rank that
 * comes while its interpreter still imports (SCHED_IDLE) waits no
 * longer than a cold one. */
static void unidle(pid_t pid)
{
	struct sched_param sp;
	char path[64];
	struct dirent *d;
	int policy = sched_getscheduler(0);
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (policy < 0 || sched_getparam(0, &sp) < 0 || !(dir = opendir(path)))
		return;
	while ((d = readdir(dir)))
		if (d->d_name[0] >= '0' && d->d_name[0] <= '9')
			sched_setscheduler((pid_t)strtol(d->d_name, NULL, 10),
					   policy, &sp);
	closedir(dir);
}

static void end_python(pid_t pid)
{
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int keeper_warm_main(int argc, char **argv)
{
	struct keeper_spec k;
	int ctl, chan[2], devnull, spec = -1, wfd = -1;
	char *stop, *warg;
	size_t wlen = 0;
	bool dead = false;	/* the interpreter ended before LAUNCH */
	pid_t agent, pid;
	char rec[512], cold[512];

	memset(&k, 0, sizeof(k));
	if (argc != 7)
		keeper_fail(PROC_STEP_SETUP, EINVAL);
	agent = (pid_t)strtol(argv[3], &stop, 10);
	if (*stop || agent <= 0)
		keeper_fail(PROC_STEP_SETUP, EINVAL);
	ctl = fcntl(0, F_DUPFD_CLOEXEC, 4);
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (ctl < 0 || devnull < 0 || dup2(devnull, 0) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	keeper_block_stops();
	if (getppid() != agent)
		keeper_on_parent_death(SIGUSR1);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	pid = fork();
	if (pid < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	if (pid == 0)
		start_python(agent, argv[4], argv[5], argv[6], chan[1]);
	idle(pid);
	close(chan[1]);

	/* Before LAUNCH: relay what the interpreter says; the agent's EOF
	 * ends the slot.  An interpreter that ended is said ("D"): the agent
	 * closes the slot, or has already sent a rank ("L" crossed "D"),
	 * which then runs cold. */
	for (;;) {
		struct pollfd p[2] = {{.fd = ctl, .events = POLLIN},
				      {.fd = dead ? -1 : chan[0],
				       .events = POLLIN}};
		ssize_t n;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			end_python(pid);
			_exit(1);
		}
		if (p[1].revents) {
			n = read(chan[0], rec, sizeof(rec) - 1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				end_python(pid);
				dead = true;
				send_rec(ctl, "D", 1);
				continue;
			}
			rec[n] = '\0';
			if (rec[0] == 'R')
				send_rec(ctl, "R", 1);
			else if (rec[0] == 'F')
				send_rec(ctl, rec, strcspn(rec, "\n"));
			continue;
		}
		if (p[0].revents) {
			if (recv_launch(ctl, &spec, &wfd) < 0) {
				if (!dead)
					end_python(pid);
				_exit(dead ? 1 : 0);
			}
			break;
		}
	}

	if (!dead)
		unidle(pid);
	/* LAUNCH: the spec goes where a cold keeper reads it. */
	if (dup2(spec, 0) < 0 || keeper_spec_read(&k) < 0 ||
	    dup2(devnull, 0) < 0)
		keeper_fail(PROC_STEP_SETUP, errno);
	close(spec);
	warg = dead ? NULL : read_memfd(wfd, WARM_ARGV_MAX, &wlen);
	snprintf(cold, sizeof(cold), "C");
	close(wfd);
	if (warg && hand_over(chan[0], &k, warg, wlen) == 0) {
		size_t got = 0;
		ssize_t n;

		/* "R\n" may still come first (the interpreter was not
		 * ready): skip it; then "K" or "C why". */
		for (;;) {
			n = read(chan[0], rec + got, sizeof(rec) - 1 - got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
			rec[got] = '\0';
			while (got >= 2 && rec[0] == 'R' && rec[1] == '\n') {
				memmove(rec, rec + 2, got - 1);
				got -= 2;
			}
			if (got > 0)
				break;
		}
		/* The interpreter could not preload (it was handed the
		 * rank while still importing): the agent says so as it
		 * would have before LAUNCH, and the rank runs cold. */
		if (got > 0 && rec[0] == 'F')
			send_rec(ctl, rec, strcspn(rec, "\n"));
		/* "C why": the interpreter will not be this rank (a module
		 * of the script's directory would shadow a preloaded one...):
		 * the agent says why. */
		if (got > 0 && rec[0] == 'C')
			snprintf(cold, sizeof(cold), "%.*s",
				 (int)strcspn(rec, "\n"), rec);
		if (got > 0 && rec[0] == 'K') {
			send_rec(ctl, "K", 1);
			close(ctl);
			close(chan[0]);
			close(3); /* the rank runs: the report pipe's EOF */
			keeper_hand_on(pid);
			keeper_wait(pid);
		}
	}
	/* Cold, from the same spec. */
	if (!dead)
		end_python(pid);
	send_rec(ctl, cold, strlen(cold));
	close(ctl);
	close(chan[0]);
	free(warg);
	keeper_cold(&k);
}
