/* transport/ssh/ssh.c — one herd-agent per node over SSH, in process (libssh),
 * no ssh/pdsh children.
 *
 * Two kinds of threads, neither one per node:
 *
 * - At most ssh.fanout connect workers.  start() queues the node; a
 *   worker takes it and, blocking, connects, checks the host key and logs
 *   in (transport/ssh/sshsess.c: the same session `herd keys` opens), makes
 * sure ssh.agent_dir (~/.cache/herd) holds this herd's agent (uploading it over
 * an exec channel when missing), starts it and waits for its first bytes.  Then
 * it hands the node over and takes the next one; a worker with nothing queued
 * ends.
 * - One I/O thread, from the first start() to free(): it serves every
 *   node whose agent runs, with libssh's non-blocking API and one poll()
 *   over each session's socket and each node's end of the socketpair
 *   whose other end the controller reads like any other transport.
 *
 * A node's libssh session belongs to one thread at a time: its worker,
 * then the I/O thread (handed over under priv->lock).
 *
 * The agent cache is checked on the node, by the same shell that execs
 * the agent, right before the exec (transport/ssh/nodecache.c: CACHE_CHECK):
 * whoever else can write the cache could make herd run their program as the job
 * user.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "launcher/transport/ssh/ssh_int.h"

void tssh_list_push(struct node_list *l, struct tssh_node *n)
{
	n->next = NULL;
	n->prev = l->tail;
	if (l->tail)
		l->tail->next = n;
	else
		l->head = n;
	l->tail = n;
	l->count++;
}

void tssh_list_remove(struct node_list *l, struct tssh_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		l->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		l->tail = n->prev;
	n->next = n->prev = NULL;
	l->count--;
}

/* Ends a node: its channel and session, then its end of the socketpair
 * (the controller sees EOF when it did not hang up first). */
void tssh_node_free(struct tssh_node *n)
{
	if (!n)
		return;
	if (n->ch) {
		ssh_channel_send_eof(n->ch);
		ssh_channel_close(n->ch);
		ssh_channel_free(n->ch);
	}
	if (n->s) {
		ssh_disconnect(n->s);
		ssh_free(n->s);
	}
	if (n->fd >= 0)
		close(n->fd);
	free(n->out);
	free(n->in);
	free(n->host);
	free(n);
}

/* ---- the transport ------------------------------------------------------- */

/* Workers are joined, not detached: a thread's OpenSSL state (its random
 * generators) is freed only when it has ended, so herd must not exit
 * while one is still on its way out.  Workers that ended are joined here,
 * so a long job that reconnects keeps no dead stacks. */
static int keep_tid(struct tssh_priv *priv, pthread_t tid)
{
	int kept = 0;

	for (int i = 0; i < priv->n_tids; i++)
		if (pthread_tryjoin_np(priv->tids[i], NULL) != 0)
			priv->tids[kept++] = priv->tids[i];
	priv->n_tids = kept;
	if (priv->n_tids == priv->cap_tids) {
		int cap = priv->cap_tids ? 2 * priv->cap_tids : 64;
		pthread_t *tids = realloc(priv->tids, cap * sizeof(*tids));

		if (!tids)
			return -1;
		priv->tids = tids;
		priv->cap_tids = cap;
	}
	priv->tids[priv->n_tids++] = tid;
	return 0;
}

/* Starts a thread with a small stack: libssh and two 32 KiB buffers. */
static int start_thread(pthread_t *tid, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(tid, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}

static int tssh_start(struct transport *t, const char *host,
		      struct herd_err *err)
{
	struct tssh_priv *priv = t->priv;
	struct tssh_node *n = calloc(1, sizeof(*n));
	bool spawn;
	pthread_t tid;
	int sv[2];

	if (!n || !(n->host = strdup(host))) {
		free(n);
		return herd_errprintf(err, "out of memory");
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		free(n->host);
		free(n);
		return herd_errprintf(err, "socketpair: %s", strerror(errno));
	}
	n->t = t;
	n->fd = sv[1];
	n->sock = -1;
	pthread_mutex_lock(&priv->lock);
	tssh_list_push(&priv->queue, n);
	/* As many workers as there are nodes to connect, up to the fan-out. */
	spawn = priv->workers < priv->fanout &&
		priv->workers < priv->queue.count + priv->connecting.count;
	if (spawn)
		priv->workers++;
	pthread_mutex_unlock(&priv->lock);
	if (!spawn)
		return sv[0];
	if (start_thread(&tid, tssh_worker_main, priv) != 0) {
		bool orphan;

		pthread_mutex_lock(&priv->lock);
		priv->workers--;
		/* With no worker left, nobody would take the node. */
		orphan = priv->workers == 0;
		if (orphan)
			tssh_list_remove(&priv->queue, n);
		pthread_mutex_unlock(&priv->lock);
		if (orphan) {
			close(sv[0]);
			tssh_node_free(n);
			return herd_errprintf(
			    err, "cannot start a thread for %s", host);
		}
		return sv[0];
	}
	if (keep_tid(priv, tid) < 0)
		pthread_detach(tid); /* out of memory: not worth failing */
	return sv[0];
}

static void tssh_free_priv(struct transport *t)
{
	struct tssh_priv *priv = t->priv;
	struct node_list queued;
	struct timespec deadline;
	bool left;

	if (!priv)
		return;
	/* The controller closed every socket: the I/O thread hangs each
	 * node up; a worker blocked inside libssh (waiting for an agent's
	 * first bytes, an upload, authentication) is woken by shutting its
	 * session's socket down; one still inside a TCP connect may take up
	 * to ssh.connect_timeout.  Wait a little; a thread still running
	 * after that keeps the shared state, and herd leaves with _exit()
	 * (transport_threads_left()): exit()'s clean-up of OpenSSL under a
	 * thread that is using it crashed herd. */
	loop_time_in(CLOCK_REALTIME, &deadline, SSH_FREE_WAIT_MS);
	pthread_mutex_lock(&priv->lock);
	priv->aborting = true;
	queued = priv->queue;
	priv->queue = (struct node_list){0};
	for (struct tssh_node *n = priv->connecting.head; n; n = n->next)
		if (n->sock >= 0)
			shutdown(n->sock, SHUT_RDWR);
	tssh_wake_io(priv);
	while ((priv->workers > 0 || priv->io_running) &&
	       pthread_cond_timedwait(&priv->cond, &priv->lock, &deadline) == 0)
		;
	left = priv->workers > 0 || priv->io_running;
	pthread_mutex_unlock(&priv->lock);
	while (queued.head) {
		struct tssh_node *n = queued.head;

		tssh_list_remove(&queued, n);
		tssh_node_free(n);
	}
	t->priv = NULL;
	if (left) {
		transport_set_threads_left();
		return;
	}
	/* Every thread is past its last use of the shared state; wait
	 * (bounded, afresh: on a loaded machine the first wait can use all
	 * of its time) until each has ended and freed its own.  One that
	 * has not ended by then keeps the state, and herd leaves with
	 * _exit() as above: the state is either freed or deliberately left
	 * to a process that ends without exit()'s clean-up. */
	loop_time_in(CLOCK_REALTIME, &deadline, SSH_JOIN_WAIT_MS);
	for (int i = 0; i < priv->n_tids; i++)
		if (pthread_timedjoin_np(priv->tids[i], NULL, &deadline) != 0)
			goto still_running;
	if (pthread_timedjoin_np(priv->io_tid, NULL, &deadline) != 0)
		goto still_running;
	free(priv->tids);
	close(priv->wake);
	sshsess_cfg_free(&priv->cfg);
	pthread_cond_destroy(&priv->cond);
	pthread_mutex_destroy(&priv->lock);
	free(priv);
	return;
still_running:
	transport_set_threads_left();
}

static int tssh_init_priv(struct transport *t, struct herd_err *err)
{
	struct tssh_priv *priv = calloc(1, sizeof(*priv));
	int rc = -1;

	if (!priv)
		return herd_errprintf(err, "out of memory");
	priv->wake = -1;
	if (nodecache_bin_init(&priv->agent, t->agent_path, "agent", err) < 0)
		goto out;
	priv->agent_dir = t->spec->ssh.agent_dir ? t->spec->ssh.agent_dir
						 : NODECACHE_DEFAULT_DIR;
	priv->fanout = t->spec->ssh.fanout > 0 ? t->spec->ssh.fanout : 64;
	if (sshsess_cfg_init_job(&priv->cfg, t->spec, err) < 0)
		goto out;
	priv->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (priv->wake < 0) {
		herd_errprintf(err, "eventfd: %s", strerror(errno));
		goto out;
	}
	pthread_mutex_init(&priv->lock, NULL);
	pthread_cond_init(&priv->cond, NULL);
	ssh_init();
	if (start_thread(&priv->io_tid, tssh_io_main, priv) != 0) {
		herd_errprintf(err, "cannot start the SSH I/O thread");
		pthread_cond_destroy(&priv->cond);
		pthread_mutex_destroy(&priv->lock);
		goto out;
	}
	priv->io_running = true;
	t->priv = priv;
	priv = NULL;
	rc = 0;
out:
	if (priv) {
		if (priv->wake >= 0)
			close(priv->wake);
		sshsess_cfg_free(&priv->cfg);
		free(priv);
	}
	return rc;
}

static int tssh_start_first(struct transport *t, const char *host,
			    struct herd_err *err)
{
	if (!t->priv && tssh_init_priv(t, err) < 0)
		return -1;
	return tssh_start(t, host, err);
}

const struct transport_ops transport_ssh_ops = {
    .name = "ssh",
    .start = tssh_start_first,
    .free = tssh_free_priv,
};
