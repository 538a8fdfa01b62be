/* fdpass.c — SCM_RIGHTS, sent and received; see fdpass.h. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "herd/fdpass.h"

union fdpass_cmsg {
	char buf[CMSG_SPACE(FDPASS_MAX * sizeof(int))];
	struct cmsghdr align;
};

int fdpass_send(int sock, char tag, const int *fds, size_t nfds, int flags)
{
	union fdpass_cmsg u;
	struct iovec iov = {.iov_base = &tag, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
	struct cmsghdr *c;
	ssize_t n;

	if (nfds < 1 || nfds > FDPASS_MAX) {
		errno = EINVAL;
		return -1;
	}
	memset(u.buf, 0, sizeof(u.buf));
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	while ((n = sendmsg(sock, &m, MSG_NOSIGNAL | flags)) < 0 &&
	       errno == EINTR)
		;
	return n == 1 ? 0 : -1;
}

int fdpass_recv(int sock, char *tag, int *fds, size_t nfds)
{
	union fdpass_cmsg u;
	struct iovec iov = {.iov_base = tag, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c;
	ssize_t n;

	if (nfds < 1 || nfds > FDPASS_MAX) {
		errno = EINVAL;
		return -1;
	}
	while ((n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	c = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -1;
	if (c->cmsg_len != CMSG_LEN(nfds * sizeof(int))) {
		/* Not what was asked: what came is not kept open. */
		size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (size_t i = 0; i < got && i < FDPASS_MAX; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			close(fd);
		}
		return -1;
	}
	memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
	return 0;
}
