/* ctl/heartbeat.c — herd's heartbeats and silence detection, herd's own
 * stalls, and the signals herd takes (Ctrl-C, SIGTERM, SIGHUP, Ctrl-Z).
 * Signals reach herd as loop callbacks (loop_on_signal), never inside
 * a handler: Ctrl-C and the like post INTERRUPT, Ctrl-Z starts the pause.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/ctl/ctl_int.h"

/* How often heartbeats are due to go out and silence is looked at: a
 * tenth of health.timeout, between 50 ms and the heartbeat interval.  The
 * tick also wakes exactly when a node's silence reaches the limit
 * (silence_wait), so a partition is noticed the limit after the node's
 * last frame, not up to a tick later. */
static int64_t check_interval(const struct ctl *c)
{
	int64_t iv = c->spec->health.timeout_ms / 10;

	if (iv > c->spec->health.heartbeat_ms)
		iv = c->spec->health.heartbeat_ms;
	return iv < 50 ? 50 : iv;
}

/* The silence after which a node is failed (spec.h states the rule and
 * its arithmetic: a blip of half health.timeout never reaches it). */
static int64_t silence_limit(const struct ctl *c)
{
	return spec_silence_limit_ms(c->spec->health.timeout_ms,
				     c->spec->health.heartbeat_ms);
}

/* When n was last heard from: its last whole frame, or bytes of one still
 * coming in (a large frame, a checkpoint's chunk on a slow link, holds
 * the heartbeats that follow it, and the node is alive all the same). */
static int64_t heard_ms(const struct node *n)
{
	int64_t rx = conn_rx_ms(n->conn);

	return rx > n->last_rx_ms ? rx : n->last_rx_ms;
}

/* Milliseconds until the next tick: the interval, or less when herd's
 * next heartbeat is due sooner (sent on time: the silence limit counts
 * one heartbeat interval, not a tick more) or a node's silence reaches
 * the limit sooner. */
static int64_t silence_wait(const struct ctl *c, int64_t now)
{
	int64_t wait = check_interval(c);
	int64_t beat = c->hb_sent_ms +
		       spec_herd_beat_ms(c->spec->health.heartbeat_ms) - now;

	if (beat < wait)
		wait = beat;

	for (int i = 0; i < c->n_nodes; i++) {
		const struct node *n = &c->nodes[i];
		int64_t left;

		if (n->state != NODE_UP || !n->conn)
			continue;
		left = heard_ms(n) + silence_limit(c) - now;
		if (left < wait)
			wait = left;
	}
	return wait < 1 ? 1 : wait;
}

/* A tick this late means herd itself did not run (SIGSTOP, a paused VM,
 * a stalled machine): at least 500 ms, and two intervals, so that a busy
 * machine's ordinary lateness is not taken for a stall. */
#define CTL_STALL_MIN_MS 500

/* CLOCK_BOOTTIME - CLOCK_MONOTONIC: grows by the time the machine was
 * suspended, which CLOCK_MONOTONIC (loop_now_ms) does not count. */
static int64_t boot_gap_ms(void)
{
	struct timespec b, m;

	if (clock_gettime(CLOCK_BOOTTIME, &b) < 0 ||
	    clock_gettime(CLOCK_MONOTONIC, &m) < 0)
		return 0;
	return ((int64_t)b.tv_sec - m.tv_sec) * 1000 +
	       (b.tv_nsec - m.tv_nsec) / 1000000;
}

/* How long herd did not run before this tick: 0, or the stall when it is
 * long enough to count (see CTL_STALL_MIN_MS). */
static int64_t own_stall(struct ctl *c, int64_t now)
{
	int64_t gap = boot_gap_ms(), late = now - c->hb_due_ms;
	int64_t min = 2 * check_interval(c);

	if (gap > c->boot_gap_ms)
		late += gap - c->boot_gap_ms;
	c->boot_gap_ms = gap;
	if (min < CTL_STALL_MIN_MS)
		min = CTL_STALL_MIN_MS;
	return c->hb_due_ms > 0 && late >= min ? late : 0;
}

/* herd did not run for stall_ms: the silence it sees is its own, and the
 * nodes' frames of that time still wait in sockets and transport threads
 * that have not run yet either.  Every node gets a fresh chance: its
 * silence clock restarts now, so a node that answers is not failed, and a
 * node that really died is still caught the limit after the resume. */
static void restart_silence_clocks(struct ctl *c, int64_t now, int64_t stall_ms,
				   const char *what)
{
	fprintf(stderr,
		"herd: %s for %.1f s; every node has %.2f s from now to "
		"answer\n",
		what, (double)stall_ms / 1000.0,
		(double)silence_limit(c) / 1000.0);
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].state == NODE_UP && c->nodes[i].conn)
			c->nodes[i].last_rx_ms = now;
	c->hb_sent_ms = 0; /* heartbeats go out at once */
}

/* Heartbeats: herd sends its own every spec_herd_beat_ms (two
 * health.heartbeats: each frame wakes an agent, and the agents answer at
 * once, so their frames come back together), and fails a node it has not
 * heard from for the silence limit (a partition is caught here, not by
 * TCP) unless herd itself was the one not running. */
static void on_heartbeat_tick(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	int64_t now = loop_now_ms();
	int64_t stall = own_stall(c, now);
	char *hb = NULL;
	size_t hb_len = 0;
	bool send;

	ctl_check_events(c);
	if (stall > 0)
		restart_silence_clocks(c, now, stall, "herd did not run");
	send = now - c->hb_sent_ms >=
	       spec_herd_beat_ms(c->spec->health.heartbeat_ms);
	if (send) {
		/* The same heartbeat for every node: encoded once per tick
		 * (with 1,000 nodes, packing and encoding it per node was a
		 * good part of an idle job's cost). */
		json_t *body = json_pack(
		    "{s:I, s:I}", "interval_ms",
		    (json_int_t)c->spec->health.heartbeat_ms, "timeout_ms",
		    (json_int_t)c->spec->health.timeout_ms);

		c->hb_sent_ms = now;
		hb =
		    proto_encode(PROTO_HEARTBEAT, body, NULL, 0, &hb_len, NULL);
		json_decref(body);
	}
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->state != NODE_UP || !n->conn)
			continue;
		if (now - heard_ms(n) >= silence_limit(c)) {
			char why[256], to[SPEC_DURATION_TEXT],
			    beat[SPEC_DURATION_TEXT], rto[SPEC_DURATION_TEXT];

			snprintf(
			    why, sizeof(why),
			    "no heartbeat for %.1f s (health.timeout "
			    "%s + heartbeat %s + %s for TCP's "
			    "retransmission)",
			    (double)(now - heard_ms(n)) / 1000.0,
			    spec_duration_text(c->spec->health.timeout_ms, to,
					       sizeof(to)),
			    spec_duration_text(c->spec->health.heartbeat_ms,
					       beat, sizeof(beat)),
			    spec_duration_text(SPEC_SILENCE_RTO_MS, rto,
					       sizeof(rto)));
			ctl_post(c, CTL_EV_NODE_FAILED, n, 0, why);
			continue;
		}
		if (hb)
			ctl_send_encoded(c, n, PROTO_HEARTBEAT, hb, hb_len);
	}
	free(hb);
	now = loop_now_ms();
	c->hb_due_ms = now + silence_wait(c, now);
	c->hb_timer =
	    loop_timer_add(loop, c->hb_due_ms - now, on_heartbeat_tick, c);
}

/* --- signals ------------------------------------------------------------- */

/* Sends SIGNAL {signal} to every agent that is up: SIGSTOP pauses the
 * ranks (each rank's process group; see agent/health.c health_pause),
 * SIGCONT resumes them. */
static void signal_agents(struct ctl *c, int sig)
{
	json_t *body = json_pack("{s:i}", "signal", sig);

	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].state == NODE_UP && c->nodes[i].conn)
			ctl_send(c, &c->nodes[i], PROTO_SIGNAL, body, NULL, 0);
	json_decref(body);
}

/* 1 s: the longest herd waits for its agents to take the pause before it
 * stops itself (each answers at once with a heartbeat; a node that does
 * not is paused when herd is continued, or caught by silence then). */
#define CTL_PAUSE_WAIT_MS 1000
/* 10 ms: how often herd looks whether every agent has answered. */
#define CTL_PAUSE_POLL_MS 10

static void on_suspend(struct loop *loop, int sig, void *arg);

/* herd is continued (SIGCONT, `fg`): the ranks go on, heartbeats at
 * once, and the silence of the pause is not held against any node. */
static void resume(struct ctl *c, int64_t stopped_ms)
{
	c->paused = false;
	/* The tick that follows is late by the pause: not a second stall. */
	c->hb_due_ms = 0;
	c->boot_gap_ms = boot_gap_ms();
	signal_agents(c, SIGCONT);
	restart_silence_clocks(c, loop_now_ms(), stopped_ms,
			       "resumed after a pause");
	fprintf(stderr, "herd: the ranks continue\n");
	events_emit(c->ev, "job_resumed",
		    json_pack("{s:i, s:I}", "attempt", c->attempt, "paused_ms",
			      (json_int_t)stopped_ms));
}

/* Stops herd the way the terminal asked (SIGTSTP's default action, which
 * the kernel drops for an orphaned process group: then herd goes on at
 * once), and resumes the job when herd is continued. */
static void stop_self(struct ctl *c)
{
	int64_t t0 = loop_now_ms();

	ctl_status_pause(c, true);
	signal(SIGTSTP, SIG_DFL);
	raise(SIGTSTP);
	/* Continued (or never stopped). */
	if (loop_on_signal(c->loop, SIGTSTP, on_suspend, c) < 0)
		fprintf(stderr, "herd: SIGTSTP: %s\n", strerror(errno));
	resume(c, loop_now_ms() - t0);
	ctl_status_pause(c, false);
}

/* Polls until every agent answered the pause (a frame after the SIGNAL,
 * herd's own queue empty) or CTL_PAUSE_WAIT_MS passed, then stops herd. */
static void on_pause_wait(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	int64_t now = loop_now_ms();
	bool all = true;

	c->pause_timer = 0;
	for (int i = 0; i < c->n_nodes && all; i++) {
		const struct node *n = &c->nodes[i];

		if (n->state == NODE_UP && n->conn &&
		    (conn_pending(n->conn) > 0 ||
		     n->last_rx_ms <= c->pause_sent_ms))
			all = false;
	}
	if (!all && now - c->pause_sent_ms < CTL_PAUSE_WAIT_MS) {
		c->pause_timer =
		    loop_timer_add(loop, CTL_PAUSE_POLL_MS, on_pause_wait, c);
		return;
	}
	stop_self(c);
}

/* Ctrl-Z (SIGTSTP), as mpirun does: every rank is stopped (SIGSTOP to
 * its process group: a rank may ignore SIGTSTP) and the agents stop
 * watching herd's silence; then herd stops itself.  SIGCONT (`fg`, `bg`)
 * continues the ranks.  (A SIGSTOP gives no warning: herd notices it
 * afterwards, see own_stall.) */
static void on_suspend(struct loop *loop, int sig, void *arg)
{
	struct ctl *c = arg;

	(void)sig;
	if (c->paused || ctl_serves(c, CTL_SERVE_ENDING))
		return;
	c->paused = true;
	c->pause_sent_ms = loop_now_ms();
	signal_agents(c, SIGSTOP);
	fprintf(stderr, "\nherd: suspended: every rank is stopped (fg or "
			"SIGCONT continues them)\n");
	events_emit(c->ev, "job_paused",
		    json_pack("{s:i}", "attempt", c->attempt));
	c->pause_timer =
	    loop_timer_add(loop, CTL_PAUSE_POLL_MS, on_pause_wait, c);
}

/* Ctrl-C, SIGTERM, SIGHUP: the ranks get the signal itself, then SIGKILL
 * after grace; a second one kills at once.  A pause not yet taken is
 * dropped (the agents continue paused ranks when they stop them). */
static void on_interrupt(struct loop *loop, int sig, void *arg)
{
	(void)loop;
	ctl_interrupt(arg, sig);
}

void ctl_interrupt(struct ctl *c, int sig)
{
	struct loop *loop = c->loop;
	char why[64];

	if (c->pause_timer) {
		loop_timer_del(loop, c->pause_timer);
		c->pause_timer = 0;
		c->paused = false;
	}
	c->interrupts++;
	/* Nodes that go now, or went a moment ago as scancel's SIGTERM
	 * reached their agents too, did not fail. */
	ctl_nodes_stopped(c);
	snprintf(why, sizeof(why), "interrupted (%s)", strsignal(sig));
	ctl_record_failure(c, 128 + sig, why);
	/* A running attempt's attempt_end says why (act_interrupt). */
	if (c->interrupts == 1) {
		fprintf(stderr,
			"\nherd: %s: stopping all ranks (again to kill them "
			"at once)\n",
			strsignal(sig));
		ctl_post_stop(c, CTL_EV_INTERRUPT, c->spec->health.grace_ms,
			      sig, why);
	} else {
		fprintf(stderr, "\nherd: killing all ranks\n");
		ctl_post_stop(c, CTL_EV_INTERRUPT, 0, SIGKILL, why);
	}
}

/* Ctrl-C, SIGTERM and SIGHUP end the job; SIGTSTP pauses it, unless
 * herd inherited it ignored (nohup-like wrappers, a shell without job
 * control in a script: then Ctrl-Z means nothing to herd either).
 * nohup (or a parent that ignores SIGHUP for us) means: keep running
 * when the terminal goes; SIGINT stays ours even in the background,
 * where scripts send it to stop a job. */
int ctl_signals_init(struct ctl *c)
{
	if (loop_on_signal(c->loop, SIGINT, on_interrupt, c) < 0 ||
	    loop_on_signal(c->loop, SIGTERM, on_interrupt, c) < 0 ||
	    loop_on_signal_unless_ignored(c->loop, SIGHUP, on_interrupt, c) <
		0 ||
	    loop_on_signal_unless_ignored(c->loop, SIGTSTP, on_suspend, c) < 0)
		return -1;
	return 0;
}

void ctl_heartbeat_start(struct ctl *c)
{
	c->hb_sent_ms = loop_now_ms();
	c->hb_due_ms = c->hb_sent_ms + check_interval(c);
	c->boot_gap_ms = boot_gap_ms();
	c->hb_timer =
	    loop_timer_add(c->loop, check_interval(c), on_heartbeat_tick, c);
}
