/* spec.c — job.yaml parsed with libyaml into a validated struct spec.
 *
 * Two passes over the text: the event parser first refuses what the
 * document loader would silently accept (aliases, which also rules out
 * alias bombs, and a second document), then the loaded document is walked
 * with one table of keys per section.  Every error carries the libyaml
 * mark of the node it is about.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "herd/hostfile.h"
#include "herd/hostlist.h"
#include "herd/inventory.h"
#include "herd/proto.h"
#include "herd/render.h"
#include "herd/spec.h"

/* Values quoted in messages are cut to this many characters so that one
 * huge scalar cannot push the position out of the error text. */
#define SHOW_MAX 40

/* Nodes the checks after the walk need, remembered while walking. */
enum track {
	TR_NONE = 0,
	TR_COUNT,
	TR_MIN,
	TR_HOSTS,
	TR_SPARES,
	TR_HEARTBEAT,
	TR_TIMEOUT,
	TR_LAUNCH,
	TR_INVENTORY,
	TR_CHECKPOINT,
	TR_PATTERN,
	TR_LATEST,
	TR_COMMAND,
	TR_RESUME,
	TR_TRANSPORT,
	TR_MAX
};

struct field;

struct ctx {
	const char *path;
	yaml_document_t *doc;
	struct spec *spec;
	struct herd_err *err;
	yaml_node_t *source_key; /* key of the first host source */
	const char *source_name;
	yaml_node_t *tracked[TR_MAX];	  /* value nodes, by enum track */
	yaml_node_t *tracked_key[TR_MAX]; /* their keys */
};

typedef int (*setter)(struct ctx *c, const struct field *f, yaml_node_t *key,
		      yaml_node_t *val);

struct field {
	const char *name; /* dotted: "nodes.count" */
	setter set;
	size_t off;		  /* offset of the member in struct spec */
	long lo, hi;		  /* numbers and durations: allowed range */
	const char *word;	  /* a word standing for the 0 / -1 default */
	const char *const *names; /* enums: NULL-terminated */
	const struct field *sub;  /* sections: their keys */
	enum track track;
	enum spec_source source; /* host source keys */
};

/* ---- messages ---------------------------------------------------------- */

static int perr(struct ctx *c, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int perr(struct ctx *c, yaml_mark_t m, const char *fmt, ...)
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
static const char *show(const char *s, char *buf)
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

static const char *kind_name(const yaml_node_t *n)
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

static yaml_node_t *node(struct ctx *c, int i)
{
	return yaml_document_get_node(c->doc, i);
}

/* A plain ~, null or empty value: "not set". */
static int is_null(const yaml_node_t *n)
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
static const char *scalar(struct ctx *c, yaml_node_t *n, const char *name,
			  const char *what)
{
	const char *v;

	if (n->type != YAML_SCALAR_NODE) {
		perr(c, n->start_mark, "expected %s for %s, got %s", what, name,
		     kind_name(n));
		return NULL;
	}
	v = (const char *)n->data.scalar.value;
	if (strlen(v) != n->data.scalar.length) {
		perr(c, n->start_mark, "%s holds a NUL character", name);
		return NULL;
	}
	return v;
}

/* A non-empty string value (copied), or NULL with err. */
static char *string(struct ctx *c, yaml_node_t *n, const char *name)
{
	const char *v = scalar(c, n, name, "a string");
	char *s;

	if (!v)
		return NULL;
	if (!*v) {
		perr(c, n->start_mark,
		     "expected a non-empty string for %s "
		     "(leave the key out for the default)",
		     name);
		return NULL;
	}
	if (!(s = strdup(v)))
		perr(c, n->start_mark, "out of memory");
	return s;
}

static void *member(struct ctx *c, const struct field *f)
{
	return (char *)c->spec + f->off;
}

/* ---- setters ----------------------------------------------------------- */

static int set_str(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val)
{
	char **dst = member(c, f);
	char *s;

	(void)key;
	if (is_null(val)) {
		free(*dst);
		*dst = NULL;
		return 0;
	}
	if (!(s = string(c, val, f->name)))
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

static int set_name(struct ctx *c, const struct field *f, yaml_node_t *key,
		    yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *s;

	if (set_str(c, f, key, val) < 0)
		return -1;
	if (!(s = c->spec->name))
		return 0;
	/* The name becomes part of paths (log.dir) and of events. */
	for (const char *p = s; *p; p++)
		if (*p == '/' || (unsigned char)*p <= ' ' || *p == 0x7f)
			return perr(c, val->start_mark,
				    "expected a job name without '/', spaces "
				    "or control characters, got '%s'",
				    show(s, buf));
	if (!strcmp(s, ".") || !strcmp(s, ".."))
		return perr(c, val->start_mark, "'%s' is not a job name", s);
	return 0;
}

/* ssh.agent_dir: a directory on every node, named before the remote shell
 * expands anything: absolute, or ~ (alone or as ~/...) for the remote
 * user's home.  No ~user, no relative path (relative to what?), no control
 * characters (the path appears in one-line messages). */
static int set_agent_dir(struct ctx *c, const struct field *f, yaml_node_t *key,
			 yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *s;
	size_t len;

	if (set_str(c, f, key, val) < 0)
		return -1;
	if (!(s = c->spec->ssh.agent_dir))
		return 0;
	len = strlen(s);
	if (len > SPEC_AGENT_DIR_MAX)
		return perr(c, val->start_mark,
			    "ssh.agent_dir is %zu bytes long; at most %d are "
			    "allowed",
			    len, SPEC_AGENT_DIR_MAX);
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			return perr(c, val->start_mark,
				    "ssh.agent_dir holds a control character: "
				    "'%s'",
				    show(s, buf));
	if (s[0] != '/' && strcmp(s, "~") && strncmp(s, "~/", 2))
		return perr(c, val->start_mark,
			    "expected an absolute path or one starting with "
			    "~/ (the home of the user on the node) for "
			    "ssh.agent_dir, got '%s'",
			    show(s, buf));
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
	if (!(v = scalar(c, val, f->name, what)))
		return -1;
	if (f->word && !strcmp(v, f->word)) {
		*out = 0;
		return 0;
	}
	p = v;
	if (*p == '-' && p[1] >= '0' && p[1] <= '9')
		return perr(c, val->start_mark,
			    "expected %s for %s, got %s "
			    "(negative)",
			    what, f->name, show(v, buf));
	if (*p == '+')
		p++;
	if (!*p)
		return perr(c, val->start_mark,
			    "expected %s for %s, got "
			    "nothing",
			    what, f->name);
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return perr(c, val->start_mark,
				    "expected %s for %s, "
				    "got '%s'",
				    what, f->name, show(v, buf));
		if (n <= f->hi)
			n = n * 10 + (*p - '0');
	}
	if (n < f->lo || n > f->hi) {
		if (n == 0)
			return perr(c, val->start_mark,
				    "expected %s for %s, "
				    "got 0",
				    what, f->name);
		return perr(c, val->start_mark,
			    "expected %s for %s, got %s "
			    "(out of range)",
			    what, f->name, show(v, buf));
	}
	*out = n;
	return 0;
}

static int set_long(struct ctx *c, const struct field *f, yaml_node_t *key,
		    yaml_node_t *val)
{
	(void)key;
	return number(c, f, val, member(c, f));
}

static int set_int(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val)
{
	long n;

	(void)key;
	if (number(c, f, val, &n) < 0)
		return -1;
	*(int *)member(c, f) = (int)n;
	return 0;
}

static int set_duration(struct ctx *c, const struct field *f, yaml_node_t *key,
			yaml_node_t *val)
{
	struct herd_err derr;
	char buf[SHOW_MAX + 4];
	const char *v;
	long ms;

	(void)key;
	if (!(v = scalar(c, val, f->name, "a duration such as 3s")))
		return -1;
	if (f->word && !strcmp(v, f->word)) {
		*(long *)member(c, f) = -1;
		return 0;
	}
	if (spec_duration_parse(v, &ms, &derr) < 0)
		return perr(c, val->start_mark,
			    "bad duration '%s' for %s%s%s%s: "
			    "%s",
			    show(v, buf), f->name, f->word ? " (or '" : "",
			    f->word ? f->word : "", f->word ? "')" : "",
			    derr.text);
	if (ms < f->lo && f->lo > 1)
		return perr(c, val->start_mark,
			    "expected a duration of at least %ldms for %s, "
			    "got '%s'",
			    f->lo, f->name, show(v, buf));
	if (ms < f->lo)
		return perr(c, val->start_mark,
			    "expected a duration above "
			    "zero for %s, got '%s'",
			    f->name, show(v, buf));
	*(long *)member(c, f) = ms;
	return 0;
}

static int set_bool(struct ctx *c, const struct field *f, yaml_node_t *key,
		    yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *v;

	(void)key;
	if (!(v = scalar(c, val, f->name, "true or false")))
		return -1;
	if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
		*(bool *)member(c, f) = true;
	else if (!strcmp(v, "false") || !strcmp(v, "False") ||
		 !strcmp(v, "FALSE"))
		*(bool *)member(c, f) = false;
	else
		return perr(c, val->start_mark,
			    "expected true or false for "
			    "%s, got '%s'",
			    f->name, show(v, buf));
	return 0;
}

static int set_bytes(struct ctx *c, const struct field *f, yaml_node_t *key,
		     yaml_node_t *val)
{
	struct herd_err derr;
	char buf[SHOW_MAX + 4];
	const char *v;
	long long n;

	(void)key;
	if (!(v = scalar(c, val, f->name, "a size such as 10G")))
		return -1;
	if (spec_bytes_parse(v, &n, &derr) < 0)
		return perr(c, val->start_mark, "bad size '%s' for %s: %s",
			    show(v, buf), f->name, derr.text);
	*(long long *)member(c, f) = n;
	return 0;
}

/* A ratio above 1 (health.straggler_ratio): "1.3", at most 100. */
static int set_ratio(struct ctx *c, const struct field *f, yaml_node_t *key,
		     yaml_node_t *val)
{
	char buf[SHOW_MAX + 4], *end;
	const char *v;
	double d;

	(void)key;
	if (!(v = scalar(c, val, f->name, "a number such as 1.3")))
		return -1;
	errno = 0;
	d = strtod(v, &end);
	if (end == v || *end || errno || !(d > 1.0 && d <= 100.0))
		return perr(c, val->start_mark,
			    "expected a number above 1 and at most 100 for "
			    "%s (how many times slower than the median), got "
			    "'%s'",
			    f->name, show(v, buf));
	*(double *)member(c, f) = d;
	return 0;
}

/* Index of v in names, or -1 with an error listing the allowed words. */
static int enum_index(struct ctx *c, const struct field *f, yaml_node_t *val,
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
	if (!(v = scalar(c, val, f->name, "one of")))
		return -1;
	for (i = 0; f->names[i]; i++)
		if (!strcmp(v, f->names[i]))
			return i;
	return perr(c, val->start_mark,
		    "unknown value '%s' for %s (expected "
		    "one of: %s)",
		    show(v, buf), f->name, allowed);
}

static int set_enum(struct ctx *c, const struct field *f, yaml_node_t *key,
		    yaml_node_t *val)
{
	int i;

	(void)key;
	if (val->type != YAML_SCALAR_NODE)
		return perr(c, val->start_mark,
			    "expected a word for %s, got "
			    "%s",
			    f->name, kind_name(val));
	if ((i = enum_index(c, f, val, NULL)) < 0)
		return -1;
	*(int *)member(c, f) = i;
	return 0;
}

/* log.mode: octal digits, the mode of every log file.  The owner must
 * read and write (herd appends, the user reads); group and others may
 * read, never write (a writer could rewrite the record of the job) nor
 * execute.  So 0600, 0640, 0604 or 0644, with or without the leading 0. */
static int set_log_mode(struct ctx *c, const struct field *f, yaml_node_t *key,
			yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *v, *p;
	unsigned int mode = 0;

	(void)key;
	if (!(v = scalar(c, val, f->name, "a file mode such as 0600")))
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
		*(unsigned int *)member(c, f) = mode;
		return 0;
	}
bad:
	return perr(c, val->start_mark,
		    "expected a file mode for %s: 0600, 0640, 0604 or 0644 "
		    "(the owner reads and writes, others at most read), got "
		    "'%s'",
		    f->name, show(v, buf));
}

static int set_host_keys(struct ctx *c, const struct field *f, yaml_node_t *key,
			 yaml_node_t *val)
{
	const char *v;

	if (val->type == YAML_SCALAR_NODE) {
		v = (const char *)val->data.scalar.value;
		if (!strcmp(v, "off") || !strcmp(v, "no") ||
		    !strcmp(v, "false") || !strcmp(v, "none") ||
		    !strcmp(v, "ignore"))
			return perr(c, val->start_mark,
				    "ssh.host_keys cannot turn host key "
				    "checking off: use strict (keys pinned by "
				    "'herd keys') or accept-new (pin a key on "
				    "first contact)");
	}
	return set_enum(c, f, key, val);
}

/* Fills dst with the strings of a non-empty list of scalars. */
static int strv(struct ctx *c, const char *name, yaml_node_t *val,
		struct spec_strv *dst)
{
	yaml_node_item_t *it;
	size_t n;

	if (val->type != YAML_SEQUENCE_NODE)
		return perr(c, val->start_mark,
			    "expected a list for %s, got "
			    "%s",
			    name, kind_name(val));
	n = (size_t)(val->data.sequence.items.top -
		     val->data.sequence.items.start);
	if (n > SPEC_LIST_MAX)
		return perr(c, val->start_mark,
			    "%s has %zu entries; at most "
			    "%d are allowed",
			    name, n, SPEC_LIST_MAX);
	if (!n)
		return 0;
	if (!(dst->v = calloc(n, sizeof(*dst->v))))
		return perr(c, val->start_mark, "out of memory");
	for (it = val->data.sequence.items.start;
	     it < val->data.sequence.items.top; it++) {
		if (!(dst->v[dst->n] = string(c, node(c, *it), name)))
			return -1;
		dst->n++;
	}
	return 0;
}

static int set_strv(struct ctx *c, const struct field *f, yaml_node_t *key,
		    yaml_node_t *val)
{
	(void)key;
	return strv(c, f->name, val, member(c, f));
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

static int set_preload(struct ctx *c, const struct field *f, yaml_node_t *key,
		       yaml_node_t *val)
{
	struct spec_strv *dst = member(c, f);

	(void)key;
	if (strv(c, f->name, val, dst) < 0)
		return -1;
	for (size_t i = 0; i < dst->n; i++)
		if (!module_name_ok(dst->v[i]))
			return perr(c,
				    node(c, val->data.sequence.items.start[i])
					    ->start_mark,
				    "%s: '%s' is not a Python module name "
				    "(identifiers joined by dots, like "
				    "torch.distributed)",
				    f->name, dst->v[i]);
	return 0;
}

static int env_name_ok(const char *s)
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
static long map_size(struct ctx *c, const struct field *f, yaml_node_t *val,
		     const char *what, long max)
{
	long n;

	if (val->type != YAML_MAPPING_NODE)
		return perr(c, val->start_mark,
			    "expected a mapping of %s for %s, got %s", what,
			    f->name, kind_name(val));
	n = (long)(val->data.mapping.pairs.top - val->data.mapping.pairs.start);
	if (n > max)
		return perr(c, val->start_mark,
			    "%s has %ld entries; at most %ld are allowed",
			    f->name, n, max);
	return n;
}

/* Whether the key name of pair p was given before it in val (the error
 * names the first place). */
static int dup_key(struct ctx *c, const struct field *f, yaml_node_t *val,
		   yaml_node_pair_t *p, const char *what, const char *name)
{
	yaml_node_t *k = node(c, p->key);

	for (yaml_node_pair_t *q = val->data.mapping.pairs.start; q < p; q++) {
		yaml_node_t *qk = node(c, q->key);

		if (!strcmp((const char *)qk->data.scalar.value, name))
			return perr(
			    c, k->start_mark,
			    "duplicate %s '%s' in %s (first at %zu:%zu)", what,
			    name, f->name, qk->start_mark.line + 1,
			    qk->start_mark.column + 1);
	}
	return 0;
}

static int set_env(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val)
{
	struct spec *s = c->spec;
	char buf[SHOW_MAX + 4];
	yaml_node_pair_t *p;
	long n;

	(void)key;
	if ((n = map_size(c, f, val, "variables", SPEC_LIST_MAX)) <= 0)
		return (int)n;
	if (!(s->launch.env = calloc((size_t)n, sizeof(*s->launch.env))))
		return perr(c, val->start_mark, "out of memory");
	for (p = val->data.mapping.pairs.start; p < val->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
		struct spec_env *e = &s->launch.env[s->launch.n_env];
		const char *name, *text;

		if (!(name = scalar(c, k, f->name, "a variable name")))
			return -1;
		if (!env_name_ok(name))
			return perr(c, k->start_mark,
				    "expected a variable "
				    "name (letters, digits, '_') in %s, got "
				    "'%s'",
				    f->name, show(name, buf));
		if (dup_key(c, f, val, p, "variable", name) < 0)
			return -1;
		if (is_null(v))
			text = "";
		else if (!(text = scalar(c, v, name,
					 "a string, number or "
					 "boolean")))
			return -1;
		if (strlen(name) + 1 + strlen(text) + 1 > SPEC_ARG_STRLEN_MAX)
			return perr(c, v->start_mark,
				    "%s.%s is %zu bytes; Linux passes at most "
				    "%d bytes in one variable (MAX_ARG_STRLEN) "
				    "and every rank would fail to start: put "
				    "the value in a file",
				    f->name, name, strlen(text),
				    SPEC_ARG_STRLEN_MAX - 2 -
					(int)strlen(name));
		if (!(e->key = strdup(name)) || !(e->value = strdup(text))) {
			free(e->key);
			e->key = NULL;
			return perr(c, v->start_mark, "out of memory");
		}
		s->launch.n_env++;
	}
	return 0;
}

/* Registers a host source; two of them at once are an error naming both. */
static int source(struct ctx *c, const struct field *f, yaml_node_t *key)
{
	if (c->source_key)
		return perr(c, key->start_mark,
			    "two host sources: %s and %s "
			    "(at %zu:%zu); give only one",
			    f->name, c->source_name,
			    c->source_key->start_mark.line + 1,
			    c->source_key->start_mark.column + 1);
	c->source_key = key;
	c->source_name = f->name;
	c->spec->nodes.source = f->source;
	return 0;
}

static int set_source_str(struct ctx *c, const struct field *f,
			  yaml_node_t *key, yaml_node_t *val)
{
	if (is_null(val))
		return perr(c, val->start_mark,
			    "expected a string for %s, "
			    "got nothing",
			    f->name);
	if (set_str(c, f, key, val) < 0)
		return -1;
	return source(c, f, key);
}

static int set_hosts(struct ctx *c, const struct field *f, yaml_node_t *key,
		     yaml_node_t *val)
{
	struct spec_strv list = {NULL, 0};
	char *joined = NULL;
	size_t len = 0;
	int rc = -1;

	if (val->type != YAML_SEQUENCE_NODE)
		return set_source_str(c, f, key, val);
	if (strv(c, f->name, val, &list) < 0)
		goto out;
	if (!list.n) {
		perr(c, val->start_mark,
		     "expected at least one hostlist "
		     "expression in %s",
		     f->name);
		goto out;
	}
	for (size_t i = 0; i < list.n; i++)
		len += strlen(list.v[i]) + 1;
	if (!(joined = malloc(len))) {
		perr(c, val->start_mark, "out of memory");
		goto out;
	}
	len = 0;
	for (size_t i = 0; i < list.n; i++) {
		size_t n = strlen(list.v[i]);

		memcpy(joined + len, list.v[i], n);
		len += n;
		joined[len++] = i + 1 < list.n ? ',' : '\0';
	}
	free(c->spec->nodes.hosts);
	c->spec->nodes.hosts = joined;
	joined = NULL;
	rc = source(c, f, key);
out:
	for (size_t i = 0; i < list.n; i++)
		free(list.v[i]);
	free(list.v);
	free(joined);
	return rc;
}

static int set_slurm_source(struct ctx *c, const struct field *f,
			    yaml_node_t *key, yaml_node_t *val)
{
	char buf[SHOW_MAX + 4];
	const char *v = scalar(c, val, f->name, "true or false");

	if (!v)
		return -1;
	if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
		return source(c, f, key);
	if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "FALSE"))
		return 0;
	return perr(c, val->start_mark,
		    "expected true or false for %s, got "
		    "'%s'",
		    f->name, show(v, buf));
}

static int walk(struct ctx *c, yaml_node_t *map, const struct field *tab,
		const char *where);

static int set_section(struct ctx *c, const struct field *f, yaml_node_t *key,
		       yaml_node_t *val)
{
	(void)key;
	/* "slurm:" with nothing under it: the section with its defaults. */
	if (is_null(val))
		return 0;
	return walk(c, val, f->sub, f->name);
}

static int set_inventory(struct ctx *c, const struct field *f, yaml_node_t *key,
			 yaml_node_t *val)
{
	if (set_section(c, f, key, val) < 0)
		return -1;
	if (!c->spec->nodes.inventory.url)
		return perr(c, val->start_mark,
			    "%s needs a url (the HTTP "
			    "JSON API to ask for hosts)",
			    f->name);
	return source(c, f, key);
}

static int set_inventory_url(struct ctx *c, const struct field *f,
			     yaml_node_t *key, yaml_node_t *val)
{
	const char *url;

	if (set_str(c, f, key, val) < 0)
		return -1;
	url = c->spec->nodes.inventory.url;
	if (url && strncmp(url, "http://", 7) != 0 &&
	    strncmp(url, "https://", 8) != 0)
		return perr(c, val->start_mark,
			    "expected an http:// or https:// URL for %s",
			    f->name);
	return 0;
}

static int set_inventory_token_env(struct ctx *c, const struct field *f,
				   yaml_node_t *key, yaml_node_t *val)
{
	const char *name;

	if (set_str(c, f, key, val) < 0)
		return -1;
	name = c->spec->nodes.inventory.token_env;
	if (!name || env_name_ok(name))
		return 0;
	return perr(c, val->start_mark,
		    "expected the name of an environment variable for %s "
		    "(the variable holds the token; the token itself never "
		    "goes into the job file)",
		    f->name);
}

static int set_inventory_filter(struct ctx *c, const struct field *f,
				yaml_node_t *key, yaml_node_t *val)
{
	struct herd_err e;

	if (set_str(c, f, key, val) < 0)
		return -1;
	if (inventory_filter_check(c->spec->nodes.inventory.filter, &e) < 0)
		return perr(c, val->start_mark, "%s: %s", f->name, e.text);
	return 0;
}

static int set_slurm_section(struct ctx *c, const struct field *f,
			     yaml_node_t *key, yaml_node_t *val)
{
	c->spec->slurm.present = true;
	return set_section(c, f, key, val);
}

static const char *const nic_words[] = {"auto", "none", NULL};

static int set_nic(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val)
{
	struct spec *s = c->spec;
	int i;

	(void)key;
	if (val->type == YAML_SEQUENCE_NODE) {
		if (strv(c, f->name, val, &s->bind.nic_list) < 0)
			return -1;
		if (!s->bind.nic_list.n)
			return perr(c, val->start_mark,
				    "expected auto, none "
				    "or a non-empty list of NIC names for %s",
				    f->name);
		s->bind.nic = SPEC_BIND_NIC_LIST;
		return 0;
	}
	if (val->type != YAML_SCALAR_NODE)
		return perr(c, val->start_mark,
			    "expected auto, none or a "
			    "list of NIC names for %s, got %s",
			    f->name, kind_name(val));
	if ((i = enum_index(c, f, val, ", or a list of NIC names")) < 0)
		return -1;
	s->bind.nic = i ? SPEC_BIND_NIC_NONE : SPEC_BIND_NIC_AUTO;
	return 0;
}

/* ---- tables ------------------------------------------------------------ */

#define OFF(m) offsetof(struct spec, m)

static const char *const mode_names[] = {"torch", "pmix", "plain", NULL};
static const char *const host_keys_names[] = {"strict", "accept-new", NULL};
static const char *const gpu_names[] = {"auto", "none", NULL};
static const char *const straggler_names[] = {"warn", "off", "evict", NULL};
static const char *const warm_names[] = {"auto", "off", NULL};
static const char *const survivors_names[] = {"keep", "restart", NULL};
static const char *const memory_names[] = {"auto", "off", NULL};
static const char *const cpu_names[] = {"numa", "cores", "none", NULL};
static const char *const transport_names[] = {"auto", "local", NULL};
static const char *const source_names[] = {
    "none", "hosts", "hostfile", "slurm", "inventory", "command", NULL};

static const struct field inventory_keys[] = {
    {.name = "nodes.inventory.url",
     .set = set_inventory_url,
     .off = OFF(nodes.inventory.url)},
    {.name = "nodes.inventory.token_env",
     .set = set_inventory_token_env,
     .off = OFF(nodes.inventory.token_env)},
    {.name = "nodes.inventory.filter",
     .set = set_inventory_filter,
     .off = OFF(nodes.inventory.filter)},
    {0},
};

static const struct field nodes_keys[] = {
    {.name = "nodes.hosts",
     .set = set_hosts,
     .off = OFF(nodes.hosts),
     .track = TR_HOSTS,
     .source = SPEC_SOURCE_HOSTS},
    {.name = "nodes.hostfile",
     .set = set_source_str,
     .off = OFF(nodes.hostfile),
     .source = SPEC_SOURCE_HOSTFILE},
    {.name = "nodes.slurm",
     .set = set_slurm_source,
     .source = SPEC_SOURCE_SLURM},
    {.name = "nodes.inventory",
     .set = set_inventory,
     .sub = inventory_keys,
     .track = TR_INVENTORY,
     .source = SPEC_SOURCE_INVENTORY},
    {.name = "nodes.command",
     .set = set_source_str,
     .off = OFF(nodes.command),
     .source = SPEC_SOURCE_COMMAND},
    {.name = "nodes.command_timeout",
     .set = set_duration,
     .off = OFF(nodes.command_timeout_ms),
     .lo = 1},
    {.name = "nodes.count",
     .set = set_long,
     .off = OFF(nodes.count),
     .lo = 1,
     .hi = HOSTLIST_MAX,
     .word = "all",
     .track = TR_COUNT},
    {.name = "nodes.slots",
     .set = set_long,
     .off = OFF(nodes.slots),
     .lo = 1,
     .hi = 65536,
     .word = "auto"},
    {.name = "nodes.min",
     .set = set_long,
     .off = OFF(nodes.min),
     .lo = 1,
     .hi = HOSTLIST_MAX,
     .word = "all",
     .track = TR_MIN},
    {.name = "nodes.spares",
     .set = set_str,
     .off = OFF(nodes.spares),
     .track = TR_SPARES},
    {.name = "nodes.readmit_after",
     .set = set_duration,
     .off = OFF(nodes.readmit_after_ms),
     .word = "never"},
    {.name = "nodes.transport",
     .set = set_enum,
     .off = OFF(nodes.transport),
     .names = transport_names,
     .track = TR_TRANSPORT},
    {0},
};

static const struct field ssh_keys[] = {
    {.name = "ssh.user", .set = set_str, .off = OFF(ssh.user)},
    {.name = "ssh.port",
     .set = set_int,
     .off = OFF(ssh.port),
     .lo = 1,
     .hi = 65535},
    {.name = "ssh.identity", .set = set_str, .off = OFF(ssh.identity)},
    {.name = "ssh.known_hosts", .set = set_str, .off = OFF(ssh.known_hosts)},
    {.name = "ssh.host_keys",
     .set = set_host_keys,
     .off = OFF(ssh.host_keys),
     .names = host_keys_names},
    {.name = "ssh.fanout",
     .set = set_int,
     .off = OFF(ssh.fanout),
     .lo = 1,
     .hi = 65536},
    {.name = "ssh.connect_timeout",
     .set = set_duration,
     .off = OFF(ssh.connect_timeout_ms),
     .lo = 1},
    {.name = "ssh.agent_dir", .set = set_agent_dir, .off = OFF(ssh.agent_dir)},
    {0},
};

static const struct field launch_keys[] = {
    {.name = "launch.mode",
     .set = set_enum,
     .off = OFF(launch.mode),
     .names = mode_names},
    {.name = "launch.command",
     .set = set_str,
     .off = OFF(launch.command),
     .track = TR_COMMAND},
    {.name = "launch.workdir", .set = set_str, .off = OFF(launch.workdir)},
    {.name = "launch.env", .set = set_env},
    {.name = "launch.env_pass", .set = set_strv, .off = OFF(launch.env_pass)},
    {.name = "launch.warm",
     .set = set_enum,
     .off = OFF(launch.warm),
     .names = warm_names},
    {.name = "launch.preload", .set = set_preload, .off = OFF(launch.preload)},
    {.name = "launch.master_port",
     .set = set_int,
     .off = OFF(launch.master_port),
     .lo = 1,
     .hi = 65535},
    {0},
};

static const struct field bind_keys[] = {
    {.name = "bind.gpu",
     .set = set_enum,
     .off = OFF(bind.gpu),
     .names = gpu_names},
    {.name = "bind.nic", .set = set_nic, .names = nic_words},
    {.name = "bind.cpu",
     .set = set_enum,
     .off = OFF(bind.cpu),
     .names = cpu_names},
    {.name = "bind.topology_file",
     .set = set_str,
     .off = OFF(bind.topology_file)},
    {0},
};

static const struct field health_keys[] = {
    {.name = "health.heartbeat",
     .set = set_duration,
     .off = OFF(health.heartbeat_ms),
     .lo = 1,
     .track = TR_HEARTBEAT},
    {.name = "health.timeout",
     .set = set_duration,
     .off = OFF(health.timeout_ms),
     .lo = 1,
     .track = TR_TIMEOUT},
    {.name = "health.grace", .set = set_duration, .off = OFF(health.grace_ms)},
    {.name = "health.progress_timeout",
     .set = set_duration,
     .off = OFF(health.progress_timeout_ms),
     .lo = 1,
     .word = "off"},
    {.name = "health.fence_timeout",
     .set = set_duration,
     .off = OFF(health.fence_timeout_ms),
     .lo = 1},
    {.name = "health.notify_grace",
     .set = set_duration,
     .off = OFF(health.notify_grace_ms)},
    {.name = "health.check_command",
     .set = set_str,
     .off = OFF(health.check_command)},
    {.name = "health.preflight", .set = set_bool, .off = OFF(health.preflight)},
    {.name = "health.min_free", .set = set_bytes, .off = OFF(health.min_free)},
    {.name = "health.straggler",
     .set = set_enum,
     .off = OFF(health.straggler),
     .names = straggler_names},
    {.name = "health.straggler_ratio",
     .set = set_ratio,
     .off = OFF(health.straggler_ratio)},
    {.name = "health.straggler_window",
     .set = set_duration,
     .off = OFF(health.straggler_window_ms),
     .lo = 1},
    {.name = "health.quarantine_after",
     .set = set_int,
     .off = OFF(health.quarantine_after),
     .lo = 0,
     .hi = 32}, /* NODEREC_KEEP: the failures kept per host */
    {.name = "health.quarantine_for",
     .set = set_duration,
     .off = OFF(health.quarantine_for_ms),
     .lo = 1},
    {.name = "health.rejoin_timeout",
     .set = set_duration,
     .off = OFF(health.rejoin_timeout_ms),
     .lo = 1},
    {0},
};

static const struct field restart_keys[] = {
    {.name = "restart.max",
     .set = set_int,
     .off = OFF(restart.max),
     .lo = 0,
     .hi = 1000000},
    {.name = "restart.backoff",
     .set = set_duration,
     .off = OFF(restart.backoff_ms)},
    {.name = "restart.survivors",
     .set = set_enum,
     .off = OFF(restart.survivors),
     .names = survivors_names},
    {0},
};

static const struct field checkpoint_keys[] = {
    {.name = "checkpoint.dir",
     .set = set_str,
     .off = OFF(checkpoint.dir),
     .track = TR_CHECKPOINT},
    {.name = "checkpoint.latest_file",
     .set = set_str,
     .off = OFF(checkpoint.latest_file),
     .track = TR_LATEST},
    {.name = "checkpoint.pattern",
     .set = set_str,
     .off = OFF(checkpoint.pattern),
     .track = TR_PATTERN},
    {.name = "checkpoint.complete_marker",
     .set = set_str,
     .off = OFF(checkpoint.complete_marker)},
    {.name = "checkpoint.resume_args",
     .set = set_str,
     .off = OFF(checkpoint.resume_args),
     .track = TR_RESUME},
    {.name = "checkpoint.memory",
     .set = set_enum,
     .off = OFF(checkpoint.memory),
     .names = memory_names},
    {.name = "checkpoint.memory_dir",
     .set = set_str,
     .off = OFF(checkpoint.memory_dir)},
    {.name = "checkpoint.replicas",
     .set = set_int,
     .off = OFF(checkpoint.replicas),
     .lo = 0,
     .hi = 8},
    {.name = "checkpoint.memory_max",
     .set = set_bytes,
     .off = OFF(checkpoint.memory_max)},
    {.name = "checkpoint.persist_every",
     .set = set_duration,
     .off = OFF(checkpoint.persist_every_ms),
     .lo = 1,
     .word = "never"},
    {.name = "checkpoint.keep_memory",
     .set = set_bool,
     .off = OFF(checkpoint.keep_memory)},
    {0},
};

static const struct field log_keys[] = {
    {.name = "log.dir", .set = set_str, .off = OFF(log.dir)},
    {.name = "log.mode", .set = set_log_mode, .off = OFF(log.mode)},
    {0},
};

int spec_listen_parse(const char *text, char host[46], int *port,
		      struct herd_err *err)
{
	const char *colon, *h = text, *pend;
	size_t hlen;
	char *end;
	long n;
	unsigned char bin[16];

	if (text[0] == '[') {
		if (!(pend = strchr(text, ']')) || pend[1] != ':')
			return herd_errprintf(err, "expected [IPv6]:PORT");
		h = text + 1;
		hlen = (size_t)(pend - h);
		colon = pend + 1;
	} else if ((colon = strrchr(text, ':'))) {
		if (strchr(text, ':') != colon)
			return herd_errprintf(err, "an IPv6 address goes in "
						   "brackets: [::1]:PORT");
		hlen = (size_t)(colon - text);
	} else {
		colon = text - 1; /* a bare port */
		hlen = 0;
	}
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || errno || n < 1 || n > 65535)
		return herd_errprintf(err, "expected a port from 1 to 65535 "
					   "after the last ':'");
	if (hlen == 0 || (hlen == 9 && !strncmp(h, "localhost", 9))) {
		snprintf(host, 46, "127.0.0.1");
	} else {
		if (hlen > 45)
			return herd_errprintf(err, "expected an IP address "
						   "before the port");
		memcpy(host, h, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET, host, bin) != 1 &&
		    inet_pton(AF_INET6, host, bin) != 1)
			return herd_errprintf(err, "expected an IP address "
						   "(such as 127.0.0.1) or "
						   "localhost before the port");
	}
	*port = (int)n;
	return 0;
}

static int set_listen(struct ctx *c, const struct field *f, yaml_node_t *key,
		      yaml_node_t *val)
{
	struct herd_err lerr;
	char buf[SHOW_MAX + 4], host[46];
	const char *v;
	int port;

	if (is_null(val))
		return set_str(c, f, key, val);
	if (!(v = scalar(c, val, f->name, "HOST:PORT such as 127.0.0.1:9464")))
		return -1;
	if (spec_listen_parse(v, host, &port, &lerr) < 0)
		return perr(c, val->start_mark, "bad address '%s' for %s: %s",
			    show(v, buf), f->name, lerr.text);
	return set_str(c, f, key, val);
}

static int pattern_name_ok(const char *s)
{
	return proto_metric_name_ok(s);
}

/* metrics.patterns: a mapping NAME: ERE, each with exactly one group. */
static int set_patterns(struct ctx *c, const struct field *f, yaml_node_t *key,
			yaml_node_t *val)
{
	struct spec *s = c->spec;
	char buf[SHOW_MAX + 4];
	yaml_node_pair_t *p;
	long n;
	size_t groups;

	(void)key;
	if ((n = map_size(c, f, val, "metric names to regular expressions",
			  SPEC_PATTERNS_MAX)) <= 0)
		return (int)n;
	if (!(s->metrics.patterns =
		  calloc((size_t)n, sizeof(*s->metrics.patterns))))
		return perr(c, val->start_mark, "out of memory");
	for (p = val->data.mapping.pairs.start; p < val->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
		struct spec_pattern *e =
		    &s->metrics.patterns[s->metrics.n_patterns];
		const char *name, *text;
		char why[256];
		regex_t re;
		int rc;

		if (!(name = scalar(c, k, f->name, "a metric name")))
			return -1;
		if (!pattern_name_ok(name))
			return perr(c, k->start_mark,
				    "expected a metric name (letters, digits, "
				    "'_', at most %d) in %s, got '%s'",
				    SPEC_PATTERN_NAME_MAX, f->name,
				    show(name, buf));
		if (dup_key(c, f, val, p, "metric", name) < 0)
			return -1;
		if (!(text = scalar(c, v, name, "a regular expression")))
			return -1;
		if (!*text || strlen(text) > SPEC_PATTERN_MAX)
			return perr(c, v->start_mark,
				    "expected a regular expression of 1 to %d "
				    "bytes for %s.%s",
				    SPEC_PATTERN_MAX, f->name, name);
		rc = regcomp(&re, text, REG_EXTENDED);
		if (rc != 0) {
			regerror(rc, &re, why, sizeof(why));
			return perr(c, v->start_mark,
				    "bad regular expression for %s.%s: %s",
				    f->name, name, why);
		}
		groups = re.re_nsub;
		regfree(&re);
		if (groups != 1)
			return perr(c, v->start_mark,
				    "the regular expression for %s.%s has %zu "
				    "groups; it needs exactly one, around the "
				    "number (use [...] or a second pattern "
				    "instead of more groups)",
				    f->name, name, groups);
		if (!(e->name = strdup(name)) || !(e->regex = strdup(text))) {
			free(e->name);
			e->name = NULL;
			return perr(c, v->start_mark, "out of memory");
		}
		s->metrics.n_patterns++;
	}
	return 0;
}

static const struct field metrics_keys[] = {
    {.name = "metrics.listen", .set = set_listen, .off = OFF(metrics.listen)},
    {.name = "metrics.interval",
     .set = set_duration,
     .off = OFF(metrics.interval_ms),
     .lo = 100,
     .word = "auto"},
    {.name = "metrics.patterns", .set = set_patterns},
    {0},
};

static const struct field slurm_keys[] = {
    {.name = "slurm.partition", .set = set_str, .off = OFF(slurm.partition)},
    {.name = "slurm.time", .set = set_str, .off = OFF(slurm.time)},
    {.name = "slurm.account", .set = set_str, .off = OFF(slurm.account)},
    {.name = "slurm.qos", .set = set_str, .off = OFF(slurm.qos)},
    {.name = "slurm.nodes",
     .set = set_long,
     .off = OFF(slurm.nodes),
     .lo = 1,
     .hi = HOSTLIST_MAX,
     .word = "auto"},
    {.name = "slurm.gpus_per_node",
     .set = set_long,
     .off = OFF(slurm.gpus_per_node),
     .lo = 0,
     .hi = 1024},
    {.name = "slurm.exclusive", .set = set_bool, .off = OFF(slurm.exclusive)},
    {.name = "slurm.requeue", .set = set_bool, .off = OFF(slurm.requeue)},
    {.name = "slurm.output", .set = set_str, .off = OFF(slurm.output)},
    {.name = "slurm.extra", .set = set_strv, .off = OFF(slurm.extra)},
    {0},
};

static const struct field top_keys[] = {
    {.name = "name", .set = set_name, .off = OFF(name)},
    {.name = "nodes", .set = set_section, .sub = nodes_keys},
    {.name = "ssh", .set = set_section, .sub = ssh_keys},
    {.name = "launch",
     .set = set_section,
     .sub = launch_keys,
     .track = TR_LAUNCH},
    {.name = "bind", .set = set_section, .sub = bind_keys},
    {.name = "health", .set = set_section, .sub = health_keys},
    {.name = "restart", .set = set_section, .sub = restart_keys},
    {.name = "checkpoint", .set = set_section, .sub = checkpoint_keys},
    {.name = "log", .set = set_section, .sub = log_keys},
    {.name = "metrics", .set = set_section, .sub = metrics_keys},
    {.name = "slurm", .set = set_slurm_section, .sub = slurm_keys},
    {0},
};

/* Room for the seen-key marks of the largest table above. */
#define TABLE_MAX 16

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
		return perr(c, k->start_mark,
			    "unknown key '%s'%s (did you "
			    "mean '%s'?)",
			    show(key, buf), in, best);
	return perr(c, k->start_mark,
		    "unknown key '%s'%s (expected one of: "
		    "%s)",
		    show(key, buf), in, list);
}

static int walk(struct ctx *c, yaml_node_t *map, const struct field *tab,
		const char *where)
{
	yaml_node_t *seen[TABLE_MAX] = {NULL};
	yaml_node_pair_t *p;

	if (map->type != YAML_MAPPING_NODE)
		return perr(c, map->start_mark,
			    "expected a mapping of keys "
			    "for %s, got %s",
			    where ? where : "the job", kind_name(map));
	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
		const struct field *f;
		const char *key;
		size_t i;

		if (k->type != YAML_SCALAR_NODE)
			return perr(c, k->start_mark,
				    "expected a key name%s%s, "
				    "got %s",
				    where ? " in " : "", where ? where : "",
				    kind_name(k));
		if (!(key = scalar(c, k, where ? where : "the job",
				   "a key name")))
			return -1;
		for (f = tab; f->name; f++)
			if (!strcmp(key, key_of(f)))
				break;
		if (!f->name)
			return unknown_key(c, tab, where, k, key);
		i = (size_t)(f - tab);
		if (seen[i])
			return perr(c, k->start_mark,
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

/* ---- checks across keys ------------------------------------------------ */

/* Every host of the expression(s) at n (a scalar, or a list for
 * nodes.hosts) follows the one host name rule of every source
 * (hostfile_host_check); the error points at the expression. */
static int check_host_names(struct ctx *c, yaml_node_t *n, const char *what)
{
	yaml_node_item_t *it;

	if (n->type == YAML_SEQUENCE_NODE) {
		for (it = n->data.sequence.items.start;
		     it < n->data.sequence.items.top; it++)
			if (check_host_names(c, node(c, *it), what) < 0)
				return -1;
		return 0;
	}
	if (n->type != YAML_SCALAR_NODE)
		return 0;
	{
		struct herd_err herr;
		struct hostlist *hl =
		    hostlist_expand((const char *)n->data.scalar.value, &herr);
		int rc = 0;

		if (!hl)
			return perr(c, n->start_mark,
				    "expected a hostlist expression for %s: "
				    "%s",
				    what, herr.text);
		for (size_t i = 0; i < hostlist_count(hl) && !rc; i++)
			if (hostfile_host_check(hostlist_nth(hl, i), what,
						&herr) < 0)
				rc = perr(c, n->start_mark, "%s", herr.text);
		hostlist_free(hl);
		return rc;
	}
}

static int check_hosts(struct ctx *c)
{
	struct spec *s = c->spec;
	struct herd_err herr;
	struct hostlist *hl = NULL;
	yaml_node_t *n;
	size_t count = 0;
	int rc = -1;

	if ((n = c->tracked[TR_SPARES]) && s->nodes.spares) {
		if (!(hl = hostlist_expand(s->nodes.spares, &herr))) {
			perr(c, n->start_mark,
			     "expected a hostlist "
			     "expression for nodes.spares: %s",
			     herr.text);
			goto out;
		}
		hostlist_free(hl);
		hl = NULL;
		if (check_host_names(c, n, "nodes.spares") < 0)
			goto out;
	}
	if (s->nodes.source == SPEC_SOURCE_HOSTS) {
		n = c->tracked[TR_HOSTS];
		if (check_host_names(c, n, "nodes.hosts") < 0)
			goto out;
		if (!(hl = hostlist_expand(s->nodes.hosts, &herr))) {
			perr(c, n->start_mark,
			     "expected a hostlist "
			     "expression for nodes.hosts: %s",
			     herr.text);
			goto out;
		}
		count = hostlist_count(hl);
		if (s->nodes.count > 0 && (size_t)s->nodes.count > count) {
			perr(c, c->tracked[TR_COUNT]->start_mark,
			     "nodes.count (%ld) is more than the %zu hosts of "
			     "nodes.hosts",
			     s->nodes.count, count);
			goto out;
		}
	}
	if (s->nodes.count > 0)
		count = (size_t)s->nodes.count;
	if (s->nodes.min > 0 && count > 0 && (size_t)s->nodes.min > count) {
		perr(c, c->tracked[TR_MIN]->start_mark,
		     "nodes.min (%ld) is more than the %zu nodes of the job "
		     "(%s)",
		     s->nodes.min, count,
		     s->nodes.count > 0 ? "nodes.count" : "nodes.hosts");
		goto out;
	}
	rc = 0;
out:
	hostlist_free(hl);
	return rc;
}

/* launch.command runs as `sh -c COMMAND`: one execve() argument, and
 * herd fills its placeholders with quoted values (render_shell). */
static int check_command(struct ctx *c)
{
	struct spec *s = c->spec;
	/* Stand-ins: only the names matter to the checks. */
	const struct render_var vars[] = {{"name", "x"},
					  {"checkpoint", "x"},
					  {"resume_args", ""},
					  {"attempt", "1"}};
	struct herd_err e;
	size_t len = strlen(s->launch.command);

	if (len + 1 > SPEC_ARG_STRLEN_MAX)
		return perr(c, c->tracked[TR_COMMAND]->start_mark,
			    "launch.command is %zu bytes; Linux passes at "
			    "most %d bytes as one argument (MAX_ARG_STRLEN) "
			    "and every rank would fail to start: put the "
			    "command in a script",
			    len, SPEC_ARG_STRLEN_MAX - 1);
	if (render_shell_check(s->launch.command, vars, 4, "resume_args", 0,
			       &e) < 0)
		return perr(c, c->tracked[TR_COMMAND]->start_mark,
			    "launch.command: %s", e.text);
	if (s->checkpoint.resume_args &&
	    render_shell_check(s->checkpoint.resume_args, vars, 4, NULL, 1,
			       &e) < 0)
		return perr(c, c->tracked[TR_RESUME]->start_mark,
			    "checkpoint.resume_args: %s", e.text);
	return 0;
}

static int check(struct ctx *c, yaml_node_t *root)
{
	struct spec *s = c->spec;
	yaml_node_t *n;

	if (!s->launch.command) {
		n = c->tracked[TR_LAUNCH] ? c->tracked[TR_LAUNCH] : root;
		return perr(c, n->start_mark,
			    "launch.command is required "
			    "(the command every rank runs)");
	}
	if (check_command(c) < 0)
		return -1;
	if (s->nodes.transport == SPEC_TRANSPORT_LOCAL &&
	    s->nodes.source == SPEC_SOURCE_SLURM)
		return perr(c, c->tracked[TR_TRANSPORT]->start_mark,
			    "nodes.transport: local starts every node's agent "
			    "on this machine, but nodes.slurm takes the nodes "
			    "of a Slurm allocation, where srun starts them: "
			    "use one or the other");
	if (s->health.timeout_ms <= s->health.heartbeat_ms) {
		char t[32], h[32];

		n = c->tracked[TR_TIMEOUT] ? c->tracked[TR_TIMEOUT]
					   : c->tracked[TR_HEARTBEAT];
		spec_duration_format(s->health.timeout_ms, t, sizeof(t));
		spec_duration_format(s->health.heartbeat_ms, h, sizeof(h));
		return perr(c, n->start_mark,
			    "health.timeout (%s) must be "
			    "longer than health.heartbeat (%s)",
			    t, h);
	}
	n = s->checkpoint.pattern	? c->tracked[TR_PATTERN]
	    : s->checkpoint.latest_file ? c->tracked[TR_LATEST]
					: NULL;
	if (!s->checkpoint.dir && n)
		return perr(c, n->start_mark,
			    "checkpoint.dir is required to "
			    "look for checkpoints");
	return check_hosts(c);
}

/* ---- libyaml errors ---------------------------------------------------- */

static int yaml_fail(struct ctx *c, const yaml_parser_t *p, const char *buf,
		     size_t len)
{
	yaml_mark_t m = {0, 0, 0};
	size_t end;

	switch (p->error) {
	case YAML_MEMORY_ERROR:
		return herd_errprintf(c->err, "%s: out of memory", c->path);
	case YAML_READER_ERROR:
		/* Reader errors carry a byte offset, not a mark.  A bad
		 * trailing octet is shown at the start of its sequence,
		 * where the wrong character is. */
		end = p->problem_offset < len ? p->problem_offset : len;
		if (p->problem && strstr(p->problem, "trailing")) {
			while (end > 0 &&
			       ((unsigned char)buf[end - 1] & 0xc0) == 0x80)
				end--;
			if (end > 0 && (unsigned char)buf[end - 1] >= 0xc0)
				end--;
		}
		for (size_t i = 0; i < end; i++) {
			if (buf[i] == '\n') {
				m.line++;
				m.column = 0;
			} else if (((unsigned char)buf[i] & 0xc0) != 0x80) {
				m.column++;
			}
		}
		if (p->problem && strstr(p->problem, "UTF-"))
			return perr(c, m,
				    "not valid UTF-8 text (%s); a job "
				    "file must be UTF-8",
				    p->problem);
		if (p->problem_value >= 0)
			return perr(c, m,
				    "%s (byte 0x%02x); a job file must "
				    "be printable UTF-8 text",
				    p->problem ? p->problem : "bad character",
				    (unsigned)p->problem_value & 0xffu);
		return perr(c, m, "%s", p->problem ? p->problem : "bad text");
	case YAML_SCANNER_ERROR:
	case YAML_PARSER_ERROR:
		/* libyaml names a tab as "character that cannot start any
		 * token": say what it is, since it looks like blanks. */
		if (p->problem_mark.index < len &&
		    buf[p->problem_mark.index] == '\t') {
			size_t i = p->problem_mark.index;

			while (i > 0 &&
			       (buf[i - 1] == ' ' || buf[i - 1] == '\t'))
				i--;
			if (i == 0 || buf[i - 1] == '\n')
				return perr(c, p->problem_mark,
					    "a tab in the indentation: YAML "
					    "indents with spaces only");
			return perr(c, p->problem_mark,
				    "a tab where YAML takes none: write "
				    "spaces");
		}
		if (p->context)
			return perr(c, p->problem_mark,
				    "invalid YAML: %s (%s "
				    "at %zu:%zu)",
				    p->problem, p->context,
				    p->context_mark.line + 1,
				    p->context_mark.column + 1);
		return perr(c, p->problem_mark, "invalid YAML: %s",
			    p->problem ? p->problem : "syntax error");
	default:
		return perr(c, p->problem_mark, "invalid YAML: %s",
			    p->problem ? p->problem : "error");
	}
}

/* The first pass: events only, refusing aliases, a second document and
 * nesting deeper than SPEC_DEPTH_MAX, so that the loader never expands an
 * alias nor spends minutes on "[[[[..." (libyaml's scanner is quadratic
 * in the depth of flow collections: a 1 MiB file of them held herd for
 * tens of minutes).  The depth is checked on each start event, so the
 * parse stops at the first collection too deep. */
static int prescan(struct ctx *c, const char *buf, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int docs = 0, rc = -1, done = 0, depth = 0;

	if (!yaml_parser_initialize(&p))
		return herd_errprintf(c->err, "%s: out of memory", c->path);
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	/* UTF-16 is refused like any other non-UTF-8 text. */
	yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
	while (!done) {
		if (!yaml_parser_parse(&p, &ev)) {
			yaml_fail(c, &p, buf, len);
			goto out;
		}
		if (ev.type == YAML_ALIAS_EVENT) {
			perr(c, ev.start_mark,
			     "aliases are not supported "
			     "(*%.40s): write the value out",
			     ev.data.alias.anchor);
			yaml_event_delete(&ev);
			goto out;
		}
		if (ev.type == YAML_SEQUENCE_START_EVENT ||
		    ev.type == YAML_MAPPING_START_EVENT) {
			if (++depth > SPEC_DEPTH_MAX) {
				perr(c, ev.start_mark,
				     "nested deeper than %d (a job file "
				     "needs a few levels)",
				     SPEC_DEPTH_MAX);
				yaml_event_delete(&ev);
				goto out;
			}
		} else if (ev.type == YAML_SEQUENCE_END_EVENT ||
			   ev.type == YAML_MAPPING_END_EVENT) {
			depth--;
		}
		if (ev.type == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
			perr(c, ev.start_mark,
			     "a second YAML document; a job "
			     "file holds exactly one");
			yaml_event_delete(&ev);
			goto out;
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	if (!docs) {
		yaml_mark_t m = {0, 0, 0};

		perr(c, m,
		     "empty job file: expected a mapping of job keys "
		     "(launch.command at least)");
		goto out;
	}
	rc = 0;
out:
	yaml_parser_delete(&p);
	return rc;
}

/* ---- defaults and the public calls ------------------------------------- */

static int dup_default(char **dst, const char *value)
{
	if (*dst)
		return 0;
	return (*dst = strdup(value)) ? 0 : -1;
}

static char *name_from_path(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 5 && !strcmp(base + n - 5, ".yaml"))
		n -= 5;
	else if (n > 4 && !strcmp(base + n - 4, ".yml"))
		n -= 4;
	if (!n)
		return strdup("job");
	return strndup(base, n);
}

struct spec *spec_parse(const char *buf, size_t len, const char *path,
			struct herd_err *err)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	int have_parser = 0, have_doc = 0;
	struct spec *spec = NULL, *ret = NULL;
	struct ctx c = {0};
	yaml_node_t *root;
	yaml_mark_t top = {0, 0, 0};

	c.path = path ? path : "-";
	c.err = err;
	c.doc = &doc;
	if (len > SPEC_FILE_MAX) {
		perr(&c, top,
		     "job file is %zu bytes; at most %d are allowed "
		     "(a job file is a few KiB)",
		     len, SPEC_FILE_MAX);
		goto out;
	}
	if (!(spec = calloc(1, sizeof(*spec))) ||
	    !(spec->path = strdup(c.path))) {
		herd_errprintf(err, "%s: out of memory", c.path);
		goto out;
	}
	spec->nodes.command_timeout_ms = 30 * 1000;
	spec->nodes.readmit_after_ms = -1;
	spec->ssh.port = 22;
	spec->ssh.fanout = 64;
	spec->ssh.connect_timeout_ms = 10 * 1000;
	spec->launch.master_port = 29500;
	spec->health.heartbeat_ms = 500;
	spec->health.timeout_ms = 3000;
	spec->health.grace_ms = 10 * 1000;
	spec->health.progress_timeout_ms = -1;
	spec->health.fence_timeout_ms = 5 * 60 * 1000;
	spec->health.notify_grace_ms = 1000;
	spec->health.min_free = 1LL << 30;
	spec->health.straggler = SPEC_STRAGGLER_WARN;
	spec->health.straggler_ratio = 1.3;
	spec->health.straggler_window_ms = 2 * 60 * 1000;
	spec->health.quarantine_after = 3;
	spec->health.quarantine_for_ms = 24L * 3600 * 1000;
	spec->restart.max = 3;
	spec->restart.backoff_ms = 2000;
	spec->restart.survivors = SPEC_SURVIVORS_KEEP;
	spec->health.rejoin_timeout_ms = 30 * 1000;
	spec->checkpoint.replicas = 1;
	spec->checkpoint.persist_every_ms = 10 * 60 * 1000;
	spec->log.mode = SPEC_LOG_MODE_DEFAULT;
	spec->metrics.interval_ms = -1; /* auto */
	c.spec = spec;

	/* A UTF-8 byte order mark (some editors write one) is not YAML
	 * text: skipped, so positions count from what the editor shows.
	 * One of UTF-16 or UTF-32 is named. */
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3)) {
		buf += 3;
		len -= 3;
	} else if (len >= 2 && (!memcmp(buf, "\xff\xfe", 2) ||
				!memcmp(buf, "\xfe\xff", 2))) {
		perr(&c, top,
		     "starts with a UTF-16 or UTF-32 byte order mark; a job "
		     "file must be UTF-8 (iconv -f UTF-16 -t UTF-8)");
		goto out;
	}
	if (prescan(&c, buf, len) < 0)
		goto out;
	if (!yaml_parser_initialize(&parser)) {
		herd_errprintf(err, "%s: out of memory", c.path);
		goto out;
	}
	have_parser = 1;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_fail(&c, &parser, buf, len);
		goto out;
	}
	have_doc = 1;
	if (!(root = yaml_document_get_root_node(&doc))) {
		perr(&c, top, "empty job file: expected a mapping of job keys");
		goto out;
	}
	if (root->type != YAML_MAPPING_NODE) {
		perr(&c, root->start_mark,
		     "expected a mapping of job keys "
		     "(name, nodes, launch, ...) at the top, got %s",
		     kind_name(root));
		goto out;
	}
	if (walk(&c, root, top_keys, NULL) < 0 || check(&c, root) < 0)
		goto out;
	if ((!spec->name && !(spec->name = name_from_path(c.path))) ||
	    dup_default(&spec->ssh.known_hosts, "~/.ssh/known_hosts") < 0 ||
	    dup_default(&spec->ssh.agent_dir, "~/.cache/herd") < 0 ||
	    dup_default(&spec->log.dir, "runs/{{name}}") < 0) {
		herd_errprintf(err, "%s: out of memory", c.path);
		goto out;
	}
	ret = spec;
	spec = NULL;
out:
	if (have_doc)
		yaml_document_delete(&doc);
	if (have_parser)
		yaml_parser_delete(&parser);
	spec_free(spec);
	return ret;
}

struct spec *spec_load(const char *path, struct herd_err *err)
{
	struct spec *spec = NULL;
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		herd_errprintf(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		herd_errprintf(err, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		herd_errprintf(err, "%s: is a directory, expected a job file",
			       path);
		goto out;
	}
	if (S_ISREG(st.st_mode) && st.st_size > SPEC_FILE_MAX) {
		herd_errprintf(err,
			       "%s:1:1: job file is %lld bytes; at most %d "
			       "are allowed (a job file is a few KiB)",
			       path, (long long)st.st_size, SPEC_FILE_MAX);
		goto out;
	}
	/* One byte more than allowed tells an oversized pipe apart. */
	if (!(buf = malloc(SPEC_FILE_MAX + 1))) {
		herd_errprintf(err, "%s: out of memory", path);
		goto out;
	}
	while (len < SPEC_FILE_MAX + 1) {
		ssize_t n = read(fd, buf + len, SPEC_FILE_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			herd_errprintf(err, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > SPEC_FILE_MAX) {
		herd_errprintf(err,
			       "%s:1:1: job file is larger than %d bytes "
			       "(a job file is a few KiB)",
			       path, SPEC_FILE_MAX);
		goto out;
	}
	spec = spec_parse(buf, len, path, err);
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return spec;
}

static void strv_free(struct spec_strv *v)
{
	for (size_t i = 0; i < v->n; i++)
		free(v->v[i]);
	free(v->v);
}

void spec_free(struct spec *spec)
{
	int saved = errno;

	if (!spec)
		return;
	free(spec->path);
	free(spec->name);
	free(spec->nodes.hosts);
	free(spec->nodes.hostfile);
	free(spec->nodes.command);
	free(spec->nodes.inventory.url);
	free(spec->nodes.inventory.token_env);
	free(spec->nodes.inventory.filter);
	free(spec->nodes.spares);
	free(spec->ssh.user);
	free(spec->ssh.identity);
	free(spec->ssh.known_hosts);
	free(spec->ssh.agent_dir);
	free(spec->launch.command);
	free(spec->launch.workdir);
	free(spec->health.check_command);
	for (size_t i = 0; i < spec->launch.n_env; i++) {
		free(spec->launch.env[i].key);
		free(spec->launch.env[i].value);
	}
	free(spec->launch.env);
	strv_free(&spec->launch.env_pass);
	strv_free(&spec->bind.nic_list);
	free(spec->bind.topology_file);
	free(spec->checkpoint.dir);
	free(spec->checkpoint.latest_file);
	free(spec->checkpoint.pattern);
	free(spec->checkpoint.complete_marker);
	free(spec->checkpoint.resume_args);
	free(spec->checkpoint.memory_dir);
	strv_free(&spec->launch.preload);
	free(spec->log.dir);
	free(spec->metrics.listen);
	for (size_t i = 0; i < spec->metrics.n_patterns; i++) {
		free(spec->metrics.patterns[i].name);
		free(spec->metrics.patterns[i].regex);
	}
	free(spec->metrics.patterns);
	free(spec->slurm.partition);
	free(spec->slurm.time);
	free(spec->slurm.account);
	free(spec->slurm.qos);
	free(spec->slurm.output);
	strv_free(&spec->slurm.extra);
	free(spec);
	errno = saved;
}

static const char *name_at(const char *const *names, size_t n, int i)
{
	return i >= 0 && (size_t)i < n ? names[i] : "?";
}

#define NAMES(a) (sizeof(a) / sizeof(a[0]) - 1)

const char *spec_mode_name(enum spec_mode mode)
{
	return name_at(mode_names, NAMES(mode_names), (int)mode);
}

const char *spec_source_name(enum spec_source src)
{
	return name_at(source_names, NAMES(source_names), (int)src);
}

const char *spec_transport_name(enum spec_transport transport)
{
	return name_at(transport_names, NAMES(transport_names), (int)transport);
}

const char *spec_host_keys_name(enum spec_host_keys host_keys)
{
	return name_at(host_keys_names, NAMES(host_keys_names), (int)host_keys);
}

const char *spec_bind_gpu_name(enum spec_bind_gpu gpu)
{
	return name_at(gpu_names, NAMES(gpu_names), (int)gpu);
}

const char *spec_bind_cpu_name(enum spec_bind_cpu cpu)
{
	return name_at(cpu_names, NAMES(cpu_names), (int)cpu);
}

const char *spec_straggler_name(enum spec_straggler straggler)
{
	return name_at(straggler_names, NAMES(straggler_names), (int)straggler);
}

const char *spec_warm_name(enum spec_warm warm)
{
	return name_at(warm_names, NAMES(warm_names), (int)warm);
}

const char *spec_survivors_name(enum spec_survivors survivors)
{
	return name_at(survivors_names, NAMES(survivors_names),
		       (int)survivors);
}

const char *spec_memory_name(enum spec_memory memory)
{
	return name_at(memory_names, NAMES(memory_names), (int)memory);
}
