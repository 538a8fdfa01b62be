/* conn.c — framed connection on the loop; see conn.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd/conn.h"

/* 64 KiB reads: large enough to drain a busy agent in few calls. */
#define CONN_READ_CHUNK (64 * 1024)

struct conn {
	struct loop *loop;
	int rfd, wfd;
	struct proto_reader *reader;
	conn_frame_fn on_frame;
	conn_close_fn on_close;
	void *arg;
	char *out;	/* queued bytes: out[out_off..out_len) */
	size_t out_len, out_off, out_cap;
	bool dead, reading;
	/* loop_now_ms() of the last read that brought bytes (0: none yet). */
	int64_t rx_ms;
	/* A failure found inside conn_send() is told to the owner from the
	 * loop (a zero-delay timer), never inside the send: the owner's
	 * close handler may change the very state the sender is walking
	 * (as OpenSSH's chan_write_failed, then channel_garbage_collect).
	 * 0: none pending. */
	long close_timer;
	char close_reason[128];
	int close_clean;
};

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void update_events(struct conn *c)
{
	short want_w = c->out_len > c->out_off ? POLLOUT : 0;

	if (c->dead)
		return;
	if (c->rfd == c->wfd) {
		loop_fd_events(c->loop, c->rfd,
			       (short)((c->reading ? POLLIN : 0) | want_w));
	} else {
		loop_fd_events(c->loop, c->rfd, c->reading ? POLLIN : 0);
		loop_fd_events(c->loop, c->wfd, want_w);
	}
}

static void conn_die(struct conn *c, const char *reason, int clean)
{
	if (c->dead)
		return;
	c->dead = true;
	loop_fd_del(c->loop, c->rfd);
	loop_fd_del(c->loop, c->wfd);
	if (c->on_close)
		c->on_close(c, reason, clean, c->arg);
}

static void deferred_close(struct loop *loop, void *arg)
{
	struct conn *c = arg;

	(void)loop;
	c->close_timer = 0;
	if (c->on_close)
		c->on_close(c, c->close_reason, c->close_clean, c->arg);
}

/* conn_die for the send path: the conn is dead at once (further sends
 * fail, the fds leave the loop) and on_close runs on the loop's next
 * turn. */
static void conn_die_later(struct conn *c, const char *reason, int clean)
{
	if (c->dead)
		return;
	c->dead = true;
	loop_fd_del(c->loop, c->rfd);
	loop_fd_del(c->loop, c->wfd);
	snprintf(c->close_reason, sizeof(c->close_reason), "%s", reason);
	c->close_clean = clean;
	c->close_timer = loop_timer_add(c->loop, 0, deferred_close, c);
	if (c->close_timer < 0) {
		/* Out of memory for one timer: telling the owner late
		 * (inside the send) beats never telling it. */
		c->close_timer = 0;
		if (c->on_close)
			c->on_close(c, c->close_reason, clean, c->arg);
	}
}

/* Writes what is queued.  from_send: called inside conn_send(), where a
 * failure must not call on_close.  Returns -1 when the conn died. */
static int do_write(struct conn *c, bool from_send)
{
	while (c->out_off < c->out_len) {
		ssize_t n = write(c->wfd, c->out + c->out_off,
				  c->out_len - c->out_off);

		if (n < 0) {
			char why[128];

			if (errno == EAGAIN || errno == EINTR)
				break;
			snprintf(why, sizeof(why), "write: %s", strerror(errno));
			if (from_send)
				conn_die_later(c, why, 0);
			else
				conn_die(c, why, 0);
			return -1;
		}
		c->out_off += (size_t)n;
	}
	if (c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	update_events(c);
	return 0;
}

static void do_read(struct conn *c)
{
	char buf[CONN_READ_CHUNK];
	struct herd_err err;
	ssize_t n = read(c->rfd, buf, sizeof(buf));

	if (n < 0) {
		char why[128];

		if (errno == EAGAIN || errno == EINTR)
			return;
		snprintf(why, sizeof(why), "read: %s", strerror(errno));
		conn_die(c, why, 0);
		return;
	}
	if (n == 0) {
		conn_die(c, "end of stream", 1);
		return;
	}
	c->rx_ms = loop_now_ms();
	if (proto_reader_feed(c->reader, buf, (size_t)n, &err) < 0) {
		conn_die(c, err.text, 0);
		return;
	}
	for (;;) {
		struct proto_frame *f = NULL;
		int r = proto_reader_next(c->reader, &f, &err);

		if (r < 0) {
			conn_die(c, err.text, 0);
			return;
		}
		if (r == 0)
			break;
		c->on_frame(c, f, c->arg);
		if (c->dead || !c->reading)
			break;
	}
}

static void on_fd(struct loop *loop, int fd, short revents, void *arg)
{
	struct conn *c = arg;

	(void)loop;
	if (fd == c->wfd && (revents & (POLLOUT | POLLERR)))
		do_write(c, false);
	if (c->dead)
		return;
	if (fd == c->rfd && (revents & (POLLIN | POLLHUP | POLLERR)))
		do_read(c);
	else if (fd == c->wfd && fd != c->rfd && (revents & POLLHUP))
		conn_die(c, "peer closed its input", 0);
}

struct conn *conn_new(struct loop *loop, int rfd, int wfd, size_t max_frame,
		      conn_frame_fn on_frame, conn_close_fn on_close,
		      void *arg)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c || !(c->reader = proto_reader_new(max_frame))) {
		free(c);
		close(rfd);
		if (wfd != rfd)
			close(wfd);
		return NULL;
	}
	c->loop = loop;
	c->rfd = rfd;
	c->wfd = wfd;
	c->on_frame = on_frame;
	c->on_close = on_close;
	c->arg = arg;
	c->reading = true;
	set_nonblock(rfd);
	set_nonblock(wfd);
	loop_fd_add(loop, rfd, POLLIN, on_fd, c);
	if (wfd != rfd)
		loop_fd_add(loop, wfd, 0, on_fd, c);
	return c;
}

void conn_free(struct conn *c)
{
	int saved = errno;

	if (!c)
		return;
	if (c->close_timer)	/* the owner is done with it: no on_close */
		loop_timer_del(c->loop, c->close_timer);
	if (!c->dead) {
		loop_fd_del(c->loop, c->rfd);
		loop_fd_del(c->loop, c->wfd);
	}
	close(c->rfd);
	if (c->wfd != c->rfd)
		close(c->wfd);
	proto_reader_free(c->reader);
	free(c->out);
	free(c);
	errno = saved;
}

int conn_send(struct conn *c, enum proto_type type, const json_t *body,
	      const void *data, size_t data_len, struct herd_err *err)
{
	size_t len = 0;
	char *frame;
	int rc;

	if (c->dead)
		return herd_errprintf(err, "connection is closed");
	frame = proto_encode(type, body, data, data_len, &len, err);
	if (!frame)
		return -1;
	rc = conn_send_encoded(c, frame, len, err);
	free(frame);
	return rc;
}

int conn_send_encoded(struct conn *c, const char *frame, size_t len,
		      struct herd_err *err)
{
	if (c->dead)
		return herd_errprintf(err, "connection is closed");
	if (c->out_len - c->out_off + len > CONN_QUEUE_MAX) {
		conn_die_later(c, "peer stopped reading (send queue full)", 0);
		return herd_errprintf(err, "send queue full");
	}
	if (c->out_off > 0 && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *n;

		if (c->out_off > 0) {	/* reclaim what was written */
			memmove(c->out, c->out + c->out_off,
				c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		while (cap < c->out_len + len)
			cap *= 2;
		n = realloc(c->out, cap);
		if (!n)
			return herd_errprintf(err, "out of memory");
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, frame, len);
	c->out_len += len;
	if (do_write(c, true) < 0)
		return herd_errprintf(err, "%s", c->close_reason);
	return 0;
}

int64_t conn_rx_ms(const struct conn *c)
{
	return c ? c->rx_ms : 0;
}

size_t conn_pending(const struct conn *c)
{
	return c->out_len - c->out_off;
}

int conn_flush(struct conn *c, int timeout_ms)
{
	int64_t end = loop_now_ms() + timeout_ms;

	while (!c->dead && c->out_off < c->out_len) {
		struct pollfd p = {.fd = c->wfd, .events = POLLOUT};
		int64_t left = end - loop_now_ms();

		if (left <= 0)
			return -1;
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return -1;
		if (do_write(c, true) < 0)
			return -1;
	}
	return c->dead ? -1 : 0;
}

void conn_pause_reading(struct conn *c)
{
	c->reading = false;
	update_events(c);
}

int conn_is_dead(const struct conn *c)
{
	return c->dead;
}
