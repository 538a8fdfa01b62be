/* ctl/pmix/event.c — PMIx events across nodes.
 *
 *   EVENT        a rank's PMIx_Notify_event for ranks on other nodes: the
 *                agent's library already told its own node; herd sends it
 *                on to every other node with ranks (namespace, session,
 *                global range) or to the nodes hosting the ranks of a
 *                custom range; each agent's library applies the range.
 *   PROC_FAILED  herd's own: ranks of the attempt failed (a rank exited
 *                non-zero or by a signal, a node was lost); every
 *                surviving node is told before the attempt is stopped,
 *                and its agent notifies its ranks (PMIX_ERR_PROC_ABORTED
 *                or _BY_SIG with the affected processes).  How long they
 *                then have is health.notify_grace (ctl/notify.c, CTL_NOTIFY).
 *
 * Nothing here changes the lifecycle: the table's actions call
 * ctl_event_proc_failed(); a frame handler only forwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/ctl_int.h"

/* Nodes of the attempt that can take a frame. */
static bool live_member(const struct node *n)
{
	return n->member && n->state == NODE_UP && n->conn && n->n_ranks > 0;
}

void ctl_event_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *b = f->body, *procs = json_object_get(b, "procs"), *out;
	bool *to = NULL;

	if (json_integer_value(json_object_get(b, "attempt")) != c->attempt ||
	    !ctl_serves(c, CTL_SERVE_RANKS) || !n->member || !c->ranks)
		return;
	if (json_array_size(procs) &&
	    !(to = calloc((size_t)c->n_nodes, sizeof(*to))))
		return;
	for (size_t i = 0; to && i < json_array_size(procs); i++) {
		json_int_t r = json_integer_value(json_array_get(procs, i));

		if (r >= 0 && r < c->world_size)
			to[c->ranks[r].node] = true;
	}
	out = json_pack("{s:i, s:O, s:O, s:O, s:O}", "attempt", c->attempt,
			"code", json_object_get(b, "code"), "rank",
			json_object_get(b, "rank"), "nspace",
			json_object_get(b, "nspace"), "range",
			json_object_get(b, "range"));
	for (int i = 0; out && i < c->n_nodes; i++) {
		struct node *m = &c->nodes[i];

		if (m == n || !live_member(m) || (to && !to[i]))
			continue;
		ctl_send(c, m, PROTO_EVENT, out, f->data, f->data_len);
	}
	json_decref(out);
	free(to);
}

void ctl_event_proc_failed(struct ctl *c, const char *kind, int status,
			   const char *host, const int *ranks, int n_ranks)
{
	json_t *arr, *body;
	int told = 0;

	if (c->spec->launch.mode != SPEC_MODE_PMIX || n_ranks <= 0)
		return;
	arr = json_array();
	for (int i = 0; arr && i < n_ranks && i < PROTO_LAUNCH_RANKS_MAX; i++)
		json_array_append_new(arr, json_integer(ranks[i]));
	body = arr ? json_pack("{s:i, s:s, s:i, s:s, s:O}", "attempt",
			       c->attempt, "kind", kind, "status",
			       status < 0 || status > 255 ? 1 : status, "host",
			       host, "ranks", arr)
		   : NULL;
	for (int i = 0; body && i < c->n_nodes; i++) {
		if (!live_member(&c->nodes[i]))
			continue;
		ctl_send(c, &c->nodes[i], PROTO_PROC_FAILED, body, NULL, 0);
		told++;
	}
	if (body)
		events_emit(
		    c->ev, "ranks_notified",
		    json_pack("{s:i, s:s, s:s, s:O, s:i, s:I}", "attempt",
			      c->attempt, "kind", kind, "host", host, "ranks",
			      arr, "nodes", told, "grace_ms",
			      (json_int_t)c->spec->health.notify_grace_ms));
	json_decref(body);
	json_decref(arr);
}
