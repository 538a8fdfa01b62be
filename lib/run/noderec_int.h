/* noderec_int.h — what noderec.c (the record and its JSON) and
 * noderec_file.c (the records on disk) share: the limits of a record's
 * strings and times, and their checks.
 */
#ifndef HERD_NODEREC_INT_H
#define HERD_NODEREC_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "herd/noderec.h"

#define NODEREC_NAME_MAX 200
/* A record's key: a name and "@" and 8 hex digits (noderec_key()). */
#define NODEREC_KEY_MAX (NODEREC_NAME_MAX + 9)
/* A host name: DNS allows 253 bytes. */
#define NODEREC_HOST_MAX 255
/* A kind and a run id are short words. */
#define NODEREC_WORD_MAX 64
/* Times and windows stay far from int64 overflow when added: 2^50 ms is
 * the year 37000, 2^40 ms 34 years. */
#define NODEREC_T_MAX	   ((json_int_t)1 << 50)
#define NODEREC_WINDOW_MAX ((json_int_t)1 << 40)

/* s is 1..max bytes without control characters (every string ends up on
 * one terminal line). */
bool noderec_text_ok(const char *s, size_t max);
/* s is a kind of failure: "failed", "unhealthy" or "straggler". */
bool noderec_kind_ok(const char *s);

#endif
