/* proc.c — child processes: spawn with a clean set-up, reap from the
 * loop; see proc.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "herd/proc.h"

extern char **environ;

/* The report: one write below PIPE_BUF, so the parent reads it whole. */
struct proc_report {
	int step;
	int err;
};

/* One child that has an owner. */
struct proc_child {
	pid_t pid;
	proc_exit_fn on_exit;
	void *arg;
	int report_fd;	/* read end, on the loop until EOF; -1 after */
	struct proc_report report;
};

/* Children of one process: a handful for herd (local agents, srun, the
 * discovery command), up to a node's ranks for the agent (4,096, the
 * LAUNCH bound), so a plain array searched by pid is enough. */
struct proc_reg {
	struct loop *loop;
	struct proc_child *v;
	size_t n, cap;
};

/* ---- in the child: async-signal-safe only -------------------------------- */

void proc_report_write(int fd, enum proc_step step, int err)
{
	struct proc_report r = {.step = (int)step, .err = err};
	ssize_t n;

	do
		n = write(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
}

static void __attribute__((noreturn))
child_fail(int report_fd, enum proc_step step, int err)
{
	proc_report_write(report_fd, step, err);
	_exit(127);
}

/* chdir, cpu set, exec (of exec_fd when > 0, else of o->path or
 * argv[0]); a failed exec is reported as exec_step. */
static void __attribute__((noreturn))
exec_steps(const struct proc_opts *o, char *const argv[], int report_fd,
	   enum proc_step exec_step, int exec_fd)
{
	if (o->workdir && chdir(o->workdir) < 0)
		child_fail(report_fd, PROC_STEP_WORKDIR, errno);
	/* Before exec: every thread the program starts inherits it. */
	if (o->cpus && sched_setaffinity(0, sizeof(*o->cpus), o->cpus) < 0)
		child_fail(report_fd, PROC_STEP_CPUS, errno);
	if (exec_fd > 0)
		fexecve(exec_fd, argv, o->envp ? o->envp : environ);
	else
		execve(o->path ? o->path : argv[0], argv,
		       o->envp ? o->envp : environ);
	child_fail(report_fd, exec_step, errno);
}

void proc_child_exec(const struct proc_opts *o, char *const argv[],
		     int report_fd)
{
	exec_steps(o, argv, report_fd, PROC_STEP_EXEC, o->exec_fd);
}

/* Everything between fork and exec.  Signals arrive blocked (proc_spawn
 * blocks them around fork), so no handler of the parent's ever runs
 * here: they would write into the parent's signal pipe. */
static void __attribute__((noreturn))
child_main(const struct proc_opts *o, char *const argv[], const int src[3],
	   int report_w, pid_t parent)
{
	struct sigaction dfl;
	sigset_t none;
	int moved[3], rep;
	int pdeath = o->pdeathsig == 0 ? SIGKILL : o->pdeathsig;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	/* Above 3 first, so that no dup2 below overwrites a source. */
	rep = fcntl(report_w, F_DUPFD_CLOEXEC, 4);
	if (rep < 0)
		_exit(127);
	if (o->group == PROC_GROUP_NEW)
		setpgid(0, 0);
	else if (o->group == PROC_SESSION)
		setsid();
	if (pdeath > 0) {
		prctl(PR_SET_PDEATHSIG, pdeath);
		if (getppid() != parent)
			_exit(127); /* the parent is gone already */
	}
	for (int i = 0; i < 3; i++) {
		moved[i] = src[i] < 0 ? open("/dev/null", O_RDWR | O_CLOEXEC)
				      : fcntl(src[i], F_DUPFD_CLOEXEC, 4);
		if (moved[i] < 0)
			child_fail(rep, PROC_STEP_SETUP, errno);
	}
	for (int i = 0; i < 3; i++)
		if (dup2(moved[i], i) < 0)
			child_fail(rep, PROC_STEP_SETUP, errno);
	/* A keeper keeps fd 3 across its exec (proc.h); for anyone else
	 * the exec closes it: EOF is the news that it worked. */
	if (dup3(rep, 3, o->keep_report ? 0 : O_CLOEXEC) < 0)
		child_fail(rep, PROC_STEP_SETUP, errno);
	/* The program to exec, when it is an open file: fd 4, closed by
	 * the exec. */
	if (o->exec_fd > 0 &&
	    (o->exec_fd == 4 ? fcntl(4, F_SETFD, FD_CLOEXEC)
			     : dup3(o->exec_fd, 4, O_CLOEXEC)) < 0)
		child_fail(3, PROC_STEP_SETUP, errno);
	close_range(o->exec_fd > 0 ? 5 : 4, ~0U, 0);
	if (o->sigmask) {
		sigprocmask(SIG_SETMASK, o->sigmask, NULL);
	} else {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
	}
	exec_steps(o, argv, 3,
		   o->keep_report ? PROC_STEP_KEEPER : PROC_STEP_EXEC,
		   o->exec_fd > 0 ? 4 : 0);
}

/* ---- in the parent -------------------------------------------------------- */

const char *proc_step_what(int step)
{
	switch (step) {
	case PROC_STEP_SETUP:
		return "cannot set up the process";
	case PROC_STEP_WORKDIR:
		return "cannot enter the workdir";
	case PROC_STEP_CPUS:
		return "cannot bind to its planned cpus";
	case PROC_STEP_EXEC:
		return "cannot exec";
	case PROC_STEP_KEEPER:
		return "cannot exec its keeper";
	}
	return "cannot start";
}

/* Reads the report pipe: 1 with r filled, 0 at EOF (the exec worked),
 * -1 when nothing can be read yet. */
static int report_read(int fd, struct proc_report *r)
{
	ssize_t n = read(fd, r, sizeof(*r));

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -1 : 0;
	if (n != (ssize_t)sizeof(*r)) {
		r->step = PROC_STEP_NONE;
		return 0; /* EOF, or a short write no child makes */
	}
	return 1;
}

static struct proc_child *child_find(struct proc_reg *reg, pid_t pid)
{
	for (size_t i = 0; i < reg->n; i++)
		if (reg->v[i].pid == pid)
			return &reg->v[i];
	return NULL;
}

static void report_close(struct proc_reg *reg, struct proc_child *ch)
{
	if (ch->report_fd < 0)
		return;
	loop_fd_del(reg->loop, ch->report_fd);
	close(ch->report_fd);
	ch->report_fd = -1;
}

static void report_take(struct proc_reg *reg, struct proc_child *ch)
{
	if (ch->report_fd < 0)
		return;
	if (report_read(ch->report_fd, &ch->report) >= 0)
		report_close(reg, ch);
}

static void on_report(struct loop *loop, int fd, short revents, void *arg)
{
	struct proc_reg *reg = arg;

	(void)loop;
	(void)revents;
	for (size_t i = 0; i < reg->n; i++) {
		if (reg->v[i].report_fd == fd) {
			report_take(reg, &reg->v[i]);
			return;
		}
	}
	loop_fd_del(reg->loop, fd); /* not ours any more */
}

int proc_reap(struct loop *loop)
{
	struct proc_reg *reg = loop_procs(loop);
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct proc_child *ch;
		struct proc_exit e = {.pid = pid, .status = status};
		proc_exit_fn cb;
		void *arg;

		if (!reg || !(ch = child_find(reg, pid)))
			continue; /* nobody's: reaped, status dropped */
		/* The child wrote its report before _exit: it is in the
		 * pipe now if it was written at all. */
		if (ch->report_fd >= 0) {
			int fl = fcntl(ch->report_fd, F_GETFL);

			fcntl(ch->report_fd, F_SETFL, fl | O_NONBLOCK);
			report_take(reg, ch);
			report_close(reg, ch);
		}
		e.step = ch->report.step;
		e.err = ch->report.err;
		cb = ch->on_exit;
		arg = ch->arg;
		/* Out of the registry before the callback, which may spawn
		 * (and so move the array). */
		*ch = reg->v[--reg->n];
		if (cb)
			cb(loop, &e, arg);
	}
	return reg ? (int)reg->n : 0;
}

static void on_sigchld(struct loop *loop, int sig, void *arg)
{
	(void)sig;
	(void)arg;
	proc_reap(loop);
}

static void reg_free(void *p)
{
	struct proc_reg *reg = p;

	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		if (reg->v[i].report_fd >= 0)
			close(reg->v[i].report_fd);
	free(reg->v);
	free(reg);
}

static struct proc_reg *reg_get(struct loop *loop)
{
	struct proc_reg *reg = loop_procs(loop);

	if (reg)
		return reg;
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return NULL;
	reg->loop = loop;
	if (loop_on_signal(loop, SIGCHLD, on_sigchld, NULL) < 0) {
		free(reg);
		return NULL;
	}
	loop_set_procs(loop, reg, reg_free);
	return reg;
}

int proc_watch(struct loop *loop)
{
	return reg_get(loop) ? 0 : -1;
}

void proc_forget(struct loop *loop, pid_t pid)
{
	struct proc_reg *reg = loop_procs(loop);
	struct proc_child *ch = reg ? child_find(reg, pid) : NULL;

	if (!ch)
		return;
	ch->on_exit = NULL;
	ch->arg = NULL;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

pid_t proc_spawn(struct loop *loop, char *const argv[], struct proc_opts *opts,
		 proc_exit_fn on_exit, void *arg, struct herd_err *err)
{
	struct proc_reg *reg = reg_get(loop);
	int pipes[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	int report[2] = {-1, -1}, src[3];
	pid_t parent = getpid(), pid = -1;
	sigset_t all, old;
	int saved;

	if (!reg) {
		herd_errprintf(err, "cannot watch children: %s",
			       strerror(errno));
		return -1;
	}
	if (reg->n == reg->cap) {
		size_t cap = reg->cap ? reg->cap * 2 : 16;
		struct proc_child *v = realloc(reg->v, cap * sizeof(*v));

		if (!v) {
			herd_errprintf(err, "out of memory");
			return -1;
		}
		reg->v = v;
		reg->cap = cap;
	}
	for (int i = 0; i < 3; i++) {
		src[i] = -1;
		if (opts->io[i].kind == PROC_FD_DUP) {
			src[i] = opts->io[i].fd;
		} else if (opts->io[i].kind == PROC_FD_PIPE) {
			if (pipe2(pipes[i], O_CLOEXEC) < 0)
				goto fail_errno;
			/* The child's end: read end for stdin. */
			src[i] = pipes[i][i == 0 ? 0 : 1];
		}
	}
	if (pipe2(report, O_CLOEXEC) < 0)
		goto fail_errno;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	pid = fork();
	if (pid == 0)
		child_main(opts, argv, src, report[1], parent);
	saved = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (pid < 0) {
		errno = saved;
		goto fail_errno;
	}
	/* Both sides set the group, so that a kill right after this
	 * already reaches the child's group. */
	if (opts->group == PROC_GROUP_NEW)
		setpgid(pid, pid);
	close_fd(&report[1]);
	for (int i = 0; i < 3; i++) {
		if (opts->io[i].kind != PROC_FD_PIPE)
			continue;
		close_fd(&pipes[i][i == 0 ? 0 : 1]);
		opts->io[i].fd = pipes[i][i == 0 ? 1 : 0];
	}
	if (opts->wait_exec) {
		struct proc_report r = {0};
		int got;

		while ((got = report_read(report[0], &r)) < 0)
			;
		close_fd(&report[0]);
		if (got == 1) {
			int status;

			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			for (int i = 0; i < 3; i++)
				if (opts->io[i].kind == PROC_FD_PIPE)
					close_fd(&opts->io[i].fd);
			herd_errprintf(err, "%s %s: %s", proc_step_what(r.step),
				       r.step == PROC_STEP_WORKDIR && opts->workdir
					       ? opts->workdir
				       : opts->path ? opts->path
						    : argv[0],
				       strerror(r.err));
			return -1;
		}
	} else {
		fcntl(report[0], F_SETFL, O_NONBLOCK);
		if (loop_fd_add(loop, report[0], POLLIN, on_report, reg) < 0) {
			/* Without a watch the report is still read at
			 * reap time; the fd simply stays open till then. */
		}
	}
	reg->v[reg->n++] = (struct proc_child){.pid = pid,
					       .on_exit = on_exit,
					       .arg = arg,
					       .report_fd = report[0]};
	return pid;

fail_errno:
	herd_errprintf(err, "cannot start %s: %s",
		       opts->path ? opts->path : argv[0], strerror(errno));
	for (int i = 0; i < 3; i++) {
		close_fd(&pipes[i][0]);
		close_fd(&pipes[i][1]);
	}
	close_fd(&report[0]);
	close_fd(&report[1]);
	return -1;
}
