/* proto_check.c — proto_frame_check(): a decoded frame against its row
 * of proto_rules[] (proto_rules.c), and the checks that several rows share.
 *
 * A body is checked in two steps.  First its shape: json_unpack_ex() with
 * JSON_STRICT (every key of the object is named in the format, so an
 * unknown key is an error) and JSON_VALIDATE_ONLY, the keys passed from
 * the row in format order; optional keys carry "?".  Then its values: the
 * row's integer ranges, and a function for what a format cannot say
 * (arrays of objects, maps of strings, keys that go together).  Nested
 * objects have bodies of their own (checked the same way), so every error
 * names the key it is about.
 */
#include <stdio.h>
#include <string.h>

#include "herd/version.h"
#include "proto_int.h"

const char *proto_json_kind(const json_t *json)
{
	switch (json_typeof(json)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		return "null";
	}
	return "an unknown JSON value";
}

/* An array of at most max objects, each matching elem. */
int proto_check_array(const json_t *body, const char *key,
		      const struct proto_body *elem, size_t max,
		      struct herd_err *err)
{
	const json_t *arr = json_object_get(body, key);
	char where[64];
	size_t i;

	if (!arr)
		return 0; /* optional and absent; required ones are
			   * checked by the format */
	if (!json_is_array(arr))
		return herd_errprintf(err,
				      "key \"%s\": expected an array, "
				      "got %s",
				      key, proto_json_kind(arr));
	if (json_array_size(arr) > max)
		return herd_errprintf(err,
				      "key \"%s\": %zu entries, at most "
				      "%zu",
				      key, json_array_size(arr), max);
	for (i = 0; i < json_array_size(arr); i++) {
		snprintf(where, sizeof(where), "%s[%zu]", key, i);
		if (proto_body_check(elem, json_array_get(arr, i), where, err) <
		    0)
			return -1;
	}
	return 0;
}

/* An array of at most max integers in [lo, hi]. */
int proto_check_ints(const json_t *body, const char *key, size_t max,
		     json_int_t lo, json_int_t hi, struct herd_err *err)
{
	const json_t *arr = json_object_get(body, key), *v;
	size_t i;

	if (!json_is_array(arr))
		return herd_errprintf(err,
				      "key \"%s\": expected an array, "
				      "got %s",
				      key, proto_json_kind(arr));
	if (json_array_size(arr) > max)
		return herd_errprintf(err,
				      "key \"%s\": %zu entries, at most "
				      "%zu",
				      key, json_array_size(arr), max);
	json_array_foreach(arr, i, v)
	{
		if (!json_is_integer(v))
			return herd_errprintf(err,
					      "key \"%s[%zu]\": expected "
					      "an integer, got %s",
					      key, i, proto_json_kind(v));
		if (json_integer_value(v) < lo || json_integer_value(v) > hi)
			return herd_errprintf(
			    err,
			    "key \"%s[%zu]\": %" JSON_INTEGER_FORMAT
			    " is out of range %" JSON_INTEGER_FORMAT
			    "..%" JSON_INTEGER_FORMAT,
			    key, i, json_integer_value(v), lo, hi);
	}
	return 0;
}

/* An environment: an object of strings whose keys are variable names
 * (not empty, no '='), at most max of them. */
int proto_check_env(const json_t *body, const char *where, const char *key,
		    size_t max, struct herd_err *err)
{
	const json_t *env = json_object_get(body, key), *v;
	const char *name;

	if (!json_is_object(env))
		return herd_errprintf(err,
				      "key \"%s%s\": expected an object, "
				      "got %s",
				      where, key, proto_json_kind(env));
	if (json_object_size(env) > max)
		return herd_errprintf(err,
				      "key \"%s%s\": %zu variables, at "
				      "most %zu",
				      where, key, json_object_size(env), max);
	json_object_foreach((json_t *)env, name, v)
	{
		if (!*name || strchr(name, '='))
			return herd_errprintf(err,
					      "key \"%s%s\": \"%s\" is "
					      "not a variable name",
					      where, key, name);
		if (!json_is_string(v))
			return herd_errprintf(err,
					      "key \"%s%s.%s\": expected a "
					      "string, got %s",
					      where, key, name,
					      proto_json_kind(v));
	}
	return 0;
}

/* An array of at most max strings (required unless optional). */
int proto_check_strings(const json_t *body, const char *key, size_t max,
			bool optional, struct herd_err *err)
{
	const json_t *arr = json_object_get(body, key), *v;
	size_t i;

	if (!arr && optional)
		return 0;
	if (!json_is_array(arr))
		return herd_errprintf(err,
				      "key \"%s\": expected an array, "
				      "got %s",
				      key, proto_json_kind(arr));
	if (json_array_size(arr) > max)
		return herd_errprintf(err,
				      "key \"%s\": %zu entries, at most "
				      "%zu",
				      key, json_array_size(arr), max);
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v))
			return herd_errprintf(err,
					      "key \"%s[%zu]\": expected "
					      "a string, got %s",
					      key, i, proto_json_kind(v));
	}
	return 0;
}

const char *proto_type_name(int type)
{
	if (type < PROTO_HELLO || type > PROTO_TYPE_MAX_)
		return "?";
	return proto_rules[type].name;
}

/* The key whose value the format position pos (1-based, as jansson
 * reports it) is about: formats here are flat objects, so keys and values
 * alternate and every 's' in key position takes the next key. */
static const char *proto_format_key(const struct proto_body *b, int pos)
{
	const char *key = NULL;
	int i, n = 0, want_key = 1;

	for (i = 0; b->format[i] && i < pos - 1; i++) {
		char ch = b->format[i];

		if (strchr("{}:, ?!*", ch))
			continue;
		if (want_key && n < PROTO_BODY_KEYS)
			key = b->keys[n++];
		want_key = !want_key;
	}
	return key;
}

/* Words for jansson's validation error text. */
static int proto_shape_error(const struct proto_body *b, const char *where,
			     const json_error_t *jerr, struct herd_err *err)
{
	const char *text = jerr->text, *key;
	const char *sep = where && *where ? "." : "";
	const char *in = where ? where : "";
	char *colon;

	if (!strncmp(text, "Object item not found: ", 23))
		return herd_errprintf(err, "missing key \"%s%s%s\"", in, sep,
				      text + 23);
	colon = strstr(text, "left unpacked: ");
	if (colon)
		return herd_errprintf(err, "unknown key%s %s%s%s",
				      strchr(colon, ',') ? "s" : "", in,
				      *in ? ": " : "", colon + 15);
	if (!strncmp(text, "Expected ", 9) &&
	    (key = proto_format_key(b, jerr->position)))
		return herd_errprintf(err, "key \"%s%s%s\": expected %s", in,
				      sep, key, text + 9);
	return herd_errprintf(err, "%s%s%s", in, *in ? ": " : "", text);
}

/* Checks one body (or a nested object, named by where) against b. */
int proto_body_check(const struct proto_body *b, const json_t *body,
		     const char *where, struct herd_err *err)
{
	const char *const *k = b->keys;
	json_error_t jerr;
	size_t i;

	if (!json_is_object(body))
		return herd_errprintf(err,
				      "key \"%s\": expected an object, "
				      "got %s",
				      where ? where : "",
				      proto_json_kind(body));
	/* Unused trailing keys are ignored by jansson: the format takes
	 * exactly as many as it names. */
	if (json_unpack_ex((json_t *)body, &jerr,
			   JSON_STRICT | JSON_VALIDATE_ONLY, b->format, k[0],
			   k[1], k[2], k[3], k[4], k[5], k[6], k[7], k[8], k[9],
			   k[10], k[11]) < 0)
		return proto_shape_error(b, where, &jerr, err);
	for (i = 0; i < PROTO_BODY_RANGES && b->ranges[i].key; i++) {
		const struct proto_range *r = &b->ranges[i];
		const json_t *v = json_object_get(body, r->key);

		if (!v)
			continue; /* an optional key, absent */
		if (json_integer_value(v) < r->lo ||
		    json_integer_value(v) > r->hi)
			return herd_errprintf(
			    err,
			    "key \"%s%s%s\": %" JSON_INTEGER_FORMAT
			    " is out of range %" JSON_INTEGER_FORMAT
			    "..%" JSON_INTEGER_FORMAT,
			    where ? where : "", where ? "." : "", r->key,
			    json_integer_value(v), r->lo, r->hi);
	}
	return b->more ? b->more(body, err) : 0;
}

/* Who sends frames that travel to `to`, as a message names them. */
static const char *proto_sender(enum proto_dir to)
{
	switch (to) {
	case PROTO_TO_HERD:
		return "agent";
	case PROTO_TO_CONTROL:
		return "client";
	case PROTO_TO_AGENT:
	case PROTO_TO_CLIENT:
	default:
		return "herd";
	}
}

static const struct proto_body *proto_rule_body(const struct proto_rule *rule,
						enum proto_dir to)
{
	switch (to) {
	case PROTO_TO_HERD:
		return &rule->to_herd;
	case PROTO_TO_AGENT:
		return &rule->to_agent;
	case PROTO_TO_CONTROL:
		return &rule->to_control;
	case PROTO_TO_CLIENT:
	default:
		return &rule->to_client;
	}
}

/* Who does send a frame of this rule (for "only X sends"). */
static const char *proto_rule_sender(const struct proto_rule *rule)
{
	if (rule->to_herd.format)
		return "an agent";
	if (rule->to_control.format)
		return "a control client";
	return "herd";
}

int proto_frame_check(const struct proto_frame *f, enum proto_dir to,
		      struct herd_err *err)
{
	const char *from = proto_sender(to);
	const struct proto_rule *rule;
	const struct proto_body *b;
	const char *version;
	struct herd_err why;
	int other;

	if ((int)f->type < PROTO_HELLO || (int)f->type > PROTO_TYPE_MAX_)
		return herd_errprintf(err,
				      "protocol error: frame of unknown "
				      "type %d from %s",
				      (int)f->type, from);
	rule = &proto_rules[f->type];
	b = proto_rule_body(rule, to);
	if (!b->format)
		return herd_errprintf(err,
				      "protocol error: %s frame from %s: "
				      "only %s sends %s",
				      rule->name, from, proto_rule_sender(rule),
				      rule->name);
	/* An agent of another version may say HELLO differently; its
	 * version alone lets herd name both versions (launcher/ctl/ctl.c). */
	version = json_string_value(json_object_get(f->body, "version"));
	other = f->type == PROTO_HELLO && version &&
		strcmp(version, HERD_VERSION) != 0;
	herd_err_clear(&why);
	if (!other && proto_body_check(b, f->body, NULL, &why) < 0)
		return herd_errprintf(err,
				      "protocol error: %s frame from %s: "
				      "%s",
				      rule->name, from, why.text);
	if (f->data_len < rule->data_min || f->data_len > rule->data_max) {
		if (rule->data_max == 0)
			return herd_errprintf(err,
					      "protocol error: %s frame "
					      "from %s: %zu data bytes, it "
					      "carries none",
					      rule->name, from, f->data_len);
		return herd_errprintf(err,
				      "protocol error: %s frame from %s: "
				      "%zu data bytes, expected %zu to %zu",
				      rule->name, from, f->data_len,
				      rule->data_min, rule->data_max);
	}
	if (!other && rule->data_more &&
	    rule->data_more(f->body, f->data_len, &why) < 0)
		return herd_errprintf(err,
				      "protocol error: %s frame from %s: %s",
				      rule->name, from, why.text);
	return 0;
}
