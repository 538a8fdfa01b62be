/* proto_rules_ckpt.c — the checks of the frames of checkpoints in memory
 * (the memory tier, peer copies, persist) that need more than their rows
 * in proto_rules.c say: CKPT_CONF, CKPT_INV and CKPT_DATA.
 */
#include <limits.h>
#include <string.h>

#include "proto_int.h"

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

int proto_ckpt_mem_more(const json_t *body, struct herd_err *err)
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

int proto_ckpt_inv_more(const json_t *body, struct herd_err *err)
{
	return proto_check_array(body, "steps", &proto_ckpt_step_body,
				 PROTO_CKPT_STEPS_MAX, err);
}

int proto_ckpt_data_more(const json_t *body, struct herd_err *err)
{
	if (json_integer_value(json_object_get(body, "offset")) >
	    json_integer_value(json_object_get(body, "total")))
		return herd_errprintf(err, "offset past total");
	return proto_ckpt_name(body, "file", err);
}
