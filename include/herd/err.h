/* err.h — the one error convention of herd's library.
 *
 * Library functions return -1 or NULL on failure and, where a person needs
 * words, fill a caller-owned struct herd_err.  herd_errprintf() always
 * returns -1 so that `return herd_errprintf(err, "...")` reads as one line.
 * Library code never prints and never exits; programs decide what to do
 * with the text.
 */
#ifndef HERD_ERR_H
#define HERD_ERR_H

#include <stdarg.h>

/* 1 KiB holds "file:line:col: message" for any sane path and message;
 * longer texts are truncated, never overflowed. */
#define HERD_ERR_MAX 1024

struct herd_err {
	char text[HERD_ERR_MAX];
};

/* Formats into err (may be NULL: then nothing is written).  Preserves
 * errno.  Returns -1. */
int herd_errprintf(struct herd_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int herd_verrprintf(struct herd_err *err, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Clears err so that a later check of err->text[0] means "no error". */
void herd_err_clear(struct herd_err *err);

#endif
