/* lifecycle.c — the agent's states and the frames that drive them.
 *
 * One table of (state, event) -> (next state, action), one transition
 * function (agent_post), as flux-core's broker/state_machine.c: no
 * flags spread over the files that say "stopping" or "exit when idle".
 * Frames from herd go through a table indexed by frame type whose
 * default is a protocol error (OpenSSH dispatch.c). */
#include <signal.h>
#include <stdio.h>

#include "agent/agent.h"
#include "agent/check.h"

/* ---- actions -------------------------------------------------------------- */

typedef void (*agent_action)(struct agent *a, void *data);

static void cancel_kill_timer(struct agent *a)
{
	if (a->kill_timer) {
		loop_timer_del(a->loop, a->kill_timer);
		a->kill_timer = 0;
	}
}

static void act_launch(struct agent *a, void *data)
{
	struct herd_err err;

	herd_err_clear(&err);
	if (rank_launch(a, data, &err) < 0)
		agent_send(a, PROTO_ERROR,
			   json_pack("{s:s}", "message", err.text), NULL, 0);
	metrics_launch(a, data);
	/* Nothing started (no ranks, or the first could not be): back to
	 * IDLE through the table. */
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
static void act_stop(struct agent *a, void *data)
{
	(void)data;
	if (rank_alive_count(a) == 0) {
		cancel_kill_timer(a);
		send_stopped(a);
	} else {
		rank_stop_all(a);
	}
}

/* STOP for a restart with no rank left: STOPPED, and still IDLE. */
static void act_stop_idle(struct agent *a, void *data)
{
	(void)data;
	cancel_kill_timer(a);
	send_stopped(a);
}

/* STACKS: the stacks of the running ranks (stacks.c); with none
 * running, an empty answer, so that herd never waits for one. */
static void act_stacks(struct agent *a, void *data)
{
	stacks_start(a, data);
}

static void act_stacks_none(struct agent *a, void *data)
{
	stacks_answer_empty(a, data);
}

/* herd is gone (connection closed, a stop signal): nobody may keep
 * training on its own. */
static void act_herd_gone(struct agent *a, void *data)
{
	(void)data;
	rank_stop_all(a);
	agent_maybe_exit(a);
}

/* herd fell silent (no HEARTBEAT in time, no first frame): with no rank
 * left the agent stops now, not waiting for a queue herd will not read. */
static void act_herd_silent(struct agent *a, void *data)
{
	(void)data;
	rank_stop_all(a);
	if (rank_alive_count(a) == 0)
		loop_stop(a->loop);
}

static void act_ranks_gone(struct agent *a, void *data)
{
	(void)data;
	cancel_kill_timer(a);
}

/* The attempt is stopped: herd learns it, and may launch again. */
static void act_ranks_gone_stopped(struct agent *a, void *data)
{
	(void)data;
	cancel_kill_timer(a);
	send_stopped(a);
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
		[AGENT_EV_SPAWN] = ROW(AGENT_RUNNING, NULL),
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
		[AGENT_EV_SPAWN] = ROW(AGENT_RUNNING, NULL),
	},
	[AGENT_STOPPING] = {
		[AGENT_EV_STOP] = ROW(AGENT_STOPPING, act_stop),
		[AGENT_EV_STOP_EXIT] = ROW(AGENT_EXITING, act_stop),
		[AGENT_EV_HERD_GONE] = ROW(AGENT_EXITING, act_herd_gone),
		[AGENT_EV_HERD_SILENT] = ROW(AGENT_EXITING, act_herd_silent),
		[AGENT_EV_RANKS_GONE] = ROW(AGENT_IDLE, act_ranks_gone_stopped),
		[AGENT_EV_STACKS] = ROW(AGENT_STOPPING, act_stacks_none),
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

bool agent_post(struct agent *a, enum agent_event ev, void *data)
{
	const struct agent_row *row;

	if ((unsigned)a->state >= AGENT_NSTATES ||
	    (unsigned)ev >= AGENT_NEVENTS)
		return false;
	row = &agent_table[a->state][ev];
	if (!row->valid)
		return false;
	a->state = row->next;
	if (row->action)
		row->action(a, data);
	return true;
}

void agent_maybe_exit(struct agent *a)
{
	if (a->state == AGENT_EXITING && rank_alive_count(a) == 0 &&
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
		pmix_jctrl_signal_ranks(a, json_object_get(f->body, "ranks"),
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
	pmix_on_fence_done(a, f);
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
	[PROTO_SPAWN_LAUNCH] = pmix_on_spawn_launch,
	[PROTO_SPAWN_DONE] = pmix_on_spawn_done,
	[PROTO_CONNECT_DONE] = pmix_on_connect_done,
	[PROTO_DMODEX] = pmix_modex_on_request,
	[PROTO_DMODEX_DATA] = pmix_modex_on_data,
	[PROTO_PUBSUB_DONE] = pmix_on_pubsub_done,
	[PROTO_EVENT] = pmix_on_event,
	[PROTO_PROC_FAILED] = pmix_on_proc_failed,
	[PROTO_RANK_CTL] = control_on_frame,
	/* checkpoints in memory */
	[PROTO_CKPT_CONF] = ckpt_mem_on_conf,
	[PROTO_CKPT_PUSH] = ckpt_mem_on_push,
	[PROTO_CKPT_DATA] = ckpt_mem_on_data,
	[PROTO_CKPT_PERSIST] = ckpt_mem_on_persist,
};

void agent_dispatch(struct agent *a, struct proto_frame *f)
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
