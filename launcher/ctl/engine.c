/* ctl/engine.c — the controller's posted-event queue.
 *
 * Whoever notices something (a frame, a timer, a signal) posts an event;
 * a zero-delay timer drains the queue from the loop, one event at a time,
 * through ctl_table[].  A handler never runs inside the call that noticed
 * its event, so no send, frame or timer sees the lifecycle change under
 * it; what an action posts is handled before anything noticed meanwhile.
 * An event is never lost: out of memory, herd exits (the agents stop the
 * ranks when herd's connection goes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/ctl/ctl_int.h"

struct ctl_qev {
	struct ctl_ev ev;
	struct ctl_qev *next;
};

/* One event through the table. */
static void handle(struct ctl *c, struct ctl_ev *ev)
{
	enum ctl_state from = c->state;
	const struct ctl_row *row = ctl_row_find(from, ev->type);

	if (c->trace)
		c->trace(c, from, ev, row, c->trace_arg);
	if (!row) {
		if (!ctl_event_late(ev->type))
			/* Not a transition of the table: a bug, kept
			 * visible. */
			fprintf(stderr,
				"herd: internal: event '%s' has no transition "
				"in state %s\n",
				ctl_event_name(ev->type), ctl_state_name(from));
		return;
	}
	c->state = row->next;
	if (row->action)
		row->action(c, ev);
	if (c->state == CTL_END && from != CTL_END)
		loop_stop(c->loop);
}

static void qev_free(struct ctl_qev *q)
{
	json_decref(q->ev.body);
	free(q);
}

/* The drain: every queued event in order; what an action posts is put in
 * front of the rest, so it is handled next (never inside the action). */
static void drain(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	struct ctl_qev *q;

	(void)loop;
	c->drain_timer = 0;
	while ((q = c->queue)) {
		c->queue = q->next;
		if (!c->queue)
			c->queue_tail = NULL;
		c->in_action = true;
		handle(c, &q->ev);
		c->in_action = false;
		qev_free(q);
		if (c->next) {
			c->next_tail->next = c->queue;
			if (!c->queue)
				c->queue_tail = c->next_tail;
			c->queue = c->next;
			c->next = c->next_tail = NULL;
		}
	}
}

/* A lost transition would leave the job in a state nobody can reason
 * about: out of memory, herd dies (as xmalloc would), and the agents stop
 * the ranks when herd's connection goes. */
static _Noreturn void post_failed(const struct ctl_ev *ev, const char *what)
{
	fprintf(stderr,
		"herd: out of memory %s event '%s'; the agents stop the ranks "
		"as herd exits\n",
		what, ctl_event_name(ev->type));
	fflush(stderr);
	_exit(1);
}

int ctl_post_ev(struct ctl *c, const struct ctl_ev *ev)
{
	struct ctl_qev *q = calloc(1, sizeof(*q));

	if (!q)
		post_failed(ev, "queueing");
	q->ev = *ev;
	json_incref(q->ev.body);
	if (c->in_action) {
		if (c->next_tail)
			c->next_tail->next = q;
		else
			c->next = q;
		c->next_tail = q;
		return 0;
	}
	if (c->queue_tail)
		c->queue_tail->next = q;
	else
		c->queue = q;
	c->queue_tail = q;
	if (!c->drain_timer && c->loop) {
		/* Without its timer the queue would wait for the next post:
		 * as lost as an event never queued. */
		c->drain_timer = loop_timer_add(c->loop, 0, drain, c);
		if (c->drain_timer < 0)
			post_failed(ev, "scheduling");
	}
	return 0;
}

int ctl_post(struct ctl *c, enum ctl_event event, struct node *n, int status,
	     const char *why)
{
	struct ctl_ev ev = {.type = event, .node = n, .status = status};

	if (why) {
		/* Cut to fit: a reason is one line of a message. */
		size_t len = strnlen(why, sizeof(ev.why) - 1);

		memcpy(ev.why, why, len);
		ev.why[len] = '\0';
	}
	return ctl_post_ev(c, &ev);
}

int ctl_post_stop(struct ctl *c, enum ctl_event event, long grace_ms, int sig,
		  const char *why)
{
	struct ctl_ev ev = {.type = event, .status = sig, .grace_ms = grace_ms};

	if (why)
		snprintf(ev.why, sizeof(ev.why), "%s", why);
	return ctl_post_ev(c, &ev);
}

void ctl_queue_clear(struct ctl *c)
{
	struct ctl_qev *q;

	while ((q = c->queue)) {
		c->queue = q->next;
		qev_free(q);
	}
	while ((q = c->next)) {
		c->next = q->next;
		qev_free(q);
	}
	c->queue_tail = c->next_tail = NULL;
	if (c->drain_timer && c->loop)
		loop_timer_del(c->loop, c->drain_timer);
	c->drain_timer = 0;
}
