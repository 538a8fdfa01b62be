/* ctl/warm.c — what herd hears of warm interpreters (agent/warm.c).
 *
 * rank_start is written when the rank's agent says the rank started
 * (STARTED), so that the event can say whether it came from a warm
 * interpreter: the agent alone knows.  STARTED comes before the rank's
 * EXIT on the same connection, so rank_start precedes rank_exit.
 *
 * With warm interpreters on, spares are connected at the start (hot):
 * a spare brought in after a failure then has its interpreters ready,
 * as the members have theirs for the next attempt.
 */
#include "launcher/ctl/ctl_int.h"
#include "launcher/transport/transport.h"

bool ctl_warm_spares(const struct ctl *c)
{
	struct transport_warm w;

	transport_warm_args(c->spec, &w);
	return w.argc > 0;
}

void ctl_rank_started(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *b = f->body;
	int rank = (int)json_integer_value(json_object_get(b, "rank"));
	int attempt = (int)json_integer_value(json_object_get(b, "attempt"));

	/* A rank of this node in the LAUNCH it was sent. */
	if (!n->member || rank < n->first_rank ||
	    rank >= n->first_rank + n->n_ranks)
		return;
	events_emit(c->ev, "rank_start",
		    json_pack("{s:i, s:i, s:s, s:i, s:i, s:b, s:i}", "attempt",
			      attempt, "rank", rank, "host", n->host,
			      "local_rank", rank - n->first_rank, "node_rank",
			      n->index, "warm",
			      json_is_true(json_object_get(b, "warm")),
			      "generation", ctl_rejoin_generation(c)));
}
