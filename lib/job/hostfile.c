/* lib/job/hostfile.c — read and write DeepSpeed, Open MPI, MPICH, plain and
 * slurm hostfiles.  See herd/hostfile.h for the contract.
 *
 * Text is read line by line into one bounded buffer (HOSTFILE_LINE_MAX);
 * comments and blank lines are dropped there, so the per-format parsers
 * see only "entry" text with surrounding blanks removed.  The list the
 * parsers fill, and its writing, is hostfile_list.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* qsort_r, reallocarray */
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "herd/file.h"
#include "herd/hostfile.h"
#include "herd/hostlist.h"

/* Names and tokens quoted in error messages are cut to this many bytes so
 * that a message always fits struct herd_err. */
#define QUOTE_MAX 64

static const char *const format_names[] = {
    [HOSTFILE_AUTO] = "auto",		[HOSTFILE_PLAIN] = "plain",
    [HOSTFILE_DEEPSPEED] = "deepspeed", [HOSTFILE_OPENMPI] = "openmpi",
    [HOSTFILE_MPICH] = "mpich",		[HOSTFILE_SLURM] = "slurm",
};

#define N_FORMATS (sizeof(format_names) / sizeof(format_names[0]))

int hostfile_format_parse(const char *name)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < N_FORMATS; i++)
		if (!strcmp(name, format_names[i]))
			return (int)i;
	return -1;
}

const char *hostfile_format_name(enum hostfile_format fmt)
{
	if ((size_t)fmt >= N_FORMATS)
		return "unknown";
	return format_names[fmt];
}

/* ---- lines ------------------------------------------------------------ */

/* Walks text one line at a time. */
struct line_iter {
	const char *text;
	size_t len;
	size_t pos;
	size_t lineno; /* line of the last line returned, from 1 */
};

enum line_kind { LINE_END = 0, LINE_OK, LINE_TOO_LONG, LINE_NUL };

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Copies the next line's entry text into buf (HOSTFILE_LINE_MAX + 1
 * bytes): comment removed, blanks trimmed, NUL-terminated.  An entry-less
 * line gives LINE_OK with buf "". */
static enum line_kind line_next(struct line_iter *it, char *buf)
{
	const char *start, *nl;
	size_t n, b, e;

	if (it->pos >= it->len)
		return LINE_END;
	start = it->text + it->pos;
	nl = memchr(start, '\n', it->len - it->pos);
	n = nl ? (size_t)(nl - start) : it->len - it->pos;
	it->pos += n + (nl ? 1 : 0);
	it->lineno++;
	if (n > HOSTFILE_LINE_MAX)
		return LINE_TOO_LONG;
	if (memchr(start, '\0', n))
		return LINE_NUL;
	memcpy(buf, start, n);
	buf[n] = '\0';
	e = strcspn(buf, "#");
	while (e > 0 && is_blank(buf[e - 1]))
		e--;
	b = 0;
	while (b < e && is_blank(buf[b]))
		b++;
	memmove(buf, buf + b, e - b);
	buf[e - b] = '\0';
	return LINE_OK;
}

/* Splits off the next blank-separated token of *p (NUL-terminating it in
 * place); NULL when none is left. */
static char *token_next(char **p)
{
	char *s = *p, *t;

	while (*s && is_blank(*s))
		s++;
	if (!*s) {
		*p = s;
		return NULL;
	}
	t = s;
	while (*s && !is_blank(*s))
		s++;
	if (*s)
		*s++ = '\0';
	*p = s;
	return t;
}

/* ---- detection -------------------------------------------------------- */

enum entry_kind {
	ENTRY_BARE,
	ENTRY_OPTIONS,
	ENTRY_MPICH,
	ENTRY_SLURM,
	ENTRY_JUNK
};

/* Classifies one entry (non-empty, trimmed); *max_slots is set when an
 * option names max_slots. */
static enum entry_kind entry_classify(const char *s, bool *max_slots)
{
	size_t first = strcspn(s, " \t\r\v\f");

	if (s[first] != '\0') {
		if (!strchr(s, '='))
			return ENTRY_JUNK;
		if (strstr(s + first, "max_slots") ||
		    strstr(s + first, "max-slots"))
			*max_slots = true;
		return ENTRY_OPTIONS;
	}
	if (strpbrk(s, "[,"))
		return ENTRY_SLURM;
	if (strchr(s, ':'))
		return ENTRY_MPICH;
	return ENTRY_BARE;
}

enum hostfile_format hostfile_detect(const char *text, size_t len)
{
	struct line_iter it = {.text = text, .len = len};
	enum entry_kind decided = ENTRY_BARE;
	bool any_bare = false, max_slots = false;
	enum line_kind k;
	char *buf;

	buf = malloc(HOSTFILE_LINE_MAX + 1);
	if (!buf)
		return HOSTFILE_PLAIN;
	while ((k = line_next(&it, buf)) != LINE_END) {
		enum entry_kind e;

		if (k != LINE_OK || !buf[0])
			continue;
		e = entry_classify(buf, &max_slots);
		if (e == ENTRY_BARE)
			any_bare = true;
		else if (decided == ENTRY_BARE)
			decided = e;
	}
	free(buf);
	switch (decided) {
	case ENTRY_OPTIONS:
		return any_bare || max_slots ? HOSTFILE_OPENMPI
					     : HOSTFILE_DEEPSPEED;
	case ENTRY_MPICH:
		return HOSTFILE_MPICH;
	case ENTRY_SLURM:
		return HOSTFILE_SLURM;
	default:
		return HOSTFILE_PLAIN;
	}
}

/* ---- parsing ---------------------------------------------------------- */

struct parse {
	const char *name;
	struct hostfile *hf;
	struct herd_err *err;
	size_t line;
	/* slurm: the expression being gathered over lines */
	char *expr;
	size_t expr_len, expr_alloc;
	size_t expr_line;
	int depth;
};

static int host_check(struct parse *p, const char *host)
{
	char where[HERD_ERR_MAX];

	snprintf(where, sizeof(where), "%s:%zu", p->name, p->line);
	return hostfile_host_check(host, where, p->err);
}

static int host_add(struct parse *p, const char *host, int slots, size_t line)
{
	struct herd_err e;

	if (host_check(p, host) < 0)
		return -1;
	if (hostfile_push(p->hf, host, slots, line, &e) < 0)
		return herd_errprintf(p->err, "%s:%zu: %s", p->name, line,
				      e.text);
	return 0;
}

/* Expands a hostlist expression found at line and adds its hosts. */
static int expr_add(struct parse *p, const char *expr, size_t line)
{
	struct herd_err e;
	struct hostlist *hl;
	int rc = -1;

	herd_err_clear(&e);
	hl = hostlist_expand(expr, &e);
	if (!hl) {
		herd_errprintf(p->err, "%s:%zu: %s", p->name, line,
			       e.text[0] ? e.text : "bad hostlist expression");
		goto out;
	}
	for (size_t i = 0; i < hostlist_count(hl); i++) {
		size_t saved = p->line;

		p->line = line;
		rc = host_add(p, hostlist_nth(hl, i), 0, line);
		p->line = saved;
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	hostlist_free(hl);
	return rc;
}

/* "N" -> *slots, 1 <= N <= HOSTFILE_SLOTS_MAX. */
static int slots_parse(struct parse *p, const char *what, const char *s,
		       int *slots)
{
	long v = 0;

	if (!*s)
		return herd_errprintf(p->err,
				      "%s:%zu: missing %s value (expected a "
				      "whole number from 1 to %d)",
				      p->name, p->line, what,
				      HOSTFILE_SLOTS_MAX);
	if (*s == '-')
		return herd_errprintf(p->err,
				      "%s:%zu: %s must be at least 1, not "
				      "'%.*s'",
				      p->name, p->line, what, QUOTE_MAX, s);
	for (const char *c = s; *c; c++) {
		if (*c < '0' || *c > '9')
			return herd_errprintf(
			    p->err,
			    "%s:%zu: bad %s value '%.*s' (expected a "
			    "whole number from 1 to %d)",
			    p->name, p->line, what, QUOTE_MAX, s,
			    HOSTFILE_SLOTS_MAX);
		if (v <= HOSTFILE_SLOTS_MAX)
			v = v * 10 + (*c - '0');
	}
	if (v == 0)
		return herd_errprintf(p->err,
				      "%s:%zu: %s must be at least 1, not "
				      "'%.*s'",
				      p->name, p->line, what, QUOTE_MAX, s);
	if (v > HOSTFILE_SLOTS_MAX)
		return herd_errprintf(p->err,
				      "%s:%zu: %s value '%.*s' is too large "
				      "(at most %d)",
				      p->name, p->line, what, QUOTE_MAX, s,
				      HOSTFILE_SLOTS_MAX);
	*slots = (int)v;
	return 0;
}

static int junk(struct parse *p, const char *tok, const char *expected)
{
	return herd_errprintf(p->err, "%s:%zu: unexpected '%.*s' (%s)", p->name,
			      p->line, QUOTE_MAX, tok, expected);
}

static int line_plain(struct parse *p, char *s)
{
	char *host = token_next(&s), *extra = token_next(&s);

	if (extra)
		return junk(p, extra, "plain format: one host a line");
	if (strpbrk(host, "[,"))
		return expr_add(p, host, p->line);
	return host_add(p, host, 0, p->line);
}

static int line_deepspeed(struct parse *p, char *s)
{
	char *host = token_next(&s), *opt = token_next(&s), *extra;
	int slots;

	if (strchr(host, '='))
		return host_check(p, host);
	if (!opt)
		return herd_errprintf(p->err,
				      "%s:%zu: expected 'slots=N' after '%.*s' "
				      "(deepspeed format: HOST slots=N)",
				      p->name, p->line, QUOTE_MAX, host);
	if (strncmp(opt, "slots=", 6))
		return junk(p, opt, "deepspeed format: HOST slots=N");
	extra = token_next(&s);
	if (extra)
		return junk(p, extra, "deepspeed format: HOST slots=N");
	if (slots_parse(p, "slots", opt + 6, &slots) < 0)
		return -1;
	return host_add(p, host, slots, p->line);
}

static int line_openmpi(struct parse *p, char *s)
{
	char *host = token_next(&s), *opt;
	int slots = 0, max_slots = 0;

	if (host_check(p, host) < 0)
		return -1;
	while ((opt = token_next(&s))) {
		if (!strncmp(opt, "slots=", 6)) {
			if (slots)
				return junk(p, opt, "slots given twice");
			if (slots_parse(p, "slots", opt + 6, &slots) < 0)
				return -1;
		} else if (!strncmp(opt, "max_slots=", 10) ||
			   !strncmp(opt, "max-slots=", 10)) {
			if (max_slots)
				return junk(p, opt, "max_slots given twice");
			if (slots_parse(p, "max_slots", opt + 10, &max_slots) <
			    0)
				return -1;
		} else {
			return junk(p, opt,
				    "openmpi format: HOST "
				    "[slots=N] [max_slots=M]");
		}
	}
	if (slots && max_slots && max_slots < slots)
		return herd_errprintf(p->err,
				      "%s:%zu: max_slots=%d is less than "
				      "slots=%d",
				      p->name, p->line, max_slots, slots);
	return host_add(p, host, slots, p->line);
}

static int line_mpich(struct parse *p, char *s)
{
	char *host = token_next(&s), *extra = token_next(&s), *colon;
	int slots = 0;

	if (extra)
		return junk(p, extra, "mpich format: HOST:N");
	colon = strrchr(host, ':');
	if (colon) {
		*colon = '\0';
		if (slots_parse(p, "slots", colon + 1, &slots) < 0)
			return -1;
	}
	return host_add(p, host, slots, p->line);
}

/* slurm: gathers lines into p->expr until brackets close and the text
 * does not end in ','; then expands it.  Blanks outside brackets separate
 * hosts like ','; inside brackets they are dropped. */
static int expr_flush(struct parse *p)
{
	int rc;

	while (p->expr_len > 0 && p->expr[p->expr_len - 1] == ',')
		p->expr_len--;
	if (p->expr_len == 0)
		return 0;
	p->expr[p->expr_len] = '\0';
	rc = expr_add(p, p->expr, p->expr_line);
	p->expr_len = 0;
	p->depth = 0;
	return rc;
}

static int expr_putc(struct parse *p, char c)
{
	if (c == ',' && (p->expr_len == 0 || p->expr[p->expr_len - 1] == ',' ||
			 p->expr[p->expr_len - 1] == '['))
		return 0;
	/* +2: room for this byte and the final NUL. */
	if (p->expr_len + 2 > p->expr_alloc) {
		size_t n = p->expr_alloc ? p->expr_alloc * 2 : 256;
		char *e;

		if (n > HOSTFILE_FILE_MAX)
			return herd_errprintf(p->err,
					      "%s:%zu: expression longer than "
					      "%d bytes",
					      p->name, p->expr_line,
					      HOSTFILE_FILE_MAX);
		e = realloc(p->expr, n);
		if (!e)
			return herd_errprintf(p->err, "out of memory");
		p->expr = e;
		p->expr_alloc = n;
	}
	p->expr[p->expr_len++] = c;
	return 0;
}

static int line_slurm(struct parse *p, char *s)
{
	if (p->expr_len == 0)
		p->expr_line = p->line;
	else if (expr_putc(p, ',') < 0)
		return -1;
	for (; *s; s++) {
		char c = *s;

		if (is_blank(c)) {
			if (p->depth == 0 && expr_putc(p, ',') < 0)
				return -1;
			continue;
		}
		if (c == '[')
			p->depth++;
		else if (c == ']' && p->depth > 0)
			p->depth--;
		if (expr_putc(p, c) < 0)
			return -1;
	}
	if (p->depth > 0 || (p->expr_len && p->expr[p->expr_len - 1] == ','))
		return 0;
	return expr_flush(p);
}

typedef int (*line_fn)(struct parse *p, char *s);

static const line_fn line_fns[] = {
    [HOSTFILE_PLAIN] = line_plain,     [HOSTFILE_DEEPSPEED] = line_deepspeed,
    [HOSTFILE_OPENMPI] = line_openmpi, [HOSTFILE_MPICH] = line_mpich,
    [HOSTFILE_SLURM] = line_slurm,
};

struct hostfile *hostfile_parse(const char *text, size_t len, const char *name,
				enum hostfile_format fmt, struct herd_err *err)
{
	struct line_iter it = {.text = text, .len = len};
	struct parse p = {.name = name ? name : "hostfile", .err = err};
	struct hostfile *ret = NULL;
	enum line_kind k;
	size_t first, second;
	char *buf = NULL;
	int dup;

	if (fmt == HOSTFILE_AUTO)
		fmt = hostfile_detect(text, len);
	if ((size_t)fmt >= N_FORMATS || !line_fns[fmt]) {
		herd_errprintf(err, "%s: unknown hostfile format %d", p.name,
			       (int)fmt);
		goto out;
	}
	p.hf = hostfile_new();
	buf = malloc(HOSTFILE_LINE_MAX + 1);
	if (!p.hf || !buf) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	p.hf->format = fmt;
	while ((k = line_next(&it, buf)) != LINE_END) {
		p.line = it.lineno;
		if (k == LINE_TOO_LONG) {
			herd_errprintf(err, "%s:%zu: line longer than %d bytes",
				       p.name, p.line, HOSTFILE_LINE_MAX);
			goto out;
		}
		if (k == LINE_NUL) {
			herd_errprintf(err, "%s:%zu: unexpected NUL byte",
				       p.name, p.line);
			goto out;
		}
		if (!buf[0])
			continue;
		if (line_fns[fmt](&p, buf) < 0)
			goto out;
	}
	if (fmt == HOSTFILE_SLURM) {
		if (p.depth > 0) {
			herd_errprintf(err, "%s:%zu: expected ']' to close '['",
				       p.name, p.expr_line);
			goto out;
		}
		if (expr_flush(&p) < 0)
			goto out;
	}
	if (p.hf->count == 0) {
		herd_errprintf(err, "no hosts in %s", p.name);
		goto out;
	}
	dup = hostfile_find_duplicate(p.hf, &first, &second);
	if (dup < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (dup) {
		herd_errprintf(err,
			       "%s:%zu: host '%s' listed twice (first on "
			       "line %zu)",
			       p.name, p.hf->entries[second].line,
			       p.hf->entries[second].host,
			       p.hf->entries[first].line);
		goto out;
	}
	ret = p.hf;
	p.hf = NULL;
out:
	hostfile_free(p.hf);
	free(p.expr);
	free(buf);
	return ret;
}

struct hostfile *hostfile_load(const char *path, enum hostfile_format fmt,
			       struct herd_err *err)
{
	struct hostfile *hf;
	size_t len = 0;
	/* A regular file only: a FIFO, a device or /dev/zero is never a
	 * list of hosts, and file_read refuses one without waiting. */
	char *text = file_read(path, HOSTFILE_FILE_MAX, &len);

	if (!text) {
		if (errno == EINVAL)
			herd_errprintf(err,
				       "cannot read hostfile %s: not a regular "
				       "file",
				       path);
		else if (errno == EFBIG)
			herd_errprintf(err, "%s: larger than %d bytes", path,
				       HOSTFILE_FILE_MAX);
		else
			herd_errprintf(err, "cannot open hostfile %s: %s", path,
				       strerror(errno));
		return NULL;
	}
	hf = hostfile_parse(text, len, path, fmt, err);
	free(text);
	return hf;
}
