/* ctl/stop.c — the end of the job: every agent told to stop its ranks
 * (a signal, SIGKILL after the grace) and exit, the stop timer that hangs
 * up on agents that do not go, and the summary.  The job is over
 * (CTL_EV_ALL_GONE) once every agent's connection is closed.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>

#include "launcher/ctl/actions.h"

/* --- the end ------------------------------------------------------------ */

/* Every agent's connection closed: the end (STOPPING only). */
void ctl_maybe_end(struct ctl *c)
{
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].conn)
			return;
	ctl_post(c, CTL_EV_ALL_GONE, NULL, 0, NULL);
}

void ctl_on_stop_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->stop_timer = 0;
	ctl_post(c, CTL_EV_STOP_TIMER, NULL, 0, NULL);
}

/* STOPPING, stop timer: the agents that did not go are hung up on. */
void act_hang_up(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (!n->conn)
			continue;
		if (n->member)
			fprintf(stderr,
				"herd: %s: agent did not confirm that its "
				"ranks stopped; hanging up\n",
				n->host);
		ctl_drop_conn(c, n);
	}
}

void ctl_send_stop(struct ctl *c, struct node *n, long grace_ms, int sig,
		   bool exit_after, bool leave)
{
	json_t *body;

	if (!n->conn || conn_is_dead(n->conn))
		return;
	body = json_pack("{s:I, s:b, s:i, s:b}", "grace_ms",
			 (json_int_t)grace_ms, "exit", exit_after, "signal", sig,
			 "leave", leave);
	ctl_send(c, n, PROTO_STOP, body, NULL, 0);
	json_decref(body);
}

/* The end of the job: every agent stops its ranks (sig, SIGKILL after
 * grace) and exits. */
void ctl_stop_all(struct ctl *c, long grace_ms, int sig)
{
	ctl_notify_stop(c);
	if (c->backoff_timer) {
		loop_timer_del(c->loop, c->backoff_timer);
		c->backoff_timer = 0;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->readmit_timer) {
			loop_timer_del(c->loop, n->readmit_timer);
			n->readmit_timer = 0;
		}
		if (n->state == NODE_CONNECTING) {
			/* Not up yet: hang up; its agent stops at EOF. */
			ctl_drop_conn(c, n);
			ctl_node_set(c, n, NODE_GONE);
			continue;
		}
		ctl_send_stop(c, n, grace_ms, sig, true, false);
	}
	if (c->stop_timer)
		loop_timer_del(c->loop, c->stop_timer);
	c->stop_timer =
	    loop_timer_add(c->loop, grace_ms + 5000, ctl_on_stop_timeout, c);
	ctl_maybe_end(c);
}

/* FINISH, INTERRUPT: into STOPPING. */
void act_finish(struct ctl *c, struct ctl_ev *ev)
{
	ctl_stop_all(c, ev->grace_ms, ev->status);
}

void ctl_give_up(struct ctl *c)
{
	c->final_failure = true;
	ctl_post_stop(c, CTL_EV_FINISH, 0, SIGTERM, NULL);
}

/* RUN, INTERRUPT: the attempt ends (why, 128 + the signal), then the
 * job. */
void act_interrupt(struct ctl *c, struct ctl_ev *ev)
{
	events_emit(c->ev, "attempt_end",
		    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
			      "reason", ev->why, "status", 128 + ev->status));
	act_finish(c, ev);
}

/* FINISH, INTERRUPT while STOPPING: a second request only shortens the
 * grace. */
void act_kill(struct ctl *c, struct ctl_ev *ev)
{
	for (int i = 0; i < c->n_nodes; i++)
		ctl_send_stop(c, &c->nodes[i], ev->grace_ms, SIGKILL, true,
			      false);
}

void ctl_summary(struct ctl *c)
{
	bool any_evicted = false;

	if (c->attempt <= 1 && !c->final_failure)
		return;
	/* One attempt and no node evicted: its failure is on stderr. */
	for (int i = 0; c->attempt == 1 && i < c->n_nodes; i++)
		any_evicted |= c->nodes[i].state == NODE_EVICTED;
	if (c->attempt == 1 && !any_evicted)
		return;
	any_evicted = false;
	fprintf(stderr, "herd: job %s ended after %d attempt%s:\n",
		c->spec->name, c->attempt, c->attempt == 1 ? "" : "s");
	for (int a = 0; a < c->attempt; a++)
		fprintf(stderr, "herd:   attempt %d: %s\n", a + 1,
			c->notes[a].why[0] ? c->notes[a].why : "completed");
	for (int i = 0; i < c->n_nodes; i++) {
		if (c->nodes[i].state != NODE_EVICTED)
			continue;
		if (!any_evicted)
			fprintf(stderr, "herd:   evicted:");
		fprintf(stderr, " %s", c->nodes[i].host);
		any_evicted = true;
	}
	if (any_evicted)
		fputc('\n', stderr);
}

/* A full disk must never pass in silence: what the logs lost, once at
 * the end (each file's first failure was reported when it happened). */
void ctl_report_lost(struct ctl *c)
{
	uint64_t ev_lost = events_lost(c->ev);

	ctl_check_events(c);
	if (!c->lt || (!c->log_failed_files && !events_error(c->ev)))
		return;
	fprintf(stderr,
		"herd: logs in %s are incomplete: %" PRIu64
		" bytes of rank output (%d log%s) and %" PRIu64
		" bytes of events could not be written\n",
		logtree_run_dir(c->lt), c->log_lost, c->log_failed_files,
		c->log_failed_files == 1 ? "" : "s", ev_lost);
}

/* STOPPING: a node whose agent goes (or fails) is gone. */
void act_node_gone(struct ctl *c, struct ctl_ev *ev)
{
	struct node *n = ev->node;
	int running = 0;

	if (!n || n->state == NODE_EVICTED || n->state == NODE_GONE ||
	    n->state == NODE_SPARE)
		return;
	for (int i = 0; i < c->n_slots; i++)
		if (c->ranks[i].node == (int)(n - c->nodes) &&
		    !c->ranks[i].done && c->ranks[i].log)
			running++; /* launched (its log is open), not ended */
	/* Its ranks' ends (and their last output) will not come: said,
	 * not left for the reader to guess from a log that stops. */
	if (running)
		fprintf(stderr,
			"herd: %s: agent gone while stopping, %d rank%s still "
			"running there (%s): their exit and last output are "
			"lost\n",
			n->host, running, running == 1 ? "" : "s",
			ev->why[0] ? ev->why : "no reason given");
	ctl_drop_conn(c, n);
	ctl_node_set(c, n, NODE_GONE);
	ctl_maybe_end(c);
}
