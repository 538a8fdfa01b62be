/* lifecycle.c — the agent's states and the frames that drive them.
 *
 * One table of (state, event) -> (next state, action), as flux-core's
 * broker/state_machine.c: no flags spread over the files that say
 * "stopping" or "exit when idle".  An event is posted (agent_post): it
 * is queued and handled later from the loop, one at a time, never inside
 * the call that noticed it (a frame handler, a SIGCHLD, a timer, a
 * signal), so no send, frame or timer sees the state change under it.
 * What an action posts is handled right after that action, before the
 * rest of the queue.  Frames from herd go through a table indexed by
 * frame type whose default is a protocol error (OpenSSH dispatch.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/check.h"

/* ---- actions -------------------------------------------------------------- */

typedef void (*agent_action)(struct agent *a, json_t *body);

static void cancel_kill_timer(struct agent *a)
{
	if (a->kill_timer) {
		loop_timer_del(a->loop, a->kill_timer);
		a->kill_timer = 0;
	}
}

static void act_launch(struct agent *a, json_t *body)
{
	struct herd_err err;

	herd_err_clear(&err);
	if (rank_launch(a, body, &err) < 0)
		agent_send(a, PROTO_ERROR,
			   json_pack("{s:s}", "message", err.text), NULL, 0);
	metrics_launch(a, body);
	/* Nothing started (no ranks, or the first could not be): back to
	 * IDLE through the table, right after this action. */
	if (rank_alive_count(a) == 0)
		agent_post(a, AGENT_EV_RANKS_GONE, NULL);
}

static void send_stopped(struct agent *a)
{
	agent_send(a, PROTO_STOPPED, json_pack("{s:i}", "attempt", a->attempt),
		   NULL, 0);
}

/* STOP: the ranks get stop_signal, then SIGKILL after grace; with none
 * left, STOPPED at once. */
static void act_stop(struct agent *a, json_t *body)
{
	(void)body;
	if (rank_alive_count(a) == 0) {
		cancel_kill_timer(a);
		send_stopped(a);
	} else {
		rank_stop_all(a);
	}
}

/* STOP for a restart with no rank left: STOPPED, and still IDLE. */
static void act_stop_idle(struct agent *a, json_t *body)
{
	(void)body;
	cancel_kill_timer(a);
	send_stopped(a);
}

/* STACKS: the stacks of the running ranks (stacks.c); with none
 * running, an empty answer, so that herd never waits for one. */
static void act_stacks(struct agent *a, json_t *body)
{
	stacks_start(a, body);
}

static void act_stacks_none(struct agent *a, json_t *body)
{
	stacks_answer_empty(a, body);
}

/* herd is gone (connection closed, a stop signal): nobody may keep
 * training on its own. */
static void act_herd_gone(struct agent *a, json_t *body)
{
	(void)body;
	rank_stop_all(a);
	agent_maybe_exit(a);
}

/* herd fell silent (no HEARTBEAT in time, no first frame): with no rank
 * left the agent stops now, not waiting for a queue herd will not read. */
static void act_herd_silent(struct agent *a, json_t *body)
{
	(void)body;
	rank_stop_all(a);
	if (rank_alive_count(a) == 0)
		loop_stop(a->loop);
}

static void act_ranks_gone(struct agent *a, json_t *body)
{
	(void)body;
	cancel_kill_timer(a);
}

/* The attempt is stopped: herd learns it, and may launch again. */
static void act_ranks_gone_stopped(struct agent *a, json_t *body)
{
	(void)body;
	cancel_kill_timer(a);
	send_stopped(a);
}

/* SPAWN_LAUNCH with processes for this node (pmix/spawn.c): they start
 * while the attempt runs here or is over here but goes on elsewhere;
 * while the agent stops, herd hears why not. */
static void act_spawn(struct agent *a, json_t *body)
{
	psrv_spawn_launch(a, body, true);
}

static void act_spawn_over(struct agent *a, json_t *body)
{
	psrv_spawn_launch(a, body, false);
}

/* ---- the table -------------------------------------------------------------- */

struct agent_row {
	bool valid;
	enum agent_state next;
	agent_action action;
};

#define ROW(n, act) {.valid = true, .next = (n), .action = (act)}

/* A missing row: the event means nothing in that state (a LAUNCH while
 * stopping, a timeout while already exiting) and is dropped. */
static const struct agent_row agent_table[AGENT_NSTATES][AGENT_NEVENTS] = {
	[AGENT_IDLE] = {
		[AGENT_EV_LAUNCH] = ROW(AGENT_RUNNING, act_launch),
		[AGENT_EV_STOP] = ROW(AGENT_IDLE, act_stop_idle),
		[AGENT_EV_STOP_EXIT] = ROW(AGENT_EXITING, act_stop),
		[AGENT_EV_HERD_GONE] = ROW(AGENT_EXITING, act_herd_gone),
		[AGENT_EV_HERD_SILENT] = ROW(AGENT_EXITING, act_herd_silent),
		[AGENT_EV_RANKS_GONE] = ROW(AGENT_IDLE, act_ranks_gone),
		[AGENT_EV_STACKS] = ROW(AGENT_IDLE, act_stacks_none),
		/* the attempt's own ranks ended here, it goes on elsewhere */
		[AGENT_EV_SPAWN] = ROW(AGENT_RUNNING, act_spawn),
	},
	[AGENT_RUNNING] = {
		/* rank_launch refuses while ranks of an attempt still run */
		[AGENT_EV_LAUNCH] = ROW(AGENT_RUNNING, act_launch),
		[AGENT_EV_STOP] = ROW(AGENT_STOPPING, act_stop),
		[AGENT_EV_STOP_EXIT] = ROW(AGENT_EXITING, act_stop),
		[AGENT_EV_HERD_GONE] = ROW(AGENT_EXITING, act_herd_gone),
		[AGENT_EV_HERD_SILENT] = ROW(AGENT_EXITING, act_herd_silent),
		/* a LAUNCH that failed part-way, or ranks that ended */
		[AGENT_EV_RANKS_GONE] = ROW(AGENT_IDLE, act_ranks_gone),
		[AGENT_EV_STACKS] = ROW(AGENT_RUNNING, act_stacks),
		[AGENT_EV_SPAWN] = ROW(AGENT_RUNNING, act_spawn),
	},
	[AGENT_STOPPING] = {
		[AGENT_EV_STOP] = ROW(AGENT_STOPPING, act_stop),
		[AGENT_EV_STOP_EXIT] = ROW(AGENT_EXITING, act_stop),
		[AGENT_EV_HERD_GONE] = ROW(AGENT_EXITING, act_herd_gone),
		[AGENT_EV_HERD_SILENT] = ROW(AGENT_EXITING, act_herd_silent),
		[AGENT_EV_RANKS_GONE] = ROW(AGENT_IDLE, act_ranks_gone_stopped),
		[AGENT_EV_STACKS] = ROW(AGENT_STOPPING, act_stacks_none),
		[AGENT_EV_SPAWN] = ROW(AGENT_STOPPING, act_spawn_over),
	},
	[AGENT_EXITING] = {
		/* An agent that is to exit stays so: a later STOP only
		 * repeats the stop signal (or STOPPED). */
		[AGENT_EV_STOP] = ROW(AGENT_EXITING, act_stop),
		[AGENT_EV_STOP_EXIT] = ROW(AGENT_EXITING, act_stop),
		[AGENT_EV_HERD_GONE] = ROW(AGENT_EXITING, act_herd_gone),
		[AGENT_EV_RANKS_GONE] = ROW(AGENT_EXITING,
					    act_ranks_gone_stopped),
		[AGENT_EV_STACKS] = ROW(AGENT_EXITING, act_stacks_none),
		[AGENT_EV_SPAWN] = ROW(AGENT_EXITING, act_spawn_over),
	},
};

const char *agent_state_name(enum agent_state s)
{
	static const char *const names[AGENT_NSTATES] = {
		[AGENT_IDLE] = "idle",
		[AGENT_RUNNING] = "running",
		[AGENT_STOPPING] = "stopping",
		[AGENT_EXITING] = "exiting",
	};

	return (unsigned)s < AGENT_NSTATES ? names[s] : "?";
}

/* One posted event; body is a reference the queue holds. */
struct agent_qev {
	enum agent_event ev;
	json_t *body;
	struct agent_qev *next;
};

/* Applies one event: the row's next state, then its action.  Returns
 * true, or false when the table has no row (the event is dropped). */
static bool handle(struct agent *a, const struct agent_qev *q)
{
	const struct agent_row *row;

	if ((unsigned)a->state >= AGENT_NSTATES ||
	    (unsigned)q->ev >= AGENT_NEVENTS)
		return false;
	row = &agent_table[a->state][q->ev];
	if (!row->valid)
		return false;
	a->state = row->next;
	if (row->action) {
		a->in_action = true;
		row->action(a, q->body);
		a->in_action = false;
	}
	return true;
}

int agent_drain(struct agent *a)
{
	struct agent_qev *q;
	int dropped = 0;

	if (a->in_action)
		return 0;
	if (a->drain_timer) {
		loop_timer_del(a->loop, a->drain_timer);
		a->drain_timer = 0;
	}
	while ((q = a->queue)) {
		a->queue = q->next;
		if (!a->queue)
			a->queue_tail = NULL;
		if (!handle(a, q))
			dropped++;
		json_decref(q->body);
		free(q);
		/* What the action posted comes before the rest. */
		if (a->next) {
			a->next_tail->next = a->queue;
			if (!a->queue)
				a->queue_tail = a->next_tail;
			a->queue = a->next;
			a->next = a->next_tail = NULL;
		}
	}
	agent_maybe_exit(a);
	return dropped;
}

static void on_drain(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->drain_timer = 0;
	agent_drain(a);
}

void agent_post(struct agent *a, enum agent_event ev, json_t *body)
{
	struct agent_qev *q = calloc(1, sizeof(*q));

	if (!q) {
		/* A lost transition leaves the agent in a state nobody can
		 * reason about: its ranks go with it. */
		fprintf(stderr, "herd-agent: out of memory queueing event %d; "
				"killing the ranks and exiting\n",
			(int)ev);
		rank_signal_all(a, SIGKILL);
		_exit(1);
	}
	q->ev = ev;
	q->body = json_incref(body);
	if (a->in_action) {
		if (a->next_tail)
			a->next_tail->next = q;
		else
			a->next = q;
		a->next_tail = q;
		return;
	}
	if (a->queue_tail)
		a->queue_tail->next = q;
	else
		a->queue = q;
	a->queue_tail = q;
	if (!a->drain_timer && a->loop) {
		a->drain_timer = loop_timer_add(a->loop, 0, on_drain, a);
		if (a->drain_timer < 0) {
			/* The next frame or drain takes them. */
			a->drain_timer = 0;
			fprintf(stderr,
				"herd-agent: out of memory: events wait\n");
		}
	}
}

void agent_queue_clear(struct agent *a)
{
	struct agent_qev *q;

	while ((q = a->queue)) {
		a->queue = q->next;
		json_decref(q->body);
		free(q);
	}
	while ((q = a->next)) {
		a->next = q->next;
		json_decref(q->body);
		free(q);
	}
	a->queue_tail = a->next_tail = NULL;
	if (a->drain_timer && a->loop)
		loop_timer_del(a->loop, a->drain_timer);
	a->drain_timer = 0;
}

/* With events queued the agent is not done: their actions may still
 * send (STOPPED). */
void agent_maybe_exit(struct agent *a)
{
	if (a->state == AGENT_EXITING && !a->queue && !a->next &&
	    rank_alive_count(a) == 0 &&
	    (!a->conn || conn_is_dead(a->conn) || conn_pending(a->conn) == 0))
		loop_stop(a->loop);
}

void agent_ranks_gone(struct agent *a)
{
	agent_post(a, AGENT_EV_RANKS_GONE, NULL);
}

void agent_child_exited(struct agent *a)
{
	agent_maybe_exit(a);
}

/* ---- frames from herd ------------------------------------------------------- */

typedef void (*frame_handler)(struct agent *a, struct proto_frame *f);

static void on_launch(struct agent *a, struct proto_frame *f)
{
	agent_post(a, AGENT_EV_LAUNCH, f->body);
}

static void on_signal(struct agent *a, struct proto_frame *f)
{
	int sig = (int)json_integer_value(json_object_get(f->body, "signal"));

	/* SIGSTOP and SIGCONT are herd's pause (SIGTSTP) and resume:
	 * health.c also stops judging herd's silence. */
	if (json_object_get(f->body, "ranks"))
		psrv_jctrl_signal_ranks(a, json_object_get(f->body, "ranks"),
					sig);
	else if (sig == SIGSTOP || sig == SIGCONT)
		health_pause(a, sig == SIGSTOP);
	else if (sig > 0 && sig < NSIG)
		rank_signal_all(a, sig);
}

static void on_stop(struct agent *a, struct proto_frame *f)
{
	json_t *g = json_object_get(f->body, "grace_ms");
	json_t *sg = json_object_get(f->body, "signal");

	if (json_is_integer(g))
		a->grace_ms = json_integer_value(g);
	/* Ctrl-C on herd: the ranks get SIGINT, not SIGTERM on top of it,
	 * so their SIGINT handlers can finish. */
	a->stop_signal = SIGTERM;
	if (json_is_integer(sg) && json_integer_value(sg) > 0 &&
	    json_integer_value(sg) < NSIG)
		a->stop_signal = (int)json_integer_value(sg);
	/* A restart: the ranks' group is over; those that speak
	 * herd.elastic hear it before the signal. */
	if (json_is_true(json_object_get(f->body, "leave")))
		control_leave(a);
	agent_post(a,
		   json_is_true(json_object_get(f->body, "exit"))
			   ? AGENT_EV_STOP_EXIT
			   : AGENT_EV_STOP,
		   NULL);
}

static void on_heartbeat(struct agent *a, struct proto_frame *f)
{
	health_on_heartbeat(a, f->body);
}

static void on_stacks(struct agent *a, struct proto_frame *f)
{
	agent_post(a, AGENT_EV_STACKS, f->body);
}

static void on_fence_done(struct agent *a, struct proto_frame *f)
{
	psrv_on_fence_done(a, f);
}

static void on_check(struct agent *a, struct proto_frame *f)
{
	check_on_frame(a, f);
}

static void on_netprobe(struct agent *a, struct proto_frame *f)
{
	netprobe_on_frame(a, f);
}

/* Frames herd sends to an agent (proto.h); every other type is a
 * protocol error. */
static const frame_handler frame_table[PROTO_TYPE_MAX_ + 1] = {
	[PROTO_LAUNCH] = on_launch,
	[PROTO_SIGNAL] = on_signal,
	[PROTO_STOP] = on_stop,
	[PROTO_HEARTBEAT] = on_heartbeat,
	[PROTO_FENCE_DONE] = on_fence_done,
	[PROTO_STACKS] = on_stacks,
	[PROTO_CHECK] = on_check,
	[PROTO_NETPROBE] = on_netprobe,
	[PROTO_SPAWN_LAUNCH] = psrv_on_spawn_launch,
	[PROTO_SPAWN_DONE] = psrv_on_spawn_done,
	[PROTO_CONNECT_DONE] = psrv_on_connect_done,
	[PROTO_DMODEX] = psrv_modex_on_request,
	[PROTO_DMODEX_DATA] = psrv_modex_on_data,
	[PROTO_PUBSUB_DONE] = psrv_on_pubsub_done,
	[PROTO_EVENT] = psrv_on_event,
	[PROTO_PROC_FAILED] = psrv_on_proc_failed,
	[PROTO_RANK_CTL] = control_on_frame,
	/* checkpoints in memory */
	[PROTO_CKPT_CONF] = ckpt_mem_on_conf,
	[PROTO_CKPT_PUSH] = ckpt_mem_on_push,
	[PROTO_CKPT_DATA] = ckpt_mem_on_data,
	[PROTO_CKPT_PERSIST] = ckpt_mem_on_persist,
};

static void dispatch(struct agent *a, struct proto_frame *f)
{
	frame_handler h = f->type >= 0 && f->type <= PROTO_TYPE_MAX_
				  ? frame_table[f->type]
				  : NULL;

	if (h)
		h(a, f);
	else
		agent_send(a, PROTO_ERROR,
			   json_pack("{s:s}", "message",
				     "unexpected frame for an agent"),
			   NULL, 0);
}

void agent_dispatch(struct agent *a, struct proto_frame *f)
{
	/* A frame is handled after what earlier frames posted, so herd's
	 * order holds (a SIGNAL after a LAUNCH finds the ranks). */
	agent_drain(a);
	dispatch(a, f);
}

void agent_on_frame(struct conn *c, struct proto_frame *f, void *arg)
{
	struct agent *a = arg;
	struct herd_err err;

	health_heard(a);
	if (proto_frame_check(f, PROTO_TO_AGENT, &err) < 0) {
		/* herd speaks a protocol we do not: it hears why, the
		 * connection stays open until that is out, and the agent
		 * goes as if herd had hung up (handled from the loop). */
		fprintf(stderr, "herd-agent: connection to herd lost: %s\n",
			err.text);
		agent_send(a, PROTO_ERROR,
			   json_pack("{s:s}", "message", err.text), NULL, 0);
		conn_pause_reading(c);
		agent_post(a, AGENT_EV_HERD_GONE, NULL);
		proto_frame_free(f);
		return;
	}
	agent_dispatch(a, f);
	proto_frame_free(f);
	agent_maybe_exit(a);
}

void agent_on_close(struct conn *c, const char *reason, int clean, void *arg)
{
	struct agent *a = arg;

	(void)c;
	if (!clean)
		fprintf(stderr, "herd-agent: connection to herd lost: %s\n",
			reason);
	else if (a->state != AGENT_EXITING)
		/* herd hung up without STOP: it ended, or dropped us. */
		fprintf(stderr, "herd-agent: herd closed the connection; "
				"stopping the ranks and exiting\n");
	agent_post(a, AGENT_EV_HERD_GONE, NULL);
}
