/* lib/job/inventory.c — an HTTP node inventory's JSON answer into a host list
 * (see inventory.h).  JSON comes from jansson. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "herd/inventory.h"

/* How much of a bad value a message quotes. */
#define QUOTE_MAX 64

/* Dotted keys are at most this deep: "a.b.c.d". */
#define KEY_DEPTH_MAX 8

struct pair {
	char *key;
	char *val;
};

struct filter {
	struct pair pairs[INVENTORY_FILTER_MAX];
	int n;
	char *buf; /* the filter's text, cut into pairs */
};

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	return s;
}

static void filter_free(struct filter *f)
{
	free(f->buf);
	f->buf = NULL;
	f->n = 0;
}

static int filter_parse(const char *text, struct filter *f,
			struct herd_err *err)
{
	char *save = NULL, *tok;

	memset(f, 0, sizeof(*f));
	if (!text)
		return 0;
	if (!(f->buf = strdup(text)))
		return herd_errprintf(err, "out of memory");
	for (tok = strtok_r(f->buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), *key, *val;

		if (!*trim(tok))
			continue; /* a blank between commas */
		if (!eq) {
			herd_errprintf(err, "expected key=value, found '%.*s'",
				       QUOTE_MAX, trim(tok));
			goto fail;
		}
		*eq = '\0';
		key = trim(tok);
		val = trim(eq + 1);
		if (!*key) {
			herd_errprintf(err, "expected a key before '=%.*s'",
				       QUOTE_MAX, val);
			goto fail;
		}
		if (f->n == INVENTORY_FILTER_MAX) {
			herd_errprintf(err, "more than %d key=value pairs",
				       INVENTORY_FILTER_MAX);
			goto fail;
		}
		f->pairs[f->n++] = (struct pair){.key = key, .val = val};
	}
	/* Only commas and blanks: a filter that says nothing is a typo. */
	if (f->n == 0 && strchr(text, ',')) {
		herd_errprintf(err, "expected key=value[,key=value...]");
		goto fail;
	}
	return 0;
fail:
	filter_free(f);
	return -1;
}

int inventory_filter_check(const char *filter, struct herd_err *err)
{
	struct filter f;

	if (filter_parse(filter, &f, err) < 0)
		return -1;
	filter_free(&f);
	return 0;
}

/* A scalar's JSON text equals want (strings compare as they are). */
static bool scalar_is(const json_t *v, const char *want)
{
	char num[64];

	switch (json_typeof(v)) {
	case JSON_STRING:
		return strcmp(json_string_value(v), want) == 0;
	case JSON_INTEGER:
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
			 json_integer_value(v));
		return strcmp(num, want) == 0;
	case JSON_REAL:
		return strtod(want, NULL) == json_real_value(v) && *want;
	case JSON_TRUE:
		return strcmp(want, "true") == 0;
	case JSON_FALSE:
		return strcmp(want, "false") == 0;
	case JSON_NULL:
		return strcmp(want, "null") == 0;
	default:
		return false;
	}
}

static bool value_is(const json_t *v, const char *want)
{
	size_t i;
	json_t *e;

	if (!json_is_array(v))
		return scalar_is(v, want);
	json_array_foreach(v, i, e)
	{
		if (scalar_is(e, want))
			return true;
	}
	return false;
}

/* The member a dotted key names, or NULL. */
static const json_t *member(const json_t *obj, const char *key)
{
	char part[256];
	const char *p = key;

	for (int depth = 0; depth < KEY_DEPTH_MAX && obj; depth++) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);

		if (!json_is_object(obj) || n >= sizeof(part))
			return NULL;
		memcpy(part, p, n);
		part[n] = '\0';
		obj = json_object_get(obj, part);
		if (!dot)
			return obj;
		p = dot + 1;
	}
	return NULL;
}

static bool entry_matches(const json_t *entry, const struct filter *f)
{
	for (int i = 0; i < f->n; i++) {
		const json_t *v;

		if (!json_is_object(entry))
			return false;
		v = member(entry, f->pairs[i].key);
		if (!v || !value_is(v, f->pairs[i].val))
			return false;
	}
	return true;
}

/* The entries array of the answer, or NULL with err. */
static const json_t *entries_of(const json_t *root, const char *what,
				struct herd_err *err)
{
	const json_t *a;

	if (json_is_array(root))
		return root;
	if (json_is_object(root)) {
		if ((a = json_object_get(root, "nodes")) ||
		    (a = json_object_get(root, "hosts"))) {
			if (json_is_array(a))
				return a;
			herd_errprintf(err,
				       "%s: expected \"nodes\" to be an array "
				       "of hosts",
				       what);
			return NULL;
		}
		herd_errprintf(err,
			       "%s: expected an array of hosts, or an object "
			       "with a \"nodes\" array",
			       what);
		return NULL;
	}
	herd_errprintf(err,
		       "%s: expected an array of hosts, or an object with a "
		       "\"nodes\" array",
		       what);
	return NULL;
}

/* One entry's name and slots; -1 with err when it is malformed. */
static int entry_host(const json_t *e, size_t i, const char *what,
		      const char **name, int *slots, struct herd_err *err)
{
	static const char *const name_keys[] = {"name", "hostname", "host"};
	const json_t *v = NULL, *s;

	*slots = 0;
	if (json_is_string(e)) {
		*name = json_string_value(e);
		return 0;
	}
	if (!json_is_object(e))
		return herd_errprintf(err,
				      "%s: entry %zu: expected a host name or "
				      "an object with \"name\"",
				      what, i + 1);
	for (size_t k = 0; k < 3 && !v; k++)
		v = json_object_get(e, name_keys[k]);
	if (!json_is_string(v))
		return herd_errprintf(err,
				      "%s: entry %zu: expected a \"name\" "
				      "string (or \"hostname\", \"host\")",
				      what, i + 1);
	*name = json_string_value(v);
	s = json_object_get(e, "slots");
	if (s) {
		if (!json_is_integer(s) || json_integer_value(s) < 1 ||
		    json_integer_value(s) > HOSTFILE_SLOTS_MAX)
			return herd_errprintf(err,
					      "%s: entry %zu (%.*s): expected "
					      "\"slots\" to be an integer from "
					      "1 to %d",
					      what, i + 1, QUOTE_MAX, *name,
					      HOSTFILE_SLOTS_MAX);
		*slots = (int)json_integer_value(s);
	}
	return 0;
}

struct hostfile *inventory_parse(const char *body, size_t len,
				 const char *filter, const char *what,
				 struct herd_err *err)
{
	struct hostfile *hf = NULL, *ret = NULL;
	const json_t *entries;
	json_t *root = NULL, *e;
	json_error_t jerr;
	struct filter f;
	size_t i;

	if (filter_parse(filter, &f, err) < 0) {
		char msg[HERD_ERR_MAX];

		snprintf(msg, sizeof(msg), "%s", err->text);
		herd_errprintf(err, "%s: filter: %s", what, msg);
		return NULL;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
			  &jerr);
	if (!root) {
		herd_errprintf(err, "%s: not JSON: %s (line %d, column %d)",
			       what, jerr.text, jerr.line, jerr.column);
		goto out;
	}
	if (!(entries = entries_of(root, what, err)))
		goto out;
	if (!(hf = hostfile_new())) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	json_array_foreach(entries, i, e)
	{
		char where[HERD_ERR_MAX];
		const char *name = NULL;
		int slots;

		if (entry_host(e, i, what, &name, &slots, err) < 0)
			goto out;
		if (f.n && !entry_matches(e, &f))
			continue;
		snprintf(where, sizeof(where), "%s: entry %zu", what, i + 1);
		if (hostfile_host_check(name, where, err) < 0 ||
		    hostfile_push(hf, name, slots, i + 1, err) < 0)
			goto out;
	}
	if (hf->count == 0) {
		if (f.n)
			herd_errprintf(err,
				       "%s: no host of %zu matches the filter "
				       "'%.*s'",
				       what, json_array_size(entries),
				       QUOTE_MAX, filter);
		else
			herd_errprintf(err, "%s: the inventory lists no hosts",
				       what);
		goto out;
	}
	ret = hf;
	hf = NULL;
out:
	hostfile_free(hf);
	json_decref(root);
	filter_free(&f);
	return ret;
}
