/* proto_rules_pmix.c — the checks of the PMIx frames: FENCE, PMIX_LOG,
 * SPAWN, SPAWN_LAUNCH, CONNECT, PUBLISH, LOOKUP, UNPUBLISH, PUBSUB_DONE,
 * EVENT and PROC_FAILED.  Their rows are in proto_rules.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proto_int.h"

/* --- FENCE's procs -------------------------------------------------------- */

int proto_procs_walk(const char *s, int (*fn)(void *arg, int lo, int hi),
		     void *arg)
{
	long prev = -1;

	if (!s || !*s)
		return -1;
	if (strcmp(s, "*") == 0)
		return 1;
	for (;;) {
		char *end;
		long lo, hi;

		if (*s < '0' || *s > '9')
			return -1;
		errno = 0;
		lo = strtol(s, &end, 10);
		hi = lo;
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return -1;
			hi = strtol(s, &end, 10);
		}
		if (errno || lo <= prev || hi < lo || hi > INT_MAX)
			return -1;
		if (fn && fn(arg, (int)lo, (int)hi) < 0)
			return -1;
		prev = hi;
		if (*end == '\0')
			return 0;
		if (*end != ',')
			return -1;
		s = end + 1;
	}
}

int proto_fence_more(const json_t *body, struct herd_err *err)
{
	const json_t *procs = json_object_get(body, "procs");

	if (procs && proto_procs_walk(json_string_value(procs), NULL, NULL) < 0)
		return herd_errprintf(err, "procs: \"*\" or ascending rank "
					   "ranges (\"0-3,6\") expected");
	return 0;
}

/* --- PMIX_LOG ----------------------------------------------------------- */

static int proto_pmix_log_entry_more(const json_t *body, struct herd_err *err)
{
	size_t k = strlen(json_string_value(json_object_get(body, "key")));
	size_t v = strlen(json_string_value(json_object_get(body, "value")));

	if (k < 1 || k > 511)
		return herd_errprintf(err, "key \"key\": %zu bytes, 1..511", k);
	if (v > PROTO_PMIX_LOG_VALUE_MAX)
		return herd_errprintf(err,
				      "key \"value\": %zu bytes, at most "
				      "%d",
				      v, PROTO_PMIX_LOG_VALUE_MAX);
	return 0;
}

static const struct proto_body proto_pmix_log_entry_body = {
    .format = "{s:s, s:s}",
    .keys = {"key", "value"},
    .more = proto_pmix_log_entry_more,
};

int proto_pmix_log_more(const json_t *body, struct herd_err *err)
{
	if (json_array_size(json_object_get(body, "entries")) == 0)
		return herd_errprintf(err, "key \"entries\": none");
	return proto_check_array(body, "entries", &proto_pmix_log_entry_body,
				 PROTO_PMIX_LOG_ENTRIES_MAX, err);
}

/* --- SPAWN, SPAWN_LAUNCH, CONNECT ----------------------------------------- */

static int proto_app_more(const json_t *body, struct herd_err *err)
{
	if (!*json_string_value(json_object_get(body, "cmd")))
		return herd_errprintf(err, "key \"cmd\": empty");
	if (proto_check_strings(body, "argv", PROTO_SPAWN_ARGS_MAX, false,
				err) < 0 ||
	    proto_check_strings(body, "env", PROTO_SPAWN_ARGS_MAX, false, err) <
		0 ||
	    proto_check_strings(body, "hosts", PROTO_SPAWN_ARGS_MAX, true,
				err) < 0)
		return -1;
	return 0;
}

static const struct proto_body proto_app_body = {
    .format = "{s:s, s:o, s:o, s?s, s:I, s?o}",
    .keys = {"cmd", "argv", "env", "cwd", "np", "hosts"},
    .ranges = {{"np", 1, PROTO_SPAWN_PROCS_MAX}},
    .more = proto_app_more,
};

int proto_spawn_apps(const json_t *body, struct herd_err *err)
{
	if (json_array_size(json_object_get(body, "apps")) == 0)
		return herd_errprintf(err, "key \"apps\": no app");
	return proto_check_array(body, "apps", &proto_app_body,
				 PROTO_SPAWN_APPS_MAX, err);
}

static int proto_launch_app_more(const json_t *body, struct herd_err *err)
{
	if (json_object_get(body, "hosts"))
		return herd_errprintf(err, "key \"hosts\": not in a "
					   "SPAWN_LAUNCH");
	return proto_app_more(body, err);
}

static const struct proto_body proto_launch_app_body = {
    .format = "{s:s, s:o, s:o, s?s, s:I}",
    .keys = {"cmd", "argv", "env", "cwd", "np"},
    .ranges = {{"np", 1, PROTO_SPAWN_PROCS_MAX}},
    .more = proto_launch_app_more,
};

static const struct proto_body proto_spawn_local_body = {
    .format = "{s:I, s:I, s:I, s?s}",
    .keys = {"rank", "id", "app", "cpus"},
    .ranges = {{"rank", 0, PROTO_SPAWN_PROCS_MAX - 1},
	       {"id", 0, INT_MAX},
	       {"app", 0, PROTO_SPAWN_APPS_MAX - 1}},
};

int proto_spawn_launch_more(const json_t *body, struct herd_err *err)
{
	if (json_array_size(json_object_get(body, "apps")) == 0)
		return herd_errprintf(err, "key \"apps\": no app");
	if (proto_check_array(body, "apps", &proto_launch_app_body,
			      PROTO_SPAWN_APPS_MAX, err) < 0)
		return -1;
	return proto_check_array(body, "local", &proto_spawn_local_body,
				 PROTO_SPAWN_PROCS_MAX, err);
}

static const struct proto_body proto_connect_proc_body = {
    .format = "{s:I, s:I}",
    .keys = {"ns", "rank"},
    .ranges = {{"ns", 0, INT_MAX}, {"rank", -1, INT_MAX}},
};

int proto_connect_more(const json_t *body, struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));

	if (strcmp(op, "connect") && strcmp(op, "disconnect") &&
	    strcmp(op, "fence"))
		return herd_errprintf(err,
				      "key \"op\": \"%s\" is not "
				      "connect, disconnect or fence",
				      op);
	if (json_array_size(json_object_get(body, "procs")) == 0)
		return herd_errprintf(err, "key \"procs\": no process");
	return proto_check_array(body, "procs", &proto_connect_proc_body,
				 PROTO_CONNECT_PROCS_MAX, err);
}

/* CONNECT: data only with op "fence" (its contribution). */
int proto_connect_data(const json_t *body, size_t data_len,
		       struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));

	if (data_len && op && strcmp(op, "fence"))
		return herd_errprintf(err,
				      "%zu bytes of data with op \"%s\" "
				      "(only a fence carries data)",
				      data_len, op);
	return 0;
}
/* --- publish / lookup and events ---------------------------------------- */

static int proto_pubsub_range_ok(const char *r)
{
	static const char *const ok[] = {"local",  "namespace", "session",
					 "global", "custom",	"proc_local"};

	for (size_t i = 0; r && i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(r, ok[i]))
			return 1;
	return 0;
}

static int proto_pubsub_key_more(const json_t *body, struct herd_err *err)
{
	const char *k = json_string_value(json_object_get(body, "key"));
	const char *ns = json_string_value(json_object_get(body, "nspace"));

	if (!k || !k[0] || strlen(k) > PROTO_PUBSUB_KEY_MAX)
		return herd_errprintf(err, "key \"key\": 1..%d bytes expected",
				      PROTO_PUBSUB_KEY_MAX);
	if (ns && strlen(ns) > PROTO_PUBSUB_NSPACE_MAX)
		return herd_errprintf(err, "key \"nspace\": at most %d bytes",
				      PROTO_PUBSUB_NSPACE_MAX);
	return 0;
}

static const struct proto_body proto_pubsub_key_body = {
    .format = "{s:s, s?I, s?s, s?I}",
    .keys = {"key", "size", "nspace", "rank"},
    .ranges = {{"size", 0, PROTO_PUBSUB_VALUE_MAX}, {"rank", 0, INT_MAX}},
    .more = proto_pubsub_key_more,
};

/* What PUBLISH, LOOKUP and UNPUBLISH share: nspace, range, keys. */
static int proto_pubsub_common(const json_t *body, size_t min_keys,
			       struct herd_err *err)
{
	const char *ns = json_string_value(json_object_get(body, "nspace"));
	const char *r = json_string_value(json_object_get(body, "range"));
	size_t n = json_array_size(json_object_get(body, "keys"));

	if (strlen(ns) > PROTO_PUBSUB_NSPACE_MAX)
		return herd_errprintf(err, "key \"nspace\": at most %d bytes",
				      PROTO_PUBSUB_NSPACE_MAX);
	if (!proto_pubsub_range_ok(r))
		return herd_errprintf(err,
				      "key \"range\": \"%s\" is not a "
				      "PMIx range",
				      r);
	if (n < min_keys)
		return herd_errprintf(err,
				      "key \"keys\": at least %zu "
				      "expected",
				      min_keys);
	return proto_check_array(body, "keys", &proto_pubsub_key_body,
				 PROTO_PUBSUB_KEYS_MAX, err);
}

int proto_publish_more(const json_t *body, struct herd_err *err)
{
	const char *p = json_string_value(json_object_get(body, "persist"));
	const json_t *keys = json_object_get(body, "keys");

	if (strcmp(p, "indef") && strcmp(p, "first_read") &&
	    strcmp(p, "proc") && strcmp(p, "app") && strcmp(p, "session"))
		return herd_errprintf(err,
				      "key \"persist\": \"%s\" is not a "
				      "PMIx persistence",
				      p);
	if (proto_pubsub_common(body, 1, err) < 0)
		return -1;
	for (size_t i = 0; i < json_array_size(keys); i++)
		if (!json_is_integer(
			json_object_get(json_array_get(keys, i), "size")))
			return herd_errprintf(err, "keys[%zu]: no size", i);
	return 0;
}

int proto_lookup_more(const json_t *body, struct herd_err *err)
{
	return proto_pubsub_common(body, 1, err);
}

int proto_unpublish_more(const json_t *body, struct herd_err *err)
{
	return proto_pubsub_common(body, 0, err);
}

int proto_pubsub_done_more(const json_t *body, struct herd_err *err)
{
	const char *s = json_string_value(json_object_get(body, "status"));
	static const char *const ok[] = {"ok",	      "partial", "not_found",
					 "duplicate", "timeout", "limit",
					 "ended"};
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(s, ok[i]))
			break;
	if (i == sizeof(ok) / sizeof(ok[0]))
		return herd_errprintf(err, "key \"status\": \"%s\" unknown", s);
	return proto_check_array(body, "found", &proto_pubsub_key_body,
				 PROTO_PUBSUB_KEYS_MAX, err);
}

int proto_event_more(const json_t *body, struct herd_err *err)
{
	const char *ns = json_string_value(json_object_get(body, "nspace"));

	if (strlen(ns) > PROTO_PUBSUB_NSPACE_MAX)
		return herd_errprintf(err, "key \"nspace\": at most %d bytes",
				      PROTO_PUBSUB_NSPACE_MAX);
	if (!proto_pubsub_range_ok(
		json_string_value(json_object_get(body, "range"))))
		return herd_errprintf(err, "key \"range\": not a PMIx range");
	if (json_object_get(body, "procs"))
		return proto_check_ints(body, "procs", PROTO_LAUNCH_RANKS_MAX,
					0, INT_MAX, err);
	return 0;
}

int proto_proc_failed_more(const json_t *body, struct herd_err *err)
{
	const char *k = json_string_value(json_object_get(body, "kind"));

	if (strcmp(k, "exit") && strcmp(k, "signal") && strcmp(k, "node"))
		return herd_errprintf(err,
				      "key \"kind\": \"%s\" is not exit, "
				      "signal or node",
				      k);
	if (json_array_size(json_object_get(body, "ranks")) < 1)
		return herd_errprintf(err, "key \"ranks\": empty");
	return proto_check_ints(body, "ranks", PROTO_LAUNCH_RANKS_MAX, 0,
				INT_MAX, err);
}
