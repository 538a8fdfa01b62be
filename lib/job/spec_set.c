/* spec_set.c — the setters of the key tables (spec_keys.c) that several
 * keys share: strings, numbers, durations, sizes, ratios, words, lists and
 * environments.  Each reads one value node into its member of struct spec
 * and returns 0, or returns -1 with an error at the node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

/* ---- setters ----------------------------------------------------------- */

int spec_set_str(struct ctx *c, const struct field *f, yaml_node_t *key,
		 yaml_node_t *val)
{
	char **dst = spec_member(c, f);
	char *s;

	(void)key;
	if (spec_is_null(val)) {
		free(*dst);
		*dst = NULL;
		return 0;
	}
	if (!(s = spec_string(c, val, f->name)))
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

int spec_set_name(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *s;

	if (spec_set_str(c, f, key, val) < 0)
		return -1;
	if (!(s = c->spec->name))
		return 0;
	/* The name becomes part of paths (log.dir) and of events. */
	for (const char *p = s; *p; p++)
		if (*p == '/' || (unsigned char)*p <= ' ' || *p == 0x7f)
			return spec_perr(
			    c, val->start_mark,
			    "expected a job name without '/', spaces "
			    "or control characters, got '%s'",
			    spec_show(s, buf));
	if (!strcmp(s, ".") || !strcmp(s, ".."))
		return spec_perr(c, val->start_mark, "'%s' is not a job name",
				 s);
	return 0;
}

/* ssh.agent_dir: a directory on every node, named before the remote shell
 * expands anything: absolute, or ~ (alone or as ~/...) for the remote
 * user's home.  No ~user, no relative path (relative to what?), no control
 * characters (the path appears in one-line messages). */
int spec_set_agent_dir(struct ctx *c, const struct field *f, yaml_node_t *key,
		       yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *s;
	size_t len;

	if (spec_set_str(c, f, key, val) < 0)
		return -1;
	if (!(s = c->spec->ssh.agent_dir))
		return 0;
	len = strlen(s);
	if (len > SPEC_AGENT_DIR_MAX)
		return spec_perr(
		    c, val->start_mark,
		    "ssh.agent_dir is %zu bytes long; at most %d are "
		    "allowed",
		    len, SPEC_AGENT_DIR_MAX);
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return spec_perr(
			    c, val->start_mark,
			    "ssh.agent_dir holds a control character: "
			    "'%s'",
			    spec_show(s, buf));
	if (s[0] != '/' && strcmp(s, "~") && strncmp(s, "~/", 2))
		return spec_perr(
		    c, val->start_mark,
		    "expected an absolute path or one starting with "
		    "~/ (the home of the user on the node) for "
		    "ssh.agent_dir, got '%s'",
		    spec_show(s, buf));
	return 0;
}

/* Numbers: decimal digits in [lo, hi]; f->word (if any) stores 0. */
static int number(struct ctx *c, const struct field *f, yaml_node_t *val,
		  long *out)
{
	char buf[SHOW_MAX + 4];
	char what[96];
	const char *v;
	long n = 0;
	const char *p;

	if (f->lo == 1 && f->hi == 65535)
		snprintf(what, sizeof(what), "a port number 1..65535");
	else if (f->lo == 1)
		snprintf(what, sizeof(what), "a positive integer%s%s%s",
			 f->word ? " or '" : "", f->word ? f->word : "",
			 f->word ? "'" : "");
	else
		snprintf(what, sizeof(what), "an integer from %ld to %ld",
			 f->lo, f->hi);
	if (!(v = spec_scalar(c, val, f->name, what)))
		return -1;
	if (f->word && !strcmp(v, f->word)) {
		*out = 0;
		return 0;
	}
	p = v;
	if (*p == '-' && p[1] >= '0' && p[1] <= '9')
		return spec_perr(c, val->start_mark,
				 "expected %s for %s, got %s "
				 "(negative)",
				 what, f->name, spec_show(v, buf));
	if (*p == '+')
		p++;
	if (!*p)
		return spec_perr(c, val->start_mark,
				 "expected %s for %s, got "
				 "nothing",
				 what, f->name);
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return spec_perr(c, val->start_mark,
					 "expected %s for %s, "
					 "got '%s'",
					 what, f->name, spec_show(v, buf));
		if (n <= f->hi)
			n = n * 10 + (*p - '0');
	}
	if (n < f->lo || n > f->hi) {
		if (n == 0)
			return spec_perr(c, val->start_mark,
					 "expected %s for %s, "
					 "got 0",
					 what, f->name);
		return spec_perr(c, val->start_mark,
				 "expected %s for %s, got %s "
				 "(out of range)",
				 what, f->name, spec_show(v, buf));
	}
	*out = n;
	return 0;
}

int spec_set_long(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val)
{
	(void)key;
	return number(c, f, val, spec_member(c, f));
}

int spec_set_int(struct ctx *c, const struct field *f, yaml_node_t *key,
		 yaml_node_t *val)
{
	long n;

	(void)key;
	if (number(c, f, val, &n) < 0)
		return -1;
	*(int *)spec_member(c, f) = (int)n;
	return 0;
}

int spec_set_duration(struct ctx *c, const struct field *f, yaml_node_t *key,
		      yaml_node_t *val)
{
	struct herd_err derr;
	char buf[SHOW_MAX + 4];
	const char *v;
	long ms;

	(void)key;
	if (!(v = spec_scalar(c, val, f->name, "a duration such as 3s")))
		return -1;
	if (f->word && !strcmp(v, f->word)) {
		*(long *)spec_member(c, f) = -1;
		return 0;
	}
	if (spec_duration_parse(v, &ms, &derr) < 0)
		return spec_perr(
		    c, val->start_mark,
		    "bad duration '%s' for %s%s%s%s: "
		    "%s",
		    spec_show(v, buf), f->name, f->word ? " (or '" : "",
		    f->word ? f->word : "", f->word ? "')" : "", derr.text);
	if (ms < f->lo && f->lo > 1)
		return spec_perr(
		    c, val->start_mark,
		    "expected a duration of at least %ldms for %s, "
		    "got '%s'",
		    f->lo, f->name, spec_show(v, buf));
	if (ms < f->lo)
		return spec_perr(c, val->start_mark,
				 "expected a duration above "
				 "zero for %s, got '%s'",
				 f->name, spec_show(v, buf));
	*(long *)spec_member(c, f) = ms;
	return 0;
}

int spec_set_bool(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *v;

	(void)key;
	if (!(v = spec_scalar(c, val, f->name, "true or false")))
		return -1;
	if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
		*(bool *)spec_member(c, f) = true;
	else if (!strcmp(v, "false") || !strcmp(v, "False") ||
		 !strcmp(v, "FALSE"))
		*(bool *)spec_member(c, f) = false;
	else
		return spec_perr(c, val->start_mark,
				 "expected true or false for "
				 "%s, got '%s'",
				 f->name, spec_show(v, buf));
	return 0;
}

int spec_set_bytes(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val)
{
	struct herd_err derr;
	char buf[SHOW_MAX + 4];
	const char *v;
	long long n;

	(void)key;
	if (!(v = spec_scalar(c, val, f->name, "a size such as 10G")))
		return -1;
	if (spec_bytes_parse(v, &n, &derr) < 0)
		return spec_perr(c, val->start_mark, "bad size '%s' for %s: %s",
				 spec_show(v, buf), f->name, derr.text);
	*(long long *)spec_member(c, f) = n;
	return 0;
}

/* A ratio above 1 (health.straggler_ratio): "1.3", at most 100. */
int spec_set_ratio(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val)
{
	char buf[SHOW_MAX + 4], *end;
	const char *v;
	double d;

	(void)key;
	if (!(v = spec_scalar(c, val, f->name, "a number such as 1.3")))
		return -1;
	errno = 0;
	d = strtod(v, &end);
	if (end == v || *end || errno || !(d > 1.0 && d <= 100.0))
		return spec_perr(
		    c, val->start_mark,
		    "expected a number above 1 and at most 100 for "
		    "%s (how many times slower than the median), got "
		    "'%s'",
		    f->name, spec_show(v, buf));
	*(double *)spec_member(c, f) = d;
	return 0;
}

/* Index of v in names, or -1 with an error listing the allowed words. */
int spec_enum_index(struct ctx *c, const struct field *f, yaml_node_t *val,
		    const char *extra)
{
	char allowed[256] = "";
	char buf[SHOW_MAX + 4];
	size_t used = 0;
	const char *v;
	int i;

	for (i = 0; f->names[i]; i++) {
		int n = snprintf(allowed + used, sizeof(allowed) - used, "%s%s",
				 i ? ", " : "", f->names[i]);
		if (n > 0 && (size_t)n < sizeof(allowed) - used)
			used += (size_t)n;
	}
	if (extra)
		snprintf(allowed + used, sizeof(allowed) - used, "%s", extra);
	if (!(v = spec_scalar(c, val, f->name, "one of")))
		return -1;
	for (i = 0; f->names[i]; i++)
		if (!strcmp(v, f->names[i]))
			return i;
	return spec_perr(c, val->start_mark,
			 "unknown value '%s' for %s (expected "
			 "one of: %s)",
			 spec_show(v, buf), f->name, allowed);
}

int spec_set_enum(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val)
{
	int i;

	(void)key;
	if (val->type != YAML_SCALAR_NODE)
		return spec_perr(c, val->start_mark,
				 "expected a word for %s, got "
				 "%s",
				 f->name, spec_kind_name(val));
	if ((i = spec_enum_index(c, f, val, NULL)) < 0)
		return -1;
	*(int *)spec_member(c, f) = i;
	return 0;
}

/* log.mode: octal digits, the mode of every log file.  The owner must
 * read and write (herd appends, the user reads); group and others may
 * read, never write (a writer could rewrite the record of the job) nor
 * execute.  So 0600, 0640, 0604 or 0644, with or without the leading 0. */
int spec_set_log_mode(struct ctx *c, const struct field *f, yaml_node_t *key,
		      yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *v, *p;
	unsigned int mode = 0;

	(void)key;
	if (!(v = spec_scalar(c, val, f->name, "a file mode such as 0600")))
		return -1;
	p = v[0] == '0' && strlen(v) == 4 ? v + 1 : v;
	if (strlen(p) != 3)
		goto bad;
	for (; *p; p++) {
		if (*p < '0' || *p > '7')
			goto bad;
		mode = mode * 8 + (unsigned int)(*p - '0');
	}
	if ((mode & 0600) == 0600 && (mode & ~0644u) == 0) {
		*(unsigned int *)spec_member(c, f) = mode;
		return 0;
	}
bad:
	return spec_perr(
	    c, val->start_mark,
	    "expected a file mode for %s: 0600, 0640, 0604 or 0644 "
	    "(the owner reads and writes, others at most read), got "
	    "'%s'",
	    f->name, spec_show(v, buf));
}

int spec_set_host_keys(struct ctx *c, const struct field *f, yaml_node_t *key,
		       yaml_node_t *val)
{
	const char *v;

	if (val->type == YAML_SCALAR_NODE) {
		v = (const char *)val->data.scalar.value;
		if (!strcmp(v, "off") || !strcmp(v, "no") ||
		    !strcmp(v, "false") || !strcmp(v, "none") ||
		    !strcmp(v, "ignore"))
			return spec_perr(
			    c, val->start_mark,
			    "ssh.host_keys cannot turn host key "
			    "checking off: use strict (keys pinned by "
			    "'herd keys') or accept-new (pin a key on "
			    "first contact)");
	}
	return spec_set_enum(c, f, key, val);
}

/* Fills dst with the strings of a non-empty list of scalars. */
int spec_strv_parse(struct ctx *c, const char *name, yaml_node_t *val,
		    struct spec_strv *dst)
{
	yaml_node_item_t *it;
	size_t n;

	if (val->type != YAML_SEQUENCE_NODE)
		return spec_perr(c, val->start_mark,
				 "expected a list for %s, got "
				 "%s",
				 name, spec_kind_name(val));
	n = (size_t)(val->data.sequence.items.top -
		     val->data.sequence.items.start);
	if (n > SPEC_LIST_MAX)
		return spec_perr(c, val->start_mark,
				 "%s has %zu entries; at most "
				 "%d are allowed",
				 name, n, SPEC_LIST_MAX);
	if (!n)
		return 0;
	if (!(dst->v = calloc(n, sizeof(*dst->v))))
		return spec_perr(c, val->start_mark, "out of memory");
	for (it = val->data.sequence.items.start;
	     it < val->data.sequence.items.top; it++) {
		if (!(dst->v[dst->n] = spec_string(c, spec_node(c, *it), name)))
			return -1;
		dst->n++;
	}
	return 0;
}

int spec_set_strv(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val)
{
	(void)key;
	return spec_strv_parse(c, f->name, val, spec_member(c, f));
}

/* launch.preload (warm interpreters): Python module names, identifiers
 * joined by dots, at most 200 bytes each (the agent takes them as one
 * argument). */
static int module_name_ok(const char *s)
{
	int start = 1;

	if (!*s || strlen(s) > 200)
		return 0;
	for (; *s; s++) {
		int alpha = (*s >= 'a' && *s <= 'z') ||
			    (*s >= 'A' && *s <= 'Z') || *s == '_';

		if (*s == '.' && !start) {
			start = 1;
			continue;
		}
		if (!alpha && (start || *s < '0' || *s > '9'))
			return 0;
		start = 0;
	}
	return !start;
}

int spec_set_preload(struct ctx *c, const struct field *f, yaml_node_t *key,
		     yaml_node_t *val)
{
	struct spec_strv *dst = spec_member(c, f);

	(void)key;
	if (spec_strv_parse(c, f->name, val, dst) < 0)
		return -1;
	for (size_t i = 0; i < dst->n; i++)
		if (!module_name_ok(dst->v[i]))
			return spec_perr(
			    c,
			    spec_node(c, val->data.sequence.items.start[i])
				->start_mark,
			    "%s: '%s' is not a Python module name "
			    "(identifiers joined by dots, like "
			    "torch.distributed)",
			    f->name, dst->v[i]);
	return 0;
}

int spec_env_name_ok(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
	      *s == '_'))
		return 0;
	for (s++; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || *s == '_'))
			return 0;
	return 1;
}

/* A mapping of at most max entries for f (what: "variables", ...):
 * returns its size, or -1 with the error. */
long spec_map_size(struct ctx *c, const struct field *f, yaml_node_t *val,
		   const char *what, long max)
{
	long n;

	if (val->type != YAML_MAPPING_NODE)
		return spec_perr(c, val->start_mark,
				 "expected a mapping of %s for %s, got %s",
				 what, f->name, spec_kind_name(val));
	n = (long)(val->data.mapping.pairs.top - val->data.mapping.pairs.start);
	if (n > max)
		return spec_perr(c, val->start_mark,
				 "%s has %ld entries; at most %ld are allowed",
				 f->name, n, max);
	return n;
}

/* Whether the key name of pair p was given before it in val (the error
 * names the first place). */
int spec_dup_key(struct ctx *c, const struct field *f, yaml_node_t *val,
		 yaml_node_pair_t *p, const char *what, const char *name)
{
	yaml_node_t *k = spec_node(c, p->key);

	for (yaml_node_pair_t *q = val->data.mapping.pairs.start; q < p; q++) {
		yaml_node_t *qk = spec_node(c, q->key);

		if (!strcmp((const char *)qk->data.scalar.value, name))
			return spec_perr(
			    c, k->start_mark,
			    "duplicate %s '%s' in %s (first at %zu:%zu)", what,
			    name, f->name, qk->start_mark.line + 1,
			    qk->start_mark.column + 1);
	}
	return 0;
}

int spec_set_env(struct ctx *c, const struct field *f, yaml_node_t *key,
		 yaml_node_t *val)
{
	struct spec *s = c->spec;
	char buf[SHOW_MAX + 4];
	yaml_node_pair_t *p;
	long n;

	(void)key;
	if ((n = spec_map_size(c, f, val, "variables", SPEC_LIST_MAX)) <= 0)
		return (int)n;
	if (!(s->launch.env = calloc((size_t)n, sizeof(*s->launch.env))))
		return spec_perr(c, val->start_mark, "out of memory");
	for (p = val->data.mapping.pairs.start; p < val->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = spec_node(c, p->key),
			    *v = spec_node(c, p->value);
		struct spec_env *e = &s->launch.env[s->launch.n_env];
		const char *name, *text;

		if (!(name = spec_scalar(c, k, f->name, "a variable name")))
			return -1;
		if (!spec_env_name_ok(name))
			return spec_perr(
			    c, k->start_mark,
			    "expected a variable "
			    "name (letters, digits, '_') in %s, got "
			    "'%s'",
			    f->name, spec_show(name, buf));
		if (spec_dup_key(c, f, val, p, "variable", name) < 0)
			return -1;
		if (spec_is_null(v))
			text = "";
		else if (!(text = spec_scalar(c, v, name,
					      "a string, number or "
					      "boolean")))
			return -1;
		if (strlen(name) + 1 + strlen(text) + 1 > SPEC_ARG_STRLEN_MAX)
			return spec_perr(
			    c, v->start_mark,
			    "%s.%s is %zu bytes; Linux passes at most "
			    "%d bytes in one variable (MAX_ARG_STRLEN) "
			    "and every rank would fail to start: put "
			    "the value in a file",
			    f->name, name, strlen(text),
			    SPEC_ARG_STRLEN_MAX - 2 - (int)strlen(name));
		if (!(e->key = strdup(name)) || !(e->value = strdup(text))) {
			free(e->key);
			e->key = NULL;
			return spec_perr(c, v->start_mark, "out of memory");
		}
		s->launch.n_env++;
	}
	return 0;
}
