/* transport/slurm/slurm_step.c — the srun steps of the Slurm transport:
 * one srun per batch of nodes, started through proc.h, its output passed
 * through prefixed, its end settled with its nodes; see slurm.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "herd/hostlist.h"

extern char **environ;

#include "launcher/transport/slurm/slurm_int.h"

/* ---- srun steps --------------------------------------------------------- */

/* Settles a step once srun has exited and its output has ended: every
 * node it started that has no agent gets one PROTO_ERROR, then its socket
 * is closed.  From whichever of the two comes last. */
static void step_maybe_end(struct step *st)
{
	struct tslurm_priv *priv = st->priv;
	int status;
	char why[160];

	if (st->ended || !st->exited || !st->output_done)
		return;
	status = st->exit.status;
	if (st->exit.step != PROC_STEP_NONE)
		snprintf(why, sizeof(why), "could not be started (%s: %s)",
			 proc_step_what(st->exit.step), strerror(st->exit.err));
	else if (WIFSIGNALED(status))
		snprintf(why, sizeof(why), "was killed by signal %d",
			 WTERMSIG(status));
	else
		snprintf(why, sizeof(why), "exited with status %d",
			 WEXITSTATUS(status));
	for (size_t i = 0; i < priv->n_nodes; i++) {
		struct snode *n = priv->nodes[i];

		if (n->step != st || n->state != SNODE_STARTED)
			continue;
		transport_report(n->fd, "srun",
				 "%s: srun failed: it %s before the agent "
				 "connected%s%s",
				 n->host, why, st->last[0] ? ": " : "",
				 st->last);
		close(n->fd);
		n->fd = -1;
		snode_set_state(n, SNODE_FAILED);
	}
	st->ended = true;
}

/* One line of srun's output to herd's stderr, with the step's prefix;
 * a stderr line is kept as the last one for "srun failed: ...". */
static void emit_line(struct step *st, struct line_buf *lb, bool is_err)
{
	while (lb->len &&
	       (lb->buf[lb->len - 1] == '\n' || lb->buf[lb->len - 1] == '\r'))
		lb->len--;
	if (lb->len == 0)
		return;
	fprintf(stderr, "herd: srun step %d: %.*s\n", st->index, (int)lb->len,
		lb->buf);
	if (is_err) {
		memcpy(st->last, lb->buf, lb->len);
		st->last[lb->len < sizeof(st->last) ? lb->len
						    : sizeof(st->last) - 1] =
		    '\0';
	}
	lb->len = 0;
}

/* Stops reading one of srun's streams (i: 0 stdout, 1 stderr); once
 * both are closed, its output has ended. */
static void step_output_close(struct step *st, int i)
{
	int *fd = i ? &st->err_fd : &st->out_fd;

	if (*fd < 0)
		return;
	loop_fd_del(st->priv->loop, *fd);
	close(*fd);
	*fd = -1;
	if (st->out_fd < 0 && st->err_fd < 0) {
		st->output_done = true;
		step_maybe_end(st);
	}
}

/* Reads one chunk of srun's stream i (one read a turn: a chatty srun
 * does not hold the loop) and passes its whole lines on; at EOF the last
 * piece goes too and the stream is closed. */
void sstep_read(struct step *st, int i)
{
	struct line_buf *lb = &st->lines[i];
	char chunk[4096];
	ssize_t got = read(i ? st->err_fd : st->out_fd, chunk, sizeof(chunk));

	if (got < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (got <= 0) {
		emit_line(st, lb, i == 1);
		step_output_close(st, i);
		return;
	}
	for (ssize_t k = 0; k < got; k++) {
		lb->buf[lb->len++] = chunk[k];
		if (chunk[k] == '\n' || lb->len == sizeof(lb->buf))
			emit_line(st, lb, i == 1);
	}
}

static void on_step_output(struct loop *loop, int fd, short revents, void *arg)
{
	struct step *st = arg;

	(void)loop;
	(void)revents;
	sstep_read(st, fd == st->err_fd);
}

/* srun has exited (proc.h, on the loop or in steps_end). */
static void step_on_exit(struct loop *loop, const struct proc_exit *e,
			 void *arg)
{
	struct step *st = arg;

	(void)loop;
	st->exited = true;
	st->exit = *e;
	step_maybe_end(st);
}

/* srun's path, looked up in PATH before forking. */
static char *find_srun(void)
{
	const char *path = getenv("PATH");
	const char *dir = path && *path ? path : "/usr/bin:/bin";

	for (;;) {
		const char *end = strchr(dir, ':');
		int len = end ? (int)(end - dir) : (int)strlen(dir);
		char *cand;

		if (asprintf(&cand, "%.*s/srun", len, len ? dir : ".") < 0)
			return NULL;
		if (access(cand, X_OK) == 0)
			return cand;
		free(cand);
		if (!end)
			return NULL;
		dir = end + 1;
	}
}

/* herd's environment without any HERD_JOB_SECRET of its own, plus the
 * job's: srun's envp (--export=ALL carries it to the agents). */
static char **step_env(const struct tslurm_priv *priv)
{
	size_t n = 0, k = 0, plen = strlen(AUTH_SECRET_ENV);
	char **envp;

	while (environ[n])
		n++;
	envp = calloc(n + 2, sizeof(*envp));
	if (!envp)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], AUTH_SECRET_ENV, plen) ||
		    environ[i][plen] != '=')
			envp[k++] = environ[i];
	envp[k] = priv->secret_env;
	return envp;
}

/* Fails every node of a batch that could not get a step. */
void sstep_fail_batch(struct tslurm_priv *priv, struct snode **batch, size_t n,
		      const char *why)
{
	(void)priv;
	for (size_t i = 0; i < n; i++) {
		transport_report(batch[i]->fd, "srun", "%s: %s", batch[i]->host,
				 why);
		close(batch[i]->fd);
		batch[i]->fd = -1;
		snode_set_state(batch[i], SNODE_FAILED);
	}
}

int sstep_start(struct transport *t, struct snode **batch, size_t n,
		struct herd_err *err)
{
	struct tslurm_priv *priv = t->priv;
	struct hostlist *hl = hostlist_new();
	char *list = NULL, *srun = NULL, **envp = NULL;
	char nodes_arg[48], tasks_arg[48], *nodelist_arg = NULL;
	struct proc_opts opts = {.pdeathsig = SIGTERM};
	struct step *st = calloc(1, sizeof(*st));
	int rc = -1;
	pid_t pid;

	if (!hl || !st) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (hostlist_push_host(hl, batch[i]->host, err) < 0)
			goto out;
	list = hostlist_compress(hl);
	srun = find_srun();
	envp = step_env(priv);
	if (!list || !envp ||
	    asprintf(&nodelist_arg, "--nodelist=%s", list) < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (!srun) {
		herd_errprintf(err, "srun is not on PATH (the slurm transport "
				    "runs inside a Slurm allocation)");
		goto out;
	}
	snprintf(nodes_arg, sizeof(nodes_arg), "--nodes=%zu", n);
	snprintf(tasks_arg, sizeof(tasks_arg), "--ntasks=%zu", n);
	{
		/* Every argument is ours or a path: nothing secret here. */
		char *args[28];
		struct transport_warm warm;
		int k = 0;

		args[k++] = srun;
		args[k++] = nodes_arg;
		args[k++] = tasks_arg;
		args[k++] = "--ntasks-per-node=1";
		args[k++] = nodelist_arg;
		args[k++] = "--no-kill";
		args[k++] = "--kill-on-bad-exit=0";
		args[k++] = "--export=ALL";
		args[k++] = "--mpi=none";
		args[k++] = "--cpu-bind=none";
		args[k++] = "--job-name=herd-agent";
		if (priv->n_steps > 0)
			args[k++] = "--overlap";
		args[k++] = t->agent_path;
		args[k++] = "--connect";
		args[k++] = priv->addr;
		transport_warm_args(t->spec, &warm);
		for (int i = 0; i < warm.argc; i++)
			args[k++] = (char *)warm.argv[i];
		args[k] = NULL;
		if (t->verbose) {
			fprintf(stderr, "herd: slurm: step %d:", priv->n_steps);
			for (char **a = args; *a; a++)
				fprintf(stderr, " %s", *a);
			fprintf(stderr, "\n");
		}
		/* Its own group (the step's), stdin from /dev/null, stdout
		 * and stderr to herd's loop; nothing else of herd's
		 * (the listener, other nodes' sockets) stays open in it. */
		opts.io[1].kind = opts.io[2].kind = PROC_FD_PIPE;
		opts.envp = envp;
		st->priv = priv;
		pid =
		    proc_spawn(priv->loop, args, &opts, step_on_exit, st, err);
		if (pid < 0)
			goto out;
	}
	st->index = priv->n_steps++;
	st->srun = pid;
	st->out_fd = opts.io[1].fd;
	st->err_fd = opts.io[2].fd;
	for (size_t i = 0; i < n; i++) {
		snode_set_state(batch[i], SNODE_STARTED);
		batch[i]->step = st;
	}
	st->next = priv->steps;
	priv->steps = st;
	if (fcntl(st->out_fd, F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(st->err_fd, F_SETFL, O_NONBLOCK) < 0 ||
	    loop_fd_add(priv->loop, st->out_fd, POLLIN, on_step_output, st) <
		0 ||
	    loop_fd_add(priv->loop, st->err_fd, POLLIN, on_step_output, st) <
		0) {
		/* Without its output read, the step cannot be watched: end
		 * it; its exit settles the nodes. */
		kill(-pid, SIGKILL);
		step_output_close(st, 0);
		step_output_close(st, 1);
	}
	st = NULL;
	rc = 0;
out:
	free(st);
	free(envp);
	free(srun);
	free(list);
	free(nodelist_arg);
	hostlist_free(hl);
	return rc;
}
