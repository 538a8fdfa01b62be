/* spec_int.h — what the files of the job file parser share (spec.c,
 * spec_walk.c, spec_set.c, spec_keys.c, spec_check.c, spec_yaml.c):
 * the parse's context, the key table's row, and the helpers.
 */
#ifndef HERD_SPEC_INT_H
#define HERD_SPEC_INT_H

#include <stddef.h>
#include <yaml.h>

#include "herd/err.h"
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

/* Room for the seen-key marks of the largest key table (spec_keys.c). */
#define TABLE_MAX 16

/* The top of the schema: name, nodes, ssh, launch, ... (spec_keys.c). */
extern const struct field spec_top_keys[];

/* --- spec_walk.c: messages, nodes, the walk --------------------------- */

/* Fills c->err with "path:line:column: " and the message at mark m;
 * returns -1. */
int spec_perr(struct ctx *c, yaml_mark_t m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copies s for a message: at most SHOW_MAX characters, control bytes as
 * '?', "..." when cut.  buf holds SHOW_MAX + 4 bytes; returns buf. */
const char *spec_show(const char *s, char *buf);
/* "a mapping", "a list" or "a scalar", for messages. */
const char *spec_kind_name(const yaml_node_t *n);
/* Node i of the document. */
yaml_node_t *spec_node(struct ctx *c, int i);
/* A plain ~, null or empty value: "not set". */
int spec_is_null(const yaml_node_t *n);
/* The text of a scalar node, or NULL with an error naming what was
 * expected when n is not a scalar or holds a NUL (a "\0" escape). */
const char *spec_scalar(struct ctx *c, yaml_node_t *n, const char *name,
			const char *what);
/* A non-empty string value (copied, the caller owns it), or NULL with
 * the error. */
char *spec_string(struct ctx *c, yaml_node_t *n, const char *name);
/* f's member of c->spec. */
void *spec_member(struct ctx *c, const struct field *f);
/* Walks the mapping map with the keys of tab (where: the section's name,
 * NULL at the top): each key's setter on its value, an unknown or
 * duplicate key an error.  Returns 0 or -1 with the error. */
int spec_walk(struct ctx *c, yaml_node_t *map, const struct field *tab,
	      const char *where);

/* --- spec_set.c: the setters several keys share ---------------------------
 * Each reads val (the value of key) into f's member and returns 0, or
 * returns -1 with the error at the node. */

int spec_set_str(struct ctx *c, const struct field *f, yaml_node_t *key,
		 yaml_node_t *val);
int spec_set_name(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val);
int spec_set_agent_dir(struct ctx *c, const struct field *f, yaml_node_t *key,
		       yaml_node_t *val);
int spec_set_long(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val);
int spec_set_int(struct ctx *c, const struct field *f, yaml_node_t *key,
		 yaml_node_t *val);
int spec_set_duration(struct ctx *c, const struct field *f, yaml_node_t *key,
		      yaml_node_t *val);
int spec_set_bool(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val);
int spec_set_bytes(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val);
int spec_set_ratio(struct ctx *c, const struct field *f, yaml_node_t *key,
		   yaml_node_t *val);
int spec_set_enum(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val);
int spec_set_log_mode(struct ctx *c, const struct field *f, yaml_node_t *key,
		      yaml_node_t *val);
int spec_set_host_keys(struct ctx *c, const struct field *f, yaml_node_t *key,
		       yaml_node_t *val);
int spec_set_strv(struct ctx *c, const struct field *f, yaml_node_t *key,
		  yaml_node_t *val);
int spec_set_preload(struct ctx *c, const struct field *f, yaml_node_t *key,
		     yaml_node_t *val);
int spec_set_env(struct ctx *c, const struct field *f, yaml_node_t *key,
		 yaml_node_t *val);

/* Index of val in f->names, or -1 with an error listing the allowed words
 * and then extra (more that is allowed, in words; NULL: nothing). */
int spec_enum_index(struct ctx *c, const struct field *f, yaml_node_t *val,
		    const char *extra);
/* Fills dst with the strings of a non-empty list of scalars (name: the
 * key, for errors). */
int spec_strv_parse(struct ctx *c, const char *name, yaml_node_t *val,
		    struct spec_strv *dst);
/* 1 when s is an environment variable name. */
int spec_env_name_ok(const char *s);
/* A mapping of at most max entries for f (what: "variables", ...):
 * returns its size, or -1 with the error. */
long spec_map_size(struct ctx *c, const struct field *f, yaml_node_t *val,
		   const char *what, long max);
/* Whether the key name of pair p was given before it in val (the error
 * names the first place): -1 then, else 0. */
int spec_dup_key(struct ctx *c, const struct field *f, yaml_node_t *val,
		 yaml_node_pair_t *p, const char *what, const char *name);

/* --- spec_check.c ------------------------------------------------------- */

/* The checks across keys, after the walk of root.  Returns 0 or -1 with
 * the error. */
int spec_check_across(struct ctx *c, yaml_node_t *root);

/* --- spec_yaml.c -------------------------------------------------------- */

/* The first pass over the events of buf: no aliases, one document, at
 * most SPEC_DEPTH_MAX deep.  Returns 0 or -1 with the error. */
int spec_prescan(struct ctx *c, const char *buf, size_t len);
/* Words for the error parser p stopped at (buf: its input); returns -1. */
int spec_yaml_fail(struct ctx *c, const yaml_parser_t *p, const char *buf,
		   size_t len);

#endif
