/* ctl/sock.c — the job's control socket, on the controller's
 * one loop.
 *
 * Every `herd run` listens on SOCKDIR/ID.sock (AF_UNIX stream, 0600 in a
 * 0700 directory of the user's own, jobreg_sock_new(); the job's registry
 * entry records the path) so that `herd attach`, `herd stop` and
 * `herd list` reach the job from another shell.  A peer whose SO_PEERCRED
 * uid is not ours is closed at once with nothing said (root too: the
 * directory already keeps others out; this is the second lock).  Each
 * client speaks the framed protocol (proto.h): one CTL_REQ {op} at a
 * time, answered with CTL_MSG frames.
 *
 *   info    {kind:"info", id, name, state, attempt, nodes, pid}
 *   attach  info, then from now on every tagged output line as the
 *           terminal would get it (kind out/err), the status text once a
 *           second (kind status), and {kind:"end", status} at the end
 *   stop    as Ctrl-C in a foreground run, with SIGTERM (a second stop
 *           kills at once); info with what herd does, then end
 *
 * A slow client never slows the job: what is queued for it is bounded
 * (CTL_SOCK_QUEUE_MAX); output past that is dropped and counted, and the
 * client is told how many bytes it missed once it has room again.  A
 * client that goes away (kill -9) is dropped from the loop's next turn:
 * conns are never freed inside their own callbacks (conn.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/ctl/ctl_int.h"
#include "herd/jobreg.h"

/* 1 MiB queued per client: a few seconds of a busy job's output, enough
 * for a terminal over a slow SSH link to lose nothing in a burst; past it
 * the client cannot keep up and lines are dropped for it alone. */
#define CTL_SOCK_QUEUE_MAX (1024u * 1024)
/* 64 clients at once: far more than people attached to one job; more are
 * closed at once so that a runaway script cannot exhaust herd's fds. */
#define CTL_SOCK_CLIENTS_MAX 64
/* 4 KiB: the largest request a client sends is a few dozen bytes. */
#define CTL_SOCK_FRAME_MAX 4096
/* 5 s: a client says what it wants within this of connecting, or is
 * closed: a peer that connects and never speaks must not hold one of the
 * CTL_SOCK_CLIENTS_MAX places for good. */
#define CTL_SOCK_REQUEST_MS 5000
/* 1 s: how often attached clients get the status text. */
#define CTL_SOCK_STATUS_MS 1000
/* 2 s: the longest the end waits for slow clients to take the last
 * frames (after job_end is written). */
#define CTL_SOCK_FLUSH_MS 2000

struct sock_client {
	struct ctl_sock *s;
	struct conn *conn;
	bool attached;	/* gets output, status and end */
	bool wants_end; /* stop: gets end */
	bool dead;
	long request_timer; /* until the first request; 0 after */
	uint64_t missed; /* output bytes dropped, not yet told */
};

struct ctl_sock {
	struct ctl *c;
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool priv; /* path is in a directory of this run's own (removed) */
	struct sock_client *clients[CTL_SOCK_CLIENTS_MAX];
	int n_clients;
	long status_timer, reap_timer;
	/* Output lines of one loop turn (most often one OUTPUT chunk of
	 * many lines), sent as one frame when the turn ends (flush_timer),
	 * the stream changes or PROTO_CTL_DATA_MAX is reached: a busy job
	 * costs herd one frame and one write per client per chunk, not per
	 * line. */
	char pend[PROTO_CTL_DATA_MAX];
	size_t pend_len;
	int pend_fd;
	long flush_timer;
};

static void client_free(struct sock_client *cl)
{
	if (!cl)
		return;
	loop_timer_del(cl->s->c->loop, cl->request_timer);
	conn_free(cl->conn);
	free(cl);
}

/* Frees the clients that went away (from the loop, never inside their
 * conn's callbacks). */
static void on_reap(struct loop *loop, void *arg)
{
	struct ctl_sock *s = arg;
	int j = 0;

	(void)loop;
	s->reap_timer = 0;
	for (int i = 0; i < s->n_clients; i++) {
		if (s->clients[i]->dead)
			client_free(s->clients[i]);
		else
			s->clients[j++] = s->clients[i];
	}
	s->n_clients = j;
}

static void client_drop(struct sock_client *cl)
{
	struct ctl_sock *s = cl->s;

	cl->dead = true;
	if (!s->reap_timer)
		s->reap_timer = loop_timer_add(s->c->loop, 0, on_reap, s);
}

/* Sends an encoded frame unless the client's queue would pass its bound.
 * Returns 0 when queued, 1 when it did not fit, -1 when the client is
 * gone. */
static int client_put(struct sock_client *cl, const char *frame, size_t len)
{
	if (cl->dead || conn_is_dead(cl->conn))
		return -1;
	if (conn_pending(cl->conn) + len > CTL_SOCK_QUEUE_MAX)
		return 1;
	/* A frame that cannot be queued (the peer gone, out of memory) ends
	 * the client: it would miss what follows. */
	if (conn_send_encoded(cl->conn, frame, len, NULL) < 0) {
		client_drop(cl);
		return -1;
	}
	return 0;
}

static int client_send(struct sock_client *cl, json_t *body, const void *data,
		       size_t len)
{
	char *frame;
	size_t flen = 0;
	int rc = -1;

	frame = proto_encode(PROTO_CTL_MSG, body, data, len, &flen, NULL);
	if (frame)
		rc = client_put(cl, frame, flen);
	else
		client_drop(cl); /* an answer it would wait for in vain */
	free(frame);
	json_decref(body);
	return rc;
}

/* Tells the client what it missed, when there is room for it. */
static void client_tell_missed(struct sock_client *cl)
{
	char text[160];
	int n;

	if (!cl->missed)
		return;
	n = snprintf(text, sizeof(text),
		     "[herd: attach: %" PRIu64
		     " bytes of output missed; the rank logs have them]\n",
		     cl->missed);
	if (client_send(cl,
			json_pack("{s:s, s:I}", "kind", "err", "missed",
				  (json_int_t)cl->missed),
			text, (size_t)n) == 0)
		cl->missed = 0;
}

static json_t *info_body(struct ctl *c, const char *message)
{
	json_t *b = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i}", "kind",
			      "info", "id", c->lt ? logtree_run_id(c->lt) : "",
			      "name", c->spec->name, "state",
			      ctl_state_name(c->state), "attempt", c->attempt,
			      "nodes", c->want_nodes, "pid", (int)getpid());

	if (b && message)
		json_object_set_new(b, "message", json_string(message));
	return b;
}

static void out_flush(struct ctl_sock *s);

static void on_status(struct loop *loop, void *arg)
{
	struct ctl_sock *s = arg;
	char line[512];
	bool any = false;

	s->status_timer = 0;
	out_flush(s); /* the lines before it come first */
	for (int i = 0; i < s->n_clients; i++) {
		struct sock_client *cl = s->clients[i];

		if (!cl->attached || cl->dead)
			continue;
		any = true;
		client_tell_missed(cl);
	}
	if (any && ctl_status_text(s->c, line, sizeof(line),
				   (int)sizeof(line) - 1) == 0)
		for (int i = 0; i < s->n_clients; i++)
			if (s->clients[i]->attached && !s->clients[i]->dead)
				client_send(
				    s->clients[i],
				    json_pack("{s:s}", "kind", "status"), line,
				    strlen(line));
	if (any)
		s->status_timer =
		    loop_timer_add(loop, CTL_SOCK_STATUS_MS, on_status, s);
}

static void on_client_frame(struct conn *conn, struct proto_frame *f, void *arg)
{
	struct sock_client *cl = arg;
	struct ctl_sock *s = cl->s;
	struct ctl *c = s->c;
	struct herd_err err;
	const char *op;
	char msg[160];

	(void)conn;
	loop_timer_del(c->loop, cl->request_timer);
	cl->request_timer = 0;
	herd_err_clear(&err);
	if (proto_frame_check(f, PROTO_TO_CONTROL, &err) < 0) {
		/* A client of another herd, or not herd at all. */
		fprintf(stderr, "herd: control socket: %s; client dropped\n",
			err.text);
		proto_frame_free(f);
		conn_pause_reading(cl->conn);
		client_drop(cl);
		return;
	}
	op = json_string_value(json_object_get(f->body, "op"));
	if (!strcmp(op, "info")) {
		client_send(cl, info_body(c, NULL), NULL, 0);
	} else if (!strcmp(op, "attach")) {
		cl->attached = true;
		client_send(cl, info_body(c, NULL), NULL, 0);
		if (!s->status_timer)
			s->status_timer = loop_timer_add(
			    c->loop, CTL_SOCK_STATUS_MS, on_status, s);
	} else { /* stop */
		cl->wants_end = true;
		char grace[SPEC_DURATION_TEXT];

		if (c->interrupts == 0)
			snprintf(msg, sizeof(msg),
				 "stopping all ranks (SIGTERM, SIGKILL after "
				 "%s)",
				 spec_duration_text(c->spec->health.grace_ms,
						    grace, sizeof(grace)));
		else
			snprintf(msg, sizeof(msg), "killing all ranks");
		client_send(cl, info_body(c, msg), NULL, 0);
		fprintf(stderr, "herd: herd stop from the control socket\n");
		ctl_interrupt(c, SIGTERM);
	}
	proto_frame_free(f);
}

static void on_client_close(struct conn *conn, const char *reason, int clean,
			    void *arg)
{
	(void)conn;
	(void)reason;
	(void)clean;
	client_drop(arg);
}

/* A client that said nothing within CTL_SOCK_REQUEST_MS. */
static void on_request_timeout(struct loop *loop, void *arg)
{
	struct sock_client *cl = arg;

	(void)loop;
	cl->request_timer = 0;
	conn_pause_reading(cl->conn);
	client_drop(cl);
}

static void on_accept(struct loop *loop, int fd, short revents, void *arg)
{
	struct ctl_sock *s = arg;
	struct sock_client *cl;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int cfd;

	(void)loop;
	(void)revents;
	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0)
		return; /* EAGAIN, or a peer gone before we took it */
	/* Only the user herd runs as; anyone else learns nothing. */
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    cred.uid != geteuid() || s->n_clients >= CTL_SOCK_CLIENTS_MAX ||
	    !(cl = calloc(1, sizeof(*cl)))) {
		close(cfd);
		return;
	}
	cl->s = s;
	cl->conn = conn_new(s->c->loop, cfd, cfd, CTL_SOCK_FRAME_MAX,
			    on_client_frame, on_client_close, cl);
	if (!cl->conn) {
		free(cl);
		return;
	}
	cl->request_timer = loop_timer_add(s->c->loop, CTL_SOCK_REQUEST_MS,
					   on_request_timeout, cl);
	s->clients[s->n_clients++] = cl;
}

/* The directory of this run's own that holds the socket at path
 * (jobreg_sock_new()), once the socket is gone: empty, so rmdir. */
static void sock_dir_remove(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		rmdir(dir);
	}
}

int ctl_sock_listen(struct ctl *c)
{
	struct ctl_sock *s = NULL;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct herd_err err, note;
	mode_t old;
	int rc;

	herd_err_clear(&err);
	if (!c->lt)
		return 0; /* herd plan: nothing to reach */
	if (!(s = calloc(1, sizeof(*s)))) {
		herd_errprintf(&err, "out of memory");
		goto fail;
	}
	s->c = c;
	s->fd = -1;
	if (jobreg_sock_new(logtree_run_id(c->lt), s->path, sizeof(s->path),
			    &s->priv, &note, &err) < 0)
		goto fail;
	if (note.text[0])
		fprintf(stderr, "herd: control socket: %s\n", note.text);
	memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0) {
		herd_errprintf(&err, "socket: %s", strerror(errno));
		goto fail;
	}
	/* Made 0600 from the start: no moment where another could
	 * connect (the 0700 directory is the first lock). */
	old = umask(077);
	rc = bind(s->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || chmod(s->path, 0600) < 0 || listen(s->fd, 16) < 0) {
		herd_errprintf(&err, "%s: %s", s->path, strerror(errno));
		if (rc == 0)
			unlink(s->path);
		goto fail;
	}
	if (loop_fd_add(c->loop, s->fd, POLLIN, on_accept, s) < 0) {
		unlink(s->path);
		herd_errprintf(&err, "out of memory");
		goto fail;
	}
	c->sock = s;
	return 0;
fail:
	if (s && s->fd >= 0)
		close(s->fd);
	if (s && s->priv)
		sock_dir_remove(s->path);
	free(s);
	if (c->opt->detach) {
		fprintf(stderr, "herd: control socket: %s\n", err.text);
		return -1;
	}
	fprintf(stderr,
		"herd: control socket: %s; herd attach and herd stop will not "
		"reach this job\n",
		err.text);
	return 0;
}

const char *ctl_sock_path(const struct ctl *c)
{
	return c->sock ? c->sock->path : NULL;
}

/* Sends data (at most PROTO_CTL_DATA_MAX bytes of fd's lines) to every
 * attached client, counting what a full one misses. */
static void out_send(struct ctl_sock *s, int fd, const char *data, size_t len)
{
	json_t *body = json_pack("{s:s}", "kind", fd == 2 ? "err" : "out");
	char *frame = NULL;
	size_t flen = 0;

	if (body)
		frame =
		    proto_encode(PROTO_CTL_MSG, body, data, len, &flen, NULL);
	json_decref(body);
	if (!frame)
		return;
	for (int i = 0; i < s->n_clients; i++) {
		struct sock_client *cl = s->clients[i];

		if (!cl->attached || cl->dead)
			continue;
		client_tell_missed(cl);
		if (cl->missed || client_put(cl, frame, flen) == 1)
			cl->missed += len;
	}
	free(frame);
}

static void out_flush(struct ctl_sock *s)
{
	if (s->pend_len)
		out_send(s, s->pend_fd, s->pend, s->pend_len);
	s->pend_len = 0;
}

static void on_flush(struct loop *loop, void *arg)
{
	struct ctl_sock *s = arg;

	(void)loop;
	s->flush_timer = 0;
	out_flush(s);
}

void ctl_sock_output(struct ctl *c, int fd, const struct iovec *iov, int iovcnt)
{
	struct ctl_sock *s = c->sock;
	size_t len = 0;
	int attached = 0;

	if (!s)
		return;
	for (int i = 0; i < s->n_clients; i++)
		attached += s->clients[i]->attached && !s->clients[i]->dead;
	if (!attached)
		return;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (s->pend_len &&
	    (s->pend_fd != fd || s->pend_len + len > sizeof(s->pend)))
		out_flush(s);
	s->pend_fd = fd;
	for (int i = 0; i < iovcnt; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		/* A cut line with a long tag may pass one frame: pieces. */
		while (left > 0) {
			size_t room = sizeof(s->pend) - s->pend_len;
			size_t n = left < room ? left : room;

			memcpy(s->pend + s->pend_len, p, n);
			s->pend_len += n;
			p += n;
			left -= n;
			if (s->pend_len == sizeof(s->pend))
				out_flush(s);
		}
	}
	if (s->pend_len && !s->flush_timer)
		s->flush_timer = loop_timer_add(c->loop, 0, on_flush, s);
}

/* The job's end could not be sent to client cl: said on stderr, and the
 * client is dropped (nothing more is flushed to it). */
static void end_unsent(struct sock_client *cl, const struct herd_err *err)
{
	fprintf(stderr,
		"herd: control socket: a client was not told the "
		"job's end: %s\n",
		err->text);
	client_drop(cl);
}

void ctl_sock_end(struct ctl *c, int status)
{
	struct ctl_sock *s = c->sock;
	json_t *end_body;
	struct herd_err err;
	int64_t end;

	if (!s)
		return;
	out_flush(s);
	for (int i = 0; i < s->n_clients; i++) {
		struct sock_client *cl = s->clients[i];

		if (cl->dead || (!cl->attached && !cl->wants_end))
			continue;
		/* Past the bound: the last words are small and must come. */
		if (cl->missed) {
			char text[160];
			int n = snprintf(text, sizeof(text),
					 "[herd: attach: %" PRIu64
					 " bytes of output missed; the rank "
					 "logs have them]\n",
					 cl->missed);
			json_t *b = json_pack("{s:s, s:I}", "kind", "err",
					      "missed", (json_int_t)cl->missed);

			if (conn_send(cl->conn, PROTO_CTL_MSG, b, text,
				      (size_t)n, &err) < 0)
				end_unsent(cl, &err);
			json_decref(b);
		}
		end_body = json_pack("{s:s, s:i}", "kind", "end", "status",
				     status & 255);
		if (!cl->dead && conn_send(cl->conn, PROTO_CTL_MSG, end_body,
					   NULL, 0, &err) < 0)
			end_unsent(cl, &err);
		json_decref(end_body);
	}
	/* The loop has stopped: wait a little, with a bound, for clients
	 * to take what is queued (a stopped client costs at most this). */
	end = loop_now_ms() + CTL_SOCK_FLUSH_MS;
	for (int i = 0; i < s->n_clients; i++) {
		int64_t left = end - loop_now_ms();

		if (!s->clients[i]->dead && left > 0)
			conn_flush(s->clients[i]->conn, (int)left);
	}
}

void ctl_sock_free(struct ctl *c)
{
	struct ctl_sock *s = c->sock;

	if (!s)
		return;
	for (int i = 0; i < s->n_clients; i++)
		client_free(s->clients[i]);
	loop_timer_del(c->loop, s->status_timer);
	loop_timer_del(c->loop, s->reap_timer);
	loop_timer_del(c->loop, s->flush_timer);
	loop_fd_del(c->loop, s->fd);
	close(s->fd);
	unlink(s->path);
	if (s->priv)
		sock_dir_remove(s->path);
	free(s);
	c->sock = NULL;
}

/* Writes all of line to the launching herd (a pipe: whole or nothing
 * for these few bytes). */
static void detach_say(struct ctl *c, const char *line, int n)
{
	if (n > 0 && write(*c->opt->detach_fd, line, (size_t)n) != n)
		fprintf(stderr, "herd: the launching herd is gone: %s\n",
			strerror(errno));
}

int ctl_detach_log(struct ctl *c)
{
	struct herd_err err;
	char line[4096 + 256];
	int fd;

	if (!c->opt->detach || !c->opt->detach_fd || *c->opt->detach_fd < 0)
		return 0;
	herd_err_clear(&err);
	fd = logtree_create(c->lt, "herd.log", &err);
	if (fd < 0) {
		fprintf(stderr, "herd: %s\n", err.text);
		return -1;
	}
	/* From now on herd's own messages go to RUN-ID/herd.log; rank
	 * output is in the rank logs and reaches attached clients only. */
	fflush(stdout);
	fflush(stderr);
	if (dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
		fprintf(stderr, "herd: herd.log: %s\n", strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	if (c->opt->detach_no_wait) {
		ctl_detach_ready(c);
		return 0;
	}
	detach_say(c, line,
		   snprintf(line, sizeof(line), "log\t%s\n",
			    logtree_run_dir(c->lt)));
	return 0;
}

void ctl_detach_ready(struct ctl *c)
{
	char line[4096 + 256];
	struct stat st;
	int n;

	if (!c->opt->detach || !c->opt->detach_fd || *c->opt->detach_fd < 0)
		return;
	fflush(stdout);
	fflush(stderr);
	n = snprintf(line, sizeof(line), "ok\t%s\t%s\t%lld\n",
		     logtree_run_id(c->lt), logtree_run_dir(c->lt),
		     fstat(2, &st) == 0 ? (long long)st.st_size : 0LL);
	if (n > 0 && (size_t)n < sizeof(line))
		detach_say(c, line, n);
	close(*c->opt->detach_fd);
	*c->opt->detach_fd = -1;
}
