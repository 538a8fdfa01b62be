/* spawn.c — child set-up between fork() and exec(); see spawn.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "herd/spawn.h"

int spawn_child_setup(pid_t parent, int out_fd, int err_fd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	int null_fd;

	setpgid(0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		return -1;
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	null_fd = open("/dev/null", O_RDWR);
	if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 ||
	    dup2(err_fd, 2) < 0)
		return -1;
	return 0;
}

void spawn_report_write(int fd, enum spawn_step step, int err)
{
	struct spawn_report r = {.step = (int)step, .err = err};
	ssize_t n;

	/* One write below PIPE_BUF is atomic: the parent reads it whole. */
	do
		n = write(fd, &r, sizeof(r));
	while (n < 0 && errno == EINTR);
}

int spawn_report_read(int fd, struct spawn_report *r)
{
	ssize_t n = read(fd, r, sizeof(*r));

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? -1 : 0;
	if (n != (ssize_t)sizeof(*r))
		return 0; /* EOF, or a short write no child makes */
	return 1;
}

const char *spawn_step_what(int step)
{
	switch (step) {
	case SPAWN_STEP_SETUP:
		return "cannot set up the process";
	case SPAWN_STEP_WORKDIR:
		return "cannot enter the workdir";
	case SPAWN_STEP_CPUS:
		return "cannot bind to its planned cpus";
	case SPAWN_STEP_EXEC:
		return "cannot exec /bin/sh";
	}
	return "cannot start";
}
