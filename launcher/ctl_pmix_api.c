/* ctl_pmix_api.c — the controller's side of the PMIx calls served in
 * agent/pmix_api.c (issue 16):
 *   PMIX_LOG  a rank's PMIx_Log: one "pmix_log" event per entry
 *             {attempt, rank, host, key, message} in the run's event log.
 * The agent bounds the entries (PROTO_PMIX_LOG_*; lib/proto.c checks
 * them); a frame for another attempt, or for a rank that is not the
 * sending node's, is dropped. */
#include <string.h>

#include "ctl_int.h"

void ctl_pmix_log(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body, *entries = json_object_get(body, "entries");
	int rank = (int)json_integer_value(json_object_get(body, "rank"));
	size_t i;
	json_t *e;

	if (json_integer_value(json_object_get(body, "attempt")) != c->attempt)
		return;
	if (!c->ranks || rank < 0 || rank >= c->world_size ||
	    &c->nodes[c->ranks[rank].node] != n)
		return;
	json_array_foreach(entries, i, e)
		events_emit(c->ev, "pmix_log",
			    json_pack("{s:i, s:i, s:s, s:O, s:O}", "attempt",
				      c->attempt, "rank", rank, "host",
				      n->host, "key", json_object_get(e, "key"),
				      "message",
				      json_object_get(e, "value")));
	ctl_check_events(c);
}
