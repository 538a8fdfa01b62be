/* transport_local.c — `hosts: localhost`: fork herd-agent on this machine,
 * no SSH.  The agent dies with herd (PR_SET_PDEATHSIG), and stops its
 * ranks when it does.
 *
 * Under `nodes.transport: local` every node of the host list gets its own
 * agent here, told its node's name (--node NAME), which it reports in
 * HELLO: a stand-in for a cluster, so that events, the plan, eviction and
 * spares work per named node with all ranks on this machine. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport.h"

static int local_start(struct transport *t, const char *host,
		       struct herd_err *err)
{
	bool named = t->spec->nodes.transport == SPEC_TRANSPORT_LOCAL;
	/* A local agent dies with herd (PR_SET_PDEATHSIG, and EOF on the
	 * socketpair), so it needs no hello timeout to end when herd
	 * vanished; and herd forks every agent before its loop answers the
	 * first HELLO, which for 1,000 nodes on a loaded machine takes
	 * longer than the default 30 s.  3600000 ms: the agent's maximum. */
	char *argv[] = {t->agent_path,
			"--stdio",
			"--hello-timeout",
			"3600000",
			named ? "--node" : NULL,
			(char *)host,
			NULL};
	pid_t parent = getpid();
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return herd_errprintf(err, "socketpair: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return herd_errprintf(err, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		/* The agent leads its own group: Ctrl-C on herd's terminal
		 * reaches herd, which decides what the ranks get. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		if (dup2(sv[1], 0) < 0 || dup2(sv[1], 1) < 0)
			_exit(127);
		execv(t->agent_path, argv);
		transport_report(sv[1], "agent", "cannot run %s: %s",
				 t->agent_path, strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	return sv[0];
}

const struct transport_ops transport_local_ops = {
	.name = "local",
	.start = local_start,
	.free = NULL,
};
