/* probe.c — `herd-agent probe`: the rank program of `herd bench`.  One
 * rank per node; the ranks meet through rank 0 (MASTER_ADDR:MASTER_PORT),
 * form a TCP ring and time a ring all-reduce (reduce-scatter then
 * all-gather, as NCCL's ring does) of float32 buffers of each size.  Rank
 * 0 prints a table on stdout: the ring (each rank's host and the address
 * the others reach it on), then per size the time of one all-reduce, the
 * algorithm bandwidth (bytes / time) and the bus bandwidth
 * (algbw * 2 (N - 1) / N, what each link carried, as nccl-tests report
 * it).  The
 * check is that every element holds 1 + 2 + ... + N.  Exit status: 0, 1
 * on a failed check, 2 on bad arguments or environment, 3 on a network
 * error (said on stderr). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent/probe.h"

#define PROBE_SIZES_MAX 32
#define PROBE_BYTES_MAX (1UL << 30)
/* Rendezvous and every ring exchange give up after this long. */
#define PROBE_TIMEOUT_MS 60000

struct peer {
	char host[256];
	char addr[INET6_ADDRSTRLEN];
	uint16_t port;
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int die(const char *what)
{
	fprintf(stderr, "herd-agent probe: %s: %s\n", what, strerror(errno));
	return -1;
}

/* As die() for rank 0's MASTER_ADDR:MASTER_PORT: what answers there may
 * be another program on that port. */
static int die_at(const char *what, const char *master, unsigned port)
{
	fprintf(stderr,
		"herd-agent probe: %s %s:%u (launch.master_port; another "
		"program on that port?): %s\n",
		what, master, port, strerror(errno));
	return -1;
}

/* Reads or writes len bytes in full (blocking, with the probe's timeout
 * set on the socket). */
static int io_all(int fd, void *buf, size_t len, bool wr)
{
	char *p = buf;

	while (len) {
		ssize_t n =
		    wr ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ECONNRESET;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void sock_setup(int fd)
{
	struct timeval tv = {PROBE_TIMEOUT_MS / 1000, 0};
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A listening socket on addr (port 0: any), family of addr. */
static int listen_on(const struct sockaddr_storage *addr, socklen_t len,
		     uint16_t port)
{
	struct sockaddr_storage a = *addr;
	int one = 1, fd;

	if (a.ss_family == AF_INET)
		((struct sockaddr_in *)&a)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&a)->sin6_port = htons(port);
	fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, 1024) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static uint16_t port_of(int fd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return 0;
	return ntohs(a.ss_family == AF_INET
			 ? ((struct sockaddr_in *)&a)->sin_port
			 : ((struct sockaddr_in6 *)&a)->sin6_port);
}

static int connect_to(const char *addr, uint16_t port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	char service[8];
	int fd = -1;
	int64_t until = now_us() + (int64_t)PROBE_TIMEOUT_MS * 1000;

	snprintf(service, sizeof(service), "%u", port);
	if (getaddrinfo(addr, service, &hints, &res) != 0 || !res) {
		errno = EHOSTUNREACH;
		return -1;
	}
	/* Rank 0 may not listen yet: retry until the timeout. */
	while (now_us() < until) {
		fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			break;
		if (connect(fd, res->ai_addr, res->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(50 * 1000); /* retry interval of a bounded wait */
	}
	freeaddrinfo(res);
	if (fd >= 0)
		sock_setup(fd);
	return fd;
}

/* Sends slen bytes to out while receiving rlen bytes from in. */
static int exchange(int out, const char *sbuf, size_t slen, int in, char *rbuf,
		    size_t rlen)
{
	while (slen || rlen) {
		struct pollfd p[2] = {
		    {.fd = slen ? out : -1, .events = POLLOUT},
		    {.fd = rlen ? in : -1, .events = POLLIN}};
		int rc = poll(p, 2, PROBE_TIMEOUT_MS);

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0) {
			if (rc == 0)
				errno = ETIMEDOUT;
			return -1;
		}
		if (p[0].revents) {
			ssize_t n =
			    send(out, sbuf, slen, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (n > 0) {
				sbuf += n;
				slen -= (size_t)n;
			}
		}
		if (p[1].revents) {
			ssize_t n = recv(in, rbuf, rlen, MSG_DONTWAIT);

			if (n == 0)
				errno = ECONNRESET;
			if (n == 0 ||
			    (n < 0 && errno != EAGAIN && errno != EINTR))
				return -1;
			if (n > 0) {
				rbuf += n;
				rlen -= (size_t)n;
			}
		}
	}
	return 0;
}

/* The length of the chunk at off: the last ones may be short or empty. */
static size_t chunk_len(size_t off, size_t chunk, size_t count)
{
	if (off >= count)
		return 0;
	return count - off < chunk ? count - off : chunk;
}

/* Ring all-reduce (sum) of count floats in buf; tmp holds a chunk. */
static int ring_allreduce(float *buf, size_t count, float *tmp, int rank, int n,
			  int next, int prev)
{
	size_t chunk = (count + (size_t)n - 1) / (size_t)n;

	for (int step = 0; step < 2 * (n - 1); step++) {
		/* reduce-scatter, then all-gather: the chunk sent moves one
		 * place back each step. */
		int send_c = ((rank - step) % n + n) % n;
		int recv_c = ((rank - step - 1) % n + n) % n;
		size_t s_off = (size_t)send_c * chunk;
		size_t r_off = (size_t)recv_c * chunk;
		size_t s_len = chunk_len(s_off, chunk, count);
		size_t r_len = chunk_len(r_off, chunk, count);
		bool reduce = step < n - 1;

		if (exchange(next, (char *)(buf + s_off), s_len * sizeof(float),
			     prev, (char *)(reduce ? tmp : buf + r_off),
			     r_len * sizeof(float)) < 0)
			return -1;
		if (reduce)
			for (size_t i = 0; i < r_len; i++)
				buf[r_off + i] += tmp[i];
	}
	return 0;
}

static int parse_sizes(const char *s, size_t *sizes, int *n)
{
	char *copy = strdup(s), *save = NULL, *tok;

	*n = 0;
	if (!copy)
		return -1;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long v = strtoul(tok, &end, 10);

		if (end == tok)
			goto bad;
		if (*end == 'K' || *end == 'k')
			v <<= 10, end++;
		else if (*end == 'M' || *end == 'm')
			v <<= 20, end++;
		else if (*end == 'G' || *end == 'g')
			v <<= 30, end++;
		if (*end || v < sizeof(float) || v > PROBE_BYTES_MAX ||
		    *n == PROBE_SIZES_MAX)
			goto bad;
		sizes[(*n)++] = v / sizeof(float) * sizeof(float);
	}
	free(copy);
	return *n ? 0 : -1;
bad:
	free(copy);
	return -1;
}

/* Rendezvous: every rank tells rank 0 where it listens for the ring;
 * rank 0 answers everyone with the whole table. */
static int rendezvous(int rank, int n, const char *master, uint16_t mport,
		      struct peer *peers, int *ring_fd)
{
	struct sockaddr_storage me;
	socklen_t mlen = sizeof(me);
	struct peer self;
	int fd = -1, lfd = -1;

	memset(&self, 0, sizeof(self));
	gethostname(self.host, sizeof(self.host) - 1);
	if (rank == 0) {
		struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
					 .ai_flags = AI_PASSIVE},
				*res = NULL;
		int *fds = calloc((size_t)n, sizeof(*fds));

		if (!fds)
			return -1;
		if (getaddrinfo(master, NULL, &hints, &res) != 0 || !res) {
			free(fds);
			errno = EHOSTUNREACH;
			return die("MASTER_ADDR");
		}
		memcpy(&me, res->ai_addr, res->ai_addrlen);
		mlen = res->ai_addrlen;
		freeaddrinfo(res);
		if ((lfd = listen_on(&me, mlen, mport)) < 0 &&
		    errno == EADDRINUSE) {
			free(fds);
			fprintf(stderr,
				"herd-agent probe: MASTER_PORT %u on %s is in "
				"use by another program: set "
				"launch.master_port to a free port\n",
				mport, master);
			return -1;
		}
		if (lfd < 0 || (*ring_fd = listen_on(&me, mlen, 0)) < 0) {
			free(fds);
			return die("listen on MASTER_ADDR");
		}
		snprintf(self.addr, sizeof(self.addr), "%s", master);
		self.port = port_of(*ring_fd);
		peers[0] = self;
		for (int got = 1; got < n; got++) {
			struct peer p;
			int32_t r;
			struct pollfd pf = {.fd = lfd, .events = POLLIN};

			if (poll(&pf, 1, PROBE_TIMEOUT_MS) <= 0 ||
			    (fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
				errno = errno ? errno : ETIMEDOUT;
				break;
			}
			sock_setup(fd);
			if (io_all(fd, &r, sizeof(r), false) < 0 ||
			    io_all(fd, &p, sizeof(p), false) < 0 || r < 1 ||
			    r >= n || fds[r]) {
				close(fd);
				break;
			}
			p.host[sizeof(p.host) - 1] = '\0';
			p.addr[sizeof(p.addr) - 1] = '\0';
			peers[r] = p;
			fds[r] = fd;
			fd = -1;
		}
		close(lfd);
		for (int r = 1; r < n; r++) {
			if (!fds[r] ||
			    io_all(fds[r], peers, (size_t)n * sizeof(*peers),
				   true) < 0) {
				for (int k = 1; k < n; k++)
					if (fds[k])
						close(fds[k]);
				free(fds);
				return die("rendezvous at rank 0");
			}
		}
		for (int r = 1; r < n; r++)
			close(fds[r]);
		free(fds);
		return 0;
	}
	if ((fd = connect_to(master, mport)) < 0)
		return die_at("cannot reach rank 0 at", master, mport);
	/* The address this node reaches rank 0 from is the one the ring
	 * uses: the interface the job's own traffic takes. */
	if (getsockname(fd, (struct sockaddr *)&me, &mlen) < 0 ||
	    (*ring_fd = listen_on(&me, mlen, 0)) < 0) {
		close(fd);
		return die("listen for the ring");
	}
	if (me.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&me)->sin_addr,
			  self.addr, sizeof(self.addr));
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&me)->sin6_addr,
			  self.addr, sizeof(self.addr));
	self.port = port_of(*ring_fd);
	{
		int32_t r = rank;

		if (io_all(fd, &r, sizeof(r), true) < 0 ||
		    io_all(fd, &self, sizeof(self), true) < 0 ||
		    io_all(fd, peers, (size_t)n * sizeof(*peers), false) < 0) {
			close(fd);
			return die_at("rendezvous with rank 0 at", master,
				      mport);
		}
	}
	close(fd);
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The median of N round times (sorts them in place); the mean of the
 * middle two when N is even. */
static double median_us(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	return n % 2 ? (double)v[n / 2]
		     : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
}

static int env_int(const char *name, int lo, int hi, int *out)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return -1;
	x = strtol(v, &end, 10);
	if (*end || x < lo || x > hi)
		return -1;
	*out = (int)x;
	return 0;
}

int probe_main(int argc, char **argv)
{
	size_t sizes[PROBE_SIZES_MAX];
	int n_sizes = 0, iters = 5, rank, n, port, lfd = -1, next = -1,
	    prev = -1, status = 3;
	const char *master = getenv("MASTER_ADDR");
	const char *size_arg = "8,64K,1M,16M";
	struct peer *peers = NULL;
	float *buf = NULL, *tmp = NULL;
	int64_t *round_us = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
			size_arg = argv[++i];
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: herd-agent probe [--sizes "
					"B[,B...]] [--iters N]\n");
			return 2;
		}
	}
	if (parse_sizes(size_arg, sizes, &n_sizes) < 0 || iters < 1 ||
	    iters > 1000) {
		fprintf(stderr, "herd-agent probe: --sizes takes 4 bytes to "
				"1G each (K, M, G suffixes), --iters 1 to "
				"1000\n");
		return 2;
	}
	if (env_int("RANK", 0, 1 << 20, &rank) < 0 ||
	    env_int("WORLD_SIZE", 1, 1 << 20, &n) < 0 ||
	    env_int("MASTER_PORT", 1, 65535, &port) < 0 || !master ||
	    rank >= n) {
		fprintf(stderr, "herd-agent probe: needs RANK, WORLD_SIZE, "
				"MASTER_ADDR and MASTER_PORT (it runs as a "
				"rank of herd bench)\n");
		return 2;
	}
	if (!(peers = calloc((size_t)n, sizeof(*peers))))
		goto out;
	if (n > 1) {
		if (rendezvous(rank, n, master, (uint16_t)port, peers, &lfd) <
		    0)
			goto out;
		/* Connect forward, accept from behind. */
		if ((next = connect_to(peers[(rank + 1) % n].addr,
				       peers[(rank + 1) % n].port)) < 0) {
			die("cannot reach the next rank of the ring");
			goto out;
		}
		{
			struct pollfd pf = {.fd = lfd, .events = POLLIN};

			if (poll(&pf, 1, PROBE_TIMEOUT_MS) <= 0 ||
			    (prev = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) <
				0) {
				errno = errno ? errno : ETIMEDOUT;
				die("the previous rank of the ring never came");
				goto out;
			}
			sock_setup(prev);
		}
	} else {
		gethostname(peers[0].host, sizeof(peers[0].host) - 1);
		snprintf(peers[0].addr, sizeof(peers[0].addr), "%s", master);
	}
	if (rank == 0) {
		printf("ring all-reduce over %d node%s (TCP, float32 sums, "
		       "median of %d timed rounds after 1 warm-up):\n",
		       n, n == 1 ? "" : "s", iters);
		printf("  %-5s %-24s %s\n", "rank", "host", "address");
		for (int r = 0; r < n; r++)
			printf("  %-5d %-24s %s\n", r, peers[r].host,
			       peers[r].addr);
		if (n == 1)
			printf("\none node: nothing crosses the network; give "
			       "the job two or more nodes\n");
		else
			printf("\n  %12s %12s %12s %12s  %s\n", "bytes",
			       "time_us", "algbw_GB/s", "busbw_GB/s", "check");
		fflush(stdout);
	}
	if (n == 1) {
		status = 0;
		goto out;
	}
	/* Each size's timed rounds, for their median. */
	if (!(round_us = calloc((size_t)iters, sizeof(*round_us)))) {
		fprintf(stderr, "herd-agent probe: out of memory\n");
		status = 3;
		goto out;
	}
	status = 0;
	for (int s = 0; s < n_sizes && status != 3; s++) {
		size_t count = sizes[s] / sizeof(float);
		size_t chunk = (count + (size_t)n - 1) / (size_t)n;
		const float want = (float)n * (float)(n + 1) / 2;
		bool ok = true;

		free(buf);
		free(tmp);
		buf = malloc(count * sizeof(float));
		tmp = malloc(chunk * sizeof(float));
		if (!buf || !tmp) {
			fprintf(stderr, "herd-agent probe: out of memory\n");
			status = 3;
			break;
		}
		/* One warm-up round, then the timed ones; every round
		 * starts from the same data, so every check is exact. */
		for (int it = -1; it < iters; it++) {
			int64_t t0;

			for (size_t i = 0; i < count; i++)
				buf[i] = (float)(rank + 1);
			t0 = now_us();
			if (n > 1 && ring_allreduce(buf, count, tmp, rank, n,
						    next, prev) < 0) {
				die("ring all-reduce");
				status = 3;
				break;
			}
			if (it >= 0)
				round_us[it] = now_us() - t0;
			for (size_t i = 0; i < count && ok; i++)
				ok = buf[i] == want;
		}
		if (status == 3)
			break;
		if (!ok)
			status = 1;
		if (rank == 0) {
			/* Rank 0's median round, the fill not counted: one
			 * round stalled by another program on a busy node
			 * does not move it, where it would move the mean. */
			double t = median_us(round_us, iters);
			double alg = (double)sizes[s] / (t > 0 ? t : 1) / 1e3;

			printf("  %12zu %12.1f %12.3f %12.3f  %s\n", sizes[s],
			       t, alg, alg * 2.0 * (n - 1) / n,
			       ok ? "ok" : "FAILED");
			fflush(stdout);
		}
	}
out:
	if (next >= 0)
		close(next);
	if (prev >= 0)
		close(prev);
	if (lfd >= 0)
		close(lfd);
	free(peers);
	free(buf);
	free(tmp);
	free(round_us);
	return status;
}
