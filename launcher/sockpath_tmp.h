/* sockpath_tmp.h — TEMPORARY copy of the control socket path rule of
 * I13-CONTRACT.md (jobreg_sock_path() of lib/jobreg.c, owned by helper
 * `views`), until that module is on this branch; then this file goes. */
#ifndef HERD_LAUNCHER_SOCKPATH_TMP_H
#define HERD_LAUNCHER_SOCKPATH_TMP_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/err.h"

int sockpath_tmp(const char *id, char *buf, size_t size, bool create,
		 struct herd_err *err);

#endif
