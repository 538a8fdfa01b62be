/* transport/local.c — `hosts: localhost`: start herd-agent on this
 * machine, no SSH.  The agent leads its own process group (Ctrl-C on
 * herd's terminal reaches herd, which decides what the ranks get) and
 * gets SIGTERM when herd dies (PR_SET_PDEATHSIG), and stops its ranks
 * then.  The child is herd's through proc.h: reaped from the loop.
 *
 * Under `nodes.transport: local` every node of the host list gets its own
 * agent here, told its node's name (--node NAME), which it reports in
 * HELLO: a stand-in for a cluster, so that events, the plan, eviction and
 * spares work per named node with all ranks on this machine.
 *
 * When herd is done its sockets are closed first; then free() waits for
 * every local agent to exit (bounded: health.grace and 5 s), so that
 * what an agent removes on its way out (its private directory) is gone
 * when herd returns, as a caller that runs herd twice expects. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "herd/proc.h"
#include "launcher/transport/transport.h"

struct local_agents {
	pid_t *pid; /* every agent started, reaped or not */
	size_t n, cap;
};

static int local_start(struct transport *t, const char *host,
		       struct herd_err *err)
{
	bool named = t->spec->nodes.transport == SPEC_TRANSPORT_LOCAL;
	bool pmix = t->spec->launch.mode == SPEC_MODE_PMIX;
	struct transport_warm warm;
	/* 8 of ours at most, the warm ones, and the NULL at the end. */
	char *argv[8 + sizeof(warm.argv) / sizeof(warm.argv[0]) + 1];
	struct proc_opts opts = {.pdeathsig = SIGTERM, .wait_exec = true};
	struct local_agents *la = t->priv;
	struct herd_err why;
	pid_t pid;
	int sv[2], k = 0;

	argv[k++] = t->agent_path;
	argv[k++] = "--stdio";
	/* --local-herd: herd's silence is a stall here (a loaded machine),
	 * never a cut-off; herd's exit is EOF on the socketpair. */
	argv[k++] = "--local-herd";
	/* A local agent dies with herd (PR_SET_PDEATHSIG, and EOF on the
	 * socketpair), so it needs no hello timeout to end when herd
	 * vanished; and herd forks every agent before its loop answers the
	 * first HELLO, which for 1,000 nodes on a loaded machine takes
	 * longer than the default 30 s.  3600000 ms: the agent's maximum. */
	argv[k++] = "--hello-timeout";
	argv[k++] = "3600000";
	/* --pmix (before --node): the agent starts its PMIx server before
	 * LAUNCH. */
	if (pmix)
		argv[k++] = "--pmix";
	if (named) {
		argv[k++] = "--node";
		argv[k++] = (char *)host;
	}
	/* --warm...: after --node NAME (or in its place). */
	transport_warm_args(t->spec, &warm);
	for (int i = 0; i < warm.argc; i++)
		argv[k++] = (char *)warm.argv[i];
	argv[k] = NULL;
	if (!la && !(la = t->priv = calloc(1, sizeof(*la))))
		return herd_errprintf(err, "out of memory");
	if (la->n == la->cap) {
		size_t cap = la->cap ? la->cap * 2 : 8;
		pid_t *p = realloc(la->pid, cap * sizeof(*p));

		if (!p)
			return herd_errprintf(err, "out of memory");
		la->pid = p;
		la->cap = cap;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return herd_errprintf(err, "socketpair: %s", strerror(errno));
	opts.io[0] = opts.io[1] = (struct proc_fd){PROC_FD_DUP, sv[1]};
	opts.io[2] = (struct proc_fd){PROC_FD_DUP, STDERR_FILENO};
	herd_err_clear(&why);
	if ((pid = proc_spawn(t->loop, argv, &opts, NULL, NULL, &why)) < 0) {
		close(sv[0]);
		close(sv[1]);
		return herd_errprintf(err, "agent: %s", why.text);
	}
	la->pid[la->n++] = pid;
	close(sv[1]);
	return sv[0];
}

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* Every socket is closed by now: each agent sees EOF, ends what is left
 * and removes its directory.  Waits for them, polling (the loop is gone,
 * and a child it reaped already answers ECHILD). */
static void local_free(struct transport *t)
{
	struct local_agents *la = t->priv;
	long deadline = mono_ms() + t->spec->health.grace_ms + 5000;

	if (!la)
		return;
	for (size_t i = 0; i < la->n; i++) {
		for (;;) {
			pid_t r = waitpid(la->pid[i], NULL, WNOHANG);

			if (r == la->pid[i] || (r < 0 && errno != EINTR))
				break;
			if (mono_ms() >= deadline)
				goto out; /* they die with herd (PDEATHSIG) */
			nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
		}
	}
out:
	free(la->pid);
	free(la);
	t->priv = NULL;
}

const struct transport_ops transport_local_ops = {
	.name = "local",
	.start = local_start,
	.free = local_free,
};
