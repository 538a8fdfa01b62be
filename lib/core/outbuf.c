/* lib/core/outbuf.c — bounded, non-blocking output; see outbuf.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/loop.h"
#include "herd/outbuf.h"

enum outbuf_mode {
	OUTBUF_PLAIN,	/* regular file or device: write() does not wait */
	OUTBUF_SEND,	/* socket: send(MSG_DONTWAIT) */
	OUTBUF_PRIVATE,	/* pipe/terminal reopened with O_NONBLOCK: wfd */
	OUTBUF_POLL,	/* pipe/terminal: poll, then PIPE_BUF at a time */
};

struct outbuf {
	struct loop *loop;
	int fd;			/* the caller's; not owned */
	int wfd;		/* what is written to: fd, or our own (owned) */
	enum outbuf_mode mode;
	bool watching;		/* wfd is on the loop for POLLOUT */
	bool broken;		/* a write failed (EPIPE, EIO): drop all */
	char *buf;		/* held bytes are buf[head, len) */
	size_t head, len, cap, max;
	uint64_t missed;	/* dropped, not yet reported */
	outbuf_drained_fn on_drained;
	void *drained_arg;
};

/* A private non-blocking description of fd's pipe or terminal, or -1. */
static int reopen_nonblock(int fd, const struct stat *st)
{
	char path[64];
	struct stat st2;
	int nfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (nfd < 0)
		return -1;
	/* The magic link names our own fd; still, write only to the very
	 * object fd is. */
	if (fstat(nfd, &st2) < 0 || st2.st_dev != st->st_dev ||
	    st2.st_ino != st->st_ino || st2.st_rdev != st->st_rdev) {
		close(nfd);
		return -1;
	}
	return nfd;
}

struct outbuf *outbuf_new(struct loop *loop, int fd, size_t max)
{
	struct outbuf *b = calloc(1, sizeof(*b));
	struct stat st;

	if (!b)
		return NULL;
	b->loop = loop;
	b->fd = b->wfd = fd;
	b->max = max;
	if (fstat(fd, &st) < 0) {
		b->broken = true;	/* closed fd: everything is missed */
	} else if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode) ||
		   (S_ISCHR(st.st_mode) && !isatty(fd))) {
		b->mode = OUTBUF_PLAIN;
	} else if (S_ISSOCK(st.st_mode)) {
		b->mode = OUTBUF_SEND;
	} else if ((b->wfd = reopen_nonblock(fd, &st)) >= 0) {
		b->mode = OUTBUF_PRIVATE;
	} else {
		b->wfd = fd;
		b->mode = OUTBUF_POLL;
	}
	return b;
}

/* One non-blocking write; returns bytes written, 0 when the fd is full,
 * -1 when it failed for good. */
static ssize_t write_some(struct outbuf *b, const char *p, size_t n)
{
	ssize_t w;

	for (;;) {
		switch (b->mode) {
		case OUTBUF_SEND:
			w = send(b->wfd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
			break;
		case OUTBUF_POLL: {
			struct pollfd pfd = {.fd = b->wfd, .events = POLLOUT};

			if (poll(&pfd, 1, 0) <= 0 || !(pfd.revents & POLLOUT)) {
				if (pfd.revents & (POLLERR | POLLNVAL))
					return -1;
				return 0;
			}
			w = write(b->wfd, p, n > PIPE_BUF ? PIPE_BUF : n);
			break;
		}
		default:
			w = write(b->wfd, p, n);
			break;
		}
		if (w >= 0)
			return w;
		if (errno == EINTR)
			continue;
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
	}
}

static void drop_held(struct outbuf *b)
{
	b->missed += b->len - b->head;
	b->head = b->len = 0;
}

static void on_writable(struct loop *loop, int fd, short revents, void *arg);

static void watch(struct outbuf *b, bool on)
{
	if (on == b->watching || !b->loop)
		return;
	if (on && loop_fd_add(b->loop, b->wfd, POLLOUT, on_writable, b) < 0)
		return;	/* retried on the next put or at the flush */
	if (!on)
		loop_fd_del(b->loop, b->wfd);
	b->watching = on;
}

/* Writes what the fd takes of the held bytes. */
static void drain(struct outbuf *b)
{
	while (b->head < b->len && !b->broken) {
		ssize_t w = write_some(b, b->buf + b->head, b->len - b->head);

		if (w < 0)
			b->broken = true;
		if (w <= 0)
			break;
		b->head += (size_t)w;
	}
	if (b->broken)
		drop_held(b);
	if (b->head == b->len)
		b->head = b->len = 0;
	watch(b, b->len > 0);
}

static void on_writable(struct loop *loop, int fd, short revents, void *arg)
{
	struct outbuf *b = arg;

	(void)loop;
	(void)fd;
	if (revents & (POLLERR | POLLNVAL))
		b->broken = true;
	drain(b);
	if (b->len == 0 && b->missed && !b->broken && b->on_drained) {
		uint64_t m = b->missed;

		b->missed = 0;
		b->on_drained(b, m, b->drained_arg);
	}
}

/* Room for n more bytes at the end of buf (within max); false if none. */
static bool reserve(struct outbuf *b, size_t n)
{
	size_t need, cap;
	char *p;

	if (b->len - b->head + n > b->max)
		return false;
	if (b->head > 0 && b->len + n > b->cap) {
		memmove(b->buf, b->buf + b->head, b->len - b->head);
		b->len -= b->head;
		b->head = 0;
	}
	need = b->len + n;
	if (need <= b->cap)
		return true;
	cap = b->cap ? b->cap : 64 * 1024;
	while (cap < need)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	p = realloc(b->buf, cap);
	if (!p)
		return false;	/* counted as missed by the caller */
	b->buf = p;
	b->cap = cap;
	return true;
}

int outbuf_put(struct outbuf *b, const struct iovec *iov, int iovcnt)
{
	size_t total = 0;
	int i = 0;

	for (int k = 0; k < iovcnt; k++)
		total += iov[k].iov_len;
	if (total == 0)
		return 0;
	if (b->broken || b->len - b->head + total > b->max) {
		b->missed += total;
		return 1;
	}
	/* Nothing held: straight to the fd, keeping only what it refuses. */
	if (b->len == b->head) {
		size_t off = 0;

		while (i < iovcnt) {
			ssize_t w = 0;

			if (off < iov[i].iov_len) {
				w = write_some(b, (const char *)iov[i].iov_base + off,
					       iov[i].iov_len - off);
				if (w < 0) {
					b->broken = true;
					b->missed += total;
					return 1;
				}
				if (w == 0)
					break;
			}
			off += (size_t)w;
			total -= (size_t)w;
			if (off == iov[i].iov_len) {
				i++;
				off = 0;
			}
		}
		if (i == iovcnt)
			return 0;
		if (!reserve(b, total)) {
			/* The fd has part of this unit; the rest cannot be
			 * held: count it, the caller's copy is complete. */
			b->missed += total;
			return 1;
		}
		memcpy(b->buf + b->len, (const char *)iov[i].iov_base + off,
		       iov[i].iov_len - off);
		b->len += iov[i].iov_len - off;
		i++;
	} else if (!reserve(b, total)) {
		b->missed += total;
		return 1;
	}
	for (; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;	/* its base may be NULL */
		memcpy(b->buf + b->len, iov[i].iov_base, iov[i].iov_len);
		b->len += iov[i].iov_len;
	}
	watch(b, true);
	return 0;
}

void outbuf_flush(struct outbuf *b)
{
	if (!b)
		return;
	while (b->len > b->head && !b->broken) {
		struct pollfd pfd = {.fd = b->wfd, .events = POLLOUT};
		size_t before = b->len - b->head;

		if (b->mode != OUTBUF_PLAIN &&
		    poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
		if (pfd.revents & (POLLERR | POLLNVAL))
			b->broken = true;
		drain(b);
		/* A file that takes nothing would spin here. */
		if (b->mode == OUTBUF_PLAIN && b->len - b->head == before)
			b->broken = true;
	}
	if (b->broken)
		drop_held(b);
	watch(b, false);
}

size_t outbuf_pending(const struct outbuf *b)
{
	return b ? b->len - b->head : 0;
}

uint64_t outbuf_take_missed(struct outbuf *b)
{
	uint64_t m;

	if (!b)
		return 0;
	m = b->missed;
	b->missed = 0;
	return m;
}

void outbuf_on_drained(struct outbuf *b, outbuf_drained_fn cb, void *arg)
{
	b->on_drained = cb;
	b->drained_arg = arg;
}

void outbuf_free(struct outbuf *b)
{
	int saved = errno;

	if (!b)
		return;
	outbuf_flush(b);
	if (b->mode == OUTBUF_PRIVATE)
		close(b->wfd);
	free(b->buf);
	free(b);
	errno = saved;
}
