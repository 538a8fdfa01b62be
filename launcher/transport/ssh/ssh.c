/* transport/ssh/ssh.c — one herd-agent per node over SSH, in process (libssh),
 * no ssh/pdsh children.
 *
 * Two kinds of threads, neither one per node:
 *
 * - At most ssh.fanout connect workers.  start() queues the node; a
 *   worker takes it and, blocking, connects, checks the host key and logs
 *   in (transport/ssh/sshsess.c: the same session `herd keys` opens), makes sure
 *   ssh.agent_dir (~/.cache/herd) holds this herd's agent (uploading it
 *   over an exec channel when missing), starts it and waits for its first
 *   bytes.  Then it hands the node over and takes the next one; a worker
 *   with nothing queued ends.
 * - One I/O thread, from the first start() to free(): it serves every
 *   node whose agent runs, with libssh's non-blocking API and one poll()
 *   over each session's socket and each node's end of the socketpair
 *   whose other end the controller reads like any other transport.
 *
 * A node's libssh session belongs to one thread at a time: its worker,
 * then the I/O thread (handed over under priv->lock).
 *
 * The agent cache is checked on the node, by the same shell that execs
 * the agent, right before the exec (transport/ssh/nodecache.c: CACHE_CHECK): whoever else
 * can write the cache could make herd run their program as the job user.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "launcher/transport/ssh/nodecache.h"
#include "launcher/transport/ssh/sshsess.h"
#include "launcher/transport/transport.h"


/* 32 KiB: one SSH channel packet is at most 32 KiB of payload. */
#define SSH_PUMP_CHUNK (32 * 1024)

/* After herd hangs up (or the agent's output ends), how long the I/O
 * thread goes on flushing what herd sent last before it drops the
 * session: the agent then sees its input end either way. */
#define SSH_CLOSE_FLUSH_MS 2000
/* How long free() waits for the threads to end (see ssh_free_priv()). */
#define SSH_FREE_WAIT_MS 1000

/* A node, owned by the queue, then by one worker, then by the I/O
 * thread, which frees it. */
struct ssh_node {
	struct transport *t;
	char *host;
	int fd;			/* our end of the socketpair */
	/* The session's socket while a worker connects, else -1: written
	 * under priv->lock and cleared before libssh closes it, so that
	 * ssh_free_priv() never shuts down a number reused by another
	 * file. */
	int sock;
	ssh_session s;
	ssh_channel ch;		/* the agent's exec channel */
	/* Channel -> fd: the agent's bytes the controller has not taken
	 * yet (at most SSH_PUMP_CHUNK: the channel is not read while any
	 * are left, so SSH's window holds back the rest). */
	char *out;
	size_t out_off, out_len;
	/* fd -> channel: the controller's bytes the channel has not taken
	 * yet (its window was full); fd is not read while any are left. */
	char *in;
	size_t in_off, in_len;
	/* Set when either side ended: the node is flushed for at most
	 * SSH_CLOSE_FLUSH_MS from then, and freed. */
	bool closing;
	/* Serve it after the next poll() even without events: libssh may
	 * hold its bytes already (a node just handed over). */
	bool kick;
	/* libssh holds bytes for the session's socket (its own flag,
	 * ssh_get_poll_flags(), stays set after they are sent). */
	bool wpending;
	struct timespec close_by;
	struct ssh_node *next, *prev;
};

/* A list of nodes (doubly linked, so a node leaves it in O(1)). */
struct node_list {
	struct ssh_node *head, *tail;
	int count;
};

struct ssh_priv {
	struct sshsess_cfg cfg;
	int fanout;		/* ssh.fanout: the most workers at once */
	pthread_mutex_t lock;	/* everything below */
	pthread_cond_t cond;	/* a worker or the I/O thread ended */
	struct node_list queue;	/* waiting for a worker */
	struct node_list connecting; /* on a worker now */
	struct node_list ready;	/* handed to the I/O thread, not taken yet */
	int workers;		/* worker threads running */
	bool io_running;	/* the I/O thread runs */
	bool aborting;		/* ssh_free_priv() has begun */
	/* eventfd: wakes the I/O thread's own poll() (a new ready node, the
	 * end).  Not loop_wake(): that wakes a struct loop, and the I/O
	 * thread runs none (its poll() set is libssh's sessions); the
	 * controller's loop needs no wake, it reads the socketpairs. */
	int wake;
	pthread_t io_tid;
	pthread_t *tids;	/* workers not joined yet */
	int n_tids, cap_tids;
	/* agent-VERSION-HASH in ssh.agent_dir, checked on the node before
	 * every exec (transport/ssh/nodecache.h) */
	struct nodecache_bin agent;
	const char *agent_dir;	/* the spec's ssh.agent_dir (borrowed) */
};

static void list_push(struct node_list *l, struct ssh_node *n)
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

static void list_remove(struct node_list *l, struct ssh_node *n)
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
static void node_free(struct ssh_node *n)
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



/* ---- connect workers ----------------------------------------------------- */

/* On a worker: connects n, logs in, starts its agent and reads the
 * agent's first bytes into n->out.  Returns 0, or -1 after reporting the
 * failure on n->fd. */
static int node_connect(struct ssh_node *n)
{
	/* --pmix: the agent starts its PMIx server while herd waits for
	 * the other nodes' HELLOs, not after LAUNCH. */
	const char *agent_args[2 + sizeof(((struct transport_warm *)0)->argv) /
				       sizeof(char *)] = {"--stdio", "--pmix"};
	struct ssh_priv *priv = n->t->priv;
	int n_args = n->t->spec->launch.mode == SPEC_MODE_PMIX ? 2 : 1;
	struct transport_warm warm;
	struct herd_err err;
	char *cmd = NULL;
	bool stop;
	int status, rc = -1;

	herd_err_clear(&err);
	if (!(n->out = malloc(SSH_PUMP_CHUNK)) ||
	    !(n->s = sshsess_new(&priv->cfg, n->host, &err))) {
		transport_report(n->fd, "connect", "%s: out of memory",
				 n->host);
		goto out;
	}
	if ((rc = sshsess_connect(n->s, &err)) < 0) {
		/* "setup": herd's set-up (ssh.port, the host name), not the
		 * node's health; not held against the node. */
		transport_report(n->fd,
				 rc == SSHSESS_SETUP ? "setup" : "connect",
				 "%s: %s", n->host, err.text);
		rc = -1;
		goto out;
	}
	pthread_mutex_lock(&priv->lock);
	stop = priv->aborting;
	if (!stop)
		n->sock = ssh_get_fd(n->s);
	pthread_mutex_unlock(&priv->lock);
	if (stop)
		goto out; /* herd is ending */
	if (sshsess_host_key(&priv->cfg, n->s, n->host, NULL, &err) < 0) {
		transport_report(n->fd, "host key", "%s: %s", n->host,
				 err.text);
		goto out;
	}
	if (sshsess_auth(&priv->cfg, n->s, NULL, NULL, &err) < 0) {
		transport_report(n->fd, "auth", "%s: %s", n->host, err.text);
		goto out;
	}
	/* One remote command in the common case (every command costs a
	 * login shell on the node): check the cache and start the agent, or
	 * exit 97 when it must be uploaded, then upload it and try once
	 * more. */
	/* --warm...: the agent starts its warm interpreters at once. */
	transport_warm_args(n->t->spec, &warm);
	for (int i = 0; i < warm.argc; i++)
		agent_args[n_args++] = warm.argv[i];
	if (!(cmd = nodecache_start_command(priv->agent_dir, &priv->agent, NULL,
					    agent_args, (size_t)n_args))) {
		transport_report(n->fd, "agent", "%s: out of memory", n->host);
		goto out;
	}
	for (int tries = 0;; tries++) {
		char why[512];
		int got;

		n->ch = ssh_channel_new(n->s);
		if (!n->ch || ssh_channel_open_session(n->ch) != SSH_OK ||
		    ssh_channel_request_exec(n->ch, cmd) != SSH_OK) {
			transport_report(n->fd, "agent",
					 "%s: cannot start herd-agent: %s",
					 n->host, ssh_get_error(n->s));
			goto out;
		}
		/* The agent speaks first (HELLO); silence until the
		 * timeout is left to the controller to judge. */
		got = ssh_channel_read_timeout(n->ch, n->out, SSH_PUMP_CHUNK, 0,
					       NODECACHE_FIRST_BYTES_MS);
		if (got > 0) {
			n->out_len = (size_t)got;
			break;
		}
		/* Not ssh_channel_is_eof(): it stays false while stderr
		 * holds unread bytes (the reason line). */
		if (got < 0 || ssh_channel_poll(n->ch, 0) != SSH_EOF)
			break;
		status = ssh_channel_get_exit_status(n->ch);
		nodecache_reason(n->ch, why, sizeof(why));
		ssh_channel_close(n->ch);
		ssh_channel_free(n->ch);
		n->ch = NULL;
		if (status == NODECACHE_REFUSED) {
			transport_report(n->fd, "agent", "%s: %s", n->host,
					 why[0] ? why
						: "refused to start "
						  "herd-agent");
			goto out;
		}
		if (status == NODECACHE_MISSING && tries > 0) {
			transport_report(n->fd, "agent",
					 "%s: the uploaded herd-agent does not "
					 "pass its check: %s",
					 n->host, why[0] ? why : "(no reason)");
			goto out;
		}
		if (status != NODECACHE_MISSING) {
			/* 126: the shell could not exec a checked file. */
			transport_report(
			    n->fd, "agent",
			    "%s: herd-agent exited at once "
			    "(status %d)%s%s%s",
			    n->host, status, why[0] ? ": " : "", why,
			    status == 126 ? " (is ssh.agent_dir on a noexec "
					    "file system?)"
					  : "");
			goto out;
		}
		if (nodecache_upload(n->s, priv->agent_dir, &priv->agent, why,
				     sizeof(why)) < 0) {
			transport_report(n->fd, "agent", "%s: %s", n->host,
					 why);
			goto out;
		}
	}
	rc = 0;
out:
	free(cmd);
	return rc;
}

static void wake_io(struct ssh_priv *priv)
{
	uint64_t one = 1;

	if (write(priv->wake, &one, sizeof(one)) < 0) {
		/* the counter is full: the I/O thread wakes anyway */
	}
}

/* A worker: takes queued nodes until there are none, then ends. */
static void *worker_main(void *arg)
{
	struct ssh_priv *priv = arg;

	pthread_mutex_lock(&priv->lock);
	while (!priv->aborting && priv->queue.head) {
		struct ssh_node *n = priv->queue.head;
		int rc;

		list_remove(&priv->queue, n);
		list_push(&priv->connecting, n);
		pthread_mutex_unlock(&priv->lock);
		rc = node_connect(n);
		pthread_mutex_lock(&priv->lock);
		list_remove(&priv->connecting, n);
		n->sock = -1; /* libssh may close it from here on */
		if (rc == 0 && !priv->aborting) {
			list_push(&priv->ready, n);
			wake_io(priv);
			continue;
		}
		pthread_mutex_unlock(&priv->lock);
		node_free(n);
		pthread_mutex_lock(&priv->lock);
	}
	priv->workers--;
	pthread_cond_broadcast(&priv->cond);
	pthread_mutex_unlock(&priv->lock);
	return NULL;
}

/* ---- the I/O thread ------------------------------------------------------ */

static long ms_until(const struct timespec *when)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (when->tv_sec - now.tv_sec) * 1000 +
	       (when->tv_nsec - now.tv_nsec) / 1000000;
}

static void ms_from_now(struct timespec *when, long ms)
{
	clock_gettime(CLOCK_MONOTONIC, when);
	when->tv_sec += ms / 1000;
	when->tv_nsec += (ms % 1000) * 1000000;
	if (when->tv_nsec >= 1000000000) {
		when->tv_sec++;
		when->tv_nsec -= 1000000000;
	}
}

/* Sends what libssh holds for n's socket, without blocking.  Returns 0
 * (n->wpending says whether bytes are left), or -1 when the session is
 * dead. */
static int node_flush(struct ssh_node *n)
{
	int rc = ssh_blocking_flush(n->s, 0);

	if (rc == SSH_ERROR)
		return -1;
	n->wpending = rc == SSH_AGAIN;
	return 0;
}

/* Either side ended: the controller sees EOF now, the agent its input
 * end once libssh has sent what is left (at most SSH_CLOSE_FLUSH_MS). */
static void node_begin_close(struct ssh_node *n)
{
	n->closing = true;
	n->kick = true; /* freed at once when nothing is left to send */
	ms_from_now(&n->close_by, SSH_CLOSE_FLUSH_MS);
	if (n->ch) {
		ssh_channel_send_eof(n->ch);
		ssh_channel_close(n->ch);
	}
	close(n->fd);
	n->fd = -1;
	if (node_flush(n) < 0)
		n->wpending = false; /* nothing more will go out */
}

/* What poll() should wait for on n's session socket (ps) and its end of
 * the socketpair (pf). */
static void node_events(struct ssh_node *n, struct pollfd *ps,
			struct pollfd *pf)
{
	ps->fd = ssh_get_fd(n->s);
	ps->events = n->wpending ? POLLOUT : 0;
	ps->revents = 0;
	pf->fd = n->fd;
	pf->events = 0;
	pf->revents = 0;
	if (n->closing)
		return;
	/* The channel is read only when its bytes can go on at once, so
	 * that SSH's window, not a buffer here, holds back a slow reader. */
	if (n->out_off < n->out_len)
		pf->events |= POLLOUT;
	else
		ps->events |= POLLIN;
	if (n->in_off == n->in_len)
		pf->events |= POLLIN;
	/* A session socket that hung up is left to the channel reads: poll
	 * would report it at once, forever. */
	if (!ps->events)
		ps->fd = -1;
}

/* Agent -> controller: what is buffered first, then the channel, until
 * either would block.  Returns -1 when this direction ended. */
static int node_to_ctl(struct ssh_node *n)
{
	for (;;) {
		int got;

		while (n->out_off < n->out_len) {
			ssize_t w = write(n->fd, n->out + n->out_off,
					  n->out_len - n->out_off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && errno == EAGAIN)
				return 0;
			if (w <= 0)
				return -1; /* herd hung up */
			n->out_off += (size_t)w;
		}
		n->out_off = n->out_len = 0;
		/* stderr is rare (an agent's dying words): say it here. */
		while ((got = ssh_channel_read_nonblocking(
			    n->ch, n->out, SSH_PUMP_CHUNK, 1)) > 0)
			fprintf(stderr, "herd-agent@%s: %.*s", n->host, got,
				n->out);
		got = ssh_channel_read_nonblocking(n->ch, n->out,
						   SSH_PUMP_CHUNK, 0);
		if (got == 0)
			return 0;
		if (got < 0)
			return -1; /* SSH_EOF: the agent ended; or an error */
		n->out_len = (size_t)got;
	}
}

/* Controller -> agent: one read when nothing is held back, then as much
 * as the channel's window takes.  Returns -1 when this direction
 * ended. */
static int node_to_agent(struct ssh_node *n, short frev)
{
	if (n->in_off == n->in_len && (frev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t got = read(n->fd, n->in, SSH_PUMP_CHUNK);

		if (got == 0 ||
		    (got < 0 && errno != EAGAIN && errno != EINTR))
			return -1; /* herd hung up */
		if (got > 0) {
			n->in_off = 0;
			n->in_len = (size_t)got;
		}
	}
	if (n->in_off < n->in_len) {
		uint32_t room = ssh_channel_window_size(n->ch);
		size_t len = n->in_len - n->in_off;
		int w;

		if (len > room)
			len = room;
		if (len == 0)
			return 0; /* the window opens with a later packet */
		w = ssh_channel_write(n->ch, n->in + n->in_off, (uint32_t)len);
		if (w < 0)
			return -1;
		n->in_off += (size_t)w;
	}
	return 0;
}

/* Serves n after poll().  Returns -1 when n is done and can be freed.
 *
 * Any libssh call may read the session's socket and leave channel data
 * or a window adjustment in libssh's buffers, where poll() cannot see
 * it: so once anything happened to n, both directions run until the
 * channel is drained (node_to_ctl() ends with a read that found nothing)
 * and nothing held back could go on. */
static int node_serve(struct ssh_node *n, short srev, short frev)
{
	if (n->closing && ms_until(&n->close_by) <= 0)
		return -1;
	if (!srev && !frev && !n->kick)
		return 0;
	n->kick = false;
	if ((srev & (POLLOUT | POLLERR | POLLHUP)) && node_flush(n) < 0)
		return -1;
	if (n->closing)
		return n->wpending ? 0 : -1;
	/* A few rounds at most: a session blocked by a key re-exchange
	 * takes nothing, and its next packets wake poll() anyway. */
	for (int round = 0; round < 4; round++) {
		if (node_to_agent(n, frev) < 0 || node_to_ctl(n) < 0) {
			node_begin_close(n);
			return n->wpending ? 0 : -1;
		}
		frev = 0;
		if (n->in_off == n->in_len ||
		    ssh_channel_window_size(n->ch) == 0)
			break;
	}
	/* What the writes and reads queued (data, window adjustments). */
	if (node_flush(n) < 0) {
		node_begin_close(n);
		return -1;
	}
	return 0;
}

/* Takes a node from a worker: its session becomes non-blocking. */
static int node_adopt(struct ssh_node *n)
{
	int fl = fcntl(n->fd, F_GETFL);

	if (fl < 0 || fcntl(n->fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    !(n->in = malloc(SSH_PUMP_CHUNK)))
		return -1;
	ssh_set_blocking(n->s, 0);
	n->kick = true;
	return 0;
}

static void *io_main(void *arg)
{
	struct ssh_priv *priv = arg;
	struct node_list served = {0};
	struct pollfd *pfd = NULL;
	size_t cap = 0;
	struct timespec abort_by = {0};
	bool aborting = false;

	for (;;) {
		struct ssh_node *n, *next;
		long timeout = -1;
		size_t np = 1;

		pthread_mutex_lock(&priv->lock);
		while ((n = priv->ready.head)) {
			list_remove(&priv->ready, n);
			list_push(&served, n);
			if (node_adopt(n) < 0)
				node_begin_close(n);
		}
		if (priv->aborting && !aborting) {
			/* The controller closed every socket: each node
			 * hangs up; what has not after this is dropped. */
			aborting = true;
			ms_from_now(&abort_by, SSH_FREE_WAIT_MS / 2);
		}
		pthread_mutex_unlock(&priv->lock);
		if (aborting && (!served.head || ms_until(&abort_by) <= 0))
			break;
		if (cap < 1 + 2 * (size_t)served.count) {
			size_t ncap = 2 * (1 + 2 * (size_t)served.count);
			struct pollfd *p = realloc(pfd, ncap * sizeof(*p));

			if (!p) {
				/* Out of memory: wait and try again. */
				poll(NULL, 0, 100);
				continue;
			}
			pfd = p;
			cap = ncap;
		}
		pfd[0] = (struct pollfd){.fd = priv->wake, .events = POLLIN};
		for (n = served.head; n; n = n->next, np += 2) {
			node_events(n, &pfd[np], &pfd[np + 1]);
			if (n->kick)
				timeout = 0;
			else if (n->closing) {
				long left = ms_until(&n->close_by);

				left = left < 0 ? 0 : left;
				if (timeout < 0 || left < timeout)
					timeout = left;
			}
		}
		if (aborting) {
			long left = ms_until(&abort_by);

			left = left < 0 ? 0 : left;
			if (timeout < 0 || left < timeout)
				timeout = left;
		}
		if (poll(pfd, np, (int)timeout) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN) {
			uint64_t count;

			if (read(priv->wake, &count, sizeof(count)) < 0) {
				/* nothing to drain */
			}
		}
		np = 1;
		for (n = served.head; n; n = next, np += 2) {
			next = n->next;
			if (node_serve(n, pfd[np].revents, pfd[np + 1].revents) <
			    0) {
				list_remove(&served, n);
				node_free(n);
			}
		}
	}
	while (served.head) {
		struct ssh_node *n = served.head;

		list_remove(&served, n);
		node_free(n);
	}
	free(pfd);
	pthread_mutex_lock(&priv->lock);
	priv->io_running = false;
	pthread_cond_broadcast(&priv->cond);
	pthread_mutex_unlock(&priv->lock);
	return NULL;
}

/* ---- the transport ------------------------------------------------------- */

/* Workers are joined, not detached: a thread's OpenSSL state (its random
 * generators) is freed only when it has ended, so herd must not exit
 * while one is still on its way out.  Workers that ended are joined here,
 * so a long job that reconnects keeps no dead stacks. */
static int keep_tid(struct ssh_priv *priv, pthread_t tid)
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

static int ssh_start(struct transport *t, const char *host,
		     struct herd_err *err)
{
	struct ssh_priv *priv = t->priv;
	struct ssh_node *n = calloc(1, sizeof(*n));
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
	list_push(&priv->queue, n);
	/* As many workers as there are nodes to connect, up to the fan-out. */
	spawn = priv->workers < priv->fanout &&
		priv->workers < priv->queue.count + priv->connecting.count;
	if (spawn)
		priv->workers++;
	pthread_mutex_unlock(&priv->lock);
	if (!spawn)
		return sv[0];
	if (start_thread(&tid, worker_main, priv) != 0) {
		bool orphan;

		pthread_mutex_lock(&priv->lock);
		priv->workers--;
		/* With no worker left, nobody would take the node. */
		orphan = priv->workers == 0;
		if (orphan)
			list_remove(&priv->queue, n);
		pthread_mutex_unlock(&priv->lock);
		if (orphan) {
			close(sv[0]);
			node_free(n);
			return herd_errprintf(err,
					      "cannot start a thread for %s",
					      host);
		}
		return sv[0];
	}
	if (keep_tid(priv, tid) < 0)
		pthread_detach(tid); /* out of memory: not worth failing */
	return sv[0];
}

static void ssh_free_priv(struct transport *t)
{
	struct ssh_priv *priv = t->priv;
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
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += SSH_FREE_WAIT_MS / 1000;
	pthread_mutex_lock(&priv->lock);
	priv->aborting = true;
	queued = priv->queue;
	priv->queue = (struct node_list){0};
	for (struct ssh_node *n = priv->connecting.head; n; n = n->next)
		if (n->sock >= 0)
			shutdown(n->sock, SHUT_RDWR);
	wake_io(priv);
	while ((priv->workers > 0 || priv->io_running) &&
	       pthread_cond_timedwait(&priv->cond, &priv->lock, &deadline) ==
		   0)
		;
	left = priv->workers > 0 || priv->io_running;
	pthread_mutex_unlock(&priv->lock);
	while (queued.head) {
		struct ssh_node *n = queued.head;

		list_remove(&queued, n);
		node_free(n);
	}
	t->priv = NULL;
	if (left) {
		transport_set_threads_left();
		return;
	}
	/* Every thread is past its last use of the shared state; wait
	 * (bounded) until each has ended and freed its own. */
	for (int i = 0; i < priv->n_tids; i++)
		if (pthread_timedjoin_np(priv->tids[i], NULL, &deadline) != 0)
			return;
	if (pthread_timedjoin_np(priv->io_tid, NULL, &deadline) != 0)
		return;
	free(priv->tids);
	close(priv->wake);
	sshsess_cfg_free(&priv->cfg);
	pthread_cond_destroy(&priv->cond);
	pthread_mutex_destroy(&priv->lock);
	free(priv);
}

static int ssh_init_priv(struct transport *t, struct herd_err *err)
{
	struct ssh_priv *priv = calloc(1, sizeof(*priv));
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
	if (start_thread(&priv->io_tid, io_main, priv) != 0) {
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

static int ssh_start_first(struct transport *t, const char *host,
			   struct herd_err *err)
{
	if (!t->priv && ssh_init_priv(t, err) < 0)
		return -1;
	return ssh_start(t, host, err);
}

const struct transport_ops transport_ssh_ops = {
	.name = "ssh",
	.start = ssh_start_first,
	.free = ssh_free_priv,
};
