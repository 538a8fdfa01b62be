/* transport_local.c — `hosts: localhost`: start herd-agent on this
 * machine, no SSH.  The agent leads its own process group (Ctrl-C on
 * herd's terminal reaches herd, which decides what the ranks get) and
 * gets SIGTERM when herd dies (PR_SET_PDEATHSIG), and stops its ranks
 * then.  The child is herd's through proc.h: reaped from the loop. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "herd/proc.h"
#include "transport.h"

static int local_start(struct transport *t, const char *host,
		       struct herd_err *err)
{
	char *argv[] = {t->agent_path, "--stdio", NULL};
	struct proc_opts opts = {.pdeathsig = SIGTERM, .wait_exec = true};
	struct herd_err why;
	int sv[2];

	(void)host;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return herd_errprintf(err, "socketpair: %s", strerror(errno));
	opts.io[0] = opts.io[1] = (struct proc_fd){PROC_FD_DUP, sv[1]};
	opts.io[2] = (struct proc_fd){PROC_FD_DUP, STDERR_FILENO};
	herd_err_clear(&why);
	if (proc_spawn(t->loop, argv, &opts, NULL, NULL, &why) < 0) {
		close(sv[0]);
		close(sv[1]);
		return herd_errprintf(err, "agent: %s", why.text);
	}
	close(sv[1]);
	return sv[0];
}

const struct transport_ops transport_local_ops = {
	.name = "local",
	.start = local_start,
	.free = NULL,
};
