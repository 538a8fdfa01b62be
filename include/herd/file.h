/* file.h — reading a whole (small) file with a stated limit, the one way
 * herd's modules read topology exports, platform files and keys. */
#ifndef HERD_FILE_H
#define HERD_FILE_H

#include <stddef.h>

/* Reads the regular file at path whole, NUL-terminated (the NUL is not
 * counted in *len).  Returns a malloc'd buffer the caller frees, or NULL
 * with errno: what open() or read() said, EINVAL when path is not a
 * regular file, EFBIG when it holds more than max bytes, ENOMEM. */
char *file_read(const char *path, size_t max, size_t *len);

/* Writes all len bytes of buf to fd, again after EINTR and short writes.
 * Returns 0, or -1 with errno (EIO when write() returned 0). */
int file_write_all(int fd, const void *buf, size_t len);

#endif
