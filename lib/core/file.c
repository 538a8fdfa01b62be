/* file.c — whole-file reads with a limit, writes that never follow a
 * link; see file.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/file.h"

/* Reads fd (closed here) whole, as file_read() says. */
static char *read_fd(int fd, size_t max, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int saved;

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

char *file_read(const char *path, size_t max, size_t *len)
{
	/* O_NONBLOCK: the open of a FIFO nobody writes would wait for ever;
	 * it is refused as any file that is not regular. */
	return read_fd(open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), max,
		       len);
}

char *file_read_at(int dfd, const char *name, size_t max, size_t *len)
{
	return read_fd(openat(dfd, name,
			      O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK),
		       max, len);
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

int file_write_at(int dfd, const char *name, const void *buf, size_t len,
		  mode_t mode)
{
	char tmp[NAME_MAX + 1];
	int fd, n, saved;

	n = snprintf(tmp, sizeof(tmp), ".%s.herd-%ld", name, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = openat(dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (file_write_all(fd, buf, len) < 0 || fchmod(fd, mode) < 0 ||
	    fsync(fd) < 0) {
		saved = errno;
		close(fd);
		goto fail;
	}
	if (close(fd) < 0 || renameat(dfd, tmp, dfd, name) < 0) {
		saved = errno;
		goto fail;
	}
	return 0;
fail:
	unlinkat(dfd, tmp, 0);
	errno = saved;
	return -1;
}

int file_dir_open(int pfd, const char *name, mode_t mkmode, struct stat *st,
		  enum file_dir_status *status)
{
	struct stat fst;
	int dfd;

	if (fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT || mkdirat(pfd, name, mkmode) < 0 ||
		    fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW) < 0) {
			*status = FILE_DIR_MAKE_FAILED;
			return -1;
		}
	}
	if (S_ISLNK(st->st_mode))
		*status = FILE_DIR_LINK;
	else if (!S_ISDIR(st->st_mode))
		*status = FILE_DIR_NOT_DIR;
	else if (st->st_uid != geteuid())
		*status = FILE_DIR_NOT_OWNED;
	else if (st->st_mode & 022)
		*status = FILE_DIR_WRITABLE;
	else
		*status = FILE_DIR_OK;
	if (*status != FILE_DIR_OK)
		return -1;
	dfd =
	    openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		*status = FILE_DIR_OPEN_FAILED;
		return -1;
	}
	if (fstat(dfd, &fst) < 0 || fst.st_dev != st->st_dev ||
	    fst.st_ino != st->st_ino) {
		close(dfd);
		*status = FILE_DIR_CHANGED;
		return -1;
	}
	return dfd;
}
