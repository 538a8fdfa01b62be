/* proto_rules_job.c — the checks of the job's own frames: HELLO, LAUNCH,
 * EXIT, SIGNAL, HEARTBEAT, STACKS and RANK_CTL (their rows are in
 * proto_rules.c).  Each fills err with the reason, without a prefix, and
 * returns -1.
 */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "proto_int.h"

/* 65,536: as many variables as a rank can sensibly get; the JSON limit
 * bounds the bytes. */
#define PROTO_ENV_MAX 65536u

static const struct proto_body proto_addr_body = {
    .format = "{s:s, s:s, s:s}",
    .keys = {"ifname", "addr", "netmask"},
};

int proto_hello_more(const json_t *body, struct herd_err *err)
{
	int topo = json_object_get(body, "topo") != NULL;
	int why = json_object_get(body, "topo_error") != NULL;

	if (topo == why)
		return herd_errprintf(err,
				      "exactly one of \"topo\" and "
				      "\"topo_error\" is expected, got %s",
				      topo ? "both" : "neither");
	/* The summary's own parser (topo_json.c) checks what is inside. */
	if (topo && !json_is_object(json_object_get(body, "topo")))
		return herd_errprintf(
		    err,
		    "key \"topo\": expected an object, "
		    "got %s",
		    proto_json_kind(json_object_get(body, "topo")));
	/* Interfaces of one node: bounded by the JSON limit alone. */
	return proto_check_array(body, "addrs", &proto_addr_body, SIZE_MAX,
				 err);
}

static int proto_launch_rank_more(const json_t *body, struct herd_err *err)
{
	return proto_check_env(body, "", "env", PROTO_ENV_MAX, err);
}

static const struct proto_body proto_launch_rank_body = {
    .format = "{s:I, s:o, s?s, s?I}",
    .keys = {"rank", "env", "cpus", "mem_node"},
    .ranges = {{"rank", 0, INT_MAX}, {"mem_node", 0, INT_MAX}},
    .more = proto_launch_rank_more,
};

static int proto_pmix_more(const json_t *body, struct herd_err *err)
{
	return proto_check_ints(body, "local", PROTO_LAUNCH_RANKS_MAX, 0,
				INT_MAX, err);
}

static const struct proto_body proto_pmix_body = {
    .format = "{s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:o}",
    .keys = {"job", "nodes", "ppn", "job_size", "num_nodes", "node_id",
	     "hostname", "local"},
    .ranges = {{"job_size", 1, INT_MAX},
	       {"num_nodes", 1, INT_MAX},
	       {"node_id", 0, INT_MAX}},
    .more = proto_pmix_more,
};

/* --- LAUNCH's metrics.patterns and METRICS' names --------------------------
 */

/* A metric name: letters, digits and '_', at most 64, not a digit first
 * (spec_keys.c's rule for metrics.patterns names). */
bool proto_metric_name_ok(const char *name)
{
	size_t len = strlen(name);
	bool ok = len >= 1 && len <= 64 &&
		  (name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z') ||
		   (name[0] >= 'A' && name[0] <= 'Z'));

	for (size_t i = 1; ok && i < len; i++)
		ok = name[i] == '_' || (name[i] >= 'a' && name[i] <= 'z') ||
		     (name[i] >= 'A' && name[i] <= 'Z') ||
		     (name[i] >= '0' && name[i] <= '9');
	return ok;
}

static int proto_pattern_more(const json_t *body, struct herd_err *err)
{
	const char *regex = json_string_value(json_object_get(body, "regex"));

	if (!proto_metric_name_ok(
		json_string_value(json_object_get(body, "name"))))
		return herd_errprintf(err,
				      "key \"name\": a metric name must be "
				      "letters, digits and '_' (at most 64), "
				      "not a digit first");
	if (!*regex || strlen(regex) > PROTO_PATTERN_REGEX_MAX)
		return herd_errprintf(err,
				      "key \"regex\": %zu bytes, expected "
				      "1..%d",
				      strlen(regex), PROTO_PATTERN_REGEX_MAX);
	return 0;
}

static const struct proto_body proto_pattern_body = {
    .format = "{s:s, s:s}",
    .keys = {"name", "regex"},
    .more = proto_pattern_more,
};

int proto_launch_more(const json_t *body, struct herd_err *err)
{
	const json_t *pmix = json_object_get(body, "pmix");

	if (proto_check_env(body, "", "env", PROTO_ENV_MAX, err) < 0 ||
	    proto_check_array(body, "ranks", &proto_launch_rank_body,
			      PROTO_LAUNCH_RANKS_MAX, err) < 0 ||
	    proto_check_array(body, "patterns", &proto_pattern_body,
			      PROTO_PATTERNS_MAX, err) < 0)
		return -1;
	return pmix ? proto_body_check(&proto_pmix_body, pmix, "pmix", err) : 0;
}

int proto_exit_more(const json_t *body, struct herd_err *err)
{
	const json_t *code = json_object_get(body, "code");
	const json_t *sig = json_object_get(body, "signal");
	json_int_t v;

	if (json_is_integer(code) && json_is_null(sig)) {
		v = json_integer_value(code);
		if (v < 0 || v > 255)
			return herd_errprintf(
			    err,
			    "key \"code\": %" JSON_INTEGER_FORMAT " is out of "
			    "range 0..255",
			    v);
	} else if (json_is_null(code) && json_is_integer(sig)) {
		v = json_integer_value(sig);
		if (v < 1 || v >= NSIG)
			return herd_errprintf(
			    err,
			    "key \"signal\": %" JSON_INTEGER_FORMAT
			    " is out of "
			    "range 1..%d",
			    v, NSIG - 1);
	} else {
		return herd_errprintf(err,
				      "keys \"code\" and \"signal\": one "
				      "integer and one null expected, got %s "
				      "and %s",
				      proto_json_kind(code),
				      proto_json_kind(sig));
	}
	if (!json_object_get(body, "error") != !json_object_get(body, "errno"))
		return herd_errprintf(err, "keys \"error\" and \"errno\" come "
					   "together, got only one");
	return 0;
}

static const struct proto_body proto_hb_hung_body = {
    .format = "{s:I, s:I}",
    .keys = {"rank", "silent_ms"},
    .ranges = {{"rank", 0, INT_MAX}, {"silent_ms", 0, PROTO_INT_ANY}},
};

int proto_hb_agent_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "hung", &proto_hb_hung_body,
				 PROTO_LAUNCH_RANKS_MAX, err);
}

/* --- STACKS: evidence of a hang, the stacks of hung ranks ------------- */

static int proto_stacks_rank_more(const json_t *body, struct herd_err *err)
{
	const char *m = json_string_value(json_object_get(body, "method"));

	if (strcmp(m, "python") && strcmp(m, "gdb") && strcmp(m, "none"))
		return herd_errprintf(err,
				      "key \"method\": \"%s\" is not python, "
				      "gdb or none",
				      m);
	return 0;
}

static const struct proto_body proto_stacks_rank_body = {
    .format = "{s:I, s:s, s?s, s:b, s:I, s?s}",
    .keys = {"rank", "method", "frame", "in_collective", "last_sign_ms",
	     "error"},
    .ranges = {{"rank", 0, INT_MAX}, {"last_sign_ms", 0, PROTO_INT_ANY}},
    .more = proto_stacks_rank_more,
};

int proto_stacks_agent_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "ranks", &proto_stacks_rank_body,
				 PROTO_LAUNCH_RANKS_MAX, err);
}

int proto_hb_herd_more(const json_t *body, struct herd_err *err)
{
	if (json_integer_value(json_object_get(body, "timeout_ms")) <
	    json_integer_value(json_object_get(body, "interval_ms")))
		return herd_errprintf(err, "key \"timeout_ms\" is shorter "
					   "than \"interval_ms\"");
	return 0;
}

/* SIGNAL's ranks: PMIx_Job_control's targets, when given. */
int proto_signal_more(const json_t *body, struct herd_err *err)
{
	const json_t *r = json_object_get(body, "ranks");

	if (!r)
		return 0;
	if (json_array_size(r) < 1)
		return herd_errprintf(err, "key \"ranks\": empty");
	return proto_check_ints(body, "ranks", PROTO_JCTRL_RANKS_MAX, 0,
				INT_MAX, err);
}

/* survivors keep training: RANK_CTL's msg is an object naming its op. */
int proto_rank_ctl_more(const json_t *body, struct herd_err *err)
{
	const json_t *msg = json_object_get(body, "msg");

	if (!json_is_string(json_object_get(msg, "op")))
		return herd_errprintf(err, "key \"msg.op\": expected a "
					   "string");
	return 0;
}
