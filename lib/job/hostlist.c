/* lib/job/hostlist.c — Slurm hostlist expressions.  See herd/hostlist.h.
 *
 * Behaviour follows Slurm 22.05 (src/common/hostlist.c), established by
 * running `scontrol show hostnames` / `scontrol show hostlist` on a corpus
 * that the integration tests keep comparing:
 *
 *  - An expression is a list of items separated by ',', ' ' or tab.  An item
 *    is literal text with bracket groups "[r,r,...]", r = N or N-M; text
 *    after the last group is not allowed.  A range's zero padding is the
 *    number of digits written for its low end ("n[8-10]" -> n8 n9 n10,
 *    "n[08-10]" -> n08 n09 n10, "n[1-003]" -> n1 n2 n3).
 *  - With several groups, Slurm expands the last group innermost and the
 *    groups before it from right to left: for a[1-2]b[3-4]c[5-6] the order
 *    is a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...  (leftmost outermost for the
 *    common case of two groups).
 *  - Compression keeps the order and duplicates (scontrol does not sort).
 *    Each host remembers the split Slurm made when it was added: a host
 *    from a bracket group has the text before the last group as prefix and
 *    that group's number and padding ("n1[1-3]" stays n1[1-3]); a plain
 *    name is split before its trailing digits ("n11,n12" -> n[11-12]).
 *    A host joins the previous range when its prefix matches, its number
 *    is the next one and the paddings are equivalent; consecutive ranges
 *    with one prefix share one bracket.
 *
 * Stricter than Slurm where Slurm guesses (all are errors here): a '['
 * without ']', empty or signed numbers, "N-" without an upper end, blanks
 * inside brackets, control characters.  Slurm also refuses single ranges
 * above 65536 hosts; herd allows up to HOSTLIST_MAX hosts in all.
 */

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/hostlist.h"

/* A DNS name is at most 253 characters; a longer host name is a typo (or
 * "n[0000...1]" padding gone wrong).  Bounds every name buffer here. */
#define HOSTLIST_NAME_MAX 255

/* Numbers must stay below ULONG_MAX: Slurm uses ULONG_MAX internally to
 * mean "empty range", and one more would overflow. */
#define HOSTLIST_NUM_MAX (ULONG_MAX - 1)

struct hl_host {
	char *name;	   /* owned */
	size_t prefix_len; /* name[0..prefix_len) is the range prefix */
	unsigned long num; /* numeric suffix, when !single */
	int width;	   /* printf width of num (zero padding) */
	bool single;	   /* no numeric suffix: name is all prefix */
};

struct hostlist {
	struct hl_host *hosts;
	size_t count;
	size_t cap;
};

/* ---- parsed expressions ----------------------------------------------- */

struct hl_range {
	unsigned long lo, hi;
	int width;
};

/* A bracket group and the literal text just before it. */
struct hl_group {
	size_t text_off, text_len;
	size_t first_range, nranges;
};

/* One item of the expression: plain name (ngroups == 0: text_off/len) or
 * literal text and groups. */
struct hl_item {
	size_t col;
	size_t text_off, text_len;
	size_t first_group, ngroups;
	size_t count;
};

struct hl_parse {
	const char *expr;
	struct hl_range *ranges;
	size_t nranges, cap_ranges;
	struct hl_group *groups;
	size_t ngroups, cap_groups;
	struct hl_item *items;
	size_t nitems, cap_items;
	size_t total;
};

/* Grows *arr (elements of size bytes) so that it holds at least need. */
static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
	size_t ncap;
	void *p;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap : 8;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2 / size)
			return -1;
		ncap *= 2;
	}
	p = realloc(*arr, ncap * size);
	if (!p)
		return -1;
	*arr = p;
	*cap = ncap;
	return 0;
}

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

/* Parses "[...]" at expr[*pos] (at the '[') into a new group. */
static int parse_group(struct hl_parse *p, size_t *pos, size_t text_off,
		       size_t *count, size_t *name_len, struct herd_err *err)
{
	const char *expr = p->expr;
	size_t i = *pos + 1;
	struct hl_group g = {text_off, *pos - text_off, p->nranges, 0};
	size_t n = 0;
	unsigned maxw = 0;

	for (;;) {
		struct hl_range r;
		size_t lo_pos = i;
		int hiw;

		if (parse_num(expr, &i, &r.lo, &r.width, err))
			return -1;
		r.hi = r.lo;
		if (expr[i] == '-') {
			i++;
			if (parse_num(expr, &i, &r.hi, &hiw, err))
				return -1;
			if (r.lo > r.hi)
				return herd_errprintf(err,
						      "column %zu: range "
						      "%lu-%lu goes down "
						      "(expected LOW-HIGH)",
						      lo_pos + 1, r.lo, r.hi);
		}
		if (grow((void **)&p->ranges, &p->cap_ranges, p->nranges + 1,
			 sizeof(*p->ranges)))
			return herd_errprintf(err, "out of memory");
		p->ranges[p->nranges++] = r;
		g.nranges++;
		n = sat_add(n, r.hi - r.lo >= HOSTLIST_MAX
				   ? HOSTLIST_MAX + 1
				   : (size_t)(r.hi - r.lo + 1));
		if ((unsigned)r.width > maxw)
			maxw = (unsigned)r.width;
		if (digits_of(r.hi) > maxw)
			maxw = digits_of(r.hi);
		if (expr[i] == ',') {
			i++;
			continue;
		}
		if (expr[i] == ']')
			break;
		return expected(err, expr, i, "',', '-' or ']'");
	}
	if (grow((void **)&p->groups, &p->cap_groups, p->ngroups + 1,
		 sizeof(*p->groups)))
		return herd_errprintf(err, "out of memory");
	p->groups[p->ngroups++] = g;
	*count = n;
	*name_len += maxw;
	*pos = i + 1;
	return 0;
}

/* Parses the item starting at expr[*pos] (not a separator, not NUL). */
static int parse_item(struct hl_parse *p, size_t *pos, struct herd_err *err)
{
	const char *expr = p->expr;
	size_t i = *pos, lit = *pos, name_len = 0;
	struct hl_item it = {*pos + 1, *pos, 0, p->ngroups, 0, 1};

	while (expr[i] != '\0' && !is_sep(expr[i])) {
		if (expr[i] == '[') {
			size_t n = 0;

			name_len += i - lit;
			if (parse_group(p, &i, lit, &n, &name_len, err))
				return -1;
			it.ngroups++;
			it.count = sat_mul(it.count, n);
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
	if (it.ngroups > 0 && i > lit)
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
				      it.col, HOSTLIST_NAME_MAX);
	it.text_len = i - *pos;
	if (grow((void **)&p->items, &p->cap_items, p->nitems + 1,
		 sizeof(*p->items)))
		return herd_errprintf(err, "out of memory");
	p->items[p->nitems++] = it;
	p->total = sat_add(p->total, it.count);
	*pos = i;
	return 0;
}

static void parse_free(struct hl_parse *p)
{
	free(p->ranges);
	free(p->groups);
	free(p->items);
}

/* ---- hosts ------------------------------------------------------------ */

/* Splits name before its trailing digits, as Slurm does for a plain name.
 * A suffix too large for a number leaves the name without one. */
static void host_split(struct hl_host *h, size_t len)
{
	size_t d = len;
	unsigned long v = 0;

	while (d > 0 && is_digit(h->name[d - 1]))
		d--;
	h->single = true;
	h->prefix_len = len;
	h->num = 0;
	h->width = 0;
	if (d == len)
		return;
	for (size_t i = d; i < len; i++) {
		unsigned dig = (unsigned)(h->name[i] - '0');

		if (v > (HOSTLIST_NUM_MAX - dig) / 10)
			return;
		v = v * 10 + dig;
	}
	h->single = false;
	h->prefix_len = d;
	h->num = v;
	h->width = (int)(len - d);
}

struct hostlist *hostlist_new(void)
{
	return calloc(1, sizeof(struct hostlist));
}

/* Frees the names of hosts [from, hl->count) and drops them. */
static void truncate_to(struct hostlist *hl, size_t from)
{
	for (size_t i = from; i < hl->count; i++)
		free(hl->hosts[i].name);
	hl->count = from;
}

void hostlist_free(struct hostlist *hl)
{
	if (!hl)
		return;
	truncate_to(hl, 0);
	free(hl->hosts);
	free(hl);
}

static int append(struct hostlist *hl, const char *name, size_t len,
		  struct hl_host *h)
{
	if (grow((void **)&hl->hosts, &hl->cap, hl->count + 1,
		 sizeof(*hl->hosts)))
		return -1;
	h->name = strndup(name, len);
	if (!h->name)
		return -1;
	hl->hosts[hl->count++] = *h;
	return 0;
}

/* Appends the hosts of one bracketed item in Slurm's order. */
static int expand_item(struct hostlist *hl, const struct hl_parse *p,
		       const struct hl_item *it)
{
	const struct hl_group *g = &p->groups[it->first_group];
	size_t k = it->ngroups;
	size_t *ri = NULL;	   /* per group: current range */
	unsigned long *val = NULL; /* per group: current number */
	int rc = -1;

	ri = calloc(k, sizeof(*ri));
	val = calloc(k, sizeof(*val));
	if (!ri || !val)
		goto out;
	for (size_t j = 0; j < k; j++)
		val[j] = p->ranges[g[j].first_range].lo;
	for (;;) {
		char name[HOSTLIST_NAME_MAX + 1];
		size_t len = 0;
		struct hl_host h = {0};
		size_t step;

		for (size_t j = 0; j < k; j++) {
			const struct hl_range *r =
			    &p->ranges[g[j].first_range + ri[j]];
			int n = snprintf(name + len, sizeof(name) - len, "%.*s",
					 (int)g[j].text_len,
					 p->expr + g[j].text_off);

			len += (size_t)n;
			if (j == k - 1)
				h.prefix_len = len;
			n = snprintf(name + len, sizeof(name) - len, "%0*lu",
				     r->width, val[j]);
			len += (size_t)n;
			if (j == k - 1)
				h.width = r->width;
		}
		h.num = val[k - 1];
		if (append(hl, name, len, &h))
			goto out;
		/* Advance: the last group fastest, then groups 0, 1, ...,
		 * k-2 (Slurm's recursion over the prefix, right to left). */
		for (step = 0; step < k; step++) {
			size_t j = step == 0 ? k - 1 : step - 1;
			const struct hl_range *r =
			    &p->ranges[g[j].first_range + ri[j]];

			if (val[j] < r->hi) {
				val[j]++;
				break;
			}
			if (ri[j] + 1 < g[j].nranges) {
				ri[j]++;
				val[j] = p->ranges[g[j].first_range + ri[j]].lo;
				break;
			}
			ri[j] = 0;
			val[j] = p->ranges[g[j].first_range].lo;
		}
		if (step == k)
			break;
	}
	rc = 0;
out:
	free(ri);
	free(val);
	return rc;
}

int hostlist_push(struct hostlist *hl, const char *expr, struct herd_err *err)
{
	struct hl_parse p = {0};
	size_t pos = 0, old = hl ? hl->count : 0;
	int rc = -1;

	if (!hl || !expr)
		return herd_errprintf(err, "no hostlist expression");
	p.expr = expr;
	for (;;) {
		while (is_sep(expr[pos]))
			pos++;
		if (expr[pos] == '\0')
			break;
		if (parse_item(&p, &pos, err))
			goto out;
		if (sat_add(hl->count, p.total) > HOSTLIST_MAX) {
			herd_errprintf(err,
				       "column %zu: more than %d hosts "
				       "(HOSTLIST_MAX)",
				       p.items[p.nitems - 1].col, HOSTLIST_MAX);
			goto out;
		}
	}
	/* The count is known and bounded: allocate once. */
	if (grow((void **)&hl->hosts, &hl->cap, hl->count + p.total,
		 sizeof(*hl->hosts))) {
		herd_errprintf(err, "out of memory for %zu hosts", p.total);
		goto out;
	}
	for (size_t i = 0; i < p.nitems; i++) {
		const struct hl_item *it = &p.items[i];
		int r;

		if (it->ngroups == 0) {
			struct hl_host h = {0};

			r = append(hl, expr + it->text_off, it->text_len, &h);
			if (r == 0)
				host_split(&hl->hosts[hl->count - 1],
					   it->text_len);
		} else {
			r = expand_item(hl, &p, it);
		}
		if (r) {
			herd_errprintf(err, "out of memory");
			truncate_to(hl, old);
			goto out;
		}
	}
	rc = 0;
out:
	parse_free(&p);
	return rc;
}

int hostlist_push_host(struct hostlist *hl, const char *host,
		       struct herd_err *err)
{
	struct hl_host h = {0};
	size_t len;

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
	if (hl->count >= HOSTLIST_MAX)
		return herd_errprintf(err, "more than %d hosts (HOSTLIST_MAX)",
				      HOSTLIST_MAX);
	if (append(hl, host, len, &h))
		return herd_errprintf(err, "out of memory");
	host_split(&hl->hosts[hl->count - 1], len);
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
	return hl->hosts[i].name;
}

long hostlist_find(const struct hostlist *hl, const char *host)
{
	if (!hl || !host)
		return -1;
	for (size_t i = 0; i < hl->count; i++)
		if (!strcmp(hl->hosts[i].name, host))
			return (long)i;
	return -1;
}

int hostlist_delete_nth(struct hostlist *hl, size_t i)
{
	if (!hl || i >= hl->count)
		return -1;
	free(hl->hosts[i].name);
	memmove(&hl->hosts[i], &hl->hosts[i + 1],
		(hl->count - i - 1) * sizeof(*hl->hosts));
	hl->count--;
	return 0;
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

/* ---- compression -------------------------------------------------------- */

/* A run of hosts with one prefix and consecutive numbers. */
struct hl_run {
	const char *prefix; /* borrowed from the first host's name */
	size_t prefix_len;
	unsigned long lo, hi;
	int width;
	bool single;
};

/* Zeros needed to pad num to width. */
static int zero_padded(unsigned long num, int width)
{
	int n = (int)digits_of(num);

	return width > n ? width - n : 0;
}

/* Slurm's width equivalence: widths wn (of n) and wm (of m) are the same
 * when either applied to both numbers changes neither's padding; then the
 * one that can change is set to the other. */
static bool width_equiv(unsigned long n, int *wn, unsigned long m, int *wm)
{
	int npad, nmpad, mpad, mnpad;

	if (*wn == *wm)
		return true;
	npad = zero_padded(n, *wn);
	nmpad = zero_padded(n, *wm);
	mpad = zero_padded(m, *wm);
	mnpad = zero_padded(m, *wn);
	if (npad != nmpad && mpad != mnpad)
		return false;
	if (npad != nmpad)
		*wm = *wn;
	else
		*wn = *wm;
	return true;
}

static bool same_prefix(const struct hl_run *a, const struct hl_run *b)
{
	return a->single == b->single && a->prefix_len == b->prefix_len &&
	       !memcmp(a->prefix, b->prefix, a->prefix_len);
}

/* Would a and b share one bracket? */
static bool within(const struct hl_run *a, const struct hl_run *b)
{
	return !a->single && !b->single && same_prefix(a, b);
}

/* Appends to a buffer sized in advance; overflowing it is a bug, reported
 * as failure rather than written. */
struct outbuf {
	char *s;
	size_t len, cap;
};

static int out_printf(struct outbuf *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int out_printf(struct outbuf *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->s + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->cap - o->len)
		return -1;
	o->len += (size_t)n;
	return 0;
}

char *hostlist_compress(const struct hostlist *hl)
{
	struct hl_run *runs = NULL;
	size_t nruns = 0;
	struct outbuf o = {NULL, 0, 1};
	char *res = NULL;

	if (!hl || hl->count == 0)
		return strdup("");
	runs = calloc(hl->count, sizeof(*runs));
	if (!runs)
		goto out;
	for (size_t i = 0; i < hl->count; i++) {
		const struct hl_host *h = &hl->hosts[i];
		struct hl_run r = {h->name, h->prefix_len, h->num,
				   h->num,  h->width,	   h->single};
		struct hl_run *t = nruns ? &runs[nruns - 1] : NULL;

		/* Limit: each host adds its name and a comma; each run at
		 * most a bracket pair. */
		o.cap += strlen(h->name) + 3;
		if (t && !t->single && !r.single && r.lo > 0 &&
		    t->hi == r.lo - 1 && same_prefix(t, &r) &&
		    width_equiv(t->lo, &t->width, r.lo, &r.width))
			t->hi = r.hi;
		else
			runs[nruns++] = r;
	}
	o.s = malloc(o.cap);
	if (!o.s)
		goto out;
	o.s[0] = '\0';
	for (size_t i = 0; i < nruns;) {
		size_t start = i;
		bool bracket =
		    runs[i].hi > runs[i].lo ||
		    (i + 1 < nruns && within(&runs[i], &runs[i + 1]));

		if (out_printf(&o, "%s%.*s%s", i ? "," : "",
			       (int)runs[i].prefix_len, runs[i].prefix,
			       bracket ? "[" : ""))
			goto out;
		do {
			const struct hl_run *r = &runs[i];

			if (i > start && out_printf(&o, ","))
				goto out;
			if (!r->single &&
			    out_printf(&o, "%0*lu", r->width, r->lo))
				goto out;
			if (!r->single && r->hi > r->lo &&
			    out_printf(&o, "-%0*lu", r->width, r->hi))
				goto out;
		} while (++i < nruns && within(&runs[i], &runs[i - 1]));
		if (bracket && out_printf(&o, "]"))
			goto out;
	}
	res = o.s;
	o.s = NULL;
out:
	free(o.s);
	free(runs);
	return res;
}
