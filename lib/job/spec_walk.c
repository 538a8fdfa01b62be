/* spec_walk.c — the walk of a loaded job document: one table of keys per
 * section (spec_keys.c), each key's setter called on its value, unknown
 * and duplicate keys refused; and the helpers every setter and check uses
 * to read nodes and word errors.  Every error carries the libyaml mark of
 * the node it is about.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "spec_int.h"

/* ---- messages ---------------------------------------------------------- */

int spec_perr(struct ctx *c, yaml_mark_t m, const char *fmt, ...)
{
	char msg[HERD_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return herd_errprintf(c->err, "%s:%zu:%zu: %s", c->path, m.line + 1,
			      m.column + 1, msg);
}

/* Copies s for a message: at most SHOW_MAX characters, control bytes as
 * '?', "..." when cut.  buf holds SHOW_MAX + 4 bytes. */
const char *spec_show(const char *s, char *buf)
{
	size_t i;

	for (i = 0; s[i] && i < SHOW_MAX; i++)
		buf[i] =
		    ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
	if (s[i]) {
		/* Do not cut a UTF-8 sequence in half. */
		while (i > 0 && ((unsigned char)buf[i] & 0xc0) == 0x80)
			i--;
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = '\0';
	return buf;
}

const char *spec_kind_name(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	default:
		return "a scalar";
	}
}

static const char *key_of(const struct field *f)
{
	const char *dot = strrchr(f->name, '.');

	return dot ? dot + 1 : f->name;
}

/* ---- node helpers ------------------------------------------------------ */

yaml_node_t *spec_node(struct ctx *c, int i)
{
	return yaml_document_get_node(c->doc, i);
}

/* A plain ~, null or empty value: "not set". */
int spec_is_null(const yaml_node_t *n)
{
	const char *v = (const char *)n->data.scalar.value;

	if (n->type != YAML_SCALAR_NODE ||
	    n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	return !*v || !strcmp(v, "~") || !strcmp(v, "null") ||
	       !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* The text of a scalar node, or NULL with an error naming what was
 * expected when n is not a scalar or holds a NUL (a "\0" escape). */
const char *spec_scalar(struct ctx *c, yaml_node_t *n, const char *name,
			const char *what)
{
	const char *v;

	if (n->type != YAML_SCALAR_NODE) {
		spec_perr(c, n->start_mark, "expected %s for %s, got %s", what,
			  name, spec_kind_name(n));
		return NULL;
	}
	v = (const char *)n->data.scalar.value;
	if (strlen(v) != n->data.scalar.length) {
		spec_perr(c, n->start_mark, "%s holds a NUL character", name);
		return NULL;
	}
	return v;
}

/* A non-empty string value (copied), or NULL with err. */
char *spec_string(struct ctx *c, yaml_node_t *n, const char *name)
{
	const char *v = spec_scalar(c, n, name, "a string");
	char *s;

	if (!v)
		return NULL;
	if (!*v) {
		spec_perr(c, n->start_mark,
			  "expected a non-empty string for %s "
			  "(leave the key out for the default)",
			  name);
		return NULL;
	}
	if (!(s = strdup(v)))
		spec_perr(c, n->start_mark, "out of memory");
	return s;
}

void *spec_member(struct ctx *c, const struct field *f)
{
	return (char *)c->spec + f->off;
}

/* ---- the walk ---------------------------------------------------------- */

/* Levenshtein distance, for "did you mean"; keys are short, so both
 * strings are cut to 64 characters. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strnlen(a, 64), lb = strnlen(b, 64);
	size_t row[65];

	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static int unknown_key(struct ctx *c, const struct field *tab,
		       const char *where, yaml_node_t *k, const char *key)
{
	char buf[SHOW_MAX + 4];
	char list[512] = "";
	const char *best = NULL;
	size_t best_d = SIZE_MAX, used = 0;
	char in[80] = "";

	for (const struct field *f = tab; f->name; f++) {
		size_t d = distance(key, key_of(f));
		int n;

		if (d < best_d) {
			best_d = d;
			best = key_of(f);
		}
		n = snprintf(list + used, sizeof(list) - used, "%s%s",
			     used ? ", " : "", key_of(f));
		if (n > 0 && (size_t)n < sizeof(list) - used)
			used += (size_t)n;
	}
	if (where)
		snprintf(in, sizeof(in), " in %s", where);
	/* A near miss is a typo: up to 2 edits, fewer for short keys. */
	if (best && best_d <= 2 && best_d < strlen(best))
		return spec_perr(c, k->start_mark,
				 "unknown key '%s'%s (did you "
				 "mean '%s'?)",
				 spec_show(key, buf), in, best);
	return spec_perr(c, k->start_mark,
			 "unknown key '%s'%s (expected one of: "
			 "%s)",
			 spec_show(key, buf), in, list);
}

int spec_walk(struct ctx *c, yaml_node_t *map, const struct field *tab,
	      const char *where)
{
	yaml_node_t *seen[TABLE_MAX] = {NULL};
	yaml_node_pair_t *p;

	if (map->type != YAML_MAPPING_NODE)
		return spec_perr(c, map->start_mark,
				 "expected a mapping of keys "
				 "for %s, got %s",
				 where ? where : "the job",
				 spec_kind_name(map));
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = spec_node(c, p->key),
			    *v = spec_node(c, p->value);
		const struct field *f;
		const char *key;
		size_t i;

		if (k->type != YAML_SCALAR_NODE)
			return spec_perr(c, k->start_mark,
					 "expected a key name%s%s, "
					 "got %s",
					 where ? " in " : "",
					 where ? where : "", spec_kind_name(k));
		if (!(key = spec_scalar(c, k, where ? where : "the job",
					"a key name")))
			return -1;
		for (f = tab; f->name; f++)
			if (!strcmp(key, key_of(f)))
				break;
		if (!f->name)
			return unknown_key(c, tab, where, k, key);
		i = (size_t)(f - tab);
		if (seen[i])
			return spec_perr(c, k->start_mark,
					 "duplicate key '%s' "
					 "(first at %zu:%zu)",
					 f->name, seen[i]->start_mark.line + 1,
					 seen[i]->start_mark.column + 1);
		seen[i] = k;
		if (f->set(c, f, k, v) < 0)
			return -1;
		if (f->track) {
			c->tracked[f->track] = v;
			c->tracked_key[f->track] = k;
		}
	}
	return 0;
}
