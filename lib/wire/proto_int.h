/* proto_int.h — the wire contract's private types, shared by the codec
 * (proto.c), the checker (proto_check.c) and the rows (proto_rules*.c).
 * Nothing outside lib/wire includes it but the unit tests, which walk
 * proto_rules[].
 *
 * A row says, for one frame type, the body each direction carries (a
 * body whose format is NULL is never sent that way) and the data bytes
 * after the JSON header.  proto_frame_check() applies it.
 */
#ifndef HERD_PROTO_INT_H
#define HERD_PROTO_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "herd/err.h"
#include "herd/proto.h"

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

/* The contract: row t is frame type t (PROTO_HELLO..PROTO_TYPE_MAX_);
 * row 0 is unused.  Every type has a row with a name. */
extern const struct proto_rule proto_rules[PROTO_TYPE_MAX_ + 1];

/* --- checks several rows share (proto_check.c) ---------------------------
 * Each fills err with the reason (no prefix) and returns -1, or returns 0.
 */

/* "an object", "a string", ...: a value's kind as an error names it. */
const char *proto_json_kind(const json_t *json);
/* body (a nested object named by where, NULL for a frame's body) against
 * b: its format, its ranges, then b->more. */
int proto_body_check(const struct proto_body *b, const json_t *body,
		     const char *where, struct herd_err *err);
/* body[key], when present: an array of at most max objects, each matching
 * elem. */
int proto_check_array(const json_t *body, const char *key,
		      const struct proto_body *elem, size_t max,
		      struct herd_err *err);
/* body[key]: an array of at most max integers in [lo, hi]. */
int proto_check_ints(const json_t *body, const char *key, size_t max,
		     json_int_t lo, json_int_t hi, struct herd_err *err);
/* body[key]: an environment, an object of at most max strings whose keys
 * are variable names (not empty, no '='); where prefixes the key in
 * errors. */
int proto_check_env(const json_t *body, const char *where, const char *key,
		    size_t max, struct herd_err *err);
/* body[key]: an array of at most max strings; absent is fine when
 * optional. */
int proto_check_strings(const json_t *body, const char *key, size_t max,
			bool optional, struct herd_err *err);

/* --- the rows' own checks (the `more` and `data_more` of proto_rules[]) ---
 * Each fills err with the reason (no prefix) and returns -1, or returns 0.
 */

/* proto_rules_job.c */
int proto_hello_more(const json_t *body, struct herd_err *err);
int proto_launch_more(const json_t *body, struct herd_err *err);
int proto_exit_more(const json_t *body, struct herd_err *err);
int proto_signal_more(const json_t *body, struct herd_err *err);
int proto_hb_herd_more(const json_t *body, struct herd_err *err);
int proto_hb_agent_more(const json_t *body, struct herd_err *err);
int proto_stacks_agent_more(const json_t *body, struct herd_err *err);
int proto_rank_ctl_more(const json_t *body, struct herd_err *err);

/* proto_rules_ckpt.c */
int proto_ckpt_mem_more(const json_t *body, struct herd_err *err);
int proto_ckpt_inv_more(const json_t *body, struct herd_err *err);
int proto_ckpt_data_more(const json_t *body, struct herd_err *err);

/* proto_rules_health.c */
int proto_metrics_more(const json_t *body, struct herd_err *err);
int proto_check_more(const json_t *body, struct herd_err *err);
int proto_netprobe_agent_more(const json_t *body, struct herd_err *err);
int proto_netprobe_herd_more(const json_t *body, struct herd_err *err);

/* proto_rules_control.c */
int proto_ctl_req_more(const json_t *body, struct herd_err *err);
int proto_ctl_msg_more(const json_t *body, struct herd_err *err);
int proto_ctl_msg_data(const json_t *body, size_t data_len,
		       struct herd_err *err);

/* proto_rules_pmix.c */
int proto_fence_more(const json_t *body, struct herd_err *err);
int proto_pmix_log_more(const json_t *body, struct herd_err *err);
int proto_spawn_apps(const json_t *body, struct herd_err *err);
int proto_spawn_launch_more(const json_t *body, struct herd_err *err);
int proto_connect_more(const json_t *body, struct herd_err *err);
int proto_connect_data(const json_t *body, size_t data_len,
		       struct herd_err *err);
int proto_publish_more(const json_t *body, struct herd_err *err);
int proto_lookup_more(const json_t *body, struct herd_err *err);
int proto_unpublish_more(const json_t *body, struct herd_err *err);
int proto_pubsub_done_more(const json_t *body, struct herd_err *err);
int proto_event_more(const json_t *body, struct herd_err *err);
int proto_proc_failed_more(const json_t *body, struct herd_err *err);

#endif
