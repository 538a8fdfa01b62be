/* transport/ssh/ssh_io.c — the I/O thread of the SSH transport: one
 * poll() over every served node's session and socketpair end, libssh's
 * non-blocking API between them; see ssh.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "herd/text.h"
#include "launcher/transport/ssh/ssh_int.h"

/* ---- the I/O thread ------------------------------------------------------ */

static long ms_until(const struct timespec *when)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (when->tv_sec - now.tv_sec) * 1000 +
	       (when->tv_nsec - now.tv_nsec) / 1000000;
}

/* Sends what libssh holds for n's socket, without blocking.  Returns 0
 * (n->wpending says whether bytes are left), or -1 when the session is
 * dead. */
static int node_flush(struct tssh_node *n)
{
	int rc = ssh_blocking_flush(n->s, 0);

	if (rc == SSH_ERROR)
		return -1;
	n->wpending = rc == SSH_AGAIN;
	return 0;
}

/* Either side ended: the controller sees EOF now, the agent its input
 * end once libssh has sent what is left (at most SSH_CLOSE_FLUSH_MS). */
static void node_begin_close(struct tssh_node *n)
{
	n->closing = true;
	n->kick = true; /* freed at once when nothing is left to send */
	loop_time_in(CLOCK_MONOTONIC, &n->close_by, SSH_CLOSE_FLUSH_MS);
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
static void node_events(struct tssh_node *n, struct pollfd *ps,
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
static int node_to_ctl(struct tssh_node *n)
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
		/* stderr is rare (an agent's dying words): say it here, as
		 * another machine's text. */
		while ((got = ssh_channel_read_nonblocking(
			    n->ch, n->out, SSH_PUMP_CHUNK, 1)) > 0) {
			char prefix[512];

			snprintf(prefix, sizeof(prefix),
				 "herd-agent@%s: ", n->host);
			herd_text_say_lines(stderr, prefix, n->out,
					    (size_t)got);
		}
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
static int node_to_agent(struct tssh_node *n, short frev)
{
	if (n->in_off == n->in_len && (frev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t got = read(n->fd, n->in, SSH_PUMP_CHUNK);

		if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR))
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
static int node_serve(struct tssh_node *n, short srev, short frev)
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
static int node_adopt(struct tssh_node *n)
{
	int fl = fcntl(n->fd, F_GETFL);

	if (fl < 0 || fcntl(n->fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    !(n->in = malloc(SSH_PUMP_CHUNK)))
		return -1;
	ssh_set_blocking(n->s, 0);
	n->kick = true;
	return 0;
}

void *tssh_io_main(void *arg)
{
	struct tssh_priv *priv = arg;
	struct node_list served = {0};
	struct pollfd *pfd = NULL;
	size_t cap = 0;
	struct timespec abort_by = {0};
	bool aborting = false;

	for (;;) {
		struct tssh_node *n, *next;
		long timeout = -1;
		size_t np = 1;

		pthread_mutex_lock(&priv->lock);
		while ((n = priv->ready.head)) {
			tssh_list_remove(&priv->ready, n);
			tssh_list_push(&served, n);
			if (node_adopt(n) < 0)
				node_begin_close(n);
		}
		if (priv->aborting && !aborting) {
			/* The controller closed every socket: each node
			 * hangs up; what has not after this is dropped. */
			aborting = true;
			loop_time_in(CLOCK_MONOTONIC, &abort_by,
				     SSH_FREE_WAIT_MS / 2);
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
			if (node_serve(n, pfd[np].revents,
				       pfd[np + 1].revents) < 0) {
				tssh_list_remove(&served, n);
				tssh_node_free(n);
			}
		}
	}
	while (served.head) {
		struct tssh_node *n = served.head;

		tssh_list_remove(&served, n);
		tssh_node_free(n);
	}
	free(pfd);
	pthread_mutex_lock(&priv->lock);
	priv->io_running = false;
	pthread_cond_broadcast(&priv->cond);
	pthread_mutex_unlock(&priv->lock);
	return NULL;
}
