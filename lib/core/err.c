#include <errno.h>
#include <stdio.h>

#include "herd/err.h"

int herd_verrprintf(struct herd_err *err, const char *fmt, va_list ap)
{
	int saved = errno;

	if (err)
		vsnprintf(err->text, sizeof(err->text), fmt, ap);
	errno = saved;
	return -1;
}

int herd_errprintf(struct herd_err *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	herd_verrprintf(err, fmt, ap);
	va_end(ap);
	return -1;
}

void herd_err_clear(struct herd_err *err)
{
	if (err)
		err->text[0] = '\0';
}
