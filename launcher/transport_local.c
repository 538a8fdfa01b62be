/* transport_local.c — `hosts: localhost`: start herd-agent on this
 * machine, no SSH.  The agent leads its own process group (Ctrl-C on
 * herd's terminal reaches herd, which decides what the ranks get) and
 * gets SIGTERM when herd dies (PR_SET_PDEATHSIG), and stops its ranks
 * then.  The child is herd's through proc.h: reaped from the loop.
 *
 * Under `nodes.transport: local` every node of the host list gets its own
 * agent here, told its node's name (--node NAME), which it reports in
 * HELLO: a stand-in for a cluster, so that events, the plan, eviction and
 * spares work per named node with all ranks on this machine. */
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
	struct proc_opts opts = {.pdeathsig = SIGTERM, .wait_exec = true};
	struct herd_err why;
	int sv[2];

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
