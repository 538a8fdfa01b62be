/* transport/slurm/slurm.c — one herd-agent per node as the tasks of srun job
 * steps inside the Slurm allocation herd runs in.
 *
 * start() only registers a node and hands back one end of a socketpair;
 * commit() starts one step for the nodes registered since the last
 * commit:
 *
 *   srun --nodes=N --ntasks=N --ntasks-per-node=1 --nodelist=HOSTS
 *        --no-kill --kill-on-bad-exit=0 --export=ALL --mpi=none
 *        --cpu-bind=none [--overlap] AGENT --connect ADDR:PORT
 *
 * --nodelist names exactly the nodes of the batch, so a step never asks
 * for more nodes than remain; every step after the first (a spare, a
 * restart in the same allocation) adds --overlap, which Slurm needs for a
 * new step beside running ones.  AGENT is this herd's own herd-agent: the
 * nodes of a Slurm cluster share the filesystem it lives on.
 *
 * The agents connect back over TCP to a listener bound to the address
 * this host uses to reach the first node that is not this host itself
 * (inside a batch job herd runs on the first node of the allocation, and
 * its own name resolves to a loopback address there), on an ephemeral
 * port, and prove
 * a per-job secret (auth.h).  The secret reaches them only through srun's
 * environment (HERD_JOB_SECRET with --export=ALL); it is never on a
 * command line and never printed.
 *
 * The listener's address is on srun's command line, which every local
 * user can read, so strangers can connect to it; they must never starve
 * herd's own agents (hundreds of idle strangers must not make a spare's
 * agent time out).  Everything runs on the controller's loop, no
 * thread per connection: the listener is a non-blocking socket drained
 * on every readiness (at most SLURM_ACCEPT_BATCH a turn, so answers of
 * accepted peers are read in between); each accepted connection gets the
 * challenge at once, a handshake state machine (auth_ctl_io) and a
 * deadline of SLURM_PREAUTH_MS; the pool of unauthenticated connections
 * is bounded per source address and in all (preauth.h), dropping the
 * oldest pending connection rather than refusing a new one.  Rejected
 * connections are logged with their peer and reason, a few as they come,
 * then at most one line per SLURM_REFUSED_LOG_MS with a count of the
 * ones left out (ratelog.h).  Once an agent proved the
 * secret and named its node, the loop relays bytes between the TCP
 * connection and that node's socketpair.
 *
 * Each srun is a child of herd through proc.h: it leads the step's
 * process group, gets SIGTERM when herd dies (PR_SET_PDEATHSIG; its tasks
 * end with it), and its exit status comes from the loop's SIGCHLD
 * registry.  srun's stdout and stderr (with the agents' stderr) pass
 * through to herd's stderr, prefixed, read on the loop too (no thread per
 * step).  A step has ended when both its exit status and the end of its
 * output are in, in either order; then the nodes it started whose agent
 * never connected get one PROTO_ERROR naming srun's status and last line.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launcher/transport/slurm/slurm_int.h"

/* A node's lifecycle, from each state the states it may move to: a fresh
 * node is REGISTERED; REGISTERED goes to STARTED (its step runs) or
 * FAILED (no step could start); STARTED goes to CONNECTED (its agent
 * proved the secret) or FAILED (its step ended first).  CONNECTED and
 * FAILED are final. */
#define SNODE_TO(s) (1u << (s))
static const unsigned snode_next[] = {
    [SNODE_REGISTERED] = SNODE_TO(SNODE_STARTED) | SNODE_TO(SNODE_FAILED),
    [SNODE_STARTED] = SNODE_TO(SNODE_CONNECTED) | SNODE_TO(SNODE_FAILED),
    [SNODE_CONNECTED] = 0,
    [SNODE_FAILED] = 0,
};

/* Moves n to state to when the table allows it (registering a fresh
 * node, calloc'd as REGISTERED, is always allowed).  Returns 0, or -1
 * and leaves n as it was. */
int snode_set_state(struct snode *n, enum snode_state to)
{
	if (to != SNODE_REGISTERED && !(snode_next[n->state] & SNODE_TO(to)))
		return -1;
	n->state = to;
	return 0;
}

/* ---- the transport ------------------------------------------------------ */

static int tslurm_init(struct transport *t, struct herd_err *err)
{
	struct tslurm_priv *priv = calloc(1, sizeof(*priv));
	char hex[AUTH_SECRET_HEX_LEN + 1];

	if (!priv)
		return herd_errprintf(err, "out of memory");
	priv->listen_fd = -1;
	priv->loop = t->loop;
	ratelog_init(&priv->refused, SLURM_REFUSED_LOG_BURST,
		     SLURM_REFUSED_LOG_MS);
	/* Checked when the listener opens (the bounds are constants). */
	priv->pool = preauth_new(SLURM_PREAUTH_MAX, SLURM_PREAUTH_PER_SOURCE);
	if (auth_secret_new(&priv->secret, hex, err) < 0 ||
	    asprintf(&priv->secret_env, "%s=%s", AUTH_SECRET_ENV, hex) < 0) {
		auth_wipe(hex, sizeof(hex));
		auth_wipe(&priv->secret, sizeof(priv->secret));
		preauth_free(priv->pool);
		free(priv);
		return err && err->text[0]
			   ? -1
			   : herd_errprintf(err, "out of memory");
	}
	auth_wipe(hex, sizeof(hex));
	t->priv = priv;
	return 0;
}

static int tslurm_start(struct transport *t, const char *host,
			struct herd_err *err)
{
	struct tslurm_priv *priv;
	struct snode *n = NULL;
	int sv[2] = {-1, -1};

	if (!t->priv && tslurm_init(t, err) < 0)
		return -1;
	priv = t->priv;
	if (!auth_name_ok(host, strlen(host)))
		return herd_errprintf(err, "'%s' is not a Slurm node name",
				      host);
	n = calloc(1, sizeof(*n));
	if (!n || !(n->host = strdup(host))) {
		free(n);
		return herd_errprintf(err, "out of memory");
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		herd_errprintf(err, "socketpair: %s", strerror(errno));
		goto fail;
	}
	if (priv->n_nodes == priv->cap_nodes) {
		size_t cap = priv->cap_nodes ? 2 * priv->cap_nodes : 16;
		struct snode **grown =
		    realloc(priv->nodes, cap * sizeof(*grown));

		if (!grown) {
			herd_errprintf(err, "out of memory");
			goto fail;
		}
		priv->nodes = grown;
		priv->cap_nodes = cap;
	}
	n->fd = sv[1];
	snode_set_state(n, SNODE_REGISTERED);
	priv->nodes[priv->n_nodes++] = n;
	return sv[0];
fail:
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	free(n->host);
	free(n);
	return -1;
}

static void tslurm_commit(struct transport *t)
{
	struct tslurm_priv *priv = t->priv;
	struct snode **batch = NULL;
	struct herd_err err;
	size_t n = 0;

	if (!priv)
		return;
	herd_err_clear(&err);
	batch = calloc(priv->n_nodes ? priv->n_nodes : 1, sizeof(*batch));
	if (!batch)
		return;
	for (size_t i = 0; i < priv->n_nodes; i++)
		if (priv->nodes[i]->state == SNODE_REGISTERED)
			batch[n++] = priv->nodes[i];
	if (n == 0)
		goto out;
	if (!priv->accepting) {
		if (sconn_listen(priv, &err) < 0) {
			sstep_fail_batch(priv, batch, n, err.text);
			goto out;
		}
		if (t->verbose)
			fprintf(stderr,
				"herd: slurm: agents connect back to "
				"%s\n",
				priv->addr);
	}
	if (sstep_start(t, batch, n, &err) < 0)
		sstep_fail_batch(priv, batch, n, err.text);
out:
	free(batch);
}

static bool steps_all_ended(const struct tslurm_priv *priv)
{
	for (const struct step *st = priv->steps; st; st = st->next)
		if (!st->ended)
			return false;
	return true;
}

/* The loop has stopped: waits (poll) until deadline_ms for the output of
 * the steps still running and for srun's exits (reaped here, proc.h),
 * passing the output on as the loop did.  Returns whether all ended. */
static bool steps_wait(struct tslurm_priv *priv, int64_t deadline_ms)
{
	for (;;) {
		struct pollfd pfd[2 * 64];
		struct step *who[2 * 64];
		int64_t left;
		nfds_t n = 0;

		proc_reap(priv->loop);
		left = deadline_ms - now_ms();
		if (steps_all_ended(priv) || left <= 0)
			return steps_all_ended(priv);
		/* srun's exit has no fd: looked for every
		 * SLURM_REAP_POLL_MS; the outputs of 64 steps at a time
		 * (a job has a handful: the first, spares, restarts). */
		for (struct step *st = priv->steps; st && n + 2 <= 2 * 64;
		     st = st->next) {
			for (int i = 0; i < 2; i++) {
				int fd = i ? st->err_fd : st->out_fd;

				if (fd < 0)
					continue;
				pfd[n] =
				    (struct pollfd){.fd = fd, .events = POLLIN};
				who[n++] = st;
			}
		}
		if (poll(pfd, n,
			 (int)(left < SLURM_REAP_POLL_MS
				   ? left
				   : SLURM_REAP_POLL_MS)) <= 0)
			continue;
		for (nfds_t k = 0; k < n; k++)
			if (pfd[k].revents)
				sstep_read(who[k], pfd[k].fd == who[k]->err_fd);
	}
}

/* Ends every step: by itself (the agents were told to exit), else
 * SIGTERM to srun, else SIGKILL to the step's group. */
static void steps_end(struct tslurm_priv *priv)
{
	for (int round = 0; round < 3; round++) {
		if (steps_wait(priv, now_ms() + SLURM_STEP_END_MS) ||
		    round == 2)
			break;
		for (struct step *st = priv->steps; st; st = st->next)
			if (!st->ended)
				kill(-st->srun, round == 0 ? SIGTERM : SIGKILL);
	}
	/* An srun still running is reaped by the loop's registry later,
	 * with nobody to tell. */
	for (struct step *st = priv->steps; st; st = st->next)
		if (!st->ended)
			proc_forget(priv->loop, st->srun);
}

static void tslurm_free(struct transport *t)
{
	struct tslurm_priv *priv = t->priv;
	int64_t flush_by = now_ms() + SLURM_RELAY_FLUSH_MS;
	unsigned long left_out;

	if (!priv)
		return;
	/* The loop has stopped: the listener and every connection end
	 * here, on the controller's thread. */
	if (priv->listen_fd >= 0) {
		loop_fd_del(priv->loop, priv->listen_fd);
		close(priv->listen_fd);
		priv->listen_fd = -1;
	}
	if (priv->resume_timer)
		loop_timer_del(priv->loop, priv->resume_timer);
	if (priv->refused_timer)
		loop_timer_del(priv->loop, priv->refused_timer);
	left_out = ratelog_flush(&priv->refused, loop_now_ms());
	if (left_out)
		fprintf(stderr,
			"herd: slurm: rejected %lu more connection%s (the "
			"latest from %s)\n",
			left_out, left_out == 1 ? "" : "s", priv->refused_last);
	while (priv->conns) {
		struct sconn *sc = priv->conns;

		if (sc->pair >= 0)
			sconn_flush(sc, flush_by);
		sconn_close(sc);
	}
	steps_end(priv);
	for (size_t i = 0; i < priv->n_nodes; i++) {
		if (priv->nodes[i]->fd >= 0)
			close(priv->nodes[i]->fd);
		priv->nodes[i]->fd = -1;
	}
	t->priv = NULL;
	auth_wipe(&priv->secret, sizeof(priv->secret));
	auth_wipe(priv->secret_env, strlen(priv->secret_env));
	preauth_free(priv->pool);
	while (priv->steps) {
		struct step *st = priv->steps;

		priv->steps = st->next;
		/* A step that would not end: its output is not read any
		 * more (its srun was forgotten in steps_end). */
		if (st->out_fd >= 0) {
			loop_fd_del(priv->loop, st->out_fd);
			close(st->out_fd);
		}
		if (st->err_fd >= 0) {
			loop_fd_del(priv->loop, st->err_fd);
			close(st->err_fd);
		}
		free(st);
	}
	for (size_t i = 0; i < priv->n_nodes; i++) {
		free(priv->nodes[i]->host);
		free(priv->nodes[i]);
	}
	free(priv->nodes);
	free(priv->secret_env);
	free(priv);
}

const struct transport_ops transport_slurm_ops = {
    .name = "slurm",
    .start = tslurm_start,
    .commit = tslurm_commit,
    .free = tslurm_free,
};
