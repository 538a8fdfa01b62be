/* file.c — whole-file reads with a limit; see file.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/file.h"

char *file_read(const char *path, size_t max, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), saved;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0)
		goto fail;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto fail;
	}
	if ((size_t)st.st_size > max) {
		errno = EFBIG;
		goto fail;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto fail;
	/* A file that shrinks meanwhile gives what is there. */
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	*len = got;
	return buf;
fail:
	saved = errno;
	free(buf);
	close(fd);
	errno = saved;
	return NULL;
}

int file_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}
