/* ctl/run.c — the actions of a running attempt (CTL_RUN) and of a hang's
 * evidence being collected (CTL_STACKS): a rank's failure, MPI_Abort,
 * completion, hung ranks.
 */
#include <signal.h>
#include <stdio.h>

#include "launcher/ctl/actions.h"

void act_abort(struct ctl *c, struct ctl_ev *ev)
{
	fprintf(stderr, "herd: %s; stopping every rank\n", ev->why);
	c->no_restart = true;
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, ev->status, ev->why);
}

/* --- running ------------------------------------------------------------- */

/* RUN, a rank failed: the attempt is over. */
void act_rank_failed(struct ctl *c, struct ctl_ev *ev)
{
	int rank = (int)json_integer_value(json_object_get(ev->body, "rank"));

	fprintf(stderr, "herd: %s; stopping the attempt\n", ev->why);
	snprintf(c->said_why, sizeof(c->said_why), "%.250s", ev->why);
	if (json_is_true(json_object_get(ev->body, "no_workdir")))
		c->workdir_said = true;
	if (ev->body)
		ctl_event_proc_failed(
		    c,
		    json_is_true(json_object_get(ev->body, "signal")) ? "signal"
								      : "exit",
		    ev->status, ev->node->host, &rank, 1);
	ctl_fail_or_notify(c, ev->status, ev->why);
}

/* A rank failed while the attempt is already stopping for another
 * reason: said per rank when it never ran, since each node may fail its
 * own way. */
void act_rank_note(struct ctl *c, struct ctl_ev *ev)
{
	/* The missing workdir is said once, not once per rank. */
	if (json_is_true(json_object_get(ev->body, "no_workdir"))) {
		if (c->workdir_said)
			return;
		c->workdir_said = true;
	}
	if (ev->flag)
		fprintf(stderr, "herd: %s\n", ev->why);
}

/* RECOVER: as act_rank_note; after a 127 or 126 the survivors are
 * stopped as soon as every rank has ended on its own. */
void act_rank_note_recover(struct ctl *c, struct ctl_ev *ev)
{
	if (c->exec_wait && ctl_all_ranks_ended(c))
		ctl_recover_stop(c);
	act_rank_note(c, ev);
}

/* RUN, every rank exited 0: the job is done. */
void act_completed(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	events_emit(c->ev, "attempt_end",
		    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
			      "reason", "completed", "status", 0));
	ctl_stop_all(c, c->spec->health.grace_ms, SIGTERM);
}

/* RUN: a node says some of its ranks hang.  Before the attempt fails,
 * every rank's stack is collected (ctl/hang.c). */
void act_hung(struct ctl *c, struct ctl_ev *ev)
{
	ctl_hang_begin(c, ev->node, ev->body);
}

/* STACKS: more hung ranks, from the same node or another. */
void act_hung_more(struct ctl *c, struct ctl_ev *ev)
{
	ctl_hang_merge(c, ev->node, ev->body);
}

/* STACKS: a node's answer. */
void act_stacks(struct ctl *c, struct ctl_ev *ev)
{
	ctl_hang_answer(c, ev->node, ev->body);
}

/* STACKS -> RUN: the evidence is in; the attempt fails as before. */
void act_stacks_done(struct ctl *c, struct ctl_ev *ev)
{
	char why[sizeof(ev->why)];

	ctl_hang_end(c, why, sizeof(why));
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

/* STACKS: a node failed; it is out as in RUN and not waited for.  The
 * hang, reported first, fails the attempt when the collection ends. */
void act_node_failed_stacks(struct ctl *c, struct ctl_ev *ev)
{
	if (ctl_node_out(c, ev->node, ev->why, false))
		ctl_hang_node_gone(c, ev->node);
}

/* STACKS: MPI_Abort: the job ends after this attempt, as in RUN. */
void act_abort_stacks(struct ctl *c, struct ctl_ev *ev)
{
	fprintf(stderr, "herd: %s\n", ev->why);
	c->no_restart = true;
}

/* STACKS, FINISH or INTERRUPT: the evidence so far goes to the events,
 * then the end as in RUN. */
void act_finish_stacks(struct ctl *c, struct ctl_ev *ev)
{
	char why[sizeof(ev->why)];

	ctl_hang_end(c, why, sizeof(why));
	act_finish(c, ev);
}

/* STACKS, INTERRUPT: the attempt ends (its attempt_end before the hang's
 * evidence), then as FINISH. */
void act_interrupt_stacks(struct ctl *c, struct ctl_ev *ev)
{
	events_emit(c->ev, "attempt_end",
		    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
			      "reason", ev->why, "status", 128 + ev->status));
	act_finish_stacks(c, ev);
}
