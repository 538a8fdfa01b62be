/* proto.c — the frame codec of include/herd/proto.h.
 *
 * The reader keeps one buffer: bytes before `off` are consumed frames,
 * bytes in [off, end) are pending.  Taking a frame only advances `off`, so
 * many small frames in one large feed cost O(total); pending bytes are
 * moved to the front only when a feed does not fit behind them.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/proto.h"
#include "herd/version.h"

/* Bytes of a frame after its len field: version, type, reserved, json_len. */
#define PROTO_FIXED_SIZE (PROTO_HEADER_SIZE - 4)
/* 4 KiB: the first allocation; enough for a HELLO or a few heartbeats. */
#define PROTO_READER_MIN_CAP 4096u
/* 256 KiB: an emptied buffer larger than this is freed, so one big frame
 * (a fence reply) does not pin its memory for the life of the stream. */
#define PROTO_READER_KEEP_CAP (256u * 1024)

struct proto_reader {
	/* largest len accepted, in [PROTO_FIXED_SIZE, PROTO_FRAME_MAX] */
	size_t max_frame;
	/* most pending bytes: max_frame + PROTO_HEADER_SIZE */
	size_t limit;
	/* [0, off) consumed, [off, end) pending, [end, cap) free; cap is at
	 * most limit */
	unsigned char *buf;
	size_t cap;
	size_t off;
	size_t end;
	/* a decoder error happened: the stream is unusable, and every later
	 * call repeats the words kept in failure */
	int failed;
	struct herd_err failure;
};

static uint32_t proto_get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void proto_put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static const char *proto_json_kind(const json_t *json)
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

/* --- the wire contract: one row per frame type --------------------------
 *
 * A body is checked in two steps.  First its shape: json_unpack_ex() with
 * JSON_STRICT (every key of the object is named in the format, so an
 * unknown key is an error) and JSON_VALIDATE_ONLY, the keys passed from
 * the row in format order; optional keys carry "?".  Then its values: the
 * row's integer ranges, and a function for what a format cannot say
 * (arrays of objects, maps of strings, keys that go together).  Nested
 * objects have bodies of their own (checked the same way), so every error
 * names the key it is about. */

/* Most keys of one body: a GPU of METRICS has 11. */
#define PROTO_BODY_KEYS 12
/* Most integer ranges of one body. */
#define PROTO_BODY_RANGES 8
/* No upper bound beyond the JSON integer's (json_int_t). */
#define PROTO_INT_ANY ((json_int_t)(~0ULL >> 1))

struct proto_range {
	const char *key;
	json_int_t lo, hi;
};

struct proto_body {
	/* strict json_unpack_ex format; NULL: this body is never sent */
	const char *format;
	/* the format's keys, in its order (passed to json_unpack_ex) */
	const char *keys[PROTO_BODY_KEYS];
	/* integer keys (present ones) must lie in [lo, hi] */
	struct proto_range ranges[PROTO_BODY_RANGES];
	/* what the format cannot say; fills err with the reason (no
	 * prefix) and returns -1.  NULL: nothing more. */
	int (*more)(const json_t *body, struct herd_err *err);
};

struct proto_rule {
	const char *name;
	struct proto_body to_agent;   /* the body herd sends */
	struct proto_body to_herd;    /* the body an agent sends */
	struct proto_body to_control; /* the body a control client sends */
	struct proto_body to_client;  /* the body herd's control socket sends */
	/* data bytes after the JSON header */
	size_t data_min, data_max;
	/* when the body decides whether data belongs (CTL_MSG): fills err
	 * (no prefix) and returns -1.  NULL: data_min..data_max is all. */
	int (*data_more)(const json_t *body, size_t data_len,
			 struct herd_err *err);
};

static int proto_body_check(const struct proto_body *b, const json_t *body,
			    const char *where, struct herd_err *err);

/* An array of at most max objects, each matching elem. */
static int proto_check_array(const json_t *body, const char *key,
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
static int proto_check_ints(const json_t *body, const char *key, size_t max,
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
static int proto_check_env(const json_t *body, const char *where,
			   const char *key, size_t max, struct herd_err *err)
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

/* 65,536: as many variables as a rank can sensibly get; the JSON limit
 * bounds the bytes. */
#define PROTO_ENV_MAX 65536u

static const struct proto_body proto_addr_body = {
    .format = "{s:s, s:s, s:s}",
    .keys = {"ifname", "addr", "netmask"},
};

static int proto_hello_more(const json_t *body, struct herd_err *err)
{
	int topo = json_object_get(body, "topo") != NULL;
	int why = json_object_get(body, "topo_error") != NULL;

	if (topo == why)
		return herd_errprintf(err,
				      "exactly one of \"topo\" and "
				      "\"topo_error\" is expected, got %s",
				      topo ? "both" : "neither");
	/* The summary's own parser (topo.c) checks what is inside. */
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

static int proto_fence_more(const json_t *body, struct herd_err *err)
{
	const json_t *procs = json_object_get(body, "procs");

	if (procs &&
	    proto_procs_walk(json_string_value(procs), NULL, NULL) < 0)
		return herd_errprintf(err,
				      "procs: \"*\" or ascending rank "
				      "ranges (\"0-3,6\") expected");
	return 0;
}

/* --- LAUNCH's metrics.patterns and METRICS' names --------------------------
 */

/* A metric name: letters, digits and '_', at most 64, not a digit first
 * (spec.c's rule for metrics.patterns names). */
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

/* --- checkpoints in memory (the memory tier, peer copies, persist) ------ */

/* A name in the tier: a job key or a file of a step directory.  Plain
 * names only (no '/', not "." or "..", no leading '.': temporary names
 * are the tier's own), at most PROTO_CKPT_NAME_MAX bytes. */
static int proto_ckpt_name(const json_t *body, const char *key,
			   struct herd_err *err)
{
	const char *v = json_string_value(json_object_get(body, key));

	if (!v)
		return 0;
	if (!*v || *v == '.' || strchr(v, '/') ||
	    strlen(v) > PROTO_CKPT_NAME_MAX)
		return herd_errprintf(err,
				      "key \"%s\": \"%s\" is not a plain "
				      "name (1..%d bytes, no '/', no leading "
				      "'.')",
				      key, v, PROTO_CKPT_NAME_MAX);
	return 0;
}

static int proto_ckpt_mem_more(const json_t *body, struct herd_err *err)
{
	return proto_ckpt_name(body, "job", err);
}

static const struct proto_body proto_ckpt_step_body = {
    .format = "{s:I, s:I, s:I, s:b}",
    .keys = {"rank", "step", "bytes", "peer"},
    .ranges = {{"rank", 0, INT_MAX},
	       {"step", 0, PROTO_INT_ANY},
	       {"bytes", 0, PROTO_INT_ANY}},
};

static int proto_ckpt_inv_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "steps", &proto_ckpt_step_body,
				 PROTO_CKPT_STEPS_MAX, err);
}

static int proto_ckpt_data_more(const json_t *body, struct herd_err *err)
{
	if (json_integer_value(json_object_get(body, "offset")) >
	    json_integer_value(json_object_get(body, "total")))
		return herd_errprintf(err, "offset past total");
	return proto_ckpt_name(body, "file", err);
}

static int proto_launch_more(const json_t *body, struct herd_err *err)
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

static int proto_exit_more(const json_t *body, struct herd_err *err)
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

static int proto_hb_agent_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "hung", &proto_hb_hung_body,
				 PROTO_LAUNCH_RANKS_MAX, err);
}

/* --- STACKS (issue 14: evidence of a hang) ------------------------------ */

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

static int proto_stacks_agent_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "ranks", &proto_stacks_rank_body,
				 PROTO_LAUNCH_RANKS_MAX, err);
}

static int proto_hb_herd_more(const json_t *body, struct herd_err *err)
{
	if (json_integer_value(json_object_get(body, "timeout_ms")) <
	    json_integer_value(json_object_get(body, "interval_ms")))
		return herd_errprintf(err, "key \"timeout_ms\" is shorter "
					   "than \"interval_ms\"");
	return 0;
}

/* --- METRICS ------------------------------------------------------------ */

/* Every integer of the object is 0 or more (counters), except the key
 * named by skip (NULL: none). */
static int proto_nonneg(const json_t *body, const char *skip,
			struct herd_err *err)
{
	const char *key;
	const json_t *v;

	json_object_foreach((json_t *)body, key, v)
	{
		if (json_is_integer(v) && json_integer_value(v) < 0 &&
		    (!skip || strcmp(key, skip)))
			return herd_errprintf(
			    err,
			    "key \"%s\": %" JSON_INTEGER_FORMAT " is below 0",
			    key, json_integer_value(v));
	}
	return 0;
}

static int proto_counters_more(const json_t *body, struct herd_err *err)
{
	return proto_nonneg(body, NULL, err);
}

static int proto_gpu_more(const json_t *body, struct herd_err *err)
{
	return proto_nonneg(body, "temp_c", err);
}

static const struct proto_body proto_m_rank_body = {
    .format = "{s:I, s:I, s:I, s?I}",
    .keys = {"rank", "cpu_ms", "rss_kb", "touches"},
    .ranges = {{"rank", 0, INT_MAX},
	       {"cpu_ms", 0, PROTO_INT_ANY},
	       {"rss_kb", 0, PROTO_INT_ANY},
	       {"touches", 0, PROTO_INT_ANY}},
};

static const struct proto_body proto_m_net_body = {
    .format = "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
    .keys = {"dev", "rx_bytes", "tx_bytes", "rx_packets", "tx_packets",
	     "rx_drops", "tx_drops", "rx_errors", "tx_errors"},
    .more = proto_counters_more,
};

static const struct proto_body proto_m_rdma_body = {
    .format = "{s:s, s:I, s:I, s:I, s:I, s:I, s:I}",
    .keys = {"dev", "port", "rx_bytes", "tx_bytes", "link_downed",
	     "symbol_error", "rcv_errors"},
    .ranges = {{"port", 1, INT_MAX}},
    .more = proto_counters_more,
};

static const struct proto_body proto_m_gpu_body = {
    .format = "{s:I, s?I, s?I, s?I, s?I, s?I, s?I, s?I, s?I, s?I, s?I}",
    .keys = {"index", "util_pct", "mem_used", "mem_total", "temp_c", "power_mw",
	     "sm_mhz", "ecc_corrected", "ecc_uncorrected", "throttle", "xid"},
    .ranges = {{"index", 0, INT_MAX},
	       {"util_pct", 0, 100},
	       {"temp_c", -300, 10000}},
    .more = proto_gpu_more,
};

static int proto_m_train_more(const json_t *body, struct herd_err *err)
{
	const json_t *values = json_object_get(body, "values"), *v;
	const char *name;

	if (!json_is_object(values))
		return herd_errprintf(err,
				      "key \"values\": expected an "
				      "object, got %s",
				      proto_json_kind(values));
	if (json_object_size(values) > PROTO_TRAIN_VALUES_MAX)
		return herd_errprintf(err,
				      "key \"values\": %zu entries, at most "
				      "%d",
				      json_object_size(values),
				      PROTO_TRAIN_VALUES_MAX);
	json_object_foreach((json_t *)values, name, v)
	{
		if (!proto_metric_name_ok(name))
			return herd_errprintf(err,
					      "key \"values\": a metric name "
					      "must be letters, digits and "
					      "'_' (at most 64), not a "
					      "digit first");
		if (!json_is_number(v))
			return herd_errprintf(err,
					      "key \"values.%s\": expected a "
					      "number, got %s",
					      name, proto_json_kind(v));
	}
	return 0;
}

static const struct proto_body proto_m_train_body = {
    .format = "{s:I, s:I, s:o}",
    .keys = {"rank", "records", "values"},
    .ranges = {{"rank", 0, INT_MAX}, {"records", 0, PROTO_INT_ANY}},
    .more = proto_m_train_more,
};

static int proto_metrics_more(const json_t *body, struct herd_err *err)
{
	if (json_number_value(json_object_get(body, "load1")) < 0)
		return herd_errprintf(err, "key \"load1\": below 0");
	if (proto_check_array(body, "ranks", &proto_m_rank_body,
			      PROTO_LAUNCH_RANKS_MAX, err) < 0 ||
	    proto_check_array(body, "net", &proto_m_net_body,
			      PROTO_METRICS_DEVS_MAX, err) < 0 ||
	    proto_check_array(body, "rdma", &proto_m_rdma_body,
			      PROTO_METRICS_DEVS_MAX, err) < 0 ||
	    proto_check_array(body, "gpus", &proto_m_gpu_body,
			      PROTO_METRICS_DEVS_MAX, err) < 0 ||
	    proto_check_array(body, "train", &proto_m_train_body,
			      PROTO_LAUNCH_RANKS_MAX, err) < 0)
		return -1;
	return 0;
}

/* CTL_REQ: the operations a control socket serves. */
static int proto_ctl_req_more(const json_t *body, struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));

	if (strcmp(op, "attach") && strcmp(op, "stop") && strcmp(op, "info"))
		return herd_errprintf(err,
				      "key \"op\": \"%s\" is not attach, "
				      "stop or info",
				      op);
	return 0;
}

/* CTL_MSG: which keys go with which kind. */
static int proto_ctl_msg_more(const json_t *body, struct herd_err *err)
{
	static const char *const info_keys[] = {"id",	   "name",  "state",
						"attempt", "nodes", "pid"};
	const char *kind = json_string_value(json_object_get(body, "kind"));
	bool info = !strcmp(kind, "info"), end = !strcmp(kind, "end");
	size_t i;

	if (!info && !end && strcmp(kind, "out") && strcmp(kind, "err") &&
	    strcmp(kind, "status"))
		return herd_errprintf(err,
				      "key \"kind\": \"%s\" is not out, err, "
				      "status, info or end",
				      kind);
	if (end != (json_object_get(body, "status") != NULL))
		return herd_errprintf(err, "key \"status\" goes with kind "
					   "end, and only with it");
	if (json_object_get(body, "missed") && strcmp(kind, "err"))
		return herd_errprintf(err,
				      "key \"missed\" goes with kind err only");
	for (i = 0; i < sizeof(info_keys) / sizeof(info_keys[0]); i++)
		if (info != (json_object_get(body, info_keys[i]) != NULL))
			return herd_errprintf(err,
					      "key \"%s\" goes with kind "
					      "info, and only with it",
					      info_keys[i]);
	if (json_object_get(body, "message") && !info)
		return herd_errprintf(err,
				      "key \"message\" goes with kind info "
				      "only");
	return 0;
}

static int proto_ctl_msg_data(const json_t *body, size_t data_len,
			      struct herd_err *err)
{
	const char *kind = json_string_value(json_object_get(body, "kind"));

	if (data_len && (!strcmp(kind, "info") || !strcmp(kind, "end")))
		return herd_errprintf(err,
				      "%zu data bytes, kind %s carries none",
				      data_len, kind);
	return 0;
}

/* --- PMIX_LOG (issue 16) ------------------------------------------------- */

static int proto_pmix_log_entry_more(const json_t *body, struct herd_err *err)
{
	size_t k = strlen(json_string_value(json_object_get(body, "key")));
	size_t v = strlen(json_string_value(json_object_get(body, "value")));

	if (k < 1 || k > 511)
		return herd_errprintf(err, "key \"key\": %zu bytes, 1..511",
				      k);
	if (v > PROTO_PMIX_LOG_VALUE_MAX)
		return herd_errprintf(err, "key \"value\": %zu bytes, at most "
					   "%d",
				      v, PROTO_PMIX_LOG_VALUE_MAX);
	return 0;
}

static const struct proto_body proto_pmix_log_entry_body = {
    .format = "{s:s, s:s}",
    .keys = {"key", "value"},
    .more = proto_pmix_log_entry_more,
};

static int proto_pmix_log_more(const json_t *body, struct herd_err *err)
{
	if (json_array_size(json_object_get(body, "entries")) == 0)
		return herd_errprintf(err, "key \"entries\": none");
	return proto_check_array(body, "entries", &proto_pmix_log_entry_body,
				 PROTO_PMIX_LOG_ENTRIES_MAX, err);
}

/* --- CHECK and NETPROBE (issue 14, the health gate) --------------------- */

static int proto_check_entry_more(const json_t *body, struct herd_err *err)
{
	const char *st = json_string_value(json_object_get(body, "status"));
	const json_t *rate = json_object_get(body, "rate");

	if (strcmp(st, "ok") && strcmp(st, "fail") && strcmp(st, "skipped"))
		return herd_errprintf(err,
				      "key \"status\": \"%s\" is not ok, fail "
				      "or skipped",
				      st);
	if (!*json_string_value(json_object_get(body, "name")))
		return herd_errprintf(err, "key \"name\": empty");
	if (rate && json_number_value(rate) < 0)
		return herd_errprintf(err, "key \"rate\": below 0");
	return 0;
}

static const struct proto_body proto_check_entry_body = {
    .format = "{s:s, s:s, s?s, s?s, s?s, s?F}",
    .keys = {"name", "status", "reason", "value", "port", "rate"},
    .more = proto_check_entry_more,
};

static int proto_check_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "checks", &proto_check_entry_body,
				 PROTO_CHECKS_MAX, err);
}

static int proto_netprobe_agent_more(const json_t *body, struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));
	bool port = json_object_get(body, "port") != NULL;

	if (strcmp(op, "listen") && strcmp(op, "connect"))
		return herd_errprintf(err,
				      "key \"op\": \"%s\" is not listen or "
				      "connect",
				      op);
	if (port != !strcmp(op, "connect"))
		return herd_errprintf(err, "key \"port\" goes with op "
					   "connect, and only with it");
	if (json_object_get(body, "peer") && strcmp(op, "listen"))
		return herd_errprintf(err, "key \"peer\" goes with op "
					   "listen only");
	return 0;
}

static int proto_netprobe_herd_more(const json_t *body, struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));
	bool port = json_object_get(body, "port") != NULL;
	bool rx = json_object_get(body, "rx_bytes") != NULL;
	bool ms = json_object_get(body, "rx_us") != NULL;
	bool error = json_object_get(body, "error") != NULL;

	if (!strcmp(op, "listening")) {
		if (!port || rx || ms || error)
			return herd_errprintf(err, "op listening carries "
						   "\"port\" only");
	} else if (!strcmp(op, "result")) {
		if (port || rx != ms || rx == error)
			return herd_errprintf(err,
					      "op result carries \"rx_bytes\" "
					      "and \"rx_us\", or \"error\"");
	} else {
		return herd_errprintf(err,
				      "key \"op\": \"%s\" is not listening or "
				      "result",
				      op);
	}
	return 0;
}

/* --- SPAWN, SPAWN_LAUNCH, CONNECT (issue 16) ------------------------------ */

/* An array of at most max strings (required unless optional). */
static int proto_check_strings(const json_t *body, const char *key,
			       size_t max, bool optional,
			       struct herd_err *err)
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

static int proto_app_more(const json_t *body, struct herd_err *err)
{
	if (!*json_string_value(json_object_get(body, "cmd")))
		return herd_errprintf(err, "key \"cmd\": empty");
	if (proto_check_strings(body, "argv", PROTO_SPAWN_ARGS_MAX, false,
				err) < 0 ||
	    proto_check_strings(body, "env", PROTO_SPAWN_ARGS_MAX, false,
				err) < 0 ||
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

static int proto_spawn_apps(const json_t *body, struct herd_err *err)
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

static int proto_spawn_launch_more(const json_t *body, struct herd_err *err)
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

static int proto_connect_more(const json_t *body, struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));

	if (strcmp(op, "connect") && strcmp(op, "disconnect") &&
	    strcmp(op, "fence"))
		return herd_errprintf(err, "key \"op\": \"%s\" is not "
				      "connect, disconnect or fence", op);
	if (json_array_size(json_object_get(body, "procs")) == 0)
		return herd_errprintf(err, "key \"procs\": no process");
	return proto_check_array(body, "procs", &proto_connect_proc_body,
				 PROTO_CONNECT_PROCS_MAX, err);
}

/* CONNECT: data only with op "fence" (its contribution). */
static int proto_connect_data(const json_t *body, size_t data_len,
			      struct herd_err *err)
{
	const char *op = json_string_value(json_object_get(body, "op"));

	if (data_len && op && strcmp(op, "fence"))
		return herd_errprintf(err, "%zu bytes of data with op \"%s\" "
				      "(only a fence carries data)",
				      data_len, op);
	return 0;
}

/* The table.  proto.h's comment table says the same in words: change
 * both together (tests/unit/test_proto.c holds a valid body of every
 * row). */
/* --- publish / lookup and events (issue 16) ----------------------------- */

static int proto_pubsub_range_ok(const char *r)
{
	static const char *const ok[] = {"local",  "namespace", "session",
					 "global", "custom",    "proc_local"};

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
		return herd_errprintf(err, "key \"range\": \"%s\" is not a "
				      "PMIx range", r);
	if (n < min_keys)
		return herd_errprintf(err, "key \"keys\": at least %zu "
				      "expected", min_keys);
	return proto_check_array(body, "keys", &proto_pubsub_key_body,
				 PROTO_PUBSUB_KEYS_MAX, err);
}

static int proto_publish_more(const json_t *body, struct herd_err *err)
{
	const char *p = json_string_value(json_object_get(body, "persist"));
	const json_t *keys = json_object_get(body, "keys");

	if (strcmp(p, "indef") && strcmp(p, "first_read") &&
	    strcmp(p, "proc") && strcmp(p, "app") && strcmp(p, "session"))
		return herd_errprintf(err, "key \"persist\": \"%s\" is not a "
				      "PMIx persistence", p);
	if (proto_pubsub_common(body, 1, err) < 0)
		return -1;
	for (size_t i = 0; i < json_array_size(keys); i++)
		if (!json_is_integer(json_object_get(json_array_get(keys, i),
						     "size")))
			return herd_errprintf(err, "keys[%zu]: no size", i);
	return 0;
}

static int proto_lookup_more(const json_t *body, struct herd_err *err)
{
	return proto_pubsub_common(body, 1, err);
}

static int proto_unpublish_more(const json_t *body, struct herd_err *err)
{
	return proto_pubsub_common(body, 0, err);
}

static int proto_pubsub_done_more(const json_t *body, struct herd_err *err)
{
	const char *s = json_string_value(json_object_get(body, "status"));
	static const char *const ok[] = {"ok",	    "partial", "not_found",
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

static int proto_event_more(const json_t *body, struct herd_err *err)
{
	const char *ns = json_string_value(json_object_get(body, "nspace"));

	if (strlen(ns) > PROTO_PUBSUB_NSPACE_MAX)
		return herd_errprintf(err, "key \"nspace\": at most %d bytes",
				      PROTO_PUBSUB_NSPACE_MAX);
	if (!proto_pubsub_range_ok(
		    json_string_value(json_object_get(body, "range"))))
		return herd_errprintf(err, "key \"range\": not a PMIx range");
	if (json_object_get(body, "procs"))
		return proto_check_ints(body, "procs", PROTO_LAUNCH_RANKS_MAX, 0,
					INT_MAX, err);
	return 0;
}

static int proto_proc_failed_more(const json_t *body, struct herd_err *err)
{
	const char *k = json_string_value(json_object_get(body, "kind"));

	if (strcmp(k, "exit") && strcmp(k, "signal") && strcmp(k, "node"))
		return herd_errprintf(err, "key \"kind\": \"%s\" is not exit, "
				      "signal or node", k);
	if (json_array_size(json_object_get(body, "ranks")) < 1)
		return herd_errprintf(err, "key \"ranks\": empty");
	return proto_check_ints(body, "ranks", PROTO_LAUNCH_RANKS_MAX, 0,
				INT_MAX, err);
}

/* SIGNAL's ranks: PMIx_Job_control's targets, when given. */
static int proto_signal_more(const json_t *body, struct herd_err *err)
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
static int proto_rank_ctl_more(const json_t *body, struct herd_err *err)
{
	const json_t *msg = json_object_get(body, "msg");

	if (!json_is_string(json_object_get(msg, "op")))
		return herd_errprintf(err, "key \"msg.op\": expected a "
				      "string");
	return 0;
}

static const struct proto_rule proto_rules[] = {
    [PROTO_HELLO] =
	{
	    .name = "HELLO",
	    .to_herd =
		{
		    .format = "{s:s, s:s, s:o, s:I, s:I, s?o, s?s}",
		    .keys = {"version", "hostname", "addrs", "cores", "pid",
			     "topo", "topo_error"},
		    .ranges = {{"cores", 1, INT_MAX}, {"pid", 1, INT_MAX}},
		    .more = proto_hello_more,
		},
	},
    [PROTO_LAUNCH] =
	{
	    .name = "LAUNCH",
	    .to_agent =
		{
		    .format = "{s:I, s:s, s:I, s:o, s:o, s?s, s?o, s?I, s?I, "
			      "s?o}",
		    .keys = {"attempt", "command", "grace_ms", "env", "ranks",
			     "workdir", "pmix", "progress_timeout_ms",
			     "metrics_interval_ms", "patterns"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"grace_ms", 0, PROTO_INT_ANY},
			       {"progress_timeout_ms", 1, PROTO_INT_ANY},
			       {"metrics_interval_ms", 100, PROTO_INT_ANY}},
		    .more = proto_launch_more,
		},
	},
    [PROTO_OUTPUT] =
	{
	    .name = "OUTPUT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I}",
		    .keys = {"rank", "fd", "attempt"},
		    .ranges = {{"rank", 0, INT_MAX},
			       {"fd", 1, 2},
			       {"attempt", 0, INT_MAX}},
		},
	    .data_min = 1,
	    .data_max = PROTO_OUTPUT_CHUNK,
	},
    [PROTO_EXIT] =
	{
	    .name = "EXIT",
	    .to_herd =
		{
		    .format = "{s:I, s:o, s:o, s:I, s?s, s?I, s?b}",
		    .keys = {"rank", "code", "signal", "attempt",
			     "error", "errno", "pmix_connected"},
		    .ranges = {{"rank", 0, INT_MAX},
			       {"attempt", 0, INT_MAX},
			       {"errno", 0, INT_MAX}},
		    .more = proto_exit_more,
		},
	},
    [PROTO_SIGNAL] =
	{
	    .name = "SIGNAL",
	    .to_agent =
		{
		    .format = "{s:I, s?o}",
		    .keys = {"signal", "ranks"},
		    .ranges = {{"signal", 1, NSIG - 1}},
		    .more = proto_signal_more,
		},
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"attempt", "signal", "ranks"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"signal", 1, NSIG - 1}},
		    .more = proto_signal_more,
		},
	},
    [PROTO_STOP] =
	{
	    .name = "STOP",
	    .to_agent =
		{
		    .format = "{s:I, s:b, s:I}",
		    .keys = {"grace_ms", "exit", "signal"},
		    .ranges = {{"grace_ms", 0, PROTO_INT_ANY},
			       {"signal", 1, NSIG - 1}},
		},
	},
    [PROTO_HEARTBEAT] =
	{
	    .name = "HEARTBEAT",
	    .to_agent =
		{
		    .format = "{s:I, s:I}",
		    .keys = {"interval_ms", "timeout_ms"},
		    .ranges = {{"interval_ms", 1, PROTO_INT_ANY},
			       {"timeout_ms", 1, PROTO_INT_ANY}},
		    .more = proto_hb_herd_more,
		},
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"seq", "attempt", "hung"},
		    .ranges = {{"seq", 1, PROTO_INT_ANY},
			       {"attempt", 0, INT_MAX}},
		    .more = proto_hb_agent_more,
		},
	},
    [PROTO_ERROR] =
	{
	    .name = "ERROR",
	    .to_herd =
		{
		    .format = "{s:s, s?s}",
		    .keys = {"message", "stage"},
		},
	},
    [PROTO_STOPPED] =
	{
	    .name = "STOPPED",
	    .to_herd =
		{
		    .format = "{s:I}",
		    .keys = {"attempt"},
		    .ranges = {{"attempt", 0, INT_MAX}},
		},
	},
    [PROTO_FENCE] =
	{
	    .name = "FENCE",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s?s, s?I}",
		    .keys = {"attempt", "seq", "procs", "count"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"count", 1, INT_MAX}},
		    .more = proto_fence_more,
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    [PROTO_FENCE_DONE] =
	{
	    .name = "FENCE_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I}",
		    .keys = {"attempt", "seq", "status"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"status", INT_MIN, INT_MAX}},
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    [PROTO_DMODEX] =
	{
	    .name = "DMODEX",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "ns"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"ns", 0, INT_MAX}},
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "from", "ns"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"from", 0, INT_MAX},
			       {"ns", 0, INT_MAX}},
		},
	},
    [PROTO_DMODEX_DATA] =
	{
	    .name = "DMODEX_DATA",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "from", "status", "ns"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"from", 0, INT_MAX},
			       {"status", INT_MIN, 0},
			       {"ns", 0, INT_MAX}},
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s?I}",
		    .keys = {"attempt", "seq", "rank", "status", "ns"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"status", INT_MIN, PROTO_DMODEX_UNREACH},
			       {"ns", 0, INT_MAX}},
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    [PROTO_ABORT] =
	{
	    .name = "ABORT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s}",
		    .keys = {"attempt", "rank", "status", "message"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"status", INT_MIN, INT_MAX}},
		},
	},
    [PROTO_METRICS] =
	{
	    .name = "METRICS",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:F, s:I, s:o, s:o, s:o, s:o, s?s, "
			      "s:o}",
		    .keys = {"t", "attempt", "load1", "cpus", "ranks", "net",
			     "rdma", "gpus", "gpu_error", "train"},
		    .ranges = {{"t", 0, PROTO_INT_ANY},
			       {"attempt", 0, INT_MAX},
			       {"cpus", 1, INT_MAX}},
		    .more = proto_metrics_more,
		},
	},
    [PROTO_CTL_REQ] =
	{
	    .name = "CTL_REQ",
	    .to_control =
		{
		    .format = "{s:s}",
		    .keys = {"op"},
		    .more = proto_ctl_req_more,
		},
	},
    [PROTO_CTL_MSG] =
	{
	    .name = "CTL_MSG",
	    .to_client =
		{
		    .format = "{s:s, s?I, s?s, s?s, s?s, s?I, s?I, s?I, s?s, "
			      "s?I}",
		    .keys = {"kind", "missed", "id", "name", "state", "attempt",
			     "nodes", "pid", "message", "status"},
		    .ranges = {{"missed", 0, PROTO_INT_ANY},
			       {"attempt", 0, INT_MAX},
			       {"nodes", 0, INT_MAX},
			       {"pid", 1, INT_MAX},
			       {"status", 0, 255}},
		    .more = proto_ctl_msg_more,
		},
	    .data_max = PROTO_CTL_DATA_MAX,
	    .data_more = proto_ctl_msg_data,
	},
    [PROTO_STACKS] =
	{
	    .name = "STACKS",
	    .to_agent =
		{
		    .format = "{s:I}",
		    .keys = {"attempt"},
		    .ranges = {{"attempt", 1, INT_MAX}},
		},
	    .to_herd =
		{
		    .format = "{s:I, s:o}",
		    .keys = {"attempt", "ranks"},
		    .ranges = {{"attempt", 0, INT_MAX}},
		    .more = proto_stacks_agent_more,
		},
	},
    [PROTO_CHECK] =
	{
	    .name = "CHECK",
	    .to_agent =
		{
		    .format = "{s?s, s?s, s:I, s:I, s?s, s?s, s:I, s:I}",
		    .keys = {"workdir", "checkpoint_dir", "min_free", "gpus",
			     "master_addr", "check_command", "check_timeout_ms",
			     "t_ms"},
		    .ranges = {{"min_free", 0, PROTO_INT_ANY},
			       {"gpus", -1, PROTO_METRICS_DEVS_MAX},
			       {"check_timeout_ms", 1, PROTO_INT_ANY},
			       {"t_ms", 0, PROTO_INT_ANY}},
		},
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"t_ms", "held_ms", "checks"},
		    .ranges = {{"t_ms", 0, PROTO_INT_ANY},
			       {"held_ms", 0, PROTO_INT_ANY}},
		    .more = proto_check_more,
		},
	},
    [PROTO_NETPROBE] =
	{
	    .name = "NETPROBE",
	    .to_agent =
		{
		    .format = "{s:I, s:s, s:s, s?I, s:I, s:I, s?s}",
		    .keys = {"round", "op", "addr", "port", "bytes",
			     "timeout_ms", "peer"},
		    .ranges = {{"round", 1, INT_MAX},
			       {"port", 1, 65535},
			       {"bytes", 1, PROTO_NETPROBE_BYTES_MAX},
			       {"timeout_ms", 1, PROTO_NETPROBE_TIMEOUT_MAX}},
		    .more = proto_netprobe_agent_more,
		},
	    .to_herd =
		{
		    .format = "{s:I, s:s, s?I, s?I, s?I, s?s}",
		    .keys = {"round", "op", "port", "rx_bytes", "rx_us",
			     "error"},
		    .ranges = {{"round", 1, INT_MAX},
			       {"port", 1, 65535},
			       {"rx_bytes", 0, PROTO_INT_ANY},
			       {"rx_us", 0, PROTO_INT_ANY}},
		    .more = proto_netprobe_herd_more,
		},
	},
    [PROTO_SPAWN] =
	{
	    .name = "SPAWN",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:o}",
		    .keys = {"attempt", "seq", "ns", "rank", "apps"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"ns", 0, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_spawn_apps,
		},
	},
    [PROTO_SPAWN_LAUNCH] =
	{
	    .name = "SPAWN_LAUNCH",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:I, "
			      "s:s, s:o, s:o}",
		    .keys = {"attempt", "spawn", "parent_ns", "parent_rank",
			     "size", "nodes", "ppn", "num_nodes", "node_id",
			     "hostname", "apps", "local"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"spawn", 1, INT_MAX},
			       {"parent_ns", 0, INT_MAX},
			       {"parent_rank", 0, INT_MAX},
			       {"size", 1, PROTO_SPAWN_PROCS_MAX},
			       {"num_nodes", 1, INT_MAX},
			       {"node_id", 0, INT_MAX}},
		    .more = proto_spawn_launch_more,
		},
	},
    [PROTO_SPAWN_UP] =
	{
	    .name = "SPAWN_UP",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s?s}",
		    .keys = {"attempt", "spawn", "error"},
		    .ranges = {{"attempt", 0, INT_MAX}, {"spawn", 1, INT_MAX}},
		},
	},
    [PROTO_SPAWN_DONE] =
	{
	    .name = "SPAWN_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s?I, s?s}",
		    .keys = {"attempt", "seq", "status", "spawn", "error"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"status", INT_MIN, INT_MAX},
			       {"spawn", 1, INT_MAX}},
		},
	},
    [PROTO_CONNECT] =
	{
	    .name = "CONNECT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:s, s:o}",
		    .keys = {"attempt", "seq", "op", "procs"},
		    .ranges = {{"attempt", 0, INT_MAX}, {"seq", 1, INT_MAX}},
		    .more = proto_connect_more,
		},
	    .data_max = PROTO_FRAME_MAX,
	    .data_more = proto_connect_data,
	},
    [PROTO_CONNECT_DONE] =
	{
	    .name = "CONNECT_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I}",
		    .keys = {"attempt", "seq", "status"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"seq", 1, INT_MAX},
			       {"status", INT_MIN, INT_MAX}},
		},
	    .data_max = PROTO_FRAME_MAX,
	},
    /* warm interpreters */
    [PROTO_STARTED] =
	{
	    .name = "STARTED",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:b}",
		    .keys = {"attempt", "rank", "warm"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"rank", 0, INT_MAX}},
		},
	},
    [PROTO_PUBLISH] =
	{
	    .name = "PUBLISH",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:s, s:o}",
		    .keys = {"attempt", "id", "rank", "nspace", "range",
			     "persist", "keys"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"id", 1, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_publish_more,
		},
	    .data_max = PROTO_PUBSUB_DATA_MAX,
	},
    [PROTO_LOOKUP] =
	{
	    .name = "LOOKUP",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:o, s:I, s:I}",
		    .keys = {"attempt", "id", "rank", "nspace", "range",
			     "keys", "wait", "timeout_ms"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"id", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"wait", -1, PROTO_PUBSUB_KEYS_MAX},
			       {"timeout_ms", 0, PROTO_INT_ANY}},
		    .more = proto_lookup_more,
		},
	},
    [PROTO_UNPUBLISH] =
	{
	    .name = "UNPUBLISH",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:o}",
		    .keys = {"attempt", "id", "rank", "nspace", "range",
			     "keys"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"id", 1, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_unpublish_more,
		},
	},
    [PROTO_PUBSUB_DONE] =
	{
	    .name = "PUBSUB_DONE",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:s, s?o}",
		    .keys = {"attempt", "id", "status", "found"},
		    .ranges = {{"attempt", 1, INT_MAX}, {"id", 1, INT_MAX}},
		    .more = proto_pubsub_done_more,
		},
	    .data_max = PROTO_PUBSUB_KEYS_MAX * PROTO_PUBSUB_VALUE_MAX,
	},
    [PROTO_EVENT] =
	{
	    .name = "EVENT",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s, s:o}",
		    .keys = {"attempt", "code", "rank", "nspace", "range",
			     "procs"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"code", INT_MIN, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_event_more,
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:s, s:s}",
		    .keys = {"attempt", "code", "rank", "nspace", "range"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"code", INT_MIN, INT_MAX},
			       {"rank", 0, INT_MAX}},
		    .more = proto_event_more,
		},
	    .data_max = PROTO_EVENT_DATA_MAX,
	},
    [PROTO_PROC_FAILED] =
	{
	    .name = "PROC_FAILED",
	    .to_agent =
		{
		    .format = "{s:I, s:s, s:I, s:s, s:o}",
		    .keys = {"attempt", "kind", "status", "host", "ranks"},
		    .ranges = {{"attempt", 1, INT_MAX}, {"status", 0, 255}},
		    .more = proto_proc_failed_more,
		},
	},
    [PROTO_PMIX_LOG] =
	{
	    .name = "PMIX_LOG",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:o}",
		    .keys = {"attempt", "rank", "entries"},
		    .ranges = {{"attempt", 0, INT_MAX}, {"rank", 0, INT_MAX}},
		    .more = proto_pmix_log_more,
		},
	},
    /* survivors keep training: a rank's control channel */
    [PROTO_RANK_CTL] =
	{
	    .name = "RANK_CTL",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:o}",
		    .keys = {"attempt", "rank", "conn", "msg"},
		    .ranges = {{"attempt", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"conn", 1, INT_MAX}},
		    .more = proto_rank_ctl_more,
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:o}",
		    .keys = {"attempt", "rank", "to", "msg"},
		    .ranges = {{"attempt", 1, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"to", 0, INT_MAX}},
		    .more = proto_rank_ctl_more,
		},
	},
    /* checkpoints in memory: the tier's inventory, copies between nodes
     * (relayed by herd), persisting a step to checkpoint.dir */
    [PROTO_CKPT_CONF] =
	{
	    .name = "CKPT_CONF",
	    .to_agent =
		{
		    .format = "{s:s, s:s, s:I, s:b}",
		    .keys = {"dir", "job", "max", "keep"},
		    .ranges = {{"max", 0, PROTO_INT_ANY}},
		    .more = proto_ckpt_mem_more,
		},
	},
    [PROTO_CKPT_INV] =
	{
	    .name = "CKPT_INV",
	    .to_herd =
		{
		    .format = "{s:s, s:o, s?s, s?b}",
		    .keys = {"dir", "steps", "error", "full"},
		    .more = proto_ckpt_inv_more,
		},
	},
    [PROTO_CKPT_PUSH] =
	{
	    .name = "CKPT_PUSH",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:b, s:I}",
		    .keys = {"id", "rank", "step", "peer", "node"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY},
			       {"node", 0, INT_MAX}},
		},
	},
    [PROTO_CKPT_DATA] =
	{
	    .name = "CKPT_DATA",
	    .to_herd =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:b}",
		    .keys = {"id", "to", "rank", "step", "file", "offset",
			     "total", "last"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"to", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY},
			       {"offset", 0, PROTO_INT_ANY},
			       {"total", 0, PROTO_INT_ANY}},
		    .more = proto_ckpt_data_more,
		},
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:I, s:s, s:I, s:I, s:b}",
		    .keys = {"id", "from", "rank", "step", "file", "offset",
			     "total", "last"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"from", 0, INT_MAX},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY},
			       {"offset", 0, PROTO_INT_ANY},
			       {"total", 0, PROTO_INT_ANY}},
		    .more = proto_ckpt_data_more,
		},
	    .data_max = PROTO_CKPT_CHUNK,
	},
    [PROTO_CKPT_ACK] =
	{
	    .name = "CKPT_ACK",
	    .to_herd =
		{
		    .format = "{s:I, s:b, s?I, s?s, s?s}",
		    .keys = {"id", "ok", "bytes", "error", "path"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"bytes", 0, PROTO_INT_ANY}},
		},
	},
    [PROTO_CKPT_PERSIST] =
	{
	    .name = "CKPT_PERSIST",
	    .to_agent =
		{
		    .format = "{s:I, s:I, s:I, s:b, s:s}",
		    .keys = {"id", "rank", "step", "peer", "dir"},
		    .ranges = {{"id", 1, PROTO_INT_ANY},
			       {"rank", 0, INT_MAX},
			       {"step", 0, PROTO_INT_ANY}},
		},
	},
};

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
static int proto_body_check(const struct proto_body *b, const json_t *body,
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

/* A compact dump escapes a NUL inside a string as backslash-u0000, which
 * the reader refuses (no JSON_ALLOW_NUL).  Backslashes appear only inside
 * strings and start two-character escapes, so scanning escape by escape is
 * exact.  Returns 1 when the dump holds an escaped NUL. */
static int proto_json_has_nul(const char *json, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (json[i] != '\\')
			continue;
		if (i + 6 <= len && json[i + 1] == 'u' &&
		    memcmp(json + i + 2, "0000", 4) == 0)
			return 1;
		i++; /* skip the escaped character */
	}
	return 0;
}

char *proto_encode(enum proto_type type, const json_t *body, const void *data,
		   size_t data_len, size_t *out_len, struct herd_err *err)
{
	const size_t flags = JSON_COMPACT;
	unsigned char *frame = NULL;
	char *ret = NULL;
	size_t json_len, len;

	if ((int)type < PROTO_HELLO || (int)type > PROTO_TYPE_MAX_) {
		herd_errprintf(err, "cannot encode unknown frame type %d",
			       (int)type);
		goto out;
	}
	if (body && !json_is_object(body)) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its body is %s, "
			       "expected an object",
			       proto_type_name(type), proto_json_kind(body));
		goto out;
	}
	if (!data && data_len > 0) {
		herd_errprintf(err,
			       "cannot encode a %s frame: %zu data bytes "
			       "given without a buffer",
			       proto_type_name(type), data_len);
		goto out;
	}
	json_len = body ? json_dumpb(body, NULL, 0, flags) : 2;
	if (json_len == 0) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its body is not "
			       "encodable JSON (invalid UTF-8 or a "
			       "reference cycle)",
			       proto_type_name(type));
		goto out;
	}
	if (json_len > PROTO_JSON_MAX) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its JSON header "
			       "of %zu bytes exceeds the limit of %u",
			       proto_type_name(type), json_len, PROTO_JSON_MAX);
		goto out;
	}
	if (data_len > PROTO_FRAME_MAX - PROTO_FIXED_SIZE - json_len) {
		herd_errprintf(err,
			       "cannot encode a %s frame: %zu data bytes "
			       "and %zu JSON bytes exceed the frame limit "
			       "of %u",
			       proto_type_name(type), data_len, json_len,
			       PROTO_FRAME_MAX);
		goto out;
	}
	len = PROTO_FIXED_SIZE + json_len + data_len;
	frame = malloc(4 + len);
	if (!frame) {
		herd_errprintf(err, "cannot encode a %s frame of %zu bytes: %s",
			       proto_type_name(type), len, strerror(errno));
		goto out;
	}
	if (!body)
		memcpy(frame + PROTO_HEADER_SIZE, "{}", 2);
	else if (json_dumpb(body, (char *)frame + PROTO_HEADER_SIZE, json_len,
			    flags) != json_len) {
		herd_errprintf(err,
			       "cannot encode a %s frame: its body changed "
			       "size while being encoded",
			       proto_type_name(type));
		goto out;
	}
	if (proto_json_has_nul((char *)frame + PROTO_HEADER_SIZE, json_len)) {
		herd_errprintf(err,
			       "cannot encode a %s frame: a string in its "
			       "body holds a NUL character",
			       proto_type_name(type));
		goto out;
	}
	proto_put_be32(frame, (uint32_t)len);
	frame[4] = PROTO_VERSION;
	frame[5] = (unsigned char)type;
	frame[6] = 0;
	frame[7] = 0;
	proto_put_be32(frame + 8, (uint32_t)json_len);
	if (data_len > 0)
		memcpy(frame + PROTO_HEADER_SIZE + json_len, data, data_len);
	*out_len = 4 + len;
	ret = (char *)frame;
	frame = NULL;
out:
	free(frame);
	return ret;
}

void proto_frame_free(struct proto_frame *frame)
{
	if (!frame)
		return;
	json_decref(frame->body);
	free(frame->data);
	free(frame);
}

struct proto_reader *proto_reader_new(size_t max_frame)
{
	struct proto_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (max_frame > PROTO_FRAME_MAX)
		max_frame = PROTO_FRAME_MAX;
	if (max_frame < PROTO_FIXED_SIZE)
		max_frame = PROTO_FIXED_SIZE;
	r->max_frame = max_frame;
	r->limit = max_frame + PROTO_HEADER_SIZE;
	return r;
}

void proto_reader_free(struct proto_reader *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

/* Marks the stream failed; later calls repeat the same words. */
static int proto_reader_fail(struct proto_reader *r, struct herd_err *err,
			     const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int proto_reader_fail(struct proto_reader *r, struct herd_err *err,
			     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	herd_verrprintf(&r->failure, fmt, ap);
	va_end(ap);
	r->failed = 1;
	return herd_errprintf(err, "%s", r->failure.text);
}

/* Checks the fixed header of the pending frame as far as it has arrived,
 * so that a bad length is refused before its body is buffered.  Returns 0
 * (valid so far) or -1 with err. */
static int proto_reader_check_header(struct proto_reader *r,
				     struct herd_err *err)
{
	size_t pending = r->end - r->off;
	const unsigned char *p;
	uint32_t len, json_len;

	if (pending < 4)
		return 0;
	p = r->buf + r->off;
	len = proto_get_be32(p);
	if (len < PROTO_FIXED_SIZE)
		return proto_reader_fail(r, err,
					 "frame of %u bytes is shorter "
					 "than its %d-byte header",
					 len, PROTO_FIXED_SIZE);
	if (len > r->max_frame)
		return proto_reader_fail(r, err,
					 "frame of %u bytes exceeds "
					 "the limit of %zu",
					 len, r->max_frame);
	if (pending >= 5 && p[4] != PROTO_VERSION)
		return proto_reader_fail(r, err,
					 "frame of protocol version "
					 "%u, expected %d",
					 (unsigned)p[4], PROTO_VERSION);
	if (pending >= 6 && (p[5] < PROTO_HELLO || p[5] > PROTO_TYPE_MAX_))
		return proto_reader_fail(r, err, "frame of unknown type %u",
					 (unsigned)p[5]);
	if (pending >= 8 && (p[6] != 0 || p[7] != 0))
		return proto_reader_fail(r, err,
					 "%s frame has reserved bytes "
					 "0x%02x%02x, expected zero",
					 proto_type_name(p[5]), (unsigned)p[6],
					 (unsigned)p[7]);
	if (pending < PROTO_HEADER_SIZE)
		return 0;
	json_len = proto_get_be32(p + 8);
	if (json_len > len - PROTO_FIXED_SIZE)
		return proto_reader_fail(r, err,
					 "%s frame's JSON header of %u "
					 "bytes exceeds the %u bytes "
					 "left in the frame",
					 proto_type_name(p[5]), json_len,
					 len - PROTO_FIXED_SIZE);
	if (json_len > PROTO_JSON_MAX)
		return proto_reader_fail(r, err,
					 "%s frame's JSON header of %u "
					 "bytes exceeds the limit of "
					 "%u",
					 proto_type_name(p[5]), json_len,
					 PROTO_JSON_MAX);
	return 0;
}

/* Makes room for n more pending bytes: moves pending bytes to the front
 * when the tail is short, then grows geometrically up to r->limit.  The
 * caller has checked that pending + n <= r->limit. */
static int proto_reader_reserve(struct proto_reader *r, size_t n,
				struct herd_err *err)
{
	size_t pending = r->end - r->off;
	size_t need = pending + n;
	size_t cap;
	unsigned char *buf;

	if (r->cap - r->end >= n)
		return 0;
	if (r->off > 0) {
		memmove(r->buf, r->buf + r->off, pending);
		r->off = 0;
		r->end = pending;
		if (r->cap - r->end >= n)
			return 0;
	}
	cap = r->cap < PROTO_READER_MIN_CAP ? PROTO_READER_MIN_CAP : r->cap;
	while (cap < need && cap <= r->limit / 2)
		cap *= 2;
	if (cap < need || cap > r->limit)
		cap = r->limit;
	buf = realloc(r->buf, cap);
	if (!buf)
		return herd_errprintf(err,
				      "cannot buffer a frame of %zu bytes: "
				      "%s",
				      need, strerror(errno));
	r->buf = buf;
	r->cap = cap;
	return 0;
}

int proto_reader_feed(struct proto_reader *r, const void *buf, size_t len,
		      struct herd_err *err)
{
	size_t pending;

	if (r->failed)
		return herd_errprintf(err, "%s", r->failure.text);
	if (len == 0)
		return 0;
	pending = r->end - r->off;
	if (len > r->limit - pending) {
		/* Name the frame when its announced length is the cause. */
		if (proto_reader_check_header(r, err) < 0)
			return -1;
		return proto_reader_fail(r, err,
					 "peer sent %zu bytes beyond "
					 "%zu pending; a reader holds "
					 "at most %zu (one frame and "
					 "a header)",
					 len, pending, r->limit);
	}
	if (proto_reader_reserve(r, len, err) < 0)
		return -1;
	memcpy(r->buf + r->end, buf, len);
	r->end += len;
	return proto_reader_check_header(r, err);
}

/* Drops consumed bytes; frees a large emptied buffer. */
static void proto_reader_consume(struct proto_reader *r, size_t n)
{
	r->off += n;
	if (r->off < r->end)
		return;
	r->off = 0;
	r->end = 0;
	if (r->cap > PROTO_READER_KEEP_CAP) {
		free(r->buf);
		r->buf = NULL;
		r->cap = 0;
	}
}

int proto_reader_next(struct proto_reader *r, struct proto_frame **frame,
		      struct herd_err *err)
{
	struct proto_frame *f = NULL;
	const unsigned char *p;
	json_error_t jerr;
	uint32_t len, json_len;
	size_t data_len;
	int ret = -1;

	*frame = NULL;
	if (r->failed)
		return herd_errprintf(err, "%s", r->failure.text);
	if (proto_reader_check_header(r, err) < 0)
		goto out;
	if (r->end - r->off < PROTO_HEADER_SIZE) {
		ret = 0;
		goto out;
	}
	p = r->buf + r->off;
	len = proto_get_be32(p);
	if (r->end - r->off - 4 < len) {
		ret = 0;
		goto out;
	}
	json_len = proto_get_be32(p + 8);
	data_len = len - PROTO_FIXED_SIZE - json_len;
	f = calloc(1, sizeof(*f));
	if (!f) {
		herd_errprintf(err, "cannot decode a frame: %s",
			       strerror(errno));
		goto out;
	}
	f->type = (enum proto_type)p[5];
	/* No JSON_DECODE_ANY (only objects and arrays), no JSON_ALLOW_NUL
	 * (a NUL in a string would truncate it for C callers), no
	 * JSON_DISABLE_EOF_CHECK (trailing bytes are an error).  jansson
	 * validates UTF-8 and bounds nesting depth. */
	f->body = json_loadb((const char *)p + PROTO_HEADER_SIZE, json_len,
			     JSON_REJECT_DUPLICATES, &jerr);
	if (!f->body) {
		proto_reader_fail(r, err,
				  "%s frame's JSON header is invalid "
				  "at byte %d: %s",
				  proto_type_name(f->type), jerr.position,
				  jerr.text);
		goto out;
	}
	if (!json_is_object(f->body)) {
		proto_reader_fail(r, err,
				  "%s frame's JSON header is %s, "
				  "expected an object",
				  proto_type_name(f->type),
				  proto_json_kind(f->body));
		goto out;
	}
	if (data_len > 0) {
		f->data = malloc(data_len);
		if (!f->data) {
			herd_errprintf(err, "cannot decode %zu data bytes: %s",
				       data_len, strerror(errno));
			goto out;
		}
		memcpy(f->data, p + PROTO_HEADER_SIZE + json_len, data_len);
		f->data_len = data_len;
	}
	proto_reader_consume(r, 4 + (size_t)len);
	*frame = f;
	f = NULL;
	ret = 1;
out:
	proto_frame_free(f);
	return ret;
}
