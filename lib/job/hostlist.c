/* lib/job/hostlist.c — Slurm hostlist expressions.  See herd/hostlist.h.
 *
 * Expansion and compression are libslurm's own (slurm_hostlist_*), the
 * code behind `scontrol show hostnames` and `scontrol show hostlist`; the
 * integration tests keep comparing the two on a corpus.  What this module
 * adds is a strict check of the syntax first, so that a typo is an error
 * with a column rather than a guess, a log line on stderr or a host list
 * too large to hold:
 *
 *  - An expression is a list of items separated by ',', ' ' or tab.  An item
 *    is literal text with bracket groups "[r,r,...]", r = N or N-M; text
 *    after the last group is not allowed.
 *  - Errors here where Slurm guesses: a '[' without ']', empty or signed
 *    numbers, "N-" without an upper end, blanks inside brackets, control
 *    characters, a number above ULONG_MAX - 1 (Slurm saturates it: a host
 *    "n99999999999999999999" would come back as n18446744073709551615),
 *    also where digits before a '[' make a host's trailing number so.
 *  - Slurm refuses one range of more than HOSTLIST_RANGE_MAX hosts (and
 *    says so on stderr): refused here first, with the column.  Several
 *    groups multiply, up to HOSTLIST_MAX hosts in all.
 *
 * The list keeps the expanded names (hostlist_nth) and, beside them, a
 * libslurm list of what was pushed, as pushed, which compression needs:
 * "n1[1-3]" stays n1[1-3] where n11,n12,n13 becomes n[11-13].
 */

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>

/* Exported by libslurm beside slurm_hostlist_shift (the same alias table,
 * every release since 2.x) but not declared in slurm.h. */
extern char *slurm_hostlist_pop(hostlist_t hl);

#include "herd/hostlist.h"

/* A DNS name is at most 253 characters; a longer host name is a typo (or
 * "n[0000...1]" padding gone wrong).  Bounds every name. */
#define HOSTLIST_NAME_MAX 255

/* Numbers must stay below ULONG_MAX: Slurm uses ULONG_MAX internally to
 * mean "empty range", and saturates larger numbers to it. */
#define HOSTLIST_NUM_MAX (ULONG_MAX - 1)

/* Slurm's cap on the hosts of one range (MAX_RANGE in its hostlist.c). */
#define HOSTLIST_RANGE_MAX 65536

struct hostlist {
	hostlist_t pushed; /* libslurm's list of what was pushed, for
			      compression */
	char **names;	   /* the hosts, expanded; owned */
	size_t count;
	size_t cap;
};

/* ---- the syntax check --------------------------------------------------- */

static bool is_sep(char c)
{
	return c == ',' || c == ' ' || c == '\t';
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Characters allowed in a host name: printable, not a separator, not a
 * bracket.  Bytes from 0x80 up pass (Slurm does not look at them). */
static bool is_name_char(char c)
{
	unsigned char u = (unsigned char)c;

	if (u < 0x21 || u == 0x7f)
		return false;
	return c != ',' && c != '[' && c != ']';
}

/* Describes the character at s for "found ..." in messages. */
static void describe(char c, char *buf, size_t n)
{
	unsigned char u = (unsigned char)c;

	if (c == '\0')
		snprintf(buf, n, "end of input");
	else if (u < 0x20 || u >= 0x7f)
		snprintf(buf, n, "byte 0x%02x", u);
	else
		snprintf(buf, n, "'%c'", c);
}

static int expected(struct herd_err *err, const char *expr, size_t pos,
		    const char *what)
{
	char found[32];

	describe(expr[pos], found, sizeof(found));
	return herd_errprintf(err, "column %zu: expected %s, found %s", pos + 1,
			      what, found);
}

static unsigned digits_of(unsigned long v)
{
	unsigned n = 1;

	while (v /= 10)
		n++;
	return n;
}

/* Parses the decimal number at expr[*pos].  Fills *val and *width. */
static int parse_num(const char *expr, size_t *pos, unsigned long *val,
		     int *width, struct herd_err *err)
{
	size_t start = *pos, i = *pos;
	unsigned long v = 0;

	if (!is_digit(expr[i]))
		return expected(err, expr, i, "a number");
	for (; is_digit(expr[i]); i++) {
		unsigned d = (unsigned)(expr[i] - '0');

		if (v > (HOSTLIST_NUM_MAX - d) / 10)
			return herd_errprintf(err,
					      "column %zu: number too "
					      "large (expected at most %lu)",
					      start + 1, HOSTLIST_NUM_MAX);
		v = v * 10 + d;
		if (i - start >= HOSTLIST_NAME_MAX)
			return herd_errprintf(err,
					      "column %zu: number longer "
					      "than %d digits",
					      start + 1, HOSTLIST_NAME_MAX);
	}
	*val = v;
	*width = (int)(i - start);
	*pos = i;
	return 0;
}

/* Adds a, b saturating above HOSTLIST_MAX (counts never need more). */
static size_t sat_add(size_t a, size_t b)
{
	size_t s = a + b;

	return s > HOSTLIST_MAX ? HOSTLIST_MAX + 1 : s;
}

static size_t sat_mul(size_t a, size_t b)
{
	if (a == 0 || b == 0)
		return 0;
	if (a > (HOSTLIST_MAX + 1) / b)
		return HOSTLIST_MAX + 1;
	return sat_add(0, a * b);
}

/* Parses "[...]" at expr[*pos] (at the '['): adds the widest number to
 * *name_len and sets *count to the hosts it holds. */
static int check_group(const char *expr, size_t *pos, size_t *count,
		       size_t *name_len, struct herd_err *err)
{
	size_t i = *pos + 1;
	size_t n = 0;
	unsigned maxw = 0;

	for (;;) {
		unsigned long lo, hi;
		size_t lo_pos = i;
		int width, hiw;

		if (parse_num(expr, &i, &lo, &width, err))
			return -1;
		hi = lo;
		if (expr[i] == '-') {
			i++;
			if (parse_num(expr, &i, &hi, &hiw, err))
				return -1;
			if (lo > hi)
				return herd_errprintf(err,
						      "column %zu: range "
						      "%lu-%lu goes down "
						      "(expected LOW-HIGH)",
						      lo_pos + 1, lo, hi);
			if (hi - lo >= HOSTLIST_RANGE_MAX)
				return herd_errprintf(err,
						      "column %zu: range "
						      "%lu-%lu holds more "
						      "than %d hosts (Slurm's "
						      "limit for one range)",
						      lo_pos + 1, lo, hi,
						      HOSTLIST_RANGE_MAX);
		}
		n = sat_add(n, (size_t)(hi - lo + 1));
		if ((unsigned)width > maxw)
			maxw = (unsigned)width;
		if (digits_of(hi) > maxw)
			maxw = digits_of(hi);
		if (expr[i] == ',') {
			i++;
			continue;
		}
		if (expr[i] == ']')
			break;
		return expected(err, expr, i, "',', '-' or ']'");
	}
	*count = n;
	*name_len += maxw;
	*pos = i + 1;
	return 0;
}

/* Whether the trailing digits of name[0, len) fit in a Slurm number;
 * *start: where they begin. */
static bool suffix_fits(const char *name, size_t len, size_t *start)
{
	size_t d = len;
	unsigned long v = 0;

	while (d > 0 && is_digit(name[d - 1]))
		d--;
	*start = d;
	for (size_t i = d; i < len; i++) {
		unsigned dig = (unsigned)(name[i] - '0');

		if (v > (HOSTLIST_NUM_MAX - dig) / 10)
			return false;
		v = v * 10 + dig;
	}
	return true;
}

/* A plain name's trailing digits are a number to Slurm: it must fit. */
static int check_suffix(const char *name, size_t len, size_t col,
			struct herd_err *err)
{
	size_t d;

	if (!suffix_fits(name, len, &d))
		return herd_errprintf(err,
				      "column %zu: number too large "
				      "(expected at most %lu)",
				      col + d + 1, HOSTLIST_NUM_MAX);
	return 0;
}

/* Checks the item starting at expr[*pos] (not a separator, not NUL) and
 * sets *count to the hosts it holds. */
static int check_item(const char *expr, size_t *pos, size_t *count,
		      struct herd_err *err)
{
	size_t i = *pos, lit = *pos, name_len = 0, n = 1, ngroups = 0;

	while (expr[i] != '\0' && !is_sep(expr[i])) {
		if (expr[i] == '[') {
			size_t g = 0;

			name_len += i - lit;
			if (check_group(expr, &i, &g, &name_len, err))
				return -1;
			ngroups++;
			n = sat_mul(n, g);
			lit = i;
			continue;
		}
		if (expr[i] == ']')
			return herd_errprintf(err,
					      "column %zu: unexpected ']' "
					      "(expected a host name or '[')",
					      i + 1);
		if (!is_name_char(expr[i]))
			return expected(err, expr, i, "a host name character");
		i++;
	}
	if (ngroups > 0 && i > lit)
		return herd_errprintf(err,
				      "column %zu: expected ',' or end "
				      "of input after ']' (Slurm allows no "
				      "text after the last bracket)",
				      lit + 1);
	name_len += i - lit;
	if (name_len > HOSTLIST_NAME_MAX)
		return herd_errprintf(err,
				      "column %zu: host names longer than "
				      "%d characters",
				      *pos + 1, HOSTLIST_NAME_MAX);
	if (ngroups == 0 && check_suffix(expr + *pos, i - *pos, *pos, err))
		return -1;
	*count = n;
	*pos = i;
	return 0;
}

/* Checks expr and sets *total to its hosts; have is the count already in
 * the list, for the cap. */
static int check_expr(const char *expr, size_t have, size_t *total,
		      struct herd_err *err)
{
	size_t pos = 0, sum = 0;

	for (;;) {
		size_t col, n = 0;

		while (is_sep(expr[pos]))
			pos++;
		if (expr[pos] == '\0')
			break;
		col = pos + 1;
		if (check_item(expr, &pos, &n, err))
			return -1;
		sum = sat_add(sum, n);
		if (sat_add(have, sum) > HOSTLIST_MAX)
			return herd_errprintf(err,
					      "column %zu: more than %d hosts "
					      "(HOSTLIST_MAX)",
					      col, HOSTLIST_MAX);
	}
	*total = sum;
	return 0;
}

/* The column of the item of expr (check_expr has passed it) that
 * expands to its host number index. */
static size_t item_column(const char *expr, size_t index)
{
	struct herd_err ignored;
	size_t pos = 0;

	for (;;) {
		size_t col, n = 0;

		while (is_sep(expr[pos]))
			pos++;
		col = pos + 1;
		if (expr[pos] == '\0' ||
		    check_item(expr, &pos, &n, &ignored) || index < n)
			return col;
		index -= n;
	}
}

/* ---- the list ------------------------------------------------------------ */

struct hostlist *hostlist_new(void)
{
	struct hostlist *hl = calloc(1, sizeof(*hl));

	if (!hl)
		return NULL;
	hl->pushed = slurm_hostlist_create(NULL);
	if (!hl->pushed) {
		free(hl);
		return NULL;
	}
	return hl;
}

/* Frees the names of hosts [from, hl->count) and drops them. */
static void truncate_to(struct hostlist *hl, size_t from)
{
	for (size_t i = from; i < hl->count; i++)
		free(hl->names[i]);
	hl->count = from;
}

void hostlist_free(struct hostlist *hl)
{
	if (!hl)
		return;
	truncate_to(hl, 0);
	free(hl->names);
	if (hl->pushed)
		slurm_hostlist_destroy(hl->pushed);
	free(hl);
}

/* Makes room for need names in all. */
static int reserve(struct hostlist *hl, size_t need)
{
	size_t ncap;
	char **p;

	if (need <= hl->cap)
		return 0;
	ncap = hl->cap ? hl->cap : 8;
	while (ncap < need)
		ncap *= 2;
	p = realloc(hl->names, ncap * sizeof(*p));
	if (!p)
		return -1;
	hl->names = p;
	hl->cap = ncap;
	return 0;
}

int hostlist_push(struct hostlist *hl, const char *expr, struct herd_err *err)
{
	hostlist_t tmp = NULL;
	size_t total = 0, old = hl ? hl->count : 0;
	char *host;
	int rc = -1;

	if (!hl || !expr)
		return herd_errprintf(err, "no hostlist expression");
	if (check_expr(expr, hl->count, &total, err))
		return -1;
	if (total == 0)
		return 0;
	if (reserve(hl, hl->count + total))
		return herd_errprintf(err, "out of memory for %zu hosts",
				      total);
	tmp = slurm_hostlist_create(expr);
	if (!tmp) {
		herd_errprintf(err, "Slurm refused the expression");
		goto out;
	}
	if (slurm_hostlist_count(tmp) != (int)total) {
		/* The check and Slurm disagree: a bug, not the input. */
		herd_errprintf(err,
			       "Slurm expanded %d hosts where %zu "
			       "were expected",
			       slurm_hostlist_count(tmp), total);
		goto out;
	}
	/* From the back: popping the last host costs the same whatever
	 * the list, where shifting the first moves every range behind it
	 * ("n[1-65536]x[1-15]y[1]", a range per host, took minutes). */
	for (size_t i = total; i > 0; i--) {
		host = slurm_hostlist_pop(tmp);
		if (!host) {
			for (size_t k = i; k < total; k++)
				free(hl->names[old + k]);
			herd_errprintf(err, "out of memory for %zu hosts",
				       total);
			goto out;
		}
		hl->names[old + i - 1] = host;
	}
	hl->count = old + total;
	/* Digits before a '[' run into its numbers ("n1844674407370955161[5]"
	 * is n18446744073709551615): each host must be a name Slurm can take
	 * back, as a plain host is. */
	for (size_t i = 0; i < total; i++) {
		const char *name = hl->names[old + i];
		size_t d;

		if (!suffix_fits(name, strlen(name), &d)) {
			herd_errprintf(err,
				       "column %zu: the hosts end in a number "
				       "too large (expected at most %lu, the "
				       "digits before '[' included)",
				       item_column(expr, i), HOSTLIST_NUM_MAX);
			goto out;
		}
	}
	if (slurm_hostlist_push(hl->pushed, expr) != (int)total) {
		herd_errprintf(err, "Slurm could not keep %zu hosts", total);
		goto out;
	}
	rc = 0;
out:
	if (tmp)
		slurm_hostlist_destroy(tmp);
	if (rc)
		truncate_to(hl, old);
	return rc;
}

int hostlist_push_host(struct hostlist *hl, const char *host,
		       struct herd_err *err)
{
	size_t len;
	char *name;

	if (!hl || !host)
		return herd_errprintf(err, "no host name");
	len = strlen(host);
	if (len == 0)
		return herd_errprintf(err, "empty host name");
	if (len > HOSTLIST_NAME_MAX)
		return herd_errprintf(err,
				      "host name longer than %d "
				      "characters",
				      HOSTLIST_NAME_MAX);
	for (size_t i = 0; i < len; i++)
		if (!is_name_char(host[i]))
			return expected(err, host, i, "a host name character");
	if (check_suffix(host, len, 0, err))
		return -1;
	if (hl->count >= HOSTLIST_MAX)
		return herd_errprintf(err, "more than %d hosts (HOSTLIST_MAX)",
				      HOSTLIST_MAX);
	if (reserve(hl, hl->count + 1) || !(name = strdup(host)))
		return herd_errprintf(err, "out of memory");
	if (slurm_hostlist_push_host(hl->pushed, host) != 1) {
		free(name);
		return herd_errprintf(err, "Slurm refused host name '%s'",
				      host);
	}
	hl->names[hl->count++] = name;
	return 0;
}

size_t hostlist_count(const struct hostlist *hl)
{
	return hl ? hl->count : 0;
}

const char *hostlist_nth(const struct hostlist *hl, size_t i)
{
	if (!hl || i >= hl->count)
		return NULL;
	return hl->names[i];
}

struct hostlist *hostlist_expand(const char *expr, struct herd_err *err)
{
	struct hostlist *hl = hostlist_new();

	if (!hl) {
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	if (hostlist_push(hl, expr, err)) {
		hostlist_free(hl);
		return NULL;
	}
	return hl;
}

char *hostlist_compress(const struct hostlist *hl)
{
	if (!hl || hl->count == 0)
		return strdup("");
	return slurm_hostlist_ranged_string_malloc(hl->pushed);
}
