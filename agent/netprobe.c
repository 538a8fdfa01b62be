/* netprobe.c — the transfers of the health gate's network probe.  herd
 * pairs the nodes (launcher/ctl/check.c); for each transfer it tells one
 * agent to listen and, once that one answered with its port,
 * the other to connect.  The connecting side sends `bytes`, the listening
 * side receives them, for at most timeout_ms, and reports what it
 * received and how long that took (each pair is probed both ways, in two
 * rounds).  The transfer runs in a child,
 * `herd-agent netprobe listen|connect ...` (blocking code with poll and a
 * deadline), so the agent's loop never waits on the network: the child's
 * one line of stdout ("ok RX_BYTES RX_US" or "error WHY") is read when it
 * has exited.  RX_US runs from the first byte received to the last (or
 * to the deadline). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/check.h"

struct netprobe_state {
	pid_t pid;  /* the child, 0 when none */
	int out_fd; /* its stdout */
	int round;
};

static void np_result(struct agent *a, int round, const char *error,
		      long long rx, long long us)
{
	json_t *b = json_pack("{s:i, s:s}", "round", round, "op", "result");

	if (error) {
		json_object_set_new(b, "error", json_string(error));
	} else {
		json_object_set_new(b, "rx_bytes", json_integer(rx));
		json_object_set_new(b, "rx_us", json_integer(us));
	}
	agent_send(a, PROTO_NETPROBE, b, NULL, 0);
}

static void on_np_exit(struct loop *loop, const struct proc_exit *e, void *arg)
{
	struct agent *a = arg;
	struct netprobe_state *s = a->netprobe;
	char buf[512] = "", why[600];
	long long rx = 0, us = 0;
	ssize_t n;

	(void)loop;
	if (!s || s->pid != e->pid)
		return;
	n = read(s->out_fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	close(s->out_fd);
	s->out_fd = -1;
	s->pid = 0;
	if (sscanf(buf, "ok %lld %lld", &rx, &us) == 2 && rx >= 0 && us >= 0) {
		np_result(a, s->round, NULL, rx, us);
		return;
	}
	if (!strncmp(buf, "error ", 6))
		snprintf(why, sizeof(why), "%s", buf + 6);
	else if (e->step != PROC_STEP_NONE)
		snprintf(why, sizeof(why), "%s: %s", proc_step_what(e->step),
			 strerror(e->err));
	else
		snprintf(why, sizeof(why), "probe ended without a result");
	np_result(a, s->round, why, 0, 0);
}

void netprobe_on_frame(struct agent *a, struct proto_frame *f)
{
	json_t *b = f->body;
	int round = (int)json_integer_value(json_object_get(b, "round"));
	const char *op = json_string_value(json_object_get(b, "op"));
	const char *addr = json_string_value(json_object_get(b, "addr"));
	const char *peer = json_string_value(json_object_get(b, "peer"));
	char bytes[32], timeout[32], port[16], why[256];
	struct netprobe_state *s = a->netprobe;
	struct proc_opts opts = {0};
	struct sockaddr_in sin = {0};
	socklen_t slen = sizeof(sin);
	struct herd_err err;
	bool listen_op = !strcmp(op, "listen");
	int lfd = -1;
	pid_t pid;

	herd_err_clear(&err);
	if (!s && !(s = a->netprobe = calloc(1, sizeof(*s)))) {
		np_result(a, round, "out of memory", 0, 0);
		return;
	}
	if (s->pid > 0) {
		np_result(a, round, "a probe is already running", 0, 0);
		return;
	}
	snprintf(bytes, sizeof(bytes), "%lld",
		 (long long)json_integer_value(json_object_get(b, "bytes")));
	snprintf(
	    timeout, sizeof(timeout), "%lld",
	    (long long)json_integer_value(json_object_get(b, "timeout_ms")));
	snprintf(port, sizeof(port), "%lld",
		 (long long)json_integer_value(json_object_get(b, "port")));
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1) {
		snprintf(why, sizeof(why), "%s is not an IPv4 address", addr);
		np_result(a, round, why, 0, 0);
		return;
	}
	if (listen_op) {
		sin.sin_family = AF_INET;
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0 ||
		    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
		    listen(lfd, 1) < 0 ||
		    getsockname(lfd, (struct sockaddr *)&sin, &slen) < 0) {
			snprintf(why, sizeof(why), "listen on %s: %s", addr,
				 strerror(errno));
			if (lfd >= 0)
				close(lfd);
			np_result(a, round, why, 0, 0);
			return;
		}
		opts.io[0].kind = PROC_FD_DUP;
		opts.io[0].fd = lfd;
	}
	opts.io[1].kind = PROC_FD_PIPE;
	opts.group = PROC_GROUP_NEW;
	agent_self_refresh(a);
	opts.path = a->self_path[0] ? a->self_path : "/proc/self/exe";
	{
		char *argv_l[] = {"herd-agent", "netprobe",   "listen", bytes,
				  timeout,	(char *)peer, NULL};
		char *argv_c[] = {"herd-agent", "netprobe", "connect",
				  (char *)addr, port,	    bytes,
				  timeout,	NULL};

		pid = proc_spawn(a->loop, listen_op ? argv_l : argv_c, &opts,
				 on_np_exit, a, &err);
	}
	if (lfd >= 0)
		close(lfd);
	if (pid < 0) {
		np_result(a, round, err.text, 0, 0);
		return;
	}
	s->pid = pid;
	s->out_fd = opts.io[1].fd;
	s->round = round;
	if (listen_op)
		agent_send(a, PROTO_NETPROBE,
			   json_pack("{s:i, s:s, s:i}", "round", round, "op",
				     "listening", "port",
				     (int)ntohs(sin.sin_port)),
			   NULL, 0);
}

void netprobe_fini(struct agent *a)
{
	struct netprobe_state *s = a->netprobe;

	if (!s)
		return;
	if (s->pid > 0) {
		kill(-s->pid, SIGKILL);
		proc_forget(a->loop, s->pid);
		close(s->out_fd);
	}
	free(s);
	a->netprobe = NULL;
}

/* ---- the child: `herd-agent netprobe ...` ----------------------------------
 */

static int64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int np_fail(const char *what)
{
	printf("error %s: %s\n", what, strerror(errno));
	return 1;
}

static int wait_fd(int fd, short ev, int64_t deadline_us)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int64_t left = deadline_us - mono_us();
	int rc;

	if (left <= 0)
		return 0;
	do
		rc = poll(&p, 1, (int)((left + 999) / 1000));
	while (rc < 0 && errno == EINTR);
	return rc;
}

int netprobe_main(int argc, char **argv)
{
	static char buf[64 * 1024];
	bool listen_op = (argc == 4 || argc == 5) && !strcmp(argv[1], "listen");
	long long bytes, timeout_ms, sent = 0, got = 0;
	int64_t start, deadline, first_us = 0, done_us = 0;
	int fd, one = 1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!listen_op && !(argc == 6 && !strcmp(argv[1], "connect"))) {
		fprintf(stderr, "usage: herd-agent netprobe listen BYTES "
				"TIMEOUT_MS [PEER] (socket on stdin)\n"
				"       herd-agent netprobe connect ADDR PORT "
				"BYTES TIMEOUT_MS\n");
		return 2;
	}
	bytes = atoll(argv[listen_op ? 2 : argc - 2]);
	timeout_ms = atoll(argv[listen_op ? 3 : argc - 1]);
	if (bytes < 1 || timeout_ms < 1)
		return 2;
	deadline = mono_us() + timeout_ms * 1000;
	if (listen_op) {
		struct in_addr want = {0};

		/* Only the peer herd paired us with is measured: another
		 * process that connects first (any user can reach the port)
		 * is closed and the wait goes on. */
		if (argc == 5 && inet_pton(AF_INET, argv[4], &want) != 1) {
			printf("error bad peer address %s\n", argv[4]);
			return 1;
		}
		for (;;) {
			struct sockaddr_in from;
			socklen_t flen = sizeof(from);

			if (wait_fd(0, POLLIN, deadline) <= 0) {
				printf("error nobody connected within %lld "
				       "ms\n",
				       timeout_ms);
				return 1;
			}
			fd = accept(0, (struct sockaddr *)&from, &flen);
			if (fd < 0)
				return np_fail("accept");
			if (argc != 5 || (from.sin_family == AF_INET &&
					  from.sin_addr.s_addr == want.s_addr))
				break;
			close(fd);
		}
	} else {
		struct sockaddr_in sin = {.sin_family = AF_INET};
		int soerr = 0;
		socklen_t len = sizeof(soerr);

		sin.sin_port = htons((uint16_t)atoi(argv[3]));
		if (inet_pton(AF_INET, argv[2], &sin.sin_addr) != 1) {
			printf("error bad address %s\n", argv[2]);
			return 1;
		}
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return np_fail("socket");
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 &&
		    errno != EINPROGRESS)
			return np_fail("connect");
		if (wait_fd(fd, POLLOUT, deadline) <= 0) {
			printf("error connect to %s:%s timed out\n", argv[2],
			       argv[3]);
			return 1;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
		if (soerr) {
			errno = soerr;
			return np_fail("connect");
		}
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(buf, 0x5a, sizeof(buf));
	start = mono_us();
	deadline = start + timeout_ms * 1000;
	/* One direction per connection: the listener receives, the other
	 * sends (herd probes each pair both ways, one after the other, so
	 * that a port slow one way is not hidden by the ACKs of the other). */
	while (listen_op ? got < bytes : sent < bytes) {
		struct pollfd p = {.fd = fd,
				   .events = listen_op ? POLLIN : POLLOUT};
		int64_t left = deadline - mono_us();
		ssize_t n;

		if (left <= 0)
			break;
		if (poll(&p, 1, (int)((left + 999) / 1000)) < 0) {
			if (errno == EINTR)
				continue;
			return np_fail("poll");
		}
		if (listen_op && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
			n = recv(fd, buf, sizeof(buf), 0);
			if (n == 0 || (n < 0 && errno == ECONNRESET))
				break; /* the sender gave up */
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return np_fail("recv");
			if (n > 0) {
				if (!first_us)
					first_us = mono_us();
				got += n;
				if (got >= bytes)
					done_us = mono_us();
			}
		} else if (!listen_op &&
			   (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
			size_t want = sizeof(buf);

			if ((long long)want > bytes - sent)
				want = (size_t)(bytes - sent);
			n = send(fd, buf, want, MSG_NOSIGNAL);
			/* The receiver reached its deadline and went. */
			if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
				break;
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return np_fail("send");
			if (n > 0)
				sent += n;
		}
	}
	if (!done_us)
		done_us = mono_us();
	/* Timed from the first byte in: the two children start a few ms
	 * apart on a busy machine, which is not the link's doing. */
	printf("ok %lld %lld\n", got,
	       (long long)(done_us - (first_us ? first_us : start)));
	return 0;
}
