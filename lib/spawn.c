/* spawn.c — child set-up between fork() and exec(); see spawn.h. */
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
