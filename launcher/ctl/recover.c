/* ctl/ctl.c — the job controller's lifecycle (DESIGN.md steps 3-8).
 *
 * One loop, one table.  Every node is a conn (conn.h, its arg is the node)
 * whose frames arrive here whichever transport started its agent; frames
 * dispatch through frame_handlers[] by type.  What happens to the job (a
 * node up or failed, a rank's failure, a timer, Ctrl-C) is posted as an
 * event (ctl_post) and handled later from the loop, one at a time, through
 * ctl_table[]: (state, event) -> (next state, action).  A handler never
 * runs inside the call that noticed its event, so no send, frame or timer
 * sees the lifecycle change under it.  An attempt
 * fails when a rank exits non-zero, hangs, or its node fails (channel
 * broken, heartbeats silent for health.timeout).  Then the controller
 * stops the ranks everywhere and waits for every surviving agent to
 * confirm, evicts failed nodes, takes spares or shrinks within nodes.min,
 * finds the newest complete checkpoint and launches the next attempt
 * after restart.backoff, until restart.max is spent.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/ctl/ctl_int.h"
#include "launcher/model/jobrun.h"
#include "launcher/model/plan.h"
#include "herd/checkpoint.h"
#include "herd/proc.h"
#include "herd/render.h"
#include "herd/usage.h"
#include "herd/version.h"

/* --- the lifecycle table --------------------------------------------------- */

static void act_check_connected(struct ctl *c, struct ctl_ev *ev);
static void act_check_recovered(struct ctl *c, struct ctl_ev *ev);
static void act_node_failed_connect(struct ctl *c, struct ctl_ev *ev);
static void act_node_failed_run(struct ctl *c, struct ctl_ev *ev);
static void act_node_failed_recover(struct ctl *c, struct ctl_ev *ev);
static void act_node_failed_backoff(struct ctl *c, struct ctl_ev *ev);
static void act_node_gone(struct ctl *c, struct ctl_ev *ev);
static void act_launch(struct ctl *c, struct ctl_ev *ev);
static void act_rank_failed(struct ctl *c, struct ctl_ev *ev);
static void act_rank_note(struct ctl *c, struct ctl_ev *ev);
static void act_completed(struct ctl *c, struct ctl_ev *ev);
static void act_hung(struct ctl *c, struct ctl_ev *ev);
static void act_abort(struct ctl *c, struct ctl_ev *ev);
static void act_attempt_failed(struct ctl *c, struct ctl_ev *ev);
static void act_recover(struct ctl *c, struct ctl_ev *ev);
static void act_recover_timeout(struct ctl *c, struct ctl_ev *ev);
static void act_backoff(struct ctl *c, struct ctl_ev *ev);
static void act_backoff_over(struct ctl *c, struct ctl_ev *ev);
static void act_finish(struct ctl *c, struct ctl_ev *ev);
static void act_kill(struct ctl *c, struct ctl_ev *ev);
static void act_hang_up(struct ctl *c, struct ctl_ev *ev);
static void act_readmit(struct ctl *c, struct ctl_ev *ev);
static void act_hung_more(struct ctl *c, struct ctl_ev *ev);
static void act_stacks(struct ctl *c, struct ctl_ev *ev);
static void act_stacks_done(struct ctl *c, struct ctl_ev *ev);
static void act_node_failed_stacks(struct ctl *c, struct ctl_ev *ev);
static void act_abort_stacks(struct ctl *c, struct ctl_ev *ev);
static void act_finish_stacks(struct ctl *c, struct ctl_ev *ev);
static void act_preflight(struct ctl *c, struct ctl_ev *ev);
static void act_preflight_step(struct ctl *c, struct ctl_ev *ev);
static void act_node_failed_preflight(struct ctl *c, struct ctl_ev *ev);
static void act_straggler(struct ctl *c, struct ctl_ev *ev);
static void act_notify(struct ctl *c, struct ctl_ev *ev);
static void act_notify_rank(struct ctl *c, struct ctl_ev *ev);
static void act_notify_node(struct ctl *c, struct ctl_ev *ev);
static void act_notify_check(struct ctl *c, struct ctl_ev *ev);
static void act_notify_over(struct ctl *c, struct ctl_ev *ev);
static void act_notify_finish(struct ctl *c, struct ctl_ev *ev);

/* Every transition of the job (flux-core broker/state_machine.c is the
 * model).  An event without a row in the current state is dropped when it
 * reports on a phase that may already be over (ctl_events[].late), else it
 * is a bug and said on stderr. */
const struct ctl_row ctl_table[] = {
	{CTL_CONNECT, CTL_EV_START, CTL_CONNECT, act_check_connected},
	{CTL_CONNECT, CTL_EV_NODE_UP, CTL_CONNECT, act_check_connected},
	{CTL_CONNECT, CTL_EV_NODE_FAILED, CTL_CONNECT, act_node_failed_connect},
	{CTL_CONNECT, CTL_EV_READMIT, CTL_CONNECT, act_readmit},
	{CTL_CONNECT, CTL_EV_LAUNCH, CTL_RUN, act_launch},
	{CTL_CONNECT, CTL_EV_FINISH, CTL_STOPPING, act_finish},
	{CTL_CONNECT, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

	{CTL_RUN, CTL_EV_NODE_FAILED, CTL_RUN, act_node_failed_run},
	{CTL_RUN, CTL_EV_READMIT, CTL_RUN, act_readmit},
	{CTL_RUN, CTL_EV_RANK_FAILED, CTL_RUN, act_rank_failed},
	{CTL_RUN, CTL_EV_HUNG, CTL_STACKS, act_hung},
	{CTL_RUN, CTL_EV_ABORT, CTL_RUN, act_abort},
	{CTL_RUN, CTL_EV_STRAGGLER, CTL_RUN, act_straggler},
	{CTL_RUN, CTL_EV_ATTEMPT_FAILED, CTL_RUN, act_attempt_failed},
	{CTL_RUN, CTL_EV_RECOVER, CTL_RECOVER, act_recover},
	{CTL_RUN, CTL_EV_RANKS_DONE, CTL_STOPPING, act_completed},
	{CTL_RUN, CTL_EV_FINISH, CTL_STOPPING, act_finish},
	{CTL_RUN, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

	/* A rank hung: every rank's stack before the attempt fails
	 * (ctl/hang.c); ranks that die of the SIGABRT that got Python's
	 * traceback are only noted. */
	{CTL_STACKS, CTL_EV_HUNG, CTL_STACKS, act_hung_more},
	{CTL_STACKS, CTL_EV_STACKS, CTL_STACKS, act_stacks},
	{CTL_STACKS, CTL_EV_STACKS_DONE, CTL_RUN, act_stacks_done},
	{CTL_STACKS, CTL_EV_NODE_FAILED, CTL_STACKS, act_node_failed_stacks},
	{CTL_STACKS, CTL_EV_READMIT, CTL_STACKS, act_readmit},
	{CTL_STACKS, CTL_EV_RANK_FAILED, CTL_STACKS, act_rank_note},
	{CTL_STACKS, CTL_EV_ABORT, CTL_STACKS, act_abort_stacks},
	{CTL_STACKS, CTL_EV_FINISH, CTL_STOPPING, act_finish_stacks},
	{CTL_STACKS, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish_stacks},

	{CTL_RECOVER, CTL_EV_NODE_UP, CTL_RECOVER, act_check_recovered},
	{CTL_RECOVER, CTL_EV_STOPPED, CTL_RECOVER, act_check_recovered},
	{CTL_RECOVER, CTL_EV_NODE_FAILED, CTL_RECOVER, act_node_failed_recover},
	{CTL_RECOVER, CTL_EV_READMIT, CTL_RECOVER, act_readmit},
	{CTL_RECOVER, CTL_EV_RANK_FAILED, CTL_RECOVER, act_rank_note},
	{CTL_RECOVER, CTL_EV_STOP_TIMER, CTL_RECOVER, act_recover_timeout},
	{CTL_RECOVER, CTL_EV_RECOVERED, CTL_BACKOFF, act_backoff},
	{CTL_RECOVER, CTL_EV_FINISH, CTL_STOPPING, act_finish},
	{CTL_RECOVER, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

	{CTL_BACKOFF, CTL_EV_NODE_FAILED, CTL_BACKOFF, act_node_failed_backoff},
	{CTL_BACKOFF, CTL_EV_READMIT, CTL_BACKOFF, act_readmit},
	{CTL_BACKOFF, CTL_EV_RANK_FAILED, CTL_BACKOFF, act_rank_note},
	{CTL_BACKOFF, CTL_EV_BACKOFF_OVER, CTL_BACKOFF, act_backoff_over},
	{CTL_BACKOFF, CTL_EV_LAUNCH, CTL_RUN, act_launch},
	{CTL_BACKOFF, CTL_EV_FINISH, CTL_STOPPING, act_finish},
	{CTL_BACKOFF, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

	{CTL_STOPPING, CTL_EV_NODE_FAILED, CTL_STOPPING, act_node_gone},
	{CTL_STOPPING, CTL_EV_RANK_FAILED, CTL_STOPPING, act_rank_note},
	/* A second request only shortens the grace. */
	{CTL_STOPPING, CTL_EV_FINISH, CTL_STOPPING, act_kill},
	{CTL_STOPPING, CTL_EV_INTERRUPT, CTL_STOPPING, act_kill},
	{CTL_STOPPING, CTL_EV_ALL_GONE, CTL_END, NULL},
	{CTL_STOPPING, CTL_EV_STOP_TIMER, CTL_END, act_hang_up},

	/* Issue 14: the health gate (health.preflight, herd check). */
	{CTL_CONNECT, CTL_EV_PREFLIGHT, CTL_PREFLIGHT, act_preflight},
	{CTL_BACKOFF, CTL_EV_PREFLIGHT, CTL_PREFLIGHT, act_preflight},
	{CTL_PREFLIGHT, CTL_EV_NODE_UP, CTL_PREFLIGHT, act_preflight_step},
	{CTL_PREFLIGHT, CTL_EV_CHECKED, CTL_PREFLIGHT, act_preflight_step},
	{CTL_PREFLIGHT, CTL_EV_PROBED, CTL_PREFLIGHT, act_preflight_step},
	{CTL_PREFLIGHT, CTL_EV_NODE_FAILED, CTL_PREFLIGHT,
	 act_node_failed_preflight},
	{CTL_PREFLIGHT, CTL_EV_READMIT, CTL_PREFLIGHT, act_readmit},
	{CTL_PREFLIGHT, CTL_EV_RANK_FAILED, CTL_PREFLIGHT, act_rank_note},
	{CTL_PREFLIGHT, CTL_EV_LAUNCH, CTL_RUN, act_launch},
	{CTL_PREFLIGHT, CTL_EV_FINISH, CTL_STOPPING, act_finish},
	{CTL_PREFLIGHT, CTL_EV_INTERRUPT, CTL_STOPPING, act_finish},

	/* Issue 16: a rank or node failed in a PMIx job and the survivors
	 * were told (PMIx event): they have health.notify_grace to act
	 * before the attempt is stopped; it ends sooner when every one of
	 * them exited.  Further failures are told too; an MPI_Abort now is
	 * a survivor's reaction (Open MPI aborts on the event), not the
	 * program ending the job. */
	{CTL_RUN, CTL_EV_NOTIFY, CTL_NOTIFY, act_notify},
	{CTL_NOTIFY, CTL_EV_RANK_FAILED, CTL_NOTIFY, act_notify_rank},
	{CTL_NOTIFY, CTL_EV_NODE_FAILED, CTL_NOTIFY, act_notify_node},
	{CTL_NOTIFY, CTL_EV_RANK_EXITED, CTL_NOTIFY, act_notify_check},
	{CTL_NOTIFY, CTL_EV_RANKS_DONE, CTL_NOTIFY, act_notify_check},
	{CTL_NOTIFY, CTL_EV_ABORT, CTL_NOTIFY, NULL},
	{CTL_NOTIFY, CTL_EV_READMIT, CTL_NOTIFY, act_readmit},
	{CTL_NOTIFY, CTL_EV_NOTIFY_OVER, CTL_RUN, act_notify_over},
	{CTL_NOTIFY, CTL_EV_ATTEMPT_FAILED, CTL_RUN, act_notify_over},
	{CTL_NOTIFY, CTL_EV_FINISH, CTL_STOPPING, act_notify_finish},
	{CTL_NOTIFY, CTL_EV_INTERRUPT, CTL_STOPPING, act_notify_finish},

	/* The loop is stopping: nothing is left to do. */
	{CTL_END, CTL_EV_ANY_, CTL_END, NULL},
};
const size_t ctl_table_len = sizeof(ctl_table) / sizeof(ctl_table[0]);

static const char *const ctl_state_names[] = {
	[CTL_CONNECT] = "connect", [CTL_RUN] = "run", [CTL_STACKS] = "stacks",
	[CTL_RECOVER] = "recover", [CTL_BACKOFF] = "backoff",
	[CTL_STOPPING] = "stopping", [CTL_END] = "end",
	[CTL_PREFLIGHT] = "preflight", [CTL_NOTIFY] = "notify"};

/* late: the event reports on an attempt or phase that may be over when it
 * is handled (a rank's exit after the attempt failed, a timer that was
 * already due); without a row in the current state it is dropped. */
static const struct {
	const char *name;
	bool late;
} ctl_events[CTL_EV_COUNT_] = {
	[CTL_EV_START] = {"start", false},
	[CTL_EV_NODE_UP] = {"node up", true},
	[CTL_EV_NODE_FAILED] = {"node failed", false},
	[CTL_EV_RANK_FAILED] = {"rank failed", true},
	[CTL_EV_RANKS_DONE] = {"ranks done", true},
	[CTL_EV_HUNG] = {"hung", true},
	[CTL_EV_ABORT] = {"abort", true},
	[CTL_EV_ATTEMPT_FAILED] = {"attempt failed", true},
	[CTL_EV_RECOVER] = {"recover", false},
	[CTL_EV_STOPPED] = {"stopped", true},
	[CTL_EV_RECOVERED] = {"recovered", false},
	[CTL_EV_BACKOFF_OVER] = {"backoff over", true},
	[CTL_EV_LAUNCH] = {"launch", false},
	[CTL_EV_STOP_TIMER] = {"stop timer", true},
	[CTL_EV_FINISH] = {"finish", false},
	[CTL_EV_INTERRUPT] = {"interrupt", false},
	[CTL_EV_ALL_GONE] = {"all gone", false},
	[CTL_EV_READMIT] = {"readmit", true},
	[CTL_EV_STACKS] = {"stacks", true},
	[CTL_EV_STACKS_DONE] = {"stacks done", true},
	[CTL_EV_PREFLIGHT] = {"preflight", false},
	[CTL_EV_CHECKED] = {"checked", true},
	[CTL_EV_PROBED] = {"probed", true},
	[CTL_EV_STRAGGLER] = {"straggler", true},
	[CTL_EV_NOTIFY] = {"notify", false},
	[CTL_EV_NOTIFY_OVER] = {"notify over", true},
	[CTL_EV_RANK_EXITED] = {"rank exited", true},
};

const char *ctl_state_name(enum ctl_state s)
{
	return s < CTL_STATE_COUNT_ ? ctl_state_names[s] : "?";
}

const char *ctl_event_name(enum ctl_event e)
{
	return e < CTL_EV_COUNT_ ? ctl_events[e].name : "?";
}

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

struct ctl_qev {
	struct ctl_ev ev;
	struct ctl_qev *next;
};

static const struct ctl_row *find_row(enum ctl_state state,
				      enum ctl_event event)
{
	for (size_t i = 0; i < ctl_table_len; i++)
		if (ctl_table[i].state == state &&
		    (ctl_table[i].event == event ||
		     ctl_table[i].event == CTL_EV_ANY_))
			return &ctl_table[i];
	return NULL;
}

/* One event through the table. */
static void handle(struct ctl *c, struct ctl_ev *ev)
{
	enum ctl_state from = c->state;
	const struct ctl_row *row = find_row(from, ev->type);

	if (c->trace)
		c->trace(c, from, ev, row, c->trace_arg);
	if (!row) {
		if (!ctl_events[ev->type].late)
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

static int post(struct ctl *c, const struct ctl_ev *ev)
{
	struct ctl_qev *q = calloc(1, sizeof(*q));

	if (!q) {
		/* A lost transition would leave the job in a state nobody
		 * can reason about: die, and the agents stop the ranks when
		 * herd's connection goes. */
		fprintf(stderr, "herd: out of memory queueing event '%s'; "
				"the agents stop the ranks as herd exits\n",
			ctl_event_name(ev->type));
		fflush(stderr);
		_exit(1);
	}
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
		c->drain_timer = loop_timer_add(c->loop, 0, drain, c);
		if (c->drain_timer < 0) {
			c->drain_timer = 0;
			fprintf(stderr, "herd: out of memory: events wait\n");
		}
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
	return post(c, &ev);
}

/* FINISH or INTERRUPT: every agent stops its ranks (sig, SIGKILL after
 * grace_ms) and exits. */
static int post_stop(struct ctl *c, enum ctl_event event, long grace_ms,
		     int sig)
{
	struct ctl_ev ev = {.type = event, .status = sig, .grace_ms = grace_ms};

	return post(c, &ev);
}

static void queue_clear(struct ctl *c)
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

static int count_nodes(const struct ctl *c, enum node_state state,
		       int member)
{
	int k = 0;

	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].state == state &&
		    (member < 0 || c->nodes[i].member == (member > 0)))
			k++;
	return k;
}

static void progress(struct ctl *c, bool final)
{
	int up = count_nodes(c, NODE_UP, 1);
	int failed = count_nodes(c, NODE_EVICTED, -1);

	if (!c->tty)
		return;
	fprintf(stderr, "\rherd: %d/%d nodes up", up, c->want_nodes);
	if (failed)
		fprintf(stderr, ", %d failed", failed);
	fputs(final ? "\n" : "   ", stderr);
}

/* Records the attempt's first failure: its status and why. */
static void record_failure(struct ctl *c, int status, const char *why)
{
	if (c->failed)
		return;
	c->failed = true;
	c->status = status;
	if (c->attempt >= 1 && c->notes) {
		c->notes[c->attempt - 1].status = status;
		snprintf(c->notes[c->attempt - 1].why,
			 sizeof(c->notes[0].why), "%.250s", why);
	}
}

/* conns are freed from a timer, never inside their own callbacks; the
 * graveyard holds them until then (and until cleanup). */
static void free_graveyard(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->graveyard_timer = 0;
	for (size_t i = 0; i < c->n_graveyard; i++)
		conn_free(c->graveyard[i]);
	c->n_graveyard = 0;
}

static void drop_conn(struct ctl *c, struct node *n)
{
	struct conn **g;

	if (!n->conn)
		return;
	conn_pause_reading(n->conn);
	g = realloc(c->graveyard, (c->n_graveyard + 1) * sizeof(*g));
	if (g) {
		c->graveyard = g;
		c->graveyard[c->n_graveyard++] = n->conn;
	}
	if (!c->graveyard_timer)
		c->graveyard_timer =
			loop_timer_add(c->loop, 0, free_graveyard, c);
	n->conn = NULL;
	ctl_ckpt_node_gone(c, n);
}

static void on_frame(struct conn *conn, struct proto_frame *f, void *arg);
static void on_close(struct conn *conn, const char *reason, int clean,
		     void *arg);

/* Starts node n's agent; member says whether it joins the job or is a
 * readmit probe. */
static void start_node(struct ctl *c, struct node *n, bool member)
{
	struct herd_err err;
	int fd;

	herd_err_clear(&err);
	n->member = member;
	n->state = NODE_CONNECTING;
	n->stopped = false;
	n->last_rx_ms = loop_now_ms();
	fd = transport_start(c->transport, n->host, &err);
	if (fd < 0) {
		n->state = NODE_EVICTED;
		fprintf(stderr, "herd: %s: %s\n", n->host, err.text);
		ctl_check_node_failed(c, n, err.text);
		return;
	}
	n->conn = conn_new(c->loop, fd, fd, PROTO_FRAME_MAX, on_frame,
			   on_close, n);
	if (!n->conn)
		n->state = NODE_EVICTED;
}

/* --- the end ------------------------------------------------------------ */

/* Every agent's connection closed: the end (STOPPING only). */
static void maybe_end(struct ctl *c)
{
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].conn)
			return;
	ctl_post(c, CTL_EV_ALL_GONE, NULL, 0, NULL);
}

static void on_stop_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->stop_timer = 0;
	ctl_post(c, CTL_EV_STOP_TIMER, NULL, 0, NULL);
}

static void recover_stop(struct ctl *c);

/* RECOVER, stop timer: a survivor that cannot confirm its ranks gone is
 * not trusted with the next attempt. */
static void act_recover_timeout(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (c->exec_wait) { /* not every rank ended: stop the rest now */
		recover_stop(c);
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

/* STOPPING, stop timer: the agents that did not go are hung up on. */
static void act_hang_up(struct ctl *c, struct ctl_ev *ev)
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
		drop_conn(c, n);
	}
}

static void send_stop(struct node *n, long grace_ms, int sig,
		      bool exit_after)
{
	json_t *body;

	if (!n->conn || conn_is_dead(n->conn))
		return;
	body = json_pack("{s:I, s:b, s:i}", "grace_ms", (json_int_t)grace_ms,
			 "exit", exit_after, "signal", sig);
	conn_send(n->conn, PROTO_STOP, body, NULL, 0, NULL);
	json_decref(body);
}

/* The end of the job: every agent stops its ranks (sig, SIGKILL after
 * grace) and exits. */
/* CTL_NOTIFY's timer, if any, is over. */
static void notify_stop(struct ctl *c)
{
	if (c->notify_timer)
		loop_timer_del(c->loop, c->notify_timer);
	c->notify_timer = 0;
}

static void stop_all(struct ctl *c, long grace_ms, int sig)
{
	notify_stop(c);
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
			drop_conn(c, n);
			n->state = NODE_GONE;
			continue;
		}
		send_stop(n, grace_ms, sig, true);
	}
	if (c->stop_timer)
		loop_timer_del(c->loop, c->stop_timer);
	c->stop_timer =
		loop_timer_add(c->loop, grace_ms + 5000, on_stop_timeout, c);
	maybe_end(c);
}

/* FINISH, INTERRUPT: into STOPPING. */
static void act_finish(struct ctl *c, struct ctl_ev *ev)
{
	stop_all(c, ev->grace_ms, ev->status);
}

/* FINISH, INTERRUPT while STOPPING: a second request only shortens the
 * grace. */
static void act_kill(struct ctl *c, struct ctl_ev *ev)
{
	for (int i = 0; i < c->n_nodes; i++)
		send_stop(&c->nodes[i], ev->grace_ms, SIGKILL, true);
}

/* --- failure and recovery ------------------------------------------------ */

static void check_recovered(struct ctl *c);
static void check_connected(struct ctl *c);

static void summary(struct ctl *c)
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
static void report_lost(struct ctl *c)
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

static void on_readmit(struct loop *loop, void *arg);

/* Takes node n out of the job for good (or until readmitted). */
static void evict(struct ctl *c, struct node *n, const char *reason)
{
	bool was_member = n->member;

	drop_conn(c, n);
	ctl_node_unplan(n);
	n->state = NODE_EVICTED;
	n->member = false;
	if (was_member)
		events_emit(c->ev, "node_evicted",
			    json_pack("{s:s, s:s, s:i}", "host", n->host,
				      "reason", reason, "attempt", c->attempt));
	if (c->spec->nodes.readmit_after_ms >= 0 && !n->readmit_timer &&
	    c->state != CTL_STOPPING && c->state != CTL_END) {
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

static void act_readmit(struct ctl *c, struct ctl_ev *ev)
{
	struct node *n = ev->node;

	if (n->state != NODE_EVICTED)
		return;
	n->hot = false;
	start_node(c, n, false);	/* a probe: HELLO readmits it */
	if (n->state == NODE_EVICTED)
		evict(c, n, "readmit probe failed");
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
static void act_attempt_failed(struct ctl *c, struct ctl_ev *ev)
{
	bool restarts_left;

	record_failure(c, ev->status, ev->why);
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
		post_stop(c, CTL_EV_FINISH, c->spec->health.grace_ms, SIGTERM);
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
static void act_straggler(struct ctl *c, struct ctl_ev *ev)
{
	struct node *n = ev->node;
	char why[700];

	if (!n || !n->straggler_evict || !n->member || n->state != NODE_UP)
		return;
	n->straggler_evict = false;
	fprintf(stderr, "herd: %s: evicting straggler node %s\n", ev->why,
		n->host);
	evict(c, n, "straggler");
	snprintf(why, sizeof(why), "node %s evicted as a straggler", n->host);
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

/* Every rank of the attempt has ended. */
static bool all_ranks_ended(const struct ctl *c)
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
static void act_recover(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (c->exec_suspect && !all_ranks_ended(c)) {
		c->exec_wait = true;
		if (c->stop_timer)
			loop_timer_del(c->loop, c->stop_timer);
		c->stop_timer = loop_timer_add(c->loop, CTL_EXEC_WAIT_MS,
					       on_stop_timeout, c);
		return;
	}
	recover_stop(c);
}

static void recover_stop(struct ctl *c)
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
				evict(c, n, "straggler");
				continue;
			}
			fprintf(stderr,
				"herd: straggler node %s stays: %s\n",
				n->host, whynot);
		}
		n->straggler_evict = false;
		if (n->member && n->state == NODE_UP) {
			n->stopped = false;
			send_stop(n, c->spec->health.grace_ms, SIGTERM,
				  false);
		}
	}
	if (c->stop_timer)
		loop_timer_del(c->loop, c->stop_timer);
	c->stop_timer = loop_timer_add(c->loop,
				       c->spec->health.grace_ms + 5000,
				       on_stop_timeout, c);
	check_recovered(c);
}

/* A node failed (channel broken, heartbeats silent, agent error): it is
 * evicted.  Returns true when it was a member of the job (then it was
 * said and is an event); a probe or a warm spare goes quietly. */
static bool node_out(struct ctl *c, struct node *n, const char *reason,
		     bool connecting)
{
	if (!n || n->state == NODE_EVICTED || n->state == NODE_GONE ||
	    n->state == NODE_SPARE)
		return false;
	ctl_check_node_failed(c, n, reason);
	if (!n->member) {
		evict(c, n, reason);
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
	if (!n->setup_error)	/* issue 14: node record */
		ctl_node_note(c, n, "failed", reason);
	evict(c, n, reason);
	return true;
}

static void act_node_failed_connect(struct ctl *c, struct ctl_ev *ev)
{
	if (!node_out(c, ev->node, ev->why, true))
		return;
	progress(c, false);
	check_connected(c);
}

/* launch.mode pmix: the ranks that were on node n (and not done) are
 * told to the survivors as failed. */
static void notify_node_lost(struct ctl *c, struct node *n)
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
static void fail_or_notify(struct ctl *c, int status, const char *why)
{
	if (c->spec->launch.mode == SPEC_MODE_PMIX &&
	    c->spec->health.notify_grace_ms > 0)
		ctl_post(c, CTL_EV_NOTIFY, NULL, status, why);
	else
		ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, status, why);
}

static void act_node_failed_run(struct ctl *c, struct ctl_ev *ev)
{
	char why[sizeof(ev->why) + 64];

	if (!node_out(c, ev->node, ev->why, false))
		return;
	if (ctl_rejoin_start(c, ev->node))
		return; /* the survivors keep training */
	snprintf(why, sizeof(why), "node %s failed: %s", ev->node->host,
		 ev->why);
	notify_node_lost(c, ev->node);
	fail_or_notify(c, 1, why);
}

/* --- CTL_NOTIFY (issue 16) ------------------------------------------------ */

static void on_notify_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->notify_timer = 0;
	ctl_post(c, CTL_EV_NOTIFY_OVER, NULL, 0, NULL);
}

/* RUN -> NOTIFY: the failure is kept for when the grace is over. */
static void act_notify(struct ctl *c, struct ctl_ev *ev)
{
	char grace[SPEC_DURATION_TEXT];

	c->notify_status = ev->status;
	snprintf(c->notify_why, sizeof(c->notify_why), "%s", ev->why);
	/* The attempt's first failure, whatever comes in the grace
	 * (Ctrl-C included). */
	record_failure(c, ev->status, ev->why);
	fprintf(stderr,
		"herd: the surviving ranks were told; stopping them in %s "
		"(health.notify_grace) unless they all exit first\n",
		spec_duration_text(c->spec->health.notify_grace_ms, grace,
				   sizeof(grace)));
	notify_stop(c);
	c->notify_timer = loop_timer_add(c->loop,
					 c->spec->health.notify_grace_ms,
					 on_notify_timeout, c);
	act_notify_check(c, ev);
}

/* Every rank on a node still up exited: nobody is left to wait for. */
static void act_notify_check(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	for (int r = 0; c->ranks && r < c->world_size; r++) {
		struct node *n = &c->nodes[c->ranks[r].node];

		if (!c->ranks[r].done && n->member && n->state == NODE_UP)
			return;
	}
	notify_stop(c);
	ctl_post(c, CTL_EV_NOTIFY_OVER, NULL, 0, NULL);
}

static void act_notify_rank(struct ctl *c, struct ctl_ev *ev)
{
	int rank = (int)json_integer_value(json_object_get(ev->body, "rank"));

	if (ev->body)
		ctl_event_proc_failed(c,
				      json_is_true(json_object_get(ev->body,
								   "signal"))
					      ? "signal"
					      : "exit",
				      ev->status, ev->node->host, &rank, 1);
	act_notify_check(c, ev);
}

static void act_notify_node(struct ctl *c, struct ctl_ev *ev)
{
	if (node_out(c, ev->node, ev->why, false))
		notify_node_lost(c, ev->node);
	act_notify_check(c, ev);
}

/* NOTIFY -> RUN: the grace is over (or another failure came); the
 * attempt fails with its first failure, as it would have at once. */
static void act_notify_over(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	notify_stop(c);
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, c->notify_status,
		 c->notify_why);
}

static void act_notify_finish(struct ctl *c, struct ctl_ev *ev)
{
	notify_stop(c);
	act_finish(c, ev);
}

static void act_node_failed_recover(struct ctl *c, struct ctl_ev *ev)
{
	if (node_out(c, ev->node, ev->why, false))
		check_recovered(c);
}

static void act_node_failed_backoff(struct ctl *c, struct ctl_ev *ev)
{
	node_out(c, ev->node, ev->why, false);
}

/* STOPPING: a node whose agent goes (or fails) is gone. */
static void act_node_gone(struct ctl *c, struct ctl_ev *ev)
{
	struct node *n = ev->node;

	if (!n || n->state == NODE_EVICTED || n->state == NODE_GONE ||
	    n->state == NODE_SPARE)
		return;
	drop_conn(c, n);
	n->state = NODE_GONE;
	maybe_end(c);
}

/* Replaces evicted members with spares (warm ones first), as many as
 * the job is missing.  Returns how many are still connecting. */
static int take_spares(struct ctl *c)
{
	int have = count_nodes(c, NODE_UP, 1) + count_nodes(c, NODE_CONNECTING, 1);
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
				start_node(c, n, true);
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
	return count_nodes(c, NODE_CONNECTING, 1);
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
			start_node(c, n, true);
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

static void act_backoff_over(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (count_nodes(c, NODE_UP, 1) < c->min_nodes) {
		char why[320];

		too_few_why(c, count_nodes(c, NODE_UP, 1), why, sizeof(why));
		fprintf(stderr, "herd: %s\n", why);
		c->final_failure = true;
		post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
		return;
	}
	ctl_post(c, c->spec->health.preflight ? CTL_EV_PREFLIGHT : CTL_EV_LAUNCH,
		 NULL, 0, NULL);
}

/* Recovery goes on until every surviving member confirmed its ranks
 * gone and every joining spare is up or failed (RECOVER only). */
static void check_recovered(struct ctl *c)
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
			c->final_failure = true;
			post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
			return;
		}
		say_recovering(c, c->notes[c->attempt - 1].why);
	}
	if (take_spares(c) > 0)
		return;
	up = count_nodes(c, NODE_UP, 1);
	if (up < c->min_nodes) {
		char why[320];

		too_few_why(c, up, why, sizeof(why));
		fprintf(stderr, "herd: %s\n", why);
		c->final_failure = true;
		post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
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

static void act_check_recovered(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	check_recovered(c);
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
	    (healthy ||
	     (c->spares_warm_taken + c->spares_cold_taken > 0 &&
	      !c->recover_short)))
		return 0;
	for (int k = first; k < c->attempt && backoff < CTL_BACKOFF_MAX_MS;
	     k++)
		backoff *= 2;
	return backoff > CTL_BACKOFF_MAX_MS ? CTL_BACKOFF_MAX_MS : backoff;
}

/* RECOVER -> BACKOFF: the next attempt after restart.backoff. */
static void act_backoff(struct ctl *c, struct ctl_ev *ev)
{
	int64_t backoff;

	(void)ev;
	backoff = ctl_backoff_ms(c, c->failed_at_ms);
	/* The backoff counts from the failure: time spent stopping ranks
	 * and bringing in spares is already part of it. */
	backoff -= loop_now_ms() - c->failed_at_ms;
	c->backoff_timer = loop_timer_add(c->loop, backoff > 0 ? backoff : 0,
					  on_backoff, c);
}

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
			    s->checkpoint.pattern, s->checkpoint.complete_marker,
			    &res, &err) < 0) {
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
	post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
}

/* CONNECT or BACKOFF -> RUN: the next attempt. */
static void act_launch(struct ctl *c, struct ctl_ev *ev)
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
		post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
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
	notify_stop(c);
	c->status = 0;
	before = c->checkpoint ? strdup(c->checkpoint) : NULL;
	find_checkpoint(c);
	if (c->checkpoint && (!before || strcmp(before, c->checkpoint)))
		c->progress_attempt = c->attempt;
	free(before);
	if (ctl_plan(c, &err) < 0 || ctl_open_rank_logs(c, &err) < 0 ||
	    !(command = ctl_render_command(c, &err))) {
		fprintf(stderr, "herd: %s\n", err.text);
		record_failure(c, 1, err.text);
		c->final_failure = true;
		post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
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
			      c->attempt, "nodes", count_nodes(c, NODE_UP, 1),
			      "world_size", c->world_size, "master_addr",
			      c->master_addr, "checkpoint", c->checkpoint));
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
		conn_send(n->conn, PROTO_LAUNCH, body, NULL, 0, NULL);
		json_decref(body);
		/* rank_start: when the agent says so (ctl/warm.c). */
	}
	ctl_ckpt_launched(c);
	ctl_detach_ready(c); /* --detach: the job is up */
}

/* --- connecting ----------------------------------------------------------- */

/* CONNECT: every member is up or failed: launch, or give up. */
static void check_connected(struct ctl *c)
{
	int up;

	if (count_nodes(c, NODE_CONNECTING, 1) > 0)
		return;
	/* Fill in for nodes that never came up, from the spares. */
	if (take_spares(c) > 0)
		return;
	progress(c, true);
	if (c->opt->check_only) { /* herd check: every node gets a row */
		ctl_post(c, CTL_EV_PREFLIGHT, NULL, 0, NULL);
		return;
	}
	up = count_nodes(c, NODE_UP, 1);
	if (up < c->min_nodes || up == 0) {
		fprintf(stderr,
			"herd: %d of %d nodes are up; the job needs %d%s\n", up,
			c->want_nodes, c->min_nodes,
			c->spec->nodes.min > 0 ? " (nodes.min)"
					       : " (set nodes.min to start "
						 "with fewer)");
		c->status = 1;
		c->final_failure = true;
		post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
		return;
	}
	ctl_post(c, c->spec->health.preflight ? CTL_EV_PREFLIGHT : CTL_EV_LAUNCH,
		 NULL, 0, NULL);
}

static void act_check_connected(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	check_connected(c);
}

/* --- the health gate (issue 14) ------------------------------------------ */

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
	if (ctl_check_pending(c) > 0 || count_nodes(c, NODE_CONNECTING, 1) > 0)
		return;
	ctl_check_judge(c);
	if (c->opt->check_only) {
		if (ctl_netprobe_step(c) > 0)
			return;
		ctl_check_end(c);
		ctl_check_print(c);
		post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
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
			reason, spare_left(c) ? "; a spare takes its place" : "");
		ctl_node_note(c, n, "unhealthy", reason);
		evict(c, n, reason);
	}
	if (take_spares(c) > 0)
		return; /* they are checked once up */
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].member && c->nodes[i].state == NODE_UP &&
		    !ctl_check_sent(c, &c->nodes[i])) {
			preflight_step(c); /* warm spares that joined */
			return;
		}
	ctl_check_end(c);
	up = count_nodes(c, NODE_UP, 1);
	if (up < c->min_nodes || up == 0) {
		fprintf(stderr,
			"herd: %d of %d nodes are healthy; the job needs %d%s\n",
			up, c->want_nodes, c->min_nodes,
			c->spec->nodes.min > 0 ? " (nodes.min)" : "");
		c->status = 1;
		c->final_failure = true;
		post_stop(c, CTL_EV_FINISH, 0, SIGTERM);
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
static void act_preflight(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	if (c->tty || c->opt->check_only)
		fprintf(stderr, "herd: checking %d node%s\n",
			count_nodes(c, NODE_UP, 1),
			count_nodes(c, NODE_UP, 1) == 1 ? "" : "s");
	ctl_check_begin(c);
	preflight_step(c);
}

static void act_preflight_step(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	preflight_step(c);
}

static void act_node_failed_preflight(struct ctl *c, struct ctl_ev *ev)
{
	node_out(c, ev->node, ev->why, false);
	preflight_step(c);
}

/* A frame says the node failed: nothing more is read from it (as when it
 * was evicted at once); the failure itself is handled from the loop. */
static void frame_failed(struct ctl *c, struct node *n, const char *why)
{
	conn_pause_reading(n->conn);
	ctl_post(c, CTL_EV_NODE_FAILED, n, 0, why);
}

static void on_hello(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body;
	const char *version = json_string_value(json_object_get(body, "version"));
	const char *hostname =
		json_string_value(json_object_get(body, "hostname"));
	json_t *hb;

	if (n->state != NODE_CONNECTING)
		return;	/* a second HELLO changes nothing */
	if (!version || strcmp(version, HERD_VERSION)) {
		char why[256];

		snprintf(why, sizeof(why),
			 "%s: herd-agent version %s does not match herd %s",
			 n->host, version ? version : "?", HERD_VERSION);
		frame_failed(c, n, why);
		return;
	}
	free(n->hostname);
	n->hostname = strdup(hostname ? hostname : n->host);
	json_decref(n->addrs);
	n->addrs = json_incref(json_object_get(body, "addrs"));
	if (!json_is_array(n->addrs)) {
		json_decref(n->addrs);
		n->addrs = json_array();
	}
	json_decref(n->topo);
	n->topo = json_incref(json_object_get(body, "topo"));
	if (!n->topo && n->member) {
		const char *why = json_string_value(
			json_object_get(body, "topo_error"));

		fprintf(stderr, "herd: %s: no topology (%s); its ranks run "
				"unbound\n",
			n->host, why ? why : "not reported");
	}
	n->state = NODE_UP;
	/* Heartbeats start now, both ways. */
	hb = json_pack("{s:I, s:I}", "interval_ms",
		       (json_int_t)c->spec->health.heartbeat_ms, "timeout_ms",
		       (json_int_t)c->spec->health.timeout_ms);
	conn_send(n->conn, PROTO_HEARTBEAT, hb, NULL, 0, NULL);
	json_decref(hb);
	ctl_ckpt_node_up(c, n);
	if (!n->member && n->hot) {
		events_emit(c->ev, "node_up",
			    json_pack("{s:s, s:s, s:b}", "host", n->host,
				      "hostname", n->hostname, "spare", 1));
		ctl_post(c, CTL_EV_NODE_UP, n, 0, NULL);
		return;
	}
	if (!n->member) {
		events_emit(c->ev, "node_readmitted",
			    json_pack("{s:s}", "host", n->host));
		fprintf(stderr, "herd: %s answers again; readmitted as a "
				"spare\n",
			n->host);
		ctl_post(c, CTL_EV_NODE_UP, n, 0, NULL);
		return;
	}
	events_emit(c->ev, "node_up",
		    json_pack("{s:s, s:s}", "host", n->host, "hostname",
			      n->hostname));
	progress(c, false);
	ctl_rejoin_node_up(c, n);
	ctl_post(c, CTL_EV_NODE_UP, n, 0, NULL);
}

static void act_abort(struct ctl *c, struct ctl_ev *ev)
{
	fprintf(stderr, "herd: %s; stopping every rank\n", ev->why);
	c->no_restart = true;
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, ev->status, ev->why);
}

/* --- running ------------------------------------------------------------- */

/* A process PMIx_Spawn started ended (ctl/pmix/spawn.c placed it): its
 * status counts as a rank's, a failure fails the attempt as a rank's
 * would; it is never taken for a singleton (a spawned program need not
 * use PMIx). */
static void spawned_exit(struct ctl *c, struct node *n, int slot,
			 json_t *body)
{
	struct rank_slot *r = &c->ranks[slot];
	json_t *code = json_object_get(body, "code");
	json_t *sig = json_object_get(body, "signal");
	const char *error = json_string_value(json_object_get(body, "error"));
	int status;

	if (r->done)
		return;
	r->done = true;
	c->ranks_done++;
	ctl_spawn_proc_gone(c, slot);
	ctl_print(c, slot, 1, "", 0, true);
	ctl_print(c, slot, 2, "", 0, true);
	ctl_close_rank_log(c, slot);
	status = json_is_integer(sig) ? 128 + (int)json_integer_value(sig)
				       : (int)json_integer_value(code);
	events_emit(c->ev, "spawn_exit",
		    json_pack("{s:i, s:i, s:i, s:s, s:i, s:O, s:O, s:s?}",
			      "attempt", c->attempt, "spawn", r->spawn, "rank",
			      r->srank, "host", n->host, "status", status,
			      "code", code ? code : json_null(), "signal",
			      sig ? sig : json_null(), "reason", error));
	if (status != 0) {
		struct ctl_ev fail = {.type = CTL_EV_RANK_FAILED, .node = n,
				      .status = status, .flag = error != NULL};

		if (error)
			snprintf(fail.why, sizeof(fail.why),
				 "spawned process s%d:%d on %s: %s", r->spawn,
				 r->srank, n->host, error);
		else if (json_is_integer(sig))
			snprintf(fail.why, sizeof(fail.why),
				 "spawned process s%d:%d on %s was killed by "
				 "signal %d (%s)",
				 r->spawn, r->srank, n->host,
				 (int)json_integer_value(sig),
				 strsignal((int)json_integer_value(sig)));
		else
			snprintf(fail.why, sizeof(fail.why),
				 "spawned process s%d:%d on %s exited with "
				 "status %d",
				 r->spawn, r->srank, n->host, status);
		post(c, &fail);
		return;
	}
	if (c->ranks_done == c->n_slots)
		ctl_post(c, CTL_EV_RANKS_DONE, NULL, 0, NULL);
	else
		ctl_post(c, CTL_EV_RANK_EXITED, n, 0, NULL);
}

static void on_rank_exit(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body;
	int rank = (int)json_integer_value(json_object_get(body, "rank"));
	json_t *code = json_object_get(body, "code");
	json_t *sig = json_object_get(body, "signal");
	json_t *att = json_object_get(body, "attempt");
	/* Set by the agent when the rank never ran: a failed exec (its
	 * errno), workdir or binding. */
	const char *error = json_string_value(json_object_get(body, "error"));
	json_t *ev;
	int status;
	bool singleton;
	struct rank_slot *r;

	if (json_is_integer(att) && json_integer_value(att) != c->attempt)
		return;	/* a rank of an attempt already over */
	if (!c->ranks || rank < 0 || rank >= c->n_slots ||
	    &c->nodes[c->ranks[rank].node] != n)
		return;
	r = &c->ranks[rank];
	if (r->spawn) {
		spawned_exit(c, n, rank, body);
		return;
	}
	if (r->done)
		return;
	r->done = true;
	c->ranks_done++;
	ctl_pubsub_rank_gone(c, rank);
	ctl_print(c, rank, 1, "", 0, true);
	ctl_print(c, rank, 2, "", 0, true);
	ctl_close_rank_log(c, rank);
	status = json_is_integer(sig) ? 128 + (int)json_integer_value(sig)
				       : (int)json_integer_value(code);
	singleton = status == 0 &&
		    json_is_false(json_object_get(body, "pmix_connected"));
	if (singleton)
		status = 1;
	r->status = status;
	/* The agent's words for a failed chdir (lib/core/proc.c): the same
	 * library on both sides of the channel. */
	r->no_workdir = error && c->spec->launch.workdir &&
			!strncmp(error, proc_step_what(PROC_STEP_WORKDIR),
				 strlen(proc_step_what(PROC_STEP_WORKDIR))) &&
			(json_integer_value(json_object_get(body, "errno")) ==
				 ENOENT ||
			 json_integer_value(json_object_get(body, "errno")) ==
				 ENOTDIR);
	ev = json_pack("{s:i, s:i, s:s, s:i, s:O, s:O}", "attempt", c->attempt,
		       "rank", rank, "host", n->host, "status", status, "code",
		       code ? code : json_null(), "signal",
		       sig ? sig : json_null());
	if (ev && error) {
		json_object_set_new(ev, "reason", json_string(error));
		json_object_set(ev, "errno", json_object_get(body, "errno"));
	}
	events_emit(c->ev, "rank_exit", ev);
	if (status != 0) {
		struct ctl_ev fail = {.type = CTL_EV_RANK_FAILED, .node = n,
				      .status = status, .flag = error != NULL,
				      .body = json_pack("{s:i, s:b, s:b}",
							"rank", rank, "signal",
							json_is_integer(sig),
							"no_workdir",
							r->no_workdir)};

		if (r->no_workdir)
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s: launch.workdir %s does not "
				 "exist there",
				 rank, n->host, c->spec->launch.workdir);
		else if (error)
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s: %s", rank, n->host, error);
		else if (singleton)
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s exited 0 without ever "
				 "connecting to herd's PMIx server (ran as a "
				 "singleton? Open MPI needs "
				 "OMPI_MCA_schizo=^orte)",
				 rank, n->host);
		else if (json_is_integer(sig))
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s was killed by signal %d (%s)",
				 rank, n->host, (int)json_integer_value(sig),
				 strsignal((int)json_integer_value(sig)));
		else
			snprintf(fail.why, sizeof(fail.why),
				 "rank %d on %s exited with status %d", rank,
				 n->host, status);
		post(c, &fail);
		json_decref(fail.body);
		return;
	}
	if (c->ranks_done == c->n_slots)
		ctl_post(c, CTL_EV_RANKS_DONE, NULL, 0, NULL);
	else
		ctl_post(c, CTL_EV_RANK_EXITED, n, 0, NULL);
}

/* RUN, a rank failed: the attempt is over. */
static void act_rank_failed(struct ctl *c, struct ctl_ev *ev)
{
	int rank = (int)json_integer_value(json_object_get(ev->body, "rank"));

	fprintf(stderr, "herd: %s; stopping the attempt\n", ev->why);
	snprintf(c->said_why, sizeof(c->said_why), "%.250s", ev->why);
	if (json_is_true(json_object_get(ev->body, "no_workdir")))
		c->workdir_said = true;
	if (ev->body)
		ctl_event_proc_failed(c,
				      json_is_true(json_object_get(ev->body,
								   "signal"))
					      ? "signal"
					      : "exit",
				      ev->status, ev->node->host, &rank, 1);
	fail_or_notify(c, ev->status, ev->why);
}

/* A rank failed while the attempt is already stopping for another
 * reason: said per rank when it never ran, since each node may fail its
 * own way. */
static void act_rank_note(struct ctl *c, struct ctl_ev *ev)
{
	if (c->state == CTL_RECOVER && c->exec_wait && all_ranks_ended(c))
		recover_stop(c);
	/* The missing workdir is said once, not once per rank. */
	if (json_is_true(json_object_get(ev->body, "no_workdir"))) {
		if (c->workdir_said)
			return;
		c->workdir_said = true;
	}
	if (ev->flag)
		fprintf(stderr, "herd: %s\n", ev->why);
}

/* RUN, every rank exited 0: the job is done. */
static void act_completed(struct ctl *c, struct ctl_ev *ev)
{
	(void)ev;
	events_emit(c->ev, "attempt_end",
		    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
			      "reason", "completed", "status", 0));
	stop_all(c, c->spec->health.grace_ms, SIGTERM);
}

static void on_heartbeat(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *hung = json_object_get(f->body, "hung");
	json_t *att = json_object_get(f->body, "attempt");
	struct ctl_ev ev = {.type = CTL_EV_HUNG, .node = n, .body = f->body};

	if (!json_is_array(hung) || json_array_size(hung) == 0 ||
	    !n->member ||
	    (json_is_integer(att) && json_integer_value(att) != c->attempt))
		return;
	post(c, &ev);
}

/* RUN: a node says some of its ranks hang.  Before the attempt fails,
 * every rank's stack is collected (ctl/hang.c). */
static void act_hung(struct ctl *c, struct ctl_ev *ev)
{
	ctl_hang_begin(c, ev->node, ev->body);
}

/* STACKS: more hung ranks, from the same node or another. */
static void act_hung_more(struct ctl *c, struct ctl_ev *ev)
{
	ctl_hang_merge(c, ev->node, ev->body);
}

/* STACKS: a node's answer. */
static void act_stacks(struct ctl *c, struct ctl_ev *ev)
{
	ctl_hang_answer(c, ev->node, ev->body);
}

/* STACKS -> RUN: the evidence is in; the attempt fails as before. */
static void act_stacks_done(struct ctl *c, struct ctl_ev *ev)
{
	char why[sizeof(ev->why)];

	ctl_hang_end(c, why, sizeof(why));
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

/* STACKS: a node failed; it is out as in RUN and not waited for.  The
 * hang, reported first, fails the attempt when the collection ends. */
static void act_node_failed_stacks(struct ctl *c, struct ctl_ev *ev)
{
	if (node_out(c, ev->node, ev->why, false))
		ctl_hang_node_gone(c, ev->node);
}

/* STACKS: MPI_Abort: the job ends after this attempt, as in RUN. */
static void act_abort_stacks(struct ctl *c, struct ctl_ev *ev)
{
	fprintf(stderr, "herd: %s\n", ev->why);
	c->no_restart = true;
}

/* STACKS, FINISH or INTERRUPT: the evidence so far goes to the events,
 * then the end as in RUN. */
static void act_finish_stacks(struct ctl *c, struct ctl_ev *ev)
{
	char why[sizeof(ev->why)];

	ctl_hang_end(c, why, sizeof(why));
	act_finish(c, ev);
}

static void on_stacks(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *att = json_object_get(f->body, "attempt");
	struct ctl_ev ev = {.type = CTL_EV_STACKS, .node = n, .body = f->body};

	if (!n->member || json_integer_value(att) != c->attempt)
		return;
	post(c, &ev);
}

static void on_output(struct ctl *c, struct node *n, struct proto_frame *f)
{
	int rank = (int)json_integer_value(json_object_get(f->body, "rank"));
	int fd = (int)json_integer_value(json_object_get(f->body, "fd"));
	json_t *att = json_object_get(f->body, "attempt");

	(void)n;
	if (!c->ranks || rank < 0 || rank >= c->n_slots ||
	    (fd != 1 && fd != 2) ||
	    (json_is_integer(att) && json_integer_value(att) != c->attempt))
		return;
	/* Written at once: the log is how a person (or a test) follows a
	 * rank while it runs. */
	ctl_log_write(c, rank, f->data, f->data_len);
	ctl_print(c, rank, fd, (const char *)f->data, f->data_len, false);
}

static void on_stopped(struct ctl *c, struct node *n, struct proto_frame *f)
{
	(void)f;
	n->stopped = true;
	ctl_post(c, CTL_EV_STOPPED, n, 0, NULL);
}

static void on_error(struct ctl *c, struct node *n, struct proto_frame *f)
{
	const char *msg = json_string_value(json_object_get(f->body, "message"));
	const char *stage = json_string_value(json_object_get(f->body, "stage"));

	/* A key herd could not use, a host key that does not match, a
	 * refused connection or a name that does not resolve ("setup") is
	 * how herd was set up, not the node's health: not recorded against
	 * it (a wrong key or ssh.port would otherwise quarantine every
	 * node). */
	if (stage && (!strcmp(stage, "auth") || !strcmp(stage, "host key") ||
		      !strcmp(stage, "setup")))
		n->setup_error = true;
	frame_failed(c, n, msg ? msg : "agent reported an error");
}

/* What herd takes from an agent, by frame type; anything else is a
 * protocol error that fails the node (OpenSSH dispatch.c). */
typedef void (*frame_fn)(struct ctl *c, struct node *n, struct proto_frame *f);
static const frame_fn frame_handlers[PROTO_TYPE_MAX_ + 1] = {
	[PROTO_HELLO] = on_hello,	  [PROTO_OUTPUT] = on_output,
	[PROTO_EXIT] = on_rank_exit,	  [PROTO_HEARTBEAT] = on_heartbeat,
	[PROTO_ERROR] = on_error,	  [PROTO_STOPPED] = on_stopped,
	[PROTO_FENCE] = ctl_pmix_fence,	  [PROTO_ABORT] = ctl_pmix_abort,
	[PROTO_PMIX_LOG] = ctl_pmix_log,
	[PROTO_SIGNAL] = ctl_pmix_signal,
	[PROTO_METRICS] = ctl_metrics_frame,
	[PROTO_STACKS] = on_stacks,
	[PROTO_CHECK] = ctl_check_frame,
	[PROTO_NETPROBE] = ctl_netprobe_frame,
	[PROTO_SPAWN] = ctl_spawn_frame,
	[PROTO_SPAWN_UP] = ctl_spawn_up,
	[PROTO_CONNECT] = ctl_connect_frame,
	[PROTO_DMODEX] = ctl_pmix_dmodex,
	[PROTO_DMODEX_DATA] = ctl_pmix_dmodex_data,
	[PROTO_PUBLISH] = ctl_pubsub_publish,
	[PROTO_LOOKUP] = ctl_pubsub_lookup,
	[PROTO_UNPUBLISH] = ctl_pubsub_unpublish,
	[PROTO_EVENT] = ctl_event_frame,
	[PROTO_RANK_CTL] = ctl_rejoin_frame,
	[PROTO_CKPT_INV] = ctl_ckpt_frame,
	[PROTO_CKPT_DATA] = ctl_ckpt_frame,
	[PROTO_CKPT_ACK] = ctl_ckpt_frame,
	[PROTO_STARTED] = ctl_rank_started,
};

/* A conn's arg is its node: found in O(1).  A conn the node has dropped
 * (waiting in the graveyard) is no longer its own. */
static void on_frame(struct conn *conn, struct proto_frame *f, void *arg)
{
	struct node *n = arg;
	struct ctl *c = n->ctl;
	frame_fn fn = NULL;
	struct herd_err err;

	if (n->conn != conn)
		goto out;
	n->last_rx_ms = loop_now_ms();
	if (proto_frame_check(f, PROTO_TO_HERD, &err) < 0) {
		char why[HERD_ERR_MAX + 64];

		snprintf(why, sizeof(why), "%s: %s", n->host, err.text);
		frame_failed(c, n, why);
		goto out;
	}
	if (f->type >= 1 && f->type <= PROTO_TYPE_MAX_)
		fn = frame_handlers[f->type];
	if (fn) {
		fn(c, n, f);
	} else {
		char why[256];

		snprintf(why, sizeof(why),
			 "protocol error: unexpected frame %s from %s",
			 proto_type_name((int)f->type), n->host);
		frame_failed(c, n, why);
	}
out:
	proto_frame_free(f);
}

static void on_close(struct conn *conn, const char *reason, int clean,
		     void *arg)
{
	struct node *n = arg;
	char why[512];

	if (n->conn != conn)
		return;
	snprintf(why, sizeof(why), "%s: connection to the agent lost (%s)",
		 n->host, clean ? "end of stream" : reason);
	ctl_post(n->ctl, CTL_EV_NODE_FAILED, n, 0, why);
}

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
		left = n->last_rx_ms + silence_limit(c) - now;
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
static void restart_silence_clocks(struct ctl *c, int64_t now,
				   int64_t stall_ms, const char *what)
{
	fprintf(stderr,
		"herd: %s for %.1f s; every node has %.2f s from now to "
		"answer\n",
		what, (double)stall_ms / 1000.0,
		(double)silence_limit(c) / 1000.0);
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].state == NODE_UP && c->nodes[i].conn)
			c->nodes[i].last_rx_ms = now;
	c->hb_sent_ms = 0;	/* heartbeats go out at once */
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
		hb = proto_encode(PROTO_HEARTBEAT, body, NULL, 0, &hb_len,
				  NULL);
		json_decref(body);
	}
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->state != NODE_UP || !n->conn)
			continue;
		if (now - n->last_rx_ms >= silence_limit(c)) {
			char why[256], to[SPEC_DURATION_TEXT],
			    beat[SPEC_DURATION_TEXT], rto[SPEC_DURATION_TEXT];

			snprintf(
			    why, sizeof(why),
			    "no heartbeat for %.1f s (health.timeout "
			    "%s + heartbeat %s + %s for TCP's "
			    "retransmission)",
			    (double)(now - n->last_rx_ms) / 1000.0,
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
			conn_send_encoded(n->conn, hb, hb_len, NULL);
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
			conn_send(c->nodes[i].conn, PROTO_SIGNAL, body, NULL,
				  0, NULL);
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
		    json_pack("{s:i, s:I}", "attempt", c->attempt,
			      "paused_ms", (json_int_t)stopped_ms));
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
	if (c->paused || c->state == CTL_STOPPING || c->state == CTL_END)
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
	record_failure(c, 128 + sig, why);
	if (c->state == CTL_RUN || c->state == CTL_STACKS)
		events_emit(c->ev, "attempt_end",
			    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
				      "reason", why, "status", 128 + sig));
	if (c->interrupts == 1) {
		fprintf(stderr,
			"\nherd: %s: stopping all ranks (again to kill them "
			"at once)\n",
			strsignal(sig));
		post_stop(c, CTL_EV_INTERRUPT, c->spec->health.grace_ms, sig);
	} else {
		fprintf(stderr, "\nherd: killing all ranks\n");
		post_stop(c, CTL_EV_INTERRUPT, 0, SIGKILL);
	}
}

/* The job-control signals (issue 11 item 2): SIGTSTP pauses the job,
 * unless herd inherited it ignored (nohup-like wrappers, a shell without
 * job control in a script: then Ctrl-Z means nothing to herd either). */
static int pause_signals_init(struct ctl *c)
{
	int rc = loop_on_signal_unless_ignored(c->loop, SIGTSTP, on_suspend, c);

	return rc < 0 ? -1 : 0;
}

/* --- setup and teardown ------------------------------------------------- */

/* log.dir with {{name}} filled in, made absolute: ranks on other nodes
 * see the same path on a shared filesystem, whatever their workdir. */
static char *render_log_dir(const struct spec *spec, struct herd_err *err)
{
	const struct render_var vars[] = {{"name", spec->name}};
	char *dir = render_text(spec->log.dir, vars, 1, 0, err);
	char cwd[4096], *abs;

	if (!dir || dir[0] == '/')
		return dir;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, dir) < 0) {
		herd_errprintf(err, "cannot make %s absolute", dir);
		free(dir);
		return NULL;
	}
	free(dir);
	return abs;
}

void ctl_free(struct ctl *c)
{
	if (!c)
		return;
	queue_clear(c);
	ctl_nodes_flush(c);	/* failures noted in the last loop turn */
	free(c->noderec_key);
	json_decref(c->quarantined);
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->readmit_timer && c->loop)
			loop_timer_del(c->loop, n->readmit_timer);
		conn_free(n->conn);
		free(n->host);
		free(n->hostname);
		json_decref(n->addrs);
		json_decref(n->topo);
		ctl_node_unplan(n);
	}
	free(c->nodes);
	bind_platform_free(c->platform);
	ctl_rejoin_free(c);
	ctl_free_ranks(c);
	ctl_pmix_clear(c);
	ctl_pubsub_free(c);
	ctl_ckpt_free(c);
	notify_stop(c);
	transport_free(c->transport);
	events_close(c->ev);
	logtree_free(c->lt);
	free(c->log_dir);
	free(c->master_addr);
	free(c->checkpoint);
	free(c->notes);
	free_graveyard(c->loop, c);
	free(c->graveyard);
	ctl_term_close(c);
	ctl_metrics_free(c);
	ctl_straggler_free(c);
	ctl_sock_free(c);
	ctl_hang_free(c);
	ctl_check_free(c);
	if (c->loop) {
		/* The signals' arg is c: back to their defaults. */
		loop_signals_reset(c->loop);
		loop_timer_del(c->loop, c->graveyard_timer);
		loop_timer_del(c->loop, c->stop_timer);
		loop_timer_del(c->loop, c->backoff_timer);
		loop_timer_del(c->loop, c->hb_timer);
	}
	free(c);
}

/* The nodes, then the spares, less those quarantined (issue 14).
 * Returns how many members were left out, or -1 when out of memory. */
static int add_nodes(struct ctl *c, struct resolved *res)
{
	size_t total = res->nodes->count + res->spares->count;
	bool *skip = calloc(total ? total : 1, sizeof(*skip));
	int left_out = 0;

	c->nodes = calloc(total ? total : 1, sizeof(*c->nodes));
	if (!c->nodes || !skip) {
		free(skip);
		return -1;
	}
	ctl_nodes_quarantine(c, res, skip);
	for (size_t i = 0; i < total; i++) {
		bool spare = i >= res->nodes->count;
		const struct hostfile_entry *e =
			spare ? &res->spares->entries[i - res->nodes->count]
			      : &res->nodes->entries[i];
		struct node *n;

		if (skip[i]) {
			left_out += !spare;
			continue;
		}
		n = &c->nodes[c->n_nodes++];

		n->ctl = c;
		n->host = strdup(e->host);
		if (!n->host) {
			free(skip);
			return -1;
		}
		n->slots = c->spec->nodes.slots > 0 ? (int)c->spec->nodes.slots
						    : e->slots;
		n->state = NODE_SPARE;
		n->index = -1;
	}
	/* herd check: spares are checked as members are. */
	c->want_nodes = c->opt->check_only ? (int)total
					   : (int)res->nodes->count;
	c->min_nodes = c->spec->nodes.min > 0 ? (int)c->spec->nodes.min
					      : c->want_nodes;
	free(skip);
	return left_out;
}

struct ctl *ctl_new(struct spec *spec, const struct ctl_options *opt)
{
	struct ctl *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->spec = spec;
	c->opt = opt;
	c->stacks_wait_ms = CTL_STACKS_WAIT_MS;
	return c;
}

int ctl_start(struct ctl *c, struct loop *loop, struct resolved *res,
	      struct transport *t)
{
	const struct spec *spec = c->spec;
	struct herd_err err;
	int left_out = 0;

	herd_err_clear(&err);
	c->loop = loop;
	c->transport = t;
	c->tty = !c->opt->detach && isatty(2);
	if (ctl_metrics_listen(c) < 0)
		return 1;
	/* herd plan and herd check leave no trace: no log tree. */
	if (!c->opt->plan_only && !c->opt->check_only &&
	    (!(c->lt = logtree_open(c->log_dir, spec->log.mode, &err)) ||
	     !(c->ev = events_open(c->lt, &err)))) {
		fprintf(stderr, "herd: %s\n", err.text);
		return 1;
	}
	/* Before the first line: whoever waits for it (a script that runs
	 * herd in the background, where SIGINT starts ignored) may stop
	 * herd the moment it sees it; a signal that comes before the loop
	 * runs is handled on its first turn. */
	if (loop_on_signal(c->loop, SIGINT, on_interrupt, c) < 0 ||
	    loop_on_signal(c->loop, SIGTERM, on_interrupt, c) < 0 ||
	    /* nohup (or a parent that ignores SIGHUP for us) means: keep
	     * running when the terminal goes; SIGINT stays ours even in
	     * the background, where scripts send it to stop a job. */
	    loop_on_signal_unless_ignored(c->loop, SIGHUP, on_interrupt, c) <
		    0 ||
	    /* Children (local agents, srun) are reaped by proc.h. */
	    proc_watch(c->loop) < 0 || pause_signals_init(c) < 0) {
		fprintf(stderr, "herd: signals: %s\n", strerror(errno));
		return 1;
	}
	if (c->lt)
		fprintf(stderr, "herd: logs in %s\n", logtree_run_dir(c->lt));
	/* The socket first: the entry records where it listens. */
	if (ctl_sock_listen(c) < 0) /* issue 13: herd attach, herd stop */
		return 1;
	if (c->lt && jobrun_register(c->lt, spec->name, c->opt,
				     c->opt->detach, ctl_sock_path(c),
				     &err) < 0) {
		if (c->opt->detach) { /* nobody could find it again */
			fprintf(stderr, "herd: job not registered: %s\n",
				err.text);
			return 1;
		}
		fprintf(stderr, "herd: warning: job not registered (herd "
				"list will not show it): %s\n", err.text);
	}
	if (ctl_term_open(c) < 0) {
		fprintf(stderr, "herd: %s\n", strerror(errno));
		return 1;
	}
	if (spec->bind.topology_file &&
	    !(c->platform = bind_platform_load(spec->bind.topology_file, &err))) {
		fprintf(stderr, "herd: bind.topology_file: %s\n", err.text);
		return EXIT_SPEC;
	}
	/* --detach: herd.log takes stdout and stderr before any agent or
	 * srun is started, which would hold the caller's stderr (a
	 * $(herd run --detach), a pipe, a CI step) open for the whole job. */
	if (ctl_detach_log(c) < 0)
		return 1;
	if (!c->transport)
		c->transport = transport_new(transport_pick(spec, c->local),
					     spec, c->opt->agent_path, &err);
	if (c->transport) {
		c->transport->verbose = c->opt->verbose;
		c->transport->loop = c->loop;
	}
	if (!c->transport || (left_out = add_nodes(c, res)) < 0) {
		fprintf(stderr, "herd: %s\n",
			c->transport ? "out of memory" : err.text);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if (ctl_metrics_start(c) < 0)
		return 1;

	events_emit(c->ev, "job_start",
		    json_pack("{s:s, s:s?, s:i, s:i, s:s, s:s, s:s*}", "job",
			      spec->name, "run",
			      c->lt ? logtree_run_id(c->lt) : NULL, "nodes",
			      c->want_nodes, "spares",
			      c->n_nodes - (c->want_nodes - left_out),
			      "mode", spec_mode_name(spec->launch.mode),
			      "transport", c->transport->ops->name,
			      "resumed_from", c->opt->resumed_from));
	for (size_t k = 0; k < json_array_size(c->quarantined); k++)
		events_emit(c->ev, "node_quarantined",
			    json_incref(json_array_get(c->quarantined, k)));
	ctl_check_events(c);
	/* Members the node record quarantined are not in c->nodes: the
	 * first want_nodes - left_out are the members, spares stand in for
	 * the rest at once (take_spares). */
	for (int i = 0; i < c->want_nodes - left_out; i++) {
		start_node(c, &c->nodes[i], true);
		if (c->nodes[i].state == NODE_EVICTED)
			events_emit(c->ev, "node_failed",
				    json_pack("{s:s, s:s, s:i}", "host",
					      c->nodes[i].host, "reason",
					      "transport could not start",
					      "attempt", 0));
	}
	/* Hot spares (ctl/warm.c): up before they are needed. */
	for (int i = c->want_nodes - left_out; ctl_warm_spares(c) &&
					       !c->opt->check_only &&
					       i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->state != NODE_SPARE)
			continue;
		start_node(c, n, false);
		n->hot = n->state == NODE_CONNECTING;
		if (!n->hot)
			n->state = NODE_SPARE; /* tried again when needed */
	}
	transport_commit(c->transport);
	if (left_out > 0)
		take_spares(c);
	progress(c, false);
	c->hb_sent_ms = loop_now_ms();
	c->hb_due_ms = c->hb_sent_ms + check_interval(c);
	c->boot_gap_ms = boot_gap_ms();
	c->hb_timer = loop_timer_add(c->loop, check_interval(c),
				     on_heartbeat_tick, c);
	ctl_post(c, CTL_EV_START, NULL, 0, NULL);
	return 0;
}

int ctl_end(struct ctl *c)
{
	int status = c->status;
	json_t *end;

	/* Rank output still held for a slow reader comes before the
	 * summary. */
	ctl_term_close(c);
	ctl_nodes_flush(c);
	summary(c);
	for (int r = 0; r < c->n_slots; r++)
		ctl_close_rank_log(c, r);
	end = json_pack("{s:i, s:i, s:I}", "status", status, "attempts",
			c->attempt, "log_bytes_lost",
			(json_int_t)(c->log_lost + events_lost(c->ev)));
	if (end)
		usage_add_json(end); /* herd's own CPU and peak RSS */
	ctl_metrics_end(c);
	events_emit(c->ev, "job_end", end);
	ctl_sock_end(c, status); /* after job_end: stop --wait reads it */
	report_lost(c);
	return status;
}

int ctl_run(struct spec *spec, struct resolved *res,
	    const struct ctl_options *opt)
{
	struct ctl *c = NULL;
	struct loop *loop = NULL;
	struct herd_err err;
	int status = 1;

	herd_err_clear(&err);
	if (!(c = ctl_new(spec, opt))) {
		fprintf(stderr, "herd: out of memory\n");
		goto out;
	}
	c->local = spec->nodes.transport == SPEC_TRANSPORT_LOCAL ||
		   (res->nodes->count == 1 &&
		    !strcmp(res->nodes->entries[0].host, "localhost"));
	c->log_dir = render_log_dir(spec, &err);
	if (!c->log_dir) {
		fprintf(stderr, "herd: log.dir: %s\n", err.text);
		status = EXIT_SPEC;
		goto out;
	}
	if (opt->dry_run) {
		status = ctl_dry_run(c, res);
		goto out;
	}
	if (!(loop = loop_new())) {
		fprintf(stderr, "herd: %s\n", strerror(errno));
		goto out;
	}
	status = ctl_start(c, loop, res, NULL);
	if (status == 0) {
		loop_run(loop);
		status = ctl_end(c);
	}
out:
	ctl_free(c);
	loop_free(loop);	/* puts the signals back */
	return status;
}
