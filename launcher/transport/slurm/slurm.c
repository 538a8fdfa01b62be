/* transport/slurm/slurm.c — one herd-agent per node as the tasks of srun job
 * steps inside the Slurm allocation herd runs in (DESIGN.md "connect").
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
 * herd's own agents (issue 10 item 6: 600 idle connections once made a
 * spare's agent time out).  Everything runs on the controller's loop, no
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
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "herd/auth.h"
#include "herd/hostlist.h"
#include "herd/loop.h"
#include "herd/preauth.h"
#include "herd/proc.h"
#include "herd/ratelog.h"
#include "launcher/transport/transport.h"

extern char **environ;

/* 32 KiB each way per agent: one read of a relayed stream.  Half of a
 * proto frame's output chunk; a frame simply takes two turns. */
#define SLURM_RELAY_BUF (32 * 1024)
/* srun's output lines are passed through cut at this many bytes. */
#define SLURM_LINE_MAX 1024
/* The kernel's queue of connections not accepted yet.  herd drains it on
 * every turn of the loop, so it only has to absorb a burst (a step of
 * many nodes starting at once). */
#define SLURM_LISTEN_BACKLOG 1024
/* Connections accepted per turn of the loop: a flood of strangers is
 * taken in slices, with the answers of connections already accepted
 * (herd's agents among them) read in between. */
#define SLURM_ACCEPT_BATCH 64
/* Pre-auth deadline: from accept to the agent's node name.  An agent
 * answers the challenge (sent at accept) within one round trip and names
 * its node after one more: milliseconds on a cluster network, so 3 s
 * leaves room for a loaded node and still frees a stranger's slot fast
 * (sshd's LoginGraceTime is 120 s because a person may be typing; here
 * nobody types).  An agent whose connection is dropped connects again
 * (agent/main.c), within its own AUTH_TIMEOUT_MS. */
#define SLURM_PREAUTH_MS 3000
/* Unauthenticated connections held at once: in all, and from one source
 * address (preauth.h says which one goes when a bound is hit).  A few
 * KiB each; 512 is far below the fd limit herd needs anyway, above the
 * agents of a 500-node step connecting in the same instant, and the
 * per-source bound keeps one flooding host (a hostile user on herd's own
 * node, say) to an eighth of it.  Legitimate agents from one address are
 * one per step, so 64 is never reached by them. */
#define SLURM_PREAUTH_MAX	 512
#define SLURM_PREAUTH_PER_SOURCE 64
/* "rejected a connection" lines: the first 5 as they come, then at most
 * one per 10 s saying how many were left out (3,000 strangers: a few
 * lines, not 3,000). */
#define SLURM_REFUSED_LOG_BURST 5
#define SLURM_REFUSED_LOG_MS	10000
/* Out of fds with nothing to drop: accepting pauses this long. */
#define SLURM_ACCEPT_PAUSE_MS 100
/* At free, what the controller queued for an agent (its STOP) gets this
 * long to reach the agent before the connection is closed. */
#define SLURM_RELAY_FLUSH_MS 500
/* At free, steps get this long to end by themselves (the agents exit
 * after STOP), then SIGTERM, then as long again before SIGKILL. */
#define SLURM_STEP_END_MS 3000
/* While the loop no longer runs (at free), srun's exit is looked for this
 * often. */
#define SLURM_REAP_POLL_MS 20

enum snode_state {
	SNODE_REGISTERED, /* start() done, waiting for commit() */
	SNODE_STARTED,	  /* its step is running, no agent yet */
	SNODE_CONNECTED,  /* an agent proved the secret; fd handed to a relay */
	SNODE_FAILED,	  /* its step ended first; error reported */
};

struct step;

/* One stream of srun's output: the line read so far. */
struct line_buf {
	char buf[SLURM_LINE_MAX];
	size_t len;
};

/* A node's lifecycle; snode_set_state() is the only writer. */
struct snode {
	char *host;
	int fd; /* our end of the socketpair; -1 once handed on or closed */
	enum snode_state state;
	struct step *step;
};

struct step {
	struct tslurm_priv *priv;
	int index;    /* 0 for the first srun of the job */
	pid_t srun;   /* leads the step's group */
	int out_fd, err_fd; /* srun's stdout, stderr; -1 once at EOF */
	/* The end of its output and its exit status, in either order; both
	 * in, the nodes are settled and ended is set. */
	bool output_done, exited;
	struct proc_exit exit;
	bool ended;		   /* srun is gone and its nodes are settled */
	char last[SLURM_LINE_MAX]; /* srun's last stderr line */
	struct line_buf lines[2];  /* stdout, stderr: the line so far */
	struct step *next;
};

struct sconn;

/* Everything runs on the controller's thread: on its loop, or in free()
 * once the loop has stopped. */
struct tslurm_priv {
	struct snode **nodes;
	size_t n_nodes, cap_nodes;
	struct step *steps;
	int n_steps;
	struct loop *loop; /* the controller's; borrowed */
	int listen_fd;
	bool accepting;
	long resume_timer; /* accepting paused for want of fds */
	char addr[NI_MAXHOST + NI_MAXSERV + 2]; /* ADDR:PORT for the agents */
	struct auth_secret secret;
	char *secret_env;     /* HERD_JOB_SECRET=HEX, for srun's envp only */
	struct preauth *pool; /* connections that have not proven the secret */
	struct sconn *conns;  /* every open connection: handshaking, relaying */
	struct ratelog refused;
	long refused_timer; /* the summary of suppressed "refused" lines */
	char refused_last[NI_MAXHOST + NI_MAXSERV + 160];
};

/* One direction of a relay: a chunk read and not yet all written. */
struct relay_buf {
	size_t off, len;
	char data[SLURM_RELAY_BUF];
};

/* One TCP connection: a handshake, then (an agent) a relay. */
struct sconn {
	struct tslurm_priv *priv;
	struct sconn *prev, *next;
	int fd;
	char peer[NI_MAXHOST + NI_MAXSERV + 4];
	struct preauth_src src;
	bool pooled;   /* counted in priv->pool */
	long deadline; /* timer id; 0 once the handshake is over */
	struct auth_ctl hs;
	/* The relay, once an agent proved the secret and named its node. */
	int pair;		/* the node's socketpair end; -1 until then */
	struct relay_buf *up;	/* agent -> controller */
	struct relay_buf *down; /* controller -> agent */
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

static int listener_open(struct tslurm_priv *priv, struct herd_err *err)
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
static void conn_close(struct sconn *sc)
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
	conn_close(sc);
}

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
static int snode_set_state(struct snode *n, enum snode_state to)
{
	if (to != SNODE_REGISTERED && !(snode_next[n->state] & SNODE_TO(to)))
		return -1;
	n->state = to;
	return 0;
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
		conn_close(sc);
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
		conn_close(sc);
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
		conn_close(sc);
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
static void relay_flush(struct sconn *sc, int64_t deadline)
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
			 proc_step_what(st->exit.step),
			 strerror(st->exit.err));
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
static void step_read(struct step *st, int i)
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

static void on_step_output(struct loop *loop, int fd, short revents,
			   void *arg)
{
	struct step *st = arg;

	(void)loop;
	(void)revents;
	step_read(st, fd == st->err_fd);
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
static void fail_batch(struct tslurm_priv *priv, struct snode **batch, size_t n,
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

static int step_start(struct transport *t, struct snode **batch, size_t n,
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
		pid = proc_spawn(priv->loop, args, &opts, step_on_exit, st,
				 err);
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
		if (listener_open(priv, &err) < 0) {
			fail_batch(priv, batch, n, err.text);
			goto out;
		}
		if (t->verbose)
			fprintf(stderr,
				"herd: slurm: agents connect back to "
				"%s\n",
				priv->addr);
	}
	if (step_start(t, batch, n, &err) < 0)
		fail_batch(priv, batch, n, err.text);
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
				pfd[n] = (struct pollfd){.fd = fd,
							 .events = POLLIN};
				who[n++] = st;
			}
		}
		if (poll(pfd, n,
			 (int)(left < SLURM_REAP_POLL_MS ? left
							 : SLURM_REAP_POLL_MS)) <= 0)
			continue;
		for (nfds_t k = 0; k < n; k++)
			if (pfd[k].revents)
				step_read(who[k], pfd[k].fd == who[k]->err_fd);
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
				kill(-st->srun,
				     round == 0 ? SIGTERM : SIGKILL);
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
			relay_flush(sc, flush_by);
		conn_close(sc);
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
