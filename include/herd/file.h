/* file.h — reading a whole (small) file with a stated limit, the one way
 * herd's modules read topology exports, platform files and keys; and
 * writing into a directory no other user controls, relative to its fd,
 * never through a link. */
#ifndef HERD_FILE_H
#define HERD_FILE_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Reads the regular file at path whole, NUL-terminated (the NUL is not
 * counted in *len).  Returns a malloc'd buffer the caller frees, or NULL
 * with errno: what open() or read() said, EINVAL when path is not a
 * regular file (a FIFO too, refused without waiting for a writer),
 * EFBIG when it holds more than max bytes, ENOMEM. */
char *file_read(const char *path, size_t max, size_t *len);

/* Writes all len bytes of buf to fd, again after EINTR and short writes.
 * Returns 0, or -1 with errno (EIO when write() returned 0). */
int file_write_all(int fd, const void *buf, size_t len);

/* As file_read(), for the entry name of the directory dfd, which is not
 * followed when it is a symbolic link (errno ELOOP). */
char *file_read_at(int dfd, const char *name, size_t max, size_t *len);

/* Replaces dfd/name with the len bytes of buf, atomically: they go to a
 * temporary ".NAME.herd-PID" in the same directory (made with O_EXCL and
 * O_NOFOLLOW, mode 0600 while it is written), which gets mode, is
 * fsync()ed and renamed over name; a link at name is replaced, never
 * followed.  Readers see the old file or the whole new one.  Returns 0,
 * or -1 with errno (the temporary is removed). */
int file_write_at(int dfd, const char *name, const void *buf, size_t len,
		  mode_t mode);

/* What file_dir_open() found wrong with a directory, or which step of it
 * failed. */
enum file_dir_status {
	FILE_DIR_OK,
	FILE_DIR_MAKE_FAILED, /* missing and mkdirat() failed: errno */
	FILE_DIR_OPEN_FAILED, /* openat() failed: errno */
	FILE_DIR_LINK,	      /* a symbolic link */
	FILE_DIR_NOT_DIR,     /* something else than a directory */
	FILE_DIR_NOT_OWNED,   /* st->st_uid is not the effective uid */
	FILE_DIR_WRITABLE,    /* group or others may write it (st->st_mode) */
	FILE_DIR_CHANGED,     /* replaced between the check and the open */
};

/* Opens the directory entry name of the directory pfd (made with mkmode
 * when missing) for use as a dfd: the entry is checked without following
 * it (a directory, of the effective uid, that neither group nor others
 * may write), then opened with O_NOFOLLOW and checked to be the very
 * inode that was checked.  Fills *st with what was checked (for the
 * caller's words).  Returns the fd (O_CLOEXEC), or -1 with *status. */
int file_dir_open(int pfd, const char *name, mode_t mkmode, struct stat *st,
		  enum file_dir_status *status);

#endif
