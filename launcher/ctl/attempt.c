/* ctl/attempt.c — connecting and starting an attempt: every member up
 * or failed (spares fill in), the newest complete checkpoint, the plan,
 * and LAUNCH to every member node.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/checkpoint.h"
#include "launcher/ctl/actions.h"
#include "launcher/model/plan.h"

/* The newest complete checkpoint, with events for it and for every newer
 * one passed over. */
static void find_checkpoint(struct ctl *c)
{
	const struct spec *s = c->spec;
	struct checkpoint_result res;
	struct herd_err err;

	free(c->checkpoint);
	c->checkpoint = NULL;
	if (!s->checkpoint.dir)
		return;
	herd_err_clear(&err);
	if (checkpoint_find(s->checkpoint.dir, s->checkpoint.latest_file,
			    s->checkpoint.pattern,
			    s->checkpoint.complete_marker, &res, &err) < 0) {
		fprintf(stderr, "herd: checkpoint: %s\n", err.text);
		return;
	}
	for (size_t i = 0; i < res.n_skipped; i++) {
		events_emit(c->ev, "checkpoint_skipped",
			    json_pack("{s:s, s:s, s:i}", "path",
				      res.skipped[i].path, "reason",
				      res.skipped[i].reason, "attempt",
				      c->attempt));
		if (c->attempt > 1)
			fprintf(stderr, "herd: skipping checkpoint %s: %s\n",
				res.skipped[i].path, res.skipped[i].reason);
	}
	if (res.path) {
		c->checkpoint = strdup(res.path);
		events_emit(c->ev, "checkpoint_found",
			    json_pack("{s:s, s:s, s:i}", "path", res.path,
				      "source", res.source, "attempt",
				      c->attempt));
		if (!c->opt->plan_only) /* herd plan resumes nothing */
			fprintf(stderr, "herd: attempt %d resumes from %s\n",
				c->attempt, res.path);
	}
	checkpoint_result_free(&res);
}

/* herd plan without --topology: the plan the agents' topologies give,
 * printed; then the agents are told to exit. */
static void print_plan(struct ctl *c)
{
	struct node_plan *np = calloc((size_t)c->n_nodes, sizeof(*np));
	size_t k = 0;

	c->status = 0;
	for (int i = 0; np && i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (!n->member || n->state != NODE_UP)
			continue;
		if (!n->bind) {
			fprintf(stderr, "herd: plan: %s reported no topology\n",
				n->host);
			c->status = 1;
			continue;
		}
		np[k].host = n->host;
		np[k].ranks = n->bind;
		np[k].n_ranks = n->n_ranks;
		k++;
	}
	if (!np || plan_print(np, k, c->opt->plan_json) < 0) {
		fprintf(stderr, "herd: plan: cannot write the plan\n");
		c->status = 1;
	}
	free(np);
	ctl_post_stop(c, CTL_EV_FINISH, 0, SIGTERM, NULL);
}

/* CONNECT or BACKOFF -> RUN: the next attempt. */
void act_launch(struct ctl *c, struct ctl_ev *ev)
{
	struct herd_err err;
	struct attempt_note *notes;
	char *command = NULL, *before;

	(void)ev;
	herd_err_clear(&err);
	notes = realloc(c->notes, (size_t)(c->attempt + 1) * sizeof(*notes));
	if (!notes) {
		fprintf(stderr, "herd: out of memory\n");
		c->status = 1;
		ctl_post_stop(c, CTL_EV_FINISH, 0, SIGTERM, NULL);
		return;
	}
	c->notes = notes;
	memset(&c->notes[c->attempt], 0, sizeof(*notes));
	c->attempt++;
	c->attempt_started_ms = loop_now_ms();
	c->spares_warm_taken = c->spares_cold_taken = 0;
	c->recover_short = false;
	c->failed = false;
	c->exec_suspect = false;
	c->exec_wait = false;
	c->workdir_said = false;
	c->said_why[0] = '\0';
	ctl_pmix_clear(c);
	ctl_pubsub_attempt_over(c);
	ctl_notify_stop(c);
	c->status = 0;
	before = c->checkpoint ? strdup(c->checkpoint) : NULL;
	find_checkpoint(c);
	if (c->checkpoint && (!before || strcmp(before, c->checkpoint)))
		c->progress_attempt = c->attempt;
	free(before);
	if (ctl_plan(c, &err) < 0 || ctl_open_rank_logs(c, &err) < 0 ||
	    !(command = ctl_render_command(c, &err))) {
		fprintf(stderr, "herd: %s\n", err.text);
		ctl_record_failure(c, 1, err.text);
		ctl_give_up(c);
		return;
	}
	if (c->opt->plan_only) {
		print_plan(c);
		free(command);
		return;
	}
	ctl_rejoin_attempt(c);
	events_emit(c->ev, "attempt_start",
		    json_pack("{s:i, s:i, s:i, s:s, s:s?}", "attempt",
			      c->attempt, "nodes",
			      ctl_count_nodes(c, NODE_UP, 1), "world_size",
			      c->world_size, "master_addr", c->master_addr,
			      "checkpoint", c->checkpoint));
	/* Peer copies to fetch first: LAUNCH follows from ctl/ckpt.c. */
	if (ctl_ckpt_plan(c, command) == 0)
		ctl_launch_send(c, command);
	free(command);
}

void ctl_launch_send(struct ctl *c, const char *command)
{
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];
		json_t *body;

		if (!n->member || n->state != NODE_UP)
			continue;
		body = ctl_launch_body(c, n, command);
		ctl_send(c, n, PROTO_LAUNCH, body, NULL, 0);
		json_decref(body);
		/* rank_start: when the agent says so (ctl/warm.c). */
	}
	ctl_ckpt_launched(c);
	ctl_detach_ready(c); /* --detach: the job is up */
}

/* --- connecting ----------------------------------------------------------- */

/* CONNECT: every member is up or failed: launch, or give up. */
void ctl_check_connected(struct ctl *c)
{
	int up;

	if (ctl_count_nodes(c, NODE_CONNECTING, 1) > 0)
		return;
	/* Fill in for nodes that never came up, from the spares. */
	if (ctl_take_spares(c) > 0)
		return;
	ctl_progress(c, true);
	if (c->opt->check_only) { /* herd check: every node gets a row */
		ctl_post(c, CTL_EV_PREFLIGHT, NULL, 0, NULL);
		return;
	}
	up = ctl_count_nodes(c, NODE_UP, 1);
	if (up < c->min_nodes || up == 0) {
		fprintf(stderr,
			"herd: %d of %d nodes are up; the job needs %d%s\n", up,
			c->want_nodes, c->min_nodes,
			c->spec->nodes.min > 0 ? " (nodes.min)"
					       : " (set nodes.min to start "
						 "with fewer)");
		c->status = 1;
		ctl_give_up(c);
		return;
	}
	ctl_post_next_attempt(c);
}

void ctl_post_next_attempt(struct ctl *c)
{
	ctl_post(c,
		 c->spec->health.preflight ? CTL_EV_PREFLIGHT : CTL_EV_LAUNCH,
		 NULL, 0, NULL);
}

void act_check_connected(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	ctl_check_connected(c);
}
