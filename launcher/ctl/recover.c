/* ctl/recover.c — failure and recovery: a failed node is evicted (and
 * may be readmitted after nodes.readmit_after), a failed attempt stops
 * its ranks on every surviving member and waits for each to confirm,
 * spares take the lost members' places (warm ones first) or the job
 * shrinks within nodes.min, and the next attempt follows restart.backoff.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/actions.h"

/* After a rank exited 127 or 126, how long the other ranks of the
 * attempt have to end on their own before they are stopped: a shell that
 * finds no command ends in milliseconds; this covers a loaded node. */
#define CTL_EXEC_WAIT_MS 2000

/* The longest wait between attempts, however often restart.backoff
 * doubles. */
#define CTL_BACKOFF_MAX_MS 60000
/* An attempt that ran this long before it failed was healthy: its
 * failure is not part of a crash loop (act_backoff). */
#define CTL_HEALTHY_MS 30000

/* Records the attempt's first failure: its status and why. */
void ctl_record_failure(struct ctl *c, int status, const char *why)
{
	if (c->failed)
		return;
	c->failed = true;
	c->status = status;
	if (c->attempt >= 1 && c->notes) {
		c->notes[c->attempt - 1].status = status;
		snprintf(c->notes[c->attempt - 1].why, sizeof(c->notes[0].why),
			 "%.250s", why);
	}
}

/* RECOVER, stop timer: a survivor that cannot confirm its ranks gone is
 * not trusted with the next attempt. */
void act_recover_timeout(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (c->exec_wait) { /* not every rank ended: stop the rest now */
		ctl_recover_stop(c);
		return;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->member && n->state == NODE_UP && !n->stopped)
			ctl_post(c, CTL_EV_NODE_FAILED, n, 0,
				 "did not confirm that its ranks stopped "
				 "within health.grace");
	}
}

/* --- failure and recovery ------------------------------------------------ */

static void on_readmit(struct loop *loop, void *arg);

/* Takes node n out of the job for good (or until readmitted). */
void ctl_evict(struct ctl *c, struct node *n, const char *reason)
{
	bool was_member = n->member;

	ctl_drop_conn(c, n);
	ctl_node_unplan(n);
	ctl_node_set(c, n, NODE_EVICTED);
	n->member = false;
	if (was_member)
		events_emit(c->ev, "node_evicted",
			    json_pack("{s:s, s:s, s:i}", "host", n->host,
				      "reason", reason, "attempt", c->attempt));
	if (c->spec->nodes.readmit_after_ms >= 0 && !n->readmit_timer &&
	    !ctl_serves(c, CTL_SERVE_ENDING)) {
		n->readmit_timer = loop_timer_add(
		    c->loop, c->spec->nodes.readmit_after_ms, on_readmit, n);
	}
}

static void on_readmit(struct loop *loop, void *arg)
{
	struct node *n = arg;

	(void)loop;
	n->readmit_timer = 0;
	ctl_post(n->ctl, CTL_EV_READMIT, n, 0, NULL);
}

void act_readmit(struct ctl *c, struct ctl_ev *ev)
{
	struct node *n = ev->node;

	if (n->state != NODE_EVICTED)
		return;
	n->hot = false;
	ctl_start_node(c, n, false); /* a probe: HELLO readmits it */
	if (n->state == NODE_EVICTED)
		ctl_evict(c, n, "readmit probe failed");
	else
		transport_commit(c->transport);
}

/* A rank of this attempt never ran: launch.workdir does not exist on its
 * node. */
static bool attempt_no_workdir(const struct ctl *c)
{
	for (int r = 0; r < c->world_size && r < c->n_slots && c->ranks; r++)
		if (c->ranks[r].done && c->ranks[r].no_workdir)
			return true;
	return false;
}

/* "attempt N failed: WHY; recovering", WHY left out when
 * act_rank_failed has just printed it. */
static void say_recovering(struct ctl *c, const char *why)
{
	/* notes[].why keeps 250 bytes */
	if (c->said_why[0] && !strncmp(why, c->said_why, 250))
		fprintf(stderr, "herd: attempt %d failed; recovering\n",
			c->attempt);
	else
		fprintf(stderr, "herd: attempt %d failed: %s; recovering\n",
			c->attempt, why);
}

/* Every rank of the attempt ended with 127 or 126: the shell found no
 * command (127) or could not run it (126), and the next attempt runs
 * the same command on the same nodes.  Says so in one line naming the
 * command and returns true. */
static bool attempt_no_command(struct ctl *c)
{
	int first = 0;

	if (!c->ranks || c->world_size <= 0)
		return false;
	for (int r = 0; r < c->world_size && r < c->n_slots; r++) {
		if (!c->ranks[r].done ||
		    (c->ranks[r].status != 127 && c->ranks[r].status != 126))
			return false;
		if (!first)
			first = c->ranks[r].status;
	}
	fprintf(stderr,
		"herd: every rank exited with status %d (%s): launch.command "
		"'%.300s'; not restarting, a restart runs the same command\n",
		first,
		first == 127 ? "command not found" : "command not executable",
		c->spec->launch.command);
	return true;
}

/* RUN, attempt failed: stop its ranks everywhere, then recover or end. */
void act_attempt_failed(struct ctl *c, struct ctl_ev *ev)
{
	bool restarts_left;

	ctl_record_failure(c, ev->status, ev->why);
	c->failed_at_ms = loop_now_ms();
	ctl_rejoin_attempt_over(c, ev->why);
	events_emit(c->ev, "attempt_end",
		    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
			      "reason", ev->why, "status", ev->status));
	restarts_left = c->attempt < 1 + c->spec->restart.max &&
			c->interrupts == 0 && !c->no_restart;
	if (restarts_left && attempt_no_workdir(c)) {
		fprintf(stderr, "herd: not restarting: a restart cannot make "
				"the missing workdir\n");
		restarts_left = false;
		c->no_restart = true;
	}
	if (!restarts_left) {
		if (c->interrupts == 0 && !c->no_restart &&
		    c->spec->restart.max > 0)
			fprintf(stderr,
				"herd: restart limit reached (restart.max "
				"%d)\n",
				c->spec->restart.max);
		c->final_failure = true;
		ctl_post_stop(c, CTL_EV_FINISH, c->spec->health.grace_ms,
			      SIGTERM, NULL);
		return;
	}
	/* 127, 126: whether every rank failed so is known once they all
	 * ended; the verdict and the line wait for check_recovered. */
	c->exec_suspect = ev->status == 127 || ev->status == 126;
	if (!c->exec_suspect)
		say_recovering(c, ev->why);
	ctl_post(c, CTL_EV_RECOVER, NULL, 0, NULL);
}

/* RUN, a straggler's checkpoint boundary (health.straggler: evict): the
 * node is evicted and the attempt fails, so recovery takes a spare. */
void act_straggler(struct ctl *c, struct ctl_ev *ev)
{
	struct node *n = ev->node;
	char why[700];

	if (!n || !n->straggler_evict || !n->member || n->state != NODE_UP)
		return;
	n->straggler_evict = false;
	fprintf(stderr, "herd: %s: evicting straggler node %s\n", ev->why,
		n->host);
	ctl_evict(c, n, "straggler");
	snprintf(why, sizeof(why), "node %s evicted as a straggler", n->host);
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

/* Every rank of the attempt has ended. */
bool ctl_all_ranks_ended(const struct ctl *c)
{
	for (int r = 0; r < c->world_size && r < c->n_slots && c->ranks; r++)
		if (!c->ranks[r].done)
			return false;
	return true;
}

/* RUN -> RECOVER: every surviving member stops its ranks and says so; a
 * straggler marked for eviction goes now (its restart came before a
 * checkpoint), when it can still be replaced or done without.  After a
 * 127 or 126 the other ranks get CTL_EXEC_WAIT_MS to end on their own
 * first: a rank stopped before its shell looked for the command would
 * hide that none of them can run. */
void act_recover(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (c->exec_suspect && !ctl_all_ranks_ended(c)) {
		c->exec_wait = true;
		if (c->stop_timer)
			loop_timer_del(c->loop, c->stop_timer);
		c->stop_timer = loop_timer_add(c->loop, CTL_EXEC_WAIT_MS,
					       ctl_on_stop_timeout, c);
		return;
	}
	ctl_recover_stop(c);
}

void ctl_recover_stop(struct ctl *c)
{
	c->exec_wait = false;
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];
		char whynot[160];

		if (n->straggler_evict && n->member && n->state == NODE_UP) {
			n->straggler_evict = false;
			if (ctl_straggler_can_evict(c, true, whynot,
						    sizeof(whynot))) {
				fprintf(stderr,
					"herd: evicting straggler node %s at "
					"the restart\n",
					n->host);
				ctl_evict(c, n, "straggler");
				continue;
			}
			fprintf(stderr, "herd: straggler node %s stays: %s\n",
				n->host, whynot);
		}
		n->straggler_evict = false;
		if (n->member && n->state == NODE_UP) {
			/* The attempt's group is over: ranks that speak
			 * herd.elastic leave it at once (leave), so that
			 * one blocked in a collective with the failed node
			 * can act on the SIGTERM. */
			n->stopped = false;
			ctl_send_stop(c, n, c->spec->health.grace_ms, SIGTERM,
				      false, true);
		}
	}
	if (c->stop_timer)
		loop_timer_del(c->loop, c->stop_timer);
	c->stop_timer = loop_timer_add(c->loop, c->spec->health.grace_ms + 5000,
				       ctl_on_stop_timeout, c);
	ctl_check_recovered(c);
}

/* A node failed (channel broken, heartbeats silent, agent error): it is
 * evicted.  Returns true when it was a member of the job (then it was
 * said and is an event); a probe or a warm spare goes quietly. */
bool ctl_node_out(struct ctl *c, struct node *n, const char *reason,
		  bool connecting)
{
	if (!n || n->state == NODE_EVICTED || n->state == NODE_GONE ||
	    n->state == NODE_SPARE)
		return false;
	ctl_check_node_failed(c, n, reason);
	if (!n->member) {
		ctl_evict(c, n, reason);
		return false;
	}
	/* silent_ms: since its last frame, what detection cost (failcost.h) */
	events_emit(c->ev, "node_failed",
		    json_pack("{s:s, s:s, s:i, s:I}", "host", n->host, "reason",
			      reason, "attempt", c->attempt, "silent_ms",
			      (json_int_t)(n->last_rx_ms > 0
					       ? loop_now_ms() - n->last_rx_ms
					       : 0)));
	if (connecting) {
		if (c->tty)
			fputc('\n', stderr);
		fprintf(stderr, "herd: %s\n", reason);
	} else {
		fprintf(stderr, "herd: node %s failed: %s\n", n->host, reason);
		/* the attempt's reason when it fails for it (say_recovering) */
		snprintf(c->said_why, sizeof(c->said_why),
			 "node %s failed: %.200s", n->host, reason);
	}
	/* Neither herd's set-up nor a stop from outside is the node's
	 * fault. */
	if (!n->setup_error && !n->stopped_outside)
		ctl_node_note(c, n, "failed", reason);
	ctl_evict(c, n, reason);
	return true;
}

void act_node_failed_connect(struct ctl *c, struct ctl_ev *ev)
{
	if (!ctl_node_out(c, ev->node, ev->why, true))
		return;
	ctl_progress(c, false);
	ctl_check_connected(c);
}

/* launch.mode pmix: the ranks that were on node n (and not done) are
 * told to the survivors as failed. */
void ctl_notify_node_lost(struct ctl *c, struct node *n)
{
	int idx = (int)(n - c->nodes), *ranks, k = 0;

	if (c->spec->launch.mode != SPEC_MODE_PMIX || !c->ranks ||
	    !(ranks = calloc((size_t)c->world_size, sizeof(*ranks))))
		return;
	for (int r = 0; r < c->world_size; r++)
		if (c->ranks[r].node == idx && !c->ranks[r].done)
			ranks[k++] = r;
	ctl_event_proc_failed(c, "node", 1, n->host, ranks, k);
	free(ranks);
}

/* The attempt failed (status, why): with launch.mode pmix and
 * health.notify_grace, the survivors (already told) get their grace
 * first. */
void ctl_fail_or_notify(struct ctl *c, int status, const char *why)
{
	if (c->spec->launch.mode == SPEC_MODE_PMIX &&
	    c->spec->health.notify_grace_ms > 0)
		ctl_post(c, CTL_EV_NOTIFY, NULL, status, why);
	else
		ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, status, why);
}

void act_node_failed_run(struct ctl *c, struct ctl_ev *ev)
{
	char why[sizeof(ev->why) + 64];

	if (!ctl_node_out(c, ev->node, ev->why, false))
		return;
	if (ctl_rejoin_start(c, ev->node))
		return; /* the survivors keep training */
	snprintf(why, sizeof(why), "node %s failed: %s", ev->node->host,
		 ev->why);
	ctl_notify_node_lost(c, ev->node);
	ctl_fail_or_notify(c, 1, why);
}

void act_node_failed_recover(struct ctl *c, struct ctl_ev *ev)
{
	if (ctl_node_out(c, ev->node, ev->why, false))
		ctl_check_recovered(c);
}

void act_node_failed_backoff(struct ctl *c, struct ctl_ev *ev)
{
	ctl_node_out(c, ev->node, ev->why, false);
}

/* Replaces evicted members with spares (warm ones first), as many as
 * the job is missing.  Returns how many are still connecting. */
int ctl_take_spares(struct ctl *c)
{
	int have = ctl_count_nodes(c, NODE_UP, 1) +
		   ctl_count_nodes(c, NODE_CONNECTING, 1);
	bool started = false;

	for (int pass = 0; pass < 2 && have < c->want_nodes; pass++) {
		for (int i = 0; i < c->n_nodes && have < c->want_nodes; i++) {
			struct node *n = &c->nodes[i];
			/* A hot spare still connecting joins as it comes
			 * up (ctl/warm.c). */
			bool warm = !n->member &&
				    (n->state == NODE_UP ||
				     (n->state == NODE_CONNECTING && n->hot));
			bool idle = n->state == NODE_SPARE;

			if (pass == 0 ? !warm : !idle)
				continue;
			events_emit(c->ev, "spare_used",
				    json_pack("{s:s, s:i}", "host", n->host,
					      "attempt", c->attempt + 1));
			fprintf(stderr, "herd: spare %s joins the job\n",
				n->host);
			if (warm) {
				n->member = true;
				c->spares_warm_taken++;
			} else {
				ctl_start_node(c, n, true);
				if (n->state == NODE_EVICTED)
					continue;
				started = true;
				c->spares_cold_taken++;
			}
			/* A spare runs no ranks: nothing of it to stop, so
			 * recovery must not wait for its STOPPED. */
			n->stopped = true;
			have++;
		}
	}
	if (started)
		transport_commit(c->transport);
	return ctl_count_nodes(c, NODE_CONNECTING, 1);
}

struct node *ctl_take_spare_now(struct ctl *c)
{
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < c->n_nodes; i++) {
			struct node *n = &c->nodes[i];
			bool warm = n->state == NODE_UP && !n->member;

			if (pass == 0 ? !warm : n->state != NODE_SPARE)
				continue;
			events_emit(c->ev, "spare_used",
				    json_pack("{s:s, s:i}", "host", n->host,
					      "attempt", c->attempt));
			fprintf(stderr, "herd: spare %s joins the job\n",
				n->host);
			if (warm) {
				n->member = true;
				return n;
			}
			ctl_start_node(c, n, true);
			if (n->state == NODE_EVICTED)
				continue;
			transport_commit(c->transport);
			return n;
		}
	}
	return NULL;
}

/* Why the job ends with up members, with the key to change named:
 * nodes.min is every node unless set, so a job without spares ends with
 * its first lost node. */
static void too_few_why(const struct ctl *c, int up, char *buf, size_t size)
{
	const struct spec *s = c->spec;

	snprintf(buf, size,
		 "only %d node%s left, nodes.min is %d%s; giving up: set "
		 "nodes.min lower in %s to go on with fewer nodes, or add "
		 "nodes.spares",
		 up, up == 1 ? "" : "s", c->min_nodes,
		 s->nodes.min > 0 ? "" : " (every node: the default)",
		 s->path ? s->path : "the job file");
}

static void on_backoff(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->backoff_timer = 0;
	ctl_post(c, CTL_EV_BACKOFF_OVER, NULL, 0, NULL);
}

void act_backoff_over(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (ctl_count_nodes(c, NODE_UP, 1) < c->min_nodes) {
		char why[320];

		too_few_why(c, ctl_count_nodes(c, NODE_UP, 1), why,
			    sizeof(why));
		fprintf(stderr, "herd: %s\n", why);
		ctl_give_up(c);
		return;
	}
	ctl_post_next_attempt(c);
}

/* Recovery goes on until every surviving member confirmed its ranks
 * gone and every joining spare is up or failed (RECOVER only). */
void ctl_check_recovered(struct ctl *c)
{
	int up;

	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->member && n->state == NODE_UP && !n->stopped)
			return;
	}
	if (c->exec_suspect) {
		c->exec_suspect = false;
		if (attempt_no_command(c)) {
			c->no_restart = true;
			ctl_give_up(c);
			return;
		}
		say_recovering(c, c->notes[c->attempt - 1].why);
	}
	if (ctl_take_spares(c) > 0)
		return;
	up = ctl_count_nodes(c, NODE_UP, 1);
	if (up < c->min_nodes) {
		char why[320];

		too_few_why(c, up, why, sizeof(why));
		fprintf(stderr, "herd: %s\n", why);
		ctl_give_up(c);
		return;
	}
	if (up < c->want_nodes) {
		c->recover_short = true;
		fprintf(stderr,
			"herd: no spare left; continuing with %d of %d nodes "
			"(nodes.min %d)\n",
			up, c->want_nodes, c->min_nodes);
	}
	ctl_post(c, CTL_EV_RECOVERED, NULL, 0, NULL);
}

void act_check_recovered(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	ctl_check_recovered(c);
}

/* The wait before the next attempt, counted from the failure.
 *
 * The failures since training last made progress form a streak: the
 * attempt that failed is the first of its streak when it started from a
 * newer checkpoint than the one before it, or ran CTL_HEALTHY_MS, or is
 * the job's first.  restart.backoff is for a crash loop, not for a
 * failure:
 *   - the first failure of a streak waits nothing when it ran healthy,
 *     or when the members it lost were all replaced by spares (none
 *     missing: the next attempt has every node it had);
 *   - any other waits restart.backoff, doubled for each earlier failure
 *     of its streak, at most CTL_BACKOFF_MAX_MS. */
int64_t ctl_backoff_ms(const struct ctl *c, int64_t now_ms)
{
	int64_t backoff = c->spec->restart.backoff_ms;
	bool healthy = now_ms - c->attempt_started_ms >= CTL_HEALTHY_MS;
	int first = c->progress_attempt > 1 ? c->progress_attempt : 1;

	if (healthy)
		first = c->attempt;
	if (c->attempt <= first &&
	    (healthy || (c->spares_warm_taken + c->spares_cold_taken > 0 &&
			 !c->recover_short)))
		return 0;
	for (int k = first; k < c->attempt && backoff < CTL_BACKOFF_MAX_MS; k++)
		backoff *= 2;
	return backoff > CTL_BACKOFF_MAX_MS ? CTL_BACKOFF_MAX_MS : backoff;
}

/* RECOVER -> BACKOFF: the next attempt after restart.backoff. */
void act_backoff(struct ctl *c, struct ctl_ev *ev)
{
	int64_t backoff;

	(void)ev;
	backoff = ctl_backoff_ms(c, c->failed_at_ms);
	/* The backoff counts from the failure: time spent stopping ranks
	 * and bringing in spares is already part of it. */
	backoff -= loop_now_ms() - c->failed_at_ms;
	c->backoff_timer =
	    loop_timer_add(c->loop, backoff > 0 ? backoff : 0, on_backoff, c);
}
