/* control.c — each rank's control channel to herd (HERD_CONTROL).
 *
 * Every rank of an attempt gets a Unix socket of its own, ctl-RANK.sock
 * in the agent's private directory (rundir.c: 0700, owned by the job's
 * user), so no other local user can even reach it; every connection is
 * checked once more with SO_PEERCRED (same uid as the agent) and closed
 * otherwise.  The channel carries newline-delimited JSON objects, one per
 * line, each at most CONTROL_LINE_MAX bytes:
 *
 *   rank -> agent  {"op":"hello","protocol":1,"generation":G}
 *                  {"op":"stepping","generation":G,"step":S}
 *                  {"op":"store","id":N,"gen":G,"cmd":...}  (herd.elastic's
 *                  rendezvous store: herd hosts its table)
 *   agent -> rank  {"op":"membership",...} to every connection of the rank
 *                  that said hello; {"op":"store_reply","id":N,...} to the
 *                  connection that asked; {"op":"leave","attempt":A} to
 *                  every connection that said hello when herd stops the
 *                  ranks for a restart (control_leave).
 *
 * The agent only checks and forwards: every message from a rank goes to
 * herd as RANK_CTL (with the rank and the connection's id), and herd's
 * RANK_CTL goes to the connection it names.  A rank that sends anything
 * else, or a line too long, loses that connection (not its life).
 * Sockets and connections of an attempt end with its ranks
 * (control_fini, from rank_free_all).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/agent.h"
#include "herd/proto.h"

/* 1 MiB: the longest line a rank may send; a store value (base64) of a
 * process group's rendezvous is a few hundred bytes, and a frame's JSON
 * is at most PROTO_JSON_MAX. */
#define CONTROL_LINE_MAX (PROTO_JSON_MAX / 2)
/* 4 MiB per connection: what the agent holds for a rank that does not
 * read its replies; past it the connection is closed. */
#define CONTROL_OUT_MAX (4u * 1024 * 1024)
/* Connections one rank may hold at once (its membership loop, its
 * store, a few threads). */
#define CONTROL_CONNS_PER_RANK 16

struct control_conn {
	struct control_state *cs;
	int fd;
	int rank;
	int id;
	bool hello;
	char *in;
	size_t in_len;
	char *out;
	size_t out_len;
	struct control_conn *next;
};

struct control_listen {
	struct control_state *cs;
	int fd;
	int rank;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

struct control_state {
	struct agent *a;
	struct control_listen *ls;
	int n_ls, cap_ls;
	struct control_conn *conns;
	int next_id;
};

static struct control_state *state_of(struct agent *a)
{
	if (!a->control) {
		a->control = calloc(1, sizeof(*a->control));
		if (a->control)
			a->control->a = a;
	}
	return a->control;
}

static void cc_close(struct control_conn *cc)
{
	struct control_state *cs = cc->cs;

	for (struct control_conn **p = &cs->conns; *p; p = &(*p)->next)
		if (*p == cc) {
			*p = cc->next;
			break;
		}
	loop_fd_del(cs->a->loop, cc->fd);
	close(cc->fd);
	free(cc->in);
	free(cc->out);
	free(cc);
}

/* Returns 0, or -1 when cc is closed (and freed). */
static int cc_flush(struct control_conn *cc)
{
	while (cc->out_len > 0) {
		ssize_t w = send(cc->fd, cc->out, cc->out_len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			cc_close(cc);
			return -1;
		}
		memmove(cc->out, cc->out + w, cc->out_len - (size_t)w);
		cc->out_len -= (size_t)w;
	}
	loop_fd_events(cc->cs->a->loop, cc->fd,
		       POLLIN | (cc->out_len ? POLLOUT : 0));
	return 0;
}

/* Queues msg as one line for cc (closed when it holds too much). */
static void cc_put(struct control_conn *cc, const json_t *msg)
{
	char *line = json_dumps(msg, JSON_COMPACT);
	size_t len;
	char *out;

	if (!line)
		return;
	len = strlen(line);
	if (cc->out_len + len + 1 > CONTROL_OUT_MAX ||
	    !(out = realloc(cc->out, cc->out_len + len + 1))) {
		free(line);
		cc_close(cc);
		return;
	}
	cc->out = out;
	memcpy(cc->out + cc->out_len, line, len);
	cc->out[cc->out_len + len] = '\n';
	cc->out_len += len + 1;
	free(line);
	(void)cc_flush(cc);
}

/* One line from the rank.  Returns 0, or -1: the connection goes. */
static int cc_line(struct control_conn *cc, const char *line, size_t len)
{
	struct agent *a = cc->cs->a;
	json_error_t jerr;
	json_t *msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	const char *op = json_string_value(json_object_get(msg, "op"));

	if (!json_is_object(msg) || !op ||
	    (strcmp(op, "hello") && strcmp(op, "stepping") &&
	     strcmp(op, "store"))) {
		json_decref(msg);
		return -1;
	}
	if (!strcmp(op, "hello") && !cc->hello) {
		cc->hello = true;
		warm_rank_hello(a);
	}
	agent_send(a, PROTO_RANK_CTL,
		   json_pack("{s:i, s:i, s:i, s:o}", "attempt", a->attempt,
			     "rank", cc->rank, "conn", cc->id, "msg", msg),
		   NULL, 0);
	return 0;
}

static void on_conn(struct loop *loop, int fd, short revents, void *arg)
{
	struct control_conn *cc = arg;
	char buf[16384];
	ssize_t n;

	(void)loop;
	(void)fd;
	if ((revents & POLLOUT) && cc_flush(cc) < 0)
		return;
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	n = recv(cc->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		cc_close(cc);
		return;
	}
	{
		char *in = realloc(cc->in, cc->in_len + (size_t)n);
		size_t start = 0;

		if (!in) {
			cc_close(cc);
			return;
		}
		cc->in = in;
		memcpy(cc->in + cc->in_len, buf, (size_t)n);
		cc->in_len += (size_t)n;
		for (size_t i = 0; i < cc->in_len; i++) {
			if (cc->in[i] != '\n')
				continue;
			if (i > start &&
			    cc_line(cc, cc->in + start, i - start) < 0) {
				cc_close(cc);
				return;
			}
			start = i + 1;
		}
		memmove(cc->in, cc->in + start, cc->in_len - start);
		cc->in_len -= start;
		if (cc->in_len > CONTROL_LINE_MAX)
			cc_close(cc);
	}
}

static void on_accept(struct loop *loop, int fd, short revents, void *arg)
{
	struct control_listen *l = arg;
	struct control_state *cs = l->cs;
	struct control_conn *cc;
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int k = 0, cfd;

	(void)loop;
	(void)revents;
	cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0)
		return;
	/* The directory already keeps other users out; the kernel's word
	 * on the peer is checked all the same. */
	if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
	    cred.uid != geteuid()) {
		close(cfd);
		return;
	}
	for (cc = cs->conns; cc; cc = cc->next)
		k += cc->rank == l->rank;
	if (k >= CONTROL_CONNS_PER_RANK || !(cc = calloc(1, sizeof(*cc)))) {
		close(cfd);
		return;
	}
	cc->cs = cs;
	cc->fd = cfd;
	cc->rank = l->rank;
	cc->id = ++cs->next_id;
	if (loop_fd_add(cs->a->loop, cfd, POLLIN, on_conn, cc) < 0) {
		close(cfd);
		free(cc);
		return;
	}
	cc->next = cs->conns;
	cs->conns = cc;
}

int control_rank_env(struct agent *a, int rank, struct envv *env)
{
	struct control_state *cs;
	struct control_listen *l;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (!a->run_dir[0] || !(cs = state_of(a)))
		return 0; /* no private directory: no channel, the
			   * classic restart */
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ctl-%d.sock",
		     a->run_dir, rank) >= (int)sizeof(sa.sun_path))
		return 0;
	if (cs->n_ls == cs->cap_ls) {
		int cap = cs->cap_ls ? 2 * cs->cap_ls : 8;
		struct control_listen *ls =
		    realloc(cs->ls, (size_t)cap * sizeof(*ls));

		if (!ls)
			return -1;
		for (int i = 0; i < cs->n_ls; i++)
			loop_fd_add(a->loop, ls[i].fd, POLLIN, on_accept,
				    &ls[i]);
		cs->ls = ls;
		cs->cap_ls = cap;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	unlink(sa.sun_path); /* ours, in our own directory */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(sa.sun_path, 0600) < 0 || listen(fd, 16) < 0) {
		close(fd);
		return 0;
	}
	l = &cs->ls[cs->n_ls];
	l->cs = cs;
	l->fd = fd;
	l->rank = rank;
	snprintf(l->path, sizeof(l->path), "%s", sa.sun_path);
	if (loop_fd_add(a->loop, fd, POLLIN, on_accept, l) < 0) {
		close(fd);
		unlink(sa.sun_path);
		return 0;
	}
	cs->n_ls++;
	return envv_set(env, "HERD_CONTROL", sa.sun_path);
}

void control_on_frame(struct agent *a, struct proto_frame *f)
{
	struct control_state *cs = a->control;
	int rank = (int)json_integer_value(json_object_get(f->body, "rank"));
	int to = (int)json_integer_value(json_object_get(f->body, "to"));
	json_t *msg = json_object_get(f->body, "msg");
	struct control_conn *cc, *next;

	if (!cs || json_integer_value(json_object_get(f->body, "attempt")) !=
			   a->attempt)
		return; /* an attempt already over */
	for (cc = cs->conns; cc; cc = next) {
		next = cc->next;
		if (cc->rank != rank)
			continue;
		if (to ? cc->id == to : cc->hello)
			cc_put(cc, msg);
	}
}

void control_leave(struct agent *a)
{
	struct control_state *cs = a->control;
	struct control_conn *cc, *next;
	json_t *msg;

	if (!cs || !(msg = json_pack("{s:s, s:i}", "op", "leave", "attempt",
				     a->attempt)))
		return;
	for (cc = cs->conns; cc; cc = next) {
		next = cc->next; /* cc_put may close cc */
		if (cc->hello)
			cc_put(cc, msg);
	}
	json_decref(msg);
}

void control_fini(struct agent *a)
{
	struct control_state *cs = a->control;

	if (!cs)
		return;
	while (cs->conns)
		cc_close(cs->conns);
	for (int i = 0; i < cs->n_ls; i++) {
		loop_fd_del(a->loop, cs->ls[i].fd);
		close(cs->ls[i].fd);
		unlink(cs->ls[i].path);
	}
	free(cs->ls);
	free(cs);
	a->control = NULL;
}

bool control_all_hello(struct agent *a)
{
	struct control_state *cs = a->control;
	int running = 0;

	if (!cs)
		return false;
	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];
		bool said = false;

		if (!r->running)
			continue;
		running++;
		for (struct control_conn *cc = cs->conns; cc && !said;
		     cc = cc->next)
			said = cc->rank == r->rank && cc->hello;
		if (!said)
			return false;
	}
	return running > 0;
}
