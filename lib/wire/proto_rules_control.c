/* proto_rules_control.c — the checks of a job's control socket frames:
 * CTL_REQ (client -> herd) and CTL_MSG (herd -> client).  Their rows are
 * in proto_rules.c.
 */
#include <stdbool.h>
#include <string.h>

#include "proto_int.h"

/* CTL_REQ: the operations a control socket serves. */
int proto_ctl_req_more(const json_t *body, struct herd_err *err)
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
int proto_ctl_msg_more(const json_t *body, struct herd_err *err)
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

int proto_ctl_msg_data(const json_t *body, size_t data_len,
		       struct herd_err *err)
{
	const char *kind = json_string_value(json_object_get(body, "kind"));

	if (data_len && (!strcmp(kind, "info") || !strcmp(kind, "end")))
		return herd_errprintf(err,
				      "%zu data bytes, kind %s carries none",
				      data_len, kind);
	return 0;
}
