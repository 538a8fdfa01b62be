/* transport_slurm.c — one herd-agent per node as the tasks of srun job
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
 * command line and never printed.  A thread accepts connections; each
 * connection gets a thread that runs the handshake, learns the agent's
 * node and then pumps bytes between the TCP connection and that node's
 * socketpair.  A connection that fails the handshake is logged with its
 * peer address and closed; the job goes on.
 *
 * Each srun runs under a small keeper process (a fork of herd that only
 * waits): herd's controller reaps any child on SIGCHLD, so srun's exit
 * status comes back over a pipe from the keeper instead.  The keeper leads
 * the step's process group and dies with herd (PR_SET_PDEATHSIG); srun
 * dies with the keeper, and its tasks with srun.  srun's stdout and stderr
 * (with the agents' stderr) pass through to herd's stderr, prefixed.  When
 * srun ends before some of its agents connected, those nodes get one
 * PROTO_ERROR naming srun's status and last line.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "herd/auth.h"
#include "herd/hostlist.h"
#include "herd/spawn.h"
#include "transport.h"

extern char **environ;

/* 64 KiB: one read of a pumped stream (a proto frame's output chunk). */
#define SLURM_PUMP_CHUNK (64 * 1024)
/* srun's output lines are passed through cut at this many bytes. */
#define SLURM_LINE_MAX 1024
/* Handshakes running at once: past this, accepting pauses (the kernel's
 * backlog holds the rest); each handshake is bounded by AUTH_TIMEOUT_MS,
 * so stray connections can delay agents but never stop them. */
#define SLURM_HANDSHAKES_MAX 256
#define SLURM_LISTEN_BACKLOG 1024
/* At free, steps get this long to end by themselves (the agents exit
 * after STOP), then SIGTERM, then as long again before SIGKILL. */
#define SLURM_STEP_END_MS 3000
/* Connection threads still pumping at free get this long to notice that
 * herd closed its ends. */
#define SLURM_THREADS_END_MS 3000

enum snode_state {
	SNODE_REGISTERED, /* start() done, waiting for commit() */
	SNODE_STARTED,	  /* its step is running, no agent yet */
	SNODE_CONNECTED,  /* an agent proved the secret; fd handed to a pump */
	SNODE_FAILED,	  /* its step ended first; error reported */
};

struct step;

struct snode {
	char *host;
	int fd; /* our end of the socketpair; -1 once handed on or closed */
	enum snode_state state;
	struct step *step;
};

struct step {
	struct slurm_priv *priv;
	int index;    /* 0 for the first srun of the job */
	pid_t keeper; /* leads the step's group; srun is its child */
	int out_fd, err_fd, status_fd;
	pthread_t thread;
	bool thread_started;
	bool ended;		   /* srun is gone and its nodes are settled */
	char last[SLURM_LINE_MAX]; /* srun's last stderr line */
	struct step *next;
};

struct slurm_priv {
	pthread_mutex_t lock; /* nodes, steps' ended, live, handshakes */
	pthread_cond_t cond;
	struct snode **nodes;
	size_t n_nodes, cap_nodes;
	struct step *steps;
	int n_steps;
	int listen_fd;
	int wake[2]; /* tells the accept thread to stop */
	pthread_t accept_thread;
	bool accepting;
	char addr[NI_MAXHOST + NI_MAXSERV + 2]; /* ADDR:PORT for the agents */
	struct auth_secret secret;
	char *secret_env; /* HERD_JOB_SECRET=HEX, for srun's envp only */
	int live;	  /* connection threads running */
	int handshakes;	  /* of which still authenticating */
	bool stopping;	  /* the transport is being freed */
};

struct sconn {
	struct slurm_priv *priv;
	int fd;
	char peer[NI_MAXHOST + NI_MAXSERV + 4];
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits on priv->cond (lock held) until deadline_ms; 0 when woken,
 * ETIMEDOUT when the deadline passed. */
static int cond_wait_until(struct slurm_priv *priv, int64_t deadline_ms)
{
	struct timespec ts;
	int64_t left = deadline_ms - now_ms();

	if (left <= 0)
		return ETIMEDOUT;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += left / 1000;
	ts.tv_nsec += (left % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return pthread_cond_timedwait(&priv->cond, &priv->lock, &ts);
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
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
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >>
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
static int listen_source(struct slurm_priv *priv, struct sockaddr_storage *ss,
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

static void *accept_thread(void *arg);

static int listener_open(struct slurm_priv *priv, struct herd_err *err)
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
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
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
	if (pipe2(priv->wake, O_CLOEXEC) < 0) {
		herd_errprintf(err, "pipe: %s", strerror(errno));
		goto fail;
	}
	priv->listen_fd = fd;
	if (pthread_create(&priv->accept_thread, NULL, accept_thread, priv)) {
		priv->listen_fd = -1;
		close(priv->wake[0]);
		close(priv->wake[1]);
		priv->wake[0] = priv->wake[1] = -1;
		herd_errprintf(err, "cannot start the accept thread");
		goto fail;
	}
	priv->accepting = true;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

/* ---- one agent connection ---------------------------------------------- */

/* Copies bytes both ways until either side ends. */
static void pump(int tcp, int pair)
{
	char *buf = malloc(SLURM_PUMP_CHUNK);
	struct pollfd pfd[2] = {{.fd = tcp, .events = POLLIN},
				{.fd = pair, .events = POLLIN}};

	while (buf) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t got;

			if (!pfd[i].revents)
				continue;
			got = read(pfd[i].fd, buf, SLURM_PUMP_CHUNK);
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0 ||
			    write_all(pfd[1 - i].fd, buf, (size_t)got) < 0)
				goto out;
		}
	}
out:
	free(buf);
}

/* Hands the socketpair end of a started node named name to the caller,
 * or -1 when no such node waits for an agent. */
static int claim_node(struct slurm_priv *priv, const char *name)
{
	int fd = -1;

	pthread_mutex_lock(&priv->lock);
	for (size_t i = 0; i < priv->n_nodes; i++) {
		struct snode *n = priv->nodes[i];

		if (n->state == SNODE_STARTED && !strcmp(n->host, name)) {
			n->state = SNODE_CONNECTED;
			fd = n->fd;
			n->fd = -1;
			break;
		}
	}
	pthread_mutex_unlock(&priv->lock);
	return fd;
}

static void *conn_thread(void *arg)
{
	struct sconn *sc = arg;
	struct slurm_priv *priv = sc->priv;
	char name[AUTH_NAME_MAX + 1];
	struct herd_err err;
	int one = 1, pair = -1, rc;

	herd_err_clear(&err);
	setsockopt(sc->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	rc = auth_ctl_handshake(sc->fd, &priv->secret, AUTH_TIMEOUT_MS, name,
				&err);
	pthread_mutex_lock(&priv->lock);
	priv->handshakes--;
	pthread_cond_broadcast(&priv->cond);
	pthread_mutex_unlock(&priv->lock);
	if (rc < 0) {
		fprintf(stderr,
			"herd: slurm: rejected a connection from %s: %s\n",
			sc->peer, err.text);
		goto out;
	}
	pair = claim_node(priv, name);
	if (pair < 0) {
		fprintf(stderr,
			"herd: slurm: rejected an agent from %s: node '%s' is "
			"not waiting for one\n",
			sc->peer, name);
		goto out;
	}
	pump(sc->fd, pair);
out:
	if (pair >= 0)
		close(pair);
	close(sc->fd);
	free(sc);
	pthread_mutex_lock(&priv->lock);
	priv->live--;
	pthread_cond_broadcast(&priv->cond);
	pthread_mutex_unlock(&priv->lock);
	return NULL;
}

static void start_conn(struct slurm_priv *priv, int fd,
		       const struct sockaddr_storage *ss, socklen_t len)
{
	struct sconn *sc = calloc(1, sizeof(*sc));
	char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
	pthread_attr_t attr;
	pthread_t tid;

	if (!sc) {
		close(fd);
		return;
	}
	getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), port,
		    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(sc->peer, sizeof(sc->peer), "%s:%s", host, port);
	sc->priv = priv;
	sc->fd = fd;
	pthread_mutex_lock(&priv->lock);
	priv->live++;
	priv->handshakes++;
	pthread_mutex_unlock(&priv->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* 256 KiB stacks (a pump buffer is on the heap): a thousand
	 * agents stay cheap. */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	if (pthread_create(&tid, &attr, conn_thread, sc) != 0) {
		fprintf(stderr,
			"herd: slurm: no thread for the connection "
			"from %s; closed it\n",
			sc->peer);
		pthread_mutex_lock(&priv->lock);
		priv->live--;
		priv->handshakes--;
		pthread_mutex_unlock(&priv->lock);
		close(fd);
		free(sc);
	}
	pthread_attr_destroy(&attr);
}

static void *accept_thread(void *arg)
{
	struct slurm_priv *priv = arg;
	struct pollfd pfd[2] = {{.fd = priv->listen_fd, .events = POLLIN},
				{.fd = priv->wake[0], .events = POLLIN}};

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd;

		pthread_mutex_lock(&priv->lock);
		while (priv->handshakes >= SLURM_HANDSHAKES_MAX &&
		       !priv->stopping)
			pthread_cond_wait(&priv->cond, &priv->lock);
		if (priv->stopping) {
			pthread_mutex_unlock(&priv->lock);
			break;
		}
		pthread_mutex_unlock(&priv->lock);
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		fd = accept4(priv->listen_fd, (struct sockaddr *)&ss, &len,
			     SOCK_CLOEXEC);
		if (fd < 0) {
			/* Out of fds: the poll above would spin; wait for
			 * connections to end instead. */
			if (errno == EMFILE || errno == ENFILE)
				poll(&pfd[1], 1, 100);
			continue;
		}
		start_conn(priv, fd, &ss, len);
	}
	return NULL;
}

/* ---- srun steps --------------------------------------------------------- */

/* The keeper, in the child of fork(): only async-signal-safe calls. */
static void step_keeper(char *const argv[], char *const envp[], int out_w,
			int err_w, int status_w, pid_t parent)
{
	static const char exec_failed[] = "srun: cannot be executed\n";
	struct sigaction ign = {.sa_handler = SIG_IGN};
	int status = 127 << 8;
	pid_t pid, keeper = getpid();

	/* From here on fd 0 is /dev/null and 3 the status pipe. */
	if (spawn_child_setup(parent, out_w, err_w) < 0 ||
	    dup2(status_w, 3) < 0)
		_exit(127);
	/* Nothing of herd's (sockets of other nodes, the listener) may
	 * stay open in the keeper or srun: the pumps see their ends. */
	close_range(4, ~0U, 0);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != keeper)
			_exit(127);
		close_range(3, ~0U, 0);
		execve(argv[0], argv, envp);
		if (write(2, exec_failed, sizeof(exec_failed) - 1) < 0)
			_exit(127);
		_exit(127);
	}
	/* A SIGTERM to the group is for srun; the keeper stays to report
	 * how srun ended, and only srun holds the output pipes now. */
	sigaction(SIGTERM, &ign, NULL);
	sigaction(SIGINT, &ign, NULL);
	sigaction(SIGHUP, &ign, NULL);
	dup2(0, 1);
	dup2(0, 2);
	if (pid > 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	if (write(3, &status, sizeof(status)) < 0)
		_exit(1);
	_exit(0);
}

/* Settles a step whose srun ended: every node it started that has no
 * agent gets one PROTO_ERROR, then its socket is closed. */
static void step_ended(struct step *st, int status, bool have_status)
{
	struct slurm_priv *priv = st->priv;
	char why[64];

	if (!have_status)
		snprintf(why, sizeof(why), "ended (status unknown)");
	else if (WIFSIGNALED(status))
		snprintf(why, sizeof(why), "was killed by signal %d",
			 WTERMSIG(status));
	else
		snprintf(why, sizeof(why), "exited with status %d",
			 WEXITSTATUS(status));
	pthread_mutex_lock(&priv->lock);
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
		n->state = SNODE_FAILED;
	}
	st->ended = true;
	pthread_cond_broadcast(&priv->cond);
	pthread_mutex_unlock(&priv->lock);
}

/* One stream of srun's output: whole lines to herd's stderr, each with
 * the step's prefix; returns 0 at EOF. */
struct line_buf {
	char buf[SLURM_LINE_MAX];
	size_t len;
};

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

static void *step_thread(void *arg)
{
	struct step *st = arg;
	struct line_buf lines[2] = {{.len = 0}, {.len = 0}};
	struct pollfd pfd[3] = {{.fd = st->out_fd, .events = POLLIN},
				{.fd = st->err_fd, .events = POLLIN},
				{.fd = st->status_fd, .events = POLLIN}};
	bool have_status = false;
	int status = 0;

	while (pfd[0].fd >= 0 || pfd[1].fd >= 0 || pfd[2].fd >= 0) {
		char chunk[4096];

		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			ssize_t got;

			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			got = read(pfd[i].fd, chunk, sizeof(chunk));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				emit_line(st, &lines[i], i == 1);
				pfd[i].fd = -1;
				continue;
			}
			for (ssize_t k = 0; k < got; k++) {
				lines[i].buf[lines[i].len++] = chunk[k];
				if (chunk[k] == '\n' ||
				    lines[i].len == sizeof(lines[i].buf))
					emit_line(st, &lines[i], i == 1);
			}
		}
		if (pfd[2].fd >= 0 && pfd[2].revents) {
			ssize_t got = read(pfd[2].fd, &status, sizeof(status));

			if (got < 0 && errno == EINTR)
				continue;
			have_status = got == (ssize_t)sizeof(status);
			pfd[2].fd = -1;
		}
	}
	step_ended(st, status, have_status);
	return NULL;
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
static char **step_env(const struct slurm_priv *priv)
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
static void fail_batch(struct slurm_priv *priv, struct snode **batch, size_t n,
		       const char *why)
{
	pthread_mutex_lock(&priv->lock);
	for (size_t i = 0; i < n; i++) {
		transport_report(batch[i]->fd, "srun", "%s: %s", batch[i]->host,
				 why);
		close(batch[i]->fd);
		batch[i]->fd = -1;
		batch[i]->state = SNODE_FAILED;
	}
	pthread_mutex_unlock(&priv->lock);
}

static int step_start(struct transport *t, struct snode **batch, size_t n,
		      struct herd_err *err)
{
	struct slurm_priv *priv = t->priv;
	struct hostlist *hl = hostlist_new();
	char *list = NULL, *srun = NULL, **envp = NULL;
	char nodes_arg[48], tasks_arg[48], *nodelist_arg = NULL;
	int out[2] = {-1, -1}, errp[2] = {-1, -1}, stat[2] = {-1, -1};
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
		char *args[20];
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
		args[k] = NULL;
		if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
		    pipe2(stat, O_CLOEXEC) < 0) {
			herd_errprintf(err, "pipe: %s", strerror(errno));
			goto out;
		}
		if (t->verbose) {
			fprintf(stderr, "herd: slurm: step %d:", priv->n_steps);
			for (char **a = args; *a; a++)
				fprintf(stderr, " %s", *a);
			fprintf(stderr, "\n");
		}
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			herd_errprintf(err, "fork: %s", strerror(errno));
			goto out;
		}
		if (pid == 0)
			step_keeper(args, envp, out[1], errp[1], stat[1],
				    getppid());
	}
	/* Both sides set the group so that a kill cannot race the child. */
	setpgid(pid, pid);
	close(out[1]);
	close(errp[1]);
	close(stat[1]);
	out[1] = errp[1] = stat[1] = -1;
	st->priv = priv;
	st->index = priv->n_steps++;
	st->keeper = pid;
	st->out_fd = out[0];
	st->err_fd = errp[0];
	st->status_fd = stat[0];
	out[0] = errp[0] = stat[0] = -1;
	pthread_mutex_lock(&priv->lock);
	for (size_t i = 0; i < n; i++) {
		batch[i]->state = SNODE_STARTED;
		batch[i]->step = st;
	}
	st->next = priv->steps;
	priv->steps = st;
	pthread_mutex_unlock(&priv->lock);
	if (pthread_create(&st->thread, NULL, step_thread, st) == 0) {
		st->thread_started = true;
	} else {
		/* Without its reader, the step cannot be watched: end it. */
		kill(-pid, SIGKILL);
		close(st->out_fd);
		close(st->err_fd);
		close(st->status_fd);
		st->out_fd = st->err_fd = st->status_fd = -1;
		step_ended(st, SIGKILL, true);
	}
	st = NULL;
	rc = 0;
out:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (errp[i] >= 0)
			close(errp[i]);
		if (stat[i] >= 0)
			close(stat[i]);
	}
	free(st);
	free(envp);
	free(srun);
	free(list);
	free(nodelist_arg);
	hostlist_free(hl);
	return rc;
}

/* ---- the transport ------------------------------------------------------ */

static int slurm_init(struct transport *t, struct herd_err *err)
{
	struct slurm_priv *priv = calloc(1, sizeof(*priv));
	char hex[AUTH_SECRET_HEX_LEN + 1];

	if (!priv)
		return herd_errprintf(err, "out of memory");
	priv->listen_fd = -1;
	priv->wake[0] = priv->wake[1] = -1;
	if (auth_secret_new(&priv->secret, hex, err) < 0 ||
	    asprintf(&priv->secret_env, "%s=%s", AUTH_SECRET_ENV, hex) < 0) {
		auth_wipe(hex, sizeof(hex));
		auth_wipe(&priv->secret, sizeof(priv->secret));
		free(priv);
		return err && err->text[0]
			   ? -1
			   : herd_errprintf(err, "out of memory");
	}
	auth_wipe(hex, sizeof(hex));
	pthread_mutex_init(&priv->lock, NULL);
	pthread_cond_init(&priv->cond, NULL);
	t->priv = priv;
	return 0;
}

static int slurm_start(struct transport *t, const char *host,
		       struct herd_err *err)
{
	struct slurm_priv *priv;
	struct snode *n = NULL;
	int sv[2] = {-1, -1};

	if (!t->priv && slurm_init(t, err) < 0)
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
	pthread_mutex_lock(&priv->lock);
	if (priv->n_nodes == priv->cap_nodes) {
		size_t cap = priv->cap_nodes ? 2 * priv->cap_nodes : 16;
		struct snode **grown =
		    realloc(priv->nodes, cap * sizeof(*grown));

		if (!grown) {
			pthread_mutex_unlock(&priv->lock);
			herd_errprintf(err, "out of memory");
			goto fail;
		}
		priv->nodes = grown;
		priv->cap_nodes = cap;
	}
	n->fd = sv[1];
	n->state = SNODE_REGISTERED;
	priv->nodes[priv->n_nodes++] = n;
	pthread_mutex_unlock(&priv->lock);
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

static void slurm_commit(struct transport *t)
{
	struct slurm_priv *priv = t->priv;
	struct snode **batch = NULL;
	struct herd_err err;
	size_t n = 0;

	if (!priv)
		return;
	herd_err_clear(&err);
	/* Only this thread (the controller's) adds nodes and moves them
	 * out of REGISTERED; the lock is for the other nodes' states. */
	batch = calloc(priv->n_nodes ? priv->n_nodes : 1, sizeof(*batch));
	if (!batch)
		return;
	pthread_mutex_lock(&priv->lock);
	for (size_t i = 0; i < priv->n_nodes; i++)
		if (priv->nodes[i]->state == SNODE_REGISTERED)
			batch[n++] = priv->nodes[i];
	pthread_mutex_unlock(&priv->lock);
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

/* Ends every step: by itself (the agents were told to exit), else
 * SIGTERM to srun, else SIGKILL to the step's group. */
static void steps_end(struct slurm_priv *priv)
{
	int64_t deadline = now_ms() + SLURM_STEP_END_MS;
	bool all;

	for (int round = 0; round < 3; round++) {
		pthread_mutex_lock(&priv->lock);
		for (;;) {
			all = true;
			for (struct step *st = priv->steps; st; st = st->next)
				if (!st->ended)
					all = false;
			if (all || cond_wait_until(priv, deadline) == ETIMEDOUT)
				break;
		}
		pthread_mutex_unlock(&priv->lock);
		if (all || round == 2)
			break;
		for (struct step *st = priv->steps; st; st = st->next)
			if (!st->ended)
				kill(-st->keeper,
				     round == 0 ? SIGTERM : SIGKILL);
		deadline = now_ms() + SLURM_STEP_END_MS;
	}
	for (struct step *st = priv->steps; st; st = st->next) {
		if (st->thread_started && st->ended)
			pthread_join(st->thread, NULL);
		else if (st->thread_started)
			pthread_detach(st->thread);
		/* The controller's SIGCHLD handler may have reaped it. */
		while (waitpid(st->keeper, NULL, WNOHANG) < 0 && errno == EINTR)
			;
	}
}

static void slurm_free(struct transport *t)
{
	struct slurm_priv *priv = t->priv;
	int64_t deadline = now_ms() + SLURM_THREADS_END_MS;
	bool steps_left = false;
	int live;

	if (!priv)
		return;
	if (priv->accepting) {
		pthread_mutex_lock(&priv->lock);
		priv->stopping = true;
		pthread_cond_broadcast(&priv->cond);
		pthread_mutex_unlock(&priv->lock);
		if (write(priv->wake[1], "x", 1) < 0)
			pthread_cancel(priv->accept_thread);
		pthread_join(priv->accept_thread, NULL);
	}
	if (priv->listen_fd >= 0)
		close(priv->listen_fd);
	for (int i = 0; i < 2; i++)
		if (priv->wake[i] >= 0)
			close(priv->wake[i]);
	steps_end(priv);
	pthread_mutex_lock(&priv->lock);
	for (size_t i = 0; i < priv->n_nodes; i++) {
		if (priv->nodes[i]->fd >= 0)
			close(priv->nodes[i]->fd);
		priv->nodes[i]->fd = -1;
	}
	while (priv->live > 0 && cond_wait_until(priv, deadline) != ETIMEDOUT)
		;
	live = priv->live;
	for (struct step *st = priv->steps; st; st = st->next)
		if (!st->ended)
			steps_left = true;
	pthread_mutex_unlock(&priv->lock);
	t->priv = NULL;
	auth_wipe(&priv->secret, sizeof(priv->secret));
	auth_wipe(priv->secret_env, strlen(priv->secret_env));
	/* A thread still running keeps the shared state (the process is
	 * exiting). */
	if (live > 0 || steps_left)
		return;
	while (priv->steps) {
		struct step *st = priv->steps;

		priv->steps = st->next;
		close(st->out_fd);
		close(st->err_fd);
		close(st->status_fd);
		free(st);
	}
	for (size_t i = 0; i < priv->n_nodes; i++) {
		free(priv->nodes[i]->host);
		free(priv->nodes[i]);
	}
	free(priv->nodes);
	free(priv->secret_env);
	pthread_mutex_destroy(&priv->lock);
	pthread_cond_destroy(&priv->cond);
	free(priv);
}

const struct transport_ops transport_slurm_ops = {
    .name = "slurm",
    .start = slurm_start,
    .commit = slurm_commit,
    .free = slurm_free,
};
