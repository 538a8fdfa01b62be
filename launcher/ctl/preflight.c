/* ctl/preflight.c — CTL_PREFLIGHT, the health gate (health.preflight,
 * herd check): every member that is up is checked (ctl/check.c) before
 * an attempt; an unhealthy one is evicted and a spare checked in its
 * place.
 */
#include <signal.h>
#include <stdio.h>

#include "launcher/ctl/actions.h"

/* Is a spare left to take a member's place? */
static bool spare_left(const struct ctl *c)
{
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].state == NODE_SPARE ||
		    (c->nodes[i].state == NODE_UP && !c->nodes[i].member))
			return true;
	return false;
}

/* PREFLIGHT: every member that is up gets its CHECK once; when all have
 * answered (or failed) and no spare is still connecting, the verdicts
 * are acted on: herd check prints them (after its network probe),
 * health.preflight evicts each unhealthy member, brings in spares (they
 * are checked in turn) and launches, or ends the job under nodes.min. */
static void preflight_step(struct ctl *c)
{
	int up;

	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].member && c->nodes[i].state == NODE_UP &&
		    !ctl_check_sent(c, &c->nodes[i]))
			ctl_check_send(c, &c->nodes[i]);
	if (ctl_check_pending(c) > 0 ||
	    ctl_count_nodes(c, NODE_CONNECTING, 1) > 0)
		return;
	ctl_check_judge(c);
	if (c->opt->check_only) {
		if (ctl_netprobe_step(c) > 0)
			return;
		ctl_check_end(c);
		ctl_check_print(c);
		ctl_post_stop(c, CTL_EV_FINISH, 0, SIGTERM, NULL);
		return;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];
		const char *check = NULL;
		const char *why = ctl_check_failure(c, n, &check);
		char reason[600];

		if (!why || !n->member || n->state != NODE_UP)
			continue;
		snprintf(reason, sizeof(reason), "%s", why);
		events_emit(c->ev, "node_unhealthy",
			    json_pack("{s:s, s:s, s:s, s:i}", "host", n->host,
				      "check", check, "reason", reason,
				      "attempt", c->attempt + 1));
		if (c->tty)
			fputc('\n', stderr);
		fprintf(stderr, "herd: node %s is unhealthy: %s%s\n", n->host,
			reason,
			spare_left(c) ? "; a spare takes its place" : "");
		ctl_node_note(c, n, "unhealthy", reason);
		ctl_evict(c, n, reason);
	}
	if (ctl_take_spares(c) > 0)
		return; /* they are checked once up */
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].member && c->nodes[i].state == NODE_UP &&
		    !ctl_check_sent(c, &c->nodes[i])) {
			preflight_step(c); /* warm spares that joined */
			return;
		}
	ctl_check_end(c);
	up = ctl_count_nodes(c, NODE_UP, 1);
	if (up < c->min_nodes || up == 0) {
		fprintf(
		    stderr,
		    "herd: %d of %d nodes are healthy; the job needs %d%s\n",
		    up, c->want_nodes, c->min_nodes,
		    c->spec->nodes.min > 0 ? " (nodes.min)" : "");
		c->status = 1;
		ctl_give_up(c);
		return;
	}
	if (up < c->want_nodes)
		fprintf(stderr,
			"herd: no healthy spare left; continuing with %d of %d "
			"nodes (nodes.min %d)\n",
			up, c->want_nodes, c->min_nodes);
	ctl_post(c, CTL_EV_LAUNCH, NULL, 0, NULL);
}

/* CONNECT or BACKOFF -> PREFLIGHT. */
void act_preflight(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (c->tty || c->opt->check_only)
		fprintf(stderr, "herd: checking %d node%s\n",
			ctl_count_nodes(c, NODE_UP, 1),
			ctl_count_nodes(c, NODE_UP, 1) == 1 ? "" : "s");
	ctl_check_begin(c);
	preflight_step(c);
}

void act_preflight_step(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	preflight_step(c);
}

void act_node_failed_preflight(struct ctl *c, struct ctl_ev *ev)
{
	ctl_node_out(c, ev->node, ev->why, false);
	preflight_step(c);
}
