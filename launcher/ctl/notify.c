/* ctl/notify.c — CTL_NOTIFY: a rank or node failed in a PMIx job and the
 * survivors were told (a PMIx event); they have health.notify_grace to
 * act before the attempt is stopped, less when every one of them exits.
 * The attempt then fails with its first failure, as it would have at
 * once.
 */
#include <stdio.h>
#include <stdlib.h>

#include "launcher/ctl/actions.h"

/* CTL_NOTIFY's timer, if any, is over. */
void ctl_notify_stop(struct ctl *c)
{
	if (c->notify_timer)
		loop_timer_del(c->loop, c->notify_timer);
	c->notify_timer = 0;
}

static void on_notify_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->notify_timer = 0;
	ctl_post(c, CTL_EV_NOTIFY_OVER, NULL, 0, NULL);
}

/* RUN -> NOTIFY: the failure is kept for when the grace is over. */
void act_notify(struct ctl *c, struct ctl_ev *ev)
{
	char grace[SPEC_DURATION_TEXT];

	c->notify_status = ev->status;
	snprintf(c->notify_why, sizeof(c->notify_why), "%s", ev->why);
	/* The attempt's first failure, whatever comes in the grace
	 * (Ctrl-C included). */
	ctl_record_failure(c, ev->status, ev->why);
	fprintf(stderr,
		"herd: the surviving ranks were told; stopping them in %s "
		"(health.notify_grace) unless they all exit first\n",
		spec_duration_text(c->spec->health.notify_grace_ms, grace,
				   sizeof(grace)));
	ctl_notify_stop(c);
	c->notify_timer = loop_timer_add(
	    c->loop, c->spec->health.notify_grace_ms, on_notify_timeout, c);
	act_notify_check(c, ev);
}

/* Every rank on a node still up exited: nobody is left to wait for. */
void act_notify_check(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	for (int r = 0; c->ranks && r < c->world_size; r++) {
		struct node *n = &c->nodes[c->ranks[r].node];

		if (!c->ranks[r].done && n->member && n->state == NODE_UP)
			return;
	}
	ctl_notify_stop(c);
	ctl_post(c, CTL_EV_NOTIFY_OVER, NULL, 0, NULL);
}

void act_notify_rank(struct ctl *c, struct ctl_ev *ev)
{
	int rank = (int)json_integer_value(json_object_get(ev->body, "rank"));

	if (ev->body)
		ctl_event_proc_failed(
		    c,
		    json_is_true(json_object_get(ev->body, "signal")) ? "signal"
								      : "exit",
		    ev->status, ev->node->host, &rank, 1);
	act_notify_check(c, ev);
}

void act_notify_node(struct ctl *c, struct ctl_ev *ev)
{
	if (ctl_node_out(c, ev->node, ev->why, false))
		ctl_notify_node_lost(c, ev->node);
	act_notify_check(c, ev);
}

/* NOTIFY -> RUN: the grace is over (or another failure came); the
 * attempt fails with its first failure, as it would have at once. */
void act_notify_over(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	ctl_notify_stop(c);
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, c->notify_status,
		 c->notify_why);
}

void act_notify_finish(struct ctl *c, struct ctl_ev *ev)
{
	ctl_notify_stop(c);
	act_finish(c, ev);
}
