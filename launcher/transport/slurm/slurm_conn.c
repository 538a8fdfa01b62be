/* transport/slurm/slurm_conn.c — the agents' listener of the Slurm
 * transport: accepting (a bounded pool of unauthenticated connections,
 * preauth.h), the handshake that proves the job's secret, and the relay
 * of bytes between an agent's TCP connection and its node's socketpair;
 * see slurm.c for why it is built so. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/transport/slurm/slurm_int.h"

/* ---- the listener ------------------------------------------------------ */

/* The local address this host uses to reach host: a UDP socket
 * "connected" to it sends nothing, but the kernel picks the route and
 * the source address the agents can reach us on. */
static int route_source(const char *host, struct sockaddr_storage *ss,
			socklen_t *len, struct herd_err *err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_DGRAM}, *ai = NULL;
	int fd = -1, rc;

	rc = getaddrinfo(host, "9", &hints, &ai);
	if (rc != 0)
		return herd_errprintf(err, "cannot resolve %s: %s", host,
				      gai_strerror(rc));
	fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	*len = sizeof(*ss);
	rc = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		     getsockname(fd, (struct sockaddr *)ss, len) == 0
		 ? 0
		 : herd_errprintf(err, "no route to %s: %s", host,
				  strerror(errno));
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

static bool is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)
				  ->sin_addr.s_addr) >>
			24) == 127;
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a =
		    &((const struct sockaddr_in6 *)ss)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* The address to listen on: the route source towards the first node
 * registered so far that is reached over a real interface.  A node that
 * is this host (its name is 127.0.1.1 on Debian) gives a loopback source
 * the other nodes cannot connect to; only when every node gives one
 * (all of them are this host) is loopback the answer. */
static int listen_source(struct tslurm_priv *priv, struct sockaddr_storage *ss,
			 socklen_t *len, struct herd_err *err)
{
	struct sockaddr_storage lo = {0};
	socklen_t lo_len = 0;
	struct herd_err first;

	herd_err_clear(&first);
	for (size_t i = 0; i < priv->n_nodes; i++) {
		struct herd_err e;

		herd_err_clear(&e);
		if (route_source(priv->nodes[i]->host, ss, len, &e) < 0) {
			if (!first.text[0])
				first = e;
			continue;
		}
		if (!is_loopback(ss))
			return 0;
		if (!lo_len) {
			lo = *ss;
			lo_len = *len;
		}
	}
	if (lo_len) {
		*ss = lo;
		*len = lo_len;
		return 0;
	}
	return herd_errprintf(err, "%s",
			      first.text[0] ? first.text : "no node to reach");
}

static void on_accept(struct loop *loop, int fd, short revents, void *arg);

int sconn_listen(struct tslurm_priv *priv, struct herd_err *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char host[NI_MAXHOST], port[NI_MAXSERV];
	int fd = -1, rc;

	if (listen_source(priv, &ss, &len, err) < 0)
		return -1;
	/* An ephemeral port on that address. */
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	if (!priv->loop)
		return herd_errprintf(err, "the slurm transport needs the "
					   "controller's event loop");
	fd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    listen(fd, SLURM_LISTEN_BACKLOG) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		herd_errprintf(err, "cannot listen for agents: %s",
			       strerror(errno));
		goto fail;
	}
	rc = getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port,
			 sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	if (rc != 0) {
		herd_errprintf(err, "getnameinfo: %s", gai_strerror(rc));
		goto fail;
	}
	snprintf(priv->addr, sizeof(priv->addr), "%s:%s", host, port);
	if (!priv->pool) {
		herd_errprintf(err, "out of memory");
		goto fail;
	}
	if (loop_fd_add(priv->loop, fd, POLLIN, on_accept, priv) < 0) {
		herd_errprintf(err, "cannot watch the listener: %s",
			       strerror(errno));
		goto fail;
	}
	priv->listen_fd = fd;
	priv->accepting = true;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

/* ---- one connection ---------------------------------------------------- */

static void refused_summary(struct loop *loop, void *arg)
{
	struct tslurm_priv *priv = arg;
	unsigned long n = ratelog_flush(&priv->refused, loop_now_ms());

	(void)loop;
	priv->refused_timer = 0;
	if (n)
		fprintf(stderr,
			"herd: slurm: rejected %lu more connection%s (the "
			"latest from %s); at most one such line every %d s\n",
			n, n == 1 ? "" : "s", priv->refused_last,
			SLURM_REFUSED_LOG_MS / 1000);
}

/* Says (rate-limited) that a connection was refused and why. */
static void log_refused(struct tslurm_priv *priv, const char *peer,
			const char *why)
{
	int64_t now = loop_now_ms();
	unsigned long left_out = 0;

	snprintf(priv->refused_last, sizeof(priv->refused_last), "%s: %s", peer,
		 why);
	if (ratelog_hit(&priv->refused, now, &left_out)) {
		fprintf(stderr,
			"herd: slurm: rejected a connection from %s: %s", peer,
			why);
		if (left_out)
			fprintf(stderr,
				" (and %lu more not shown since the "
				"last such line)",
				left_out);
		fputc('\n', stderr);
		return;
	}
	if (!priv->refused_timer) {
		priv->refused_timer = loop_timer_add(
		    priv->loop, ratelog_due(&priv->refused) - now,
		    refused_summary, priv);
		if (priv->refused_timer < 0)
			priv->refused_timer = 0; /* the count waits for free */
	}
}

/* Closes a connection in any state and forgets it. */
void sconn_close(struct sconn *sc)
{
	struct tslurm_priv *priv = sc->priv;

	if (sc->pooled)
		preauth_del(priv->pool, sc);
	if (sc->deadline)
		loop_timer_del(priv->loop, sc->deadline);
	loop_fd_del(priv->loop, sc->fd);
	close(sc->fd);
	if (sc->pair >= 0) {
		loop_fd_del(priv->loop, sc->pair);
		close(sc->pair);
	}
	if (sc->prev)
		sc->prev->next = sc->next;
	else
		priv->conns = sc->next;
	if (sc->next)
		sc->next->prev = sc->prev;
	auth_ctl_wipe(&sc->hs);
	free(sc->up);
	free(sc->down);
	free(sc);
}

static void conn_refuse(struct sconn *sc, const char *why)
{
	log_refused(sc->priv, sc->peer, why);
	sconn_close(sc);
}

/* Hands the socketpair end of a started node named name to the caller,
 * or -1 when no such node waits for an agent. */
static int claim_node(struct tslurm_priv *priv, const char *name)
{
	int fd = -1;

	for (size_t i = 0; i < priv->n_nodes; i++) {
		struct snode *n = priv->nodes[i];

		if (n->state == SNODE_STARTED && !strcmp(n->host, name)) {
			snode_set_state(n, SNODE_CONNECTED);
			fd = n->fd;
			n->fd = -1;
			break;
		}
	}
	return fd;
}

/* ---- the relay: agent <-> the node's socketpair ----------------------- */

/* What each side waits for: read while its buffer is empty, write while
 * the other's holds bytes (one chunk in flight per direction is the
 * back-pressure: a slow controller stops reads from the agent). */
static void relay_watch(struct sconn *sc)
{
	struct loop *loop = sc->priv->loop;

	loop_fd_events(loop, sc->fd,
		       (sc->up->len == 0 ? POLLIN : 0) |
			   (sc->down->len ? POLLOUT : 0));
	loop_fd_events(loop, sc->pair,
		       (sc->down->len == 0 ? POLLIN : 0) |
			   (sc->up->len ? POLLOUT : 0));
}

/* Moves what it can from `from` through b to `to` without waiting.
 * Returns 0, or -1 when `from` ended or either side failed. */
static int relay_move(int from, int to, struct relay_buf *b)
{
	for (;;) {
		ssize_t n;

		if (b->len) {
			n = send(to, b->data + b->off, b->len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 0;
			if (n <= 0)
				return -1;
			b->off += (size_t)n;
			b->len -= (size_t)n;
			continue;
		}
		b->off = 0;
		n = recv(from, b->data, sizeof(b->data), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0)
			return -1;
		b->len = (size_t)n;
	}
}

/* Either side may be ready; either ending ends both (the controller sees
 * its socket close: the node is lost; the agent sees EOF: it stops). */
static void on_relay(struct loop *loop, int fd, short revents, void *arg)
{
	struct sconn *sc = arg;

	(void)loop;
	(void)fd;
	(void)revents;
	if (relay_move(sc->fd, sc->pair, sc->up) < 0 ||
	    relay_move(sc->pair, sc->fd, sc->down) < 0) {
		/* Last bytes towards the side still there, best effort. */
		if (sc->up->len)
			(void)!send(sc->pair, sc->up->data + sc->up->off,
				    sc->up->len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sc->down->len)
			(void)!send(sc->fd, sc->down->data + sc->down->off,
				    sc->down->len, MSG_DONTWAIT | MSG_NOSIGNAL);
		sconn_close(sc);
		return;
	}
	relay_watch(sc);
}

/* ---- the handshake ------------------------------------------------------ */

/* The agent proved the secret and named its node. */
static void handshake_done(struct sconn *sc)
{
	struct tslurm_priv *priv = sc->priv;
	int pair = claim_node(priv, sc->hs.name);

	if (pair < 0) {
		/* Only a holder of the secret gets here: not rate-limited. */
		fprintf(stderr,
			"herd: slurm: rejected an agent from %s: node '%s' is "
			"not waiting for one\n",
			sc->peer, sc->hs.name);
		sconn_close(sc);
		return;
	}
	sc->pair = pair;
	auth_ctl_wipe(&sc->hs);
	sc->up = malloc(sizeof(*sc->up));
	sc->down = malloc(sizeof(*sc->down));
	if (!sc->up || !sc->down || fcntl(pair, F_SETFL, O_NONBLOCK) < 0 ||
	    loop_fd_add(priv->loop, pair, POLLIN, on_relay, sc) < 0 ||
	    loop_fd_add(priv->loop, sc->fd, POLLIN, on_relay, sc) < 0) {
		transport_report(pair, "connect",
				 "%s: out of memory for relaying its agent",
				 sc->hs.name);
		sconn_close(sc);
		return;
	}
	sc->up->off = sc->up->len = 0;
	sc->down->off = sc->down->len = 0;
	relay_watch(sc);
}

/* Runs the handshake as far as the socket allows.  Returns -1 when the
 * connection is gone (refused or rejected), 1 when it left the pool
 * (proven or done), 0 while it is still unauthenticated. */
static int handshake_step(struct sconn *sc)
{
	struct tslurm_priv *priv = sc->priv;
	struct herd_err err;
	int rc;

	herd_err_clear(&err);
	rc = auth_ctl_io(&sc->hs, sc->fd, &priv->secret, &err);
	if (rc < 0) {
		conn_refuse(sc, err.text);
		return -1;
	}
	if (sc->pooled && auth_ctl_proven(&sc->hs)) {
		preauth_del(priv->pool, sc);
		sc->pooled = false;
	}
	if (rc == 1) {
		loop_timer_del(priv->loop, sc->deadline);
		sc->deadline = 0;
		handshake_done(sc);
		return 1;
	}
	loop_fd_events(priv->loop, sc->fd,
		       auth_ctl_wants_write(&sc->hs) ? POLLOUT : POLLIN);
	return sc->pooled ? 0 : 1;
}

static void on_handshake(struct loop *loop, int fd, short revents, void *arg)
{
	(void)loop;
	(void)fd;
	(void)revents;
	handshake_step(arg);
}

static void on_deadline(struct loop *loop, void *arg)
{
	struct sconn *sc = arg;
	char why[96];

	(void)loop;
	sc->deadline = 0;
	snprintf(why, sizeof(why), "no %s within %d s",
		 auth_ctl_waiting_for(&sc->hs), SLURM_PREAUTH_MS / 1000);
	conn_refuse(sc, why);
}

/* Makes room in the pool for a connection from src: each connection the
 * bounds pick first gets a last look at its socket (an agent whose answer
 * is already there passes instead of being dropped). */
static void pool_make_room(struct tslurm_priv *priv,
			   const struct preauth_src *src, const char *peer)
{
	struct sconn *victim;

	while ((victim = preauth_victim(priv->pool, src))) {
		char why[NI_MAXHOST + 120];
		bool same_src = !memcmp(&victim->src, src, sizeof(*src));

		if (handshake_step(victim) != 0)
			continue;
		if (same_src)
			snprintf(why, sizeof(why),
				 "dropped for a newer one: more than %d "
				 "unauthenticated connections from one address",
				 SLURM_PREAUTH_PER_SOURCE);
		else
			snprintf(why, sizeof(why),
				 "dropped for one from %s: more than %d "
				 "unauthenticated connections in all",
				 peer, SLURM_PREAUTH_MAX);
		conn_refuse(victim, why);
	}
}

static void conn_accepted(struct tslurm_priv *priv, int fd,
			  const struct sockaddr_storage *ss, socklen_t len)
{
	char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
	struct sconn *sc = NULL;
	struct preauth_src src;
	struct herd_err err;
	int one = 1;

	herd_err_clear(&err);
	getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), port,
		    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	preauth_src_of(&src, (const struct sockaddr *)ss);
	pool_make_room(priv, &src, host);
	sc = calloc(1, sizeof(*sc));
	if (!sc) {
		close(fd);
		return;
	}
	snprintf(sc->peer, sizeof(sc->peer), "%s:%s", host, port);
	sc->priv = priv;
	sc->fd = fd;
	sc->pair = -1;
	sc->src = src;
	sc->next = priv->conns;
	if (sc->next)
		sc->next->prev = sc;
	priv->conns = sc;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (auth_ctl_begin(&sc->hs, &err) < 0)
		goto refuse;
	if (preauth_add(priv->pool, &src, sc, loop_now_ms()) < 0) {
		herd_errprintf(&err, "no room among unauthenticated "
				     "connections");
		goto refuse;
	}
	sc->pooled = true;
	if (loop_fd_add(priv->loop, fd, POLLIN, on_handshake, sc) < 0)
		goto refuse;
	sc->deadline =
	    loop_timer_add(priv->loop, SLURM_PREAUTH_MS, on_deadline, sc);
	if (sc->deadline < 0) {
		sc->deadline = 0;
		goto refuse;
	}
	/* The challenge goes out now, before anything else is read. */
	handshake_step(sc);
	return;
refuse:
	conn_refuse(sc, err.text[0] ? err.text : "out of memory");
}

static void on_resume(struct loop *loop, void *arg)
{
	struct tslurm_priv *priv = arg;

	priv->resume_timer = 0;
	if (priv->listen_fd >= 0)
		loop_fd_events(loop, priv->listen_fd, POLLIN);
}

static void on_accept(struct loop *loop, int fd, short revents, void *arg)
{
	struct tslurm_priv *priv = arg;

	(void)revents;
	for (int k = 0; k < SLURM_ACCEPT_BATCH; k++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int c = accept4(fd, (struct sockaddr *)&ss, &len,
				SOCK_CLOEXEC | SOCK_NONBLOCK);
		struct sconn *oldest;

		if (c >= 0) {
			conn_accepted(priv, c, &ss, len);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS &&
		    errno != ENOMEM)
			return; /* EAGAIN: drained */
		/* Out of fds: an unauthenticated connection makes room;
		 * with none, accepting pauses (the poll would spin). */
		oldest = preauth_oldest(priv->pool, NULL);
		if (oldest) {
			if (handshake_step(oldest) == 0)
				conn_refuse(oldest,
					    "dropped: herd is out of file "
					    "descriptors");
			continue;
		}
		if (!priv->resume_timer) {
			loop_fd_events(loop, fd, 0);
			priv->resume_timer = loop_timer_add(
			    loop, SLURM_ACCEPT_PAUSE_MS, on_resume, priv);
		}
		return;
	}
}

/* At free: what the controller queued for the agent (its STOP) is sent
 * within SLURM_RELAY_FLUSH_MS, then the connection is closed: the agent
 * sees EOF and stops. */
void sconn_flush(struct sconn *sc, int64_t deadline)
{
	struct relay_buf *b = sc->down;

	while (b) {
		struct pollfd p = {.fd = sc->fd, .events = POLLOUT};
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (!b->len) {
			b->off = 0;
			n = recv(sc->pair, b->data, sizeof(b->data),
				 MSG_DONTWAIT);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return;
			b->len = (size_t)n;
		}
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return;
		n = send(sc->fd, b->data + b->off, b->len,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return;
		b->off += (size_t)n;
		b->len -= (size_t)n;
	}
}
