/* test_ctl.c — the controller's lifecycle through a fake transport.
 *
 * The transport's start() returns one end of a socketpair; the test plays
 * the agents on the other ends, as loop callbacks on the controller's own
 * loop (proto frames through lib/wire/conn.c), so every run is one thread and
 * deterministic.  Each test checks the sequence of states, what every
 * agent received (a letter per frame) and events.jsonl; together they go
 * through every row of ctl_table[] (test_every_row checks that last).
 *
 * Agent logs: L = LAUNCH, s = STOP (recover: stop ranks, stay),
 * S = STOP (stop and exit), K = STOP with SIGKILL (and exit),
 * T = STACKS (the stacks of its ranks), F = PROC_FAILED (ranks failed,
 * told to the survivors), e = EVENT, D = FENCE_DONE (done), X =
 * FENCE_DONE (failed), M = RANK_CTL with a new membership (survivors
 * kept, ctl/rejoin.c).
 * States: C connect, R run, H stacks (a hang), V recover, B backoff,
 * S stopping, E end, P preflight, N notify.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "launcher/cli.h"
#include "launcher/ctl/ctl_int.h"
#include "herd/noderec.h"
#include "herd/version.h"

#define MAX_HOSTS 8
#define MAX_AGENTS 16
#define MAX_ATTEMPTS 5

/* How one host's agent behaves (all zero: says HELLO, its ranks exit 0
 * at once, it confirms STOPs and exits when told). */
struct hostcfg {
	char host[32];
	int fail_starts;	/* the first N start()s fail */
	int error_starts;	/* the first N agents send ERROR, no HELLO */
	const char *error_stage;	/* ERROR's stage (default "agent") */
	const char *error_message;	/* ERROR's message (a default) */
	int gone_starts;	/* the first N agents are gone before HELLO */
	/* HELLO's version, hostname and topo_error, and its ranks' EXIT
	 * error, when set (else the defaults: a node in good order). */
	const char *hello_version;
	const char *hello_hostname;
	const char *topo_error;
	const char *exit_error;
	bool pmix_unconnected;	/* EXIT says pmix_connected: false */
	long hello_ms;		/* HELLO this late */
	bool no_hello;		/* never says HELLO */
	bool bad_frame;		/* sends herd a LAUNCH frame before HELLO */
	bool close_at_launch;	/* hangs up when LAUNCH comes (attempt 1) */
	bool hold[MAX_ATTEMPTS + 1];	/* ranks run until stopped */
	long run_ms;		/* else they exit after this long */
	int exit_code[MAX_ATTEMPTS + 1];
	bool hung;		/* reports its ranks hung (attempt 1) */
	bool abort_;		/* a rank calls MPI_Abort (attempt 1) */
	bool no_stopped;	/* never confirms a recover STOP */
	long stopped_ms;	/* confirms this late */
	bool late_exit;		/* confirms, then its rank exits 1 */
	bool die_after_stopped;	/* hangs up 100 ms after confirming */
	bool ignore_exit;	/* never exits when told */
	bool answer_hb;		/* answers herd's HEARTBEAT at once */
	/* STACKS: answers with its ranks waiting in all_reduce,
	 * or, culprit, stuck in a function of its own; after stacks_ms;
	 * never (no_stacks); hangs up (close_at_stacks); its ranks die of
	 * the SIGABRT first (abort_at_stacks); MPI_Abort then
	 * (mpi_abort_at_stacks). */
	bool culprit;
	bool blank_stack; /* answers without a frame, its progress oldest */
	long stacks_ms;
	bool no_stacks;
	bool close_at_stacks;
	bool abort_at_stacks;
	bool mpi_abort_at_stacks;
	bool unhealthy;		/* its CHECK answer fails "script" */
	bool close_at_check;	/* hangs up when CHECK comes */
	long check_ms;		/* answers CHECK this late */
	int slow_recv;		/* probe: its first N receptions are slow */
	/* PROC_FAILED: its ranks exit 0, it calls MPI_Abort, or
	 * it hangs up; fence: a FENCE at launch (attempt 1). */
	bool exit_on_notify;
	bool abort_on_notify;
	bool close_on_notify;
	bool fence;
	size_t fence_data; /* its FENCE carries this many bytes */
	/* herd.elastic (ctl/rejoin.c): its ranks say hello on their control
	 * channel at every LAUNCH; stepping: they report stepping in each new
	 * generation (a membership for survivors, a LAUNCH for a
	 * replacement), then exit 0 after 50 ms; vanish_ms: the agent hangs
	 * up this long after LAUNCH (attempt 1), its ranks with it. */
	bool elastic;
	bool stepping;
	long vanish_ms;
	/* What it received, over all its starts. */
	char log[64];
	int starts;
};

struct world;

struct agent {
	struct world *w;
	struct hostcfg *cfg;
	struct conn *conn;
	int fd;			/* conn's socket: raw bytes (trickle) */
	int attempt;
	int ranks[8];
	int n_ranks;
	bool running;
	int stop_sig;
	long t_hello, t_exit, t_stopped, t_close, t_late, t_stacks, t_check;
	int64_t hb_ms[64];	/* when herd's HEARTBEATs came */
	int n_hb, hb_seq;
	long t_vanish;
};

struct world {
	char dir[64];
	struct loop *loop;
	struct spec *spec;
	struct ctl_options opt;
	struct resolved res;
	struct ctl *c;
	struct hostcfg hosts[MAX_HOSTS];
	int n_hosts;
	struct agent agents[MAX_AGENTS];
	int n_agents;
	char states[64];
	int n_events[CTL_EV_COUNT_];
	int status;
	bool timed_out;
	char *events;		/* events.jsonl */
	int saved_stderr;	/* run_err: herd's own stderr meanwhile */
	long t_raise, t_post;
	enum ctl_state raise_state;	/* raise_in: Ctrl-C entering it */
	int launches;		/* LAUNCH frames the agents got */
	/* Per test: called for every event the controller handles. */
	void (*hook)(struct world *w, enum ctl_state from,
		     const struct ctl_ev *ev, const struct ctl_row *row);
	void (*before_loop)(struct world *w);
	void (*on_launch)(struct world *w, struct agent *a);
	void (*on_stop)(struct world *w, struct agent *a, bool exit_after);
};

/* Rows of ctl_table[] some test went through. */
static bool row_hit[128];

static const char state_letter[] = "CRHVBSEPN";

/* --- the fake agents ------------------------------------------------------- */

static void agent_send(struct agent *a, enum proto_type type, json_t *body)
{
	if (a->conn)
		conn_send(a->conn, type, body, NULL, 0, NULL);
	json_decref(body);
}

static void log_frame(struct agent *a, char ch)
{
	size_t len = strlen(a->cfg->log);

	if (len + 1 < sizeof(a->cfg->log)) {
		a->cfg->log[len] = ch;
		a->cfg->log[len + 1] = '\0';
	}
}

static void agent_hangup(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->t_close = 0;
	conn_free(a->conn);
	a->conn = NULL;
}

static void hang_up_soon(struct agent *a, long ms)
{
	if (!a->t_close)
		a->t_close = loop_timer_add(a->w->loop, ms, agent_hangup, a);
}

static void send_hello(struct agent *a)
{
	if (a->cfg->bad_frame)
		agent_send(a, PROTO_LAUNCH, json_object());
	agent_send(
	    a, PROTO_HELLO,
	    json_pack(
		"{s:s, s:s, s:[{s:s, s:s, s:s}], s:i, s:i, s:s}", "version",
		a->cfg->hello_version ? a->cfg->hello_version : HERD_VERSION,
		"hostname",
		a->cfg->hello_hostname ? a->cfg->hello_hostname : a->cfg->host,
		"addrs", "ifname", "eth0", "addr", "10.0.0.1", "netmask",
		"255.255.255.0", "cores", 1, "pid", (int)getpid(), "topo_error",
		a->cfg->topo_error ? a->cfg->topo_error : "none (test)"));
}

static void agent_hello(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->t_hello = 0;
	send_hello(a);
}

static void send_exits(struct agent *a, int code, int sig, const char *error)
{
	for (int i = 0; i < a->n_ranks; i++) {
		/* One of code and signal, the other null (proto.h). */
		json_t *b = json_pack("{s:i, s:i, s:o, s:o}", "attempt",
				      a->attempt, "rank", a->ranks[i], "code",
				      sig ? json_null() : json_integer(code),
				      "signal",
				      sig ? json_integer(sig) : json_null());

		if (error) {
			json_object_set_new(b, "error", json_string(error));
			json_object_set_new(b, "errno", json_integer(2));
		}
		if (a->cfg->pmix_unconnected)
			json_object_set_new(b, "pmix_connected", json_false());
		agent_send(a, PROTO_EXIT, b);
	}
	a->running = false;
}

static void agent_exit(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->t_exit = 0;
	if (a->running)
		send_exits(a, a->cfg->exit_code[a->attempt], 0,
			   a->cfg->exit_error);
}

static void agent_stopped(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->t_stopped = 0;
	agent_send(a, PROTO_STOPPED, json_pack("{s:i}", "attempt", a->attempt));
	if (a->cfg->die_after_stopped)
		hang_up_soon(a, 100);
}

static void agent_late_exit(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->t_late = 0;
	send_exits(a, 1, 0, "late");
}

/* One message of rank's control channel to herd (RANK_CTL). */
static void rank_ctl(struct agent *a, int rank, json_t *msg)
{
	agent_send(a, PROTO_RANK_CTL,
		   json_pack("{s:i, s:i, s:i, s:o}", "attempt", a->attempt,
			     "rank", rank, "conn", 1, "msg", msg));
}

/* Its ranks step in generation gen, and end 50 ms later. */
static void rank_stepping(struct agent *a, int rank, int gen)
{
	rank_ctl(a, rank,
		 json_pack("{s:s, s:i, s:i}", "op", "stepping", "generation",
			   gen, "step", 1));
	if (!a->t_exit)
		a->t_exit = loop_timer_add(a->w->loop, 50, agent_exit, a);
}

static void agent_vanish(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->t_vanish = 0;
	conn_free(a->conn);
	a->conn = NULL;
}

static void elastic_at_launch(struct agent *a)
{
	int gen = ctl_rejoin_generation(a->w->c);

	for (int i = 0; i < a->n_ranks; i++) {
		rank_ctl(a, a->ranks[i],
			 json_pack("{s:s, s:i, s:i}", "op", "hello", "protocol",
				   1, "generation", gen));
		if (gen > 0 && a->cfg->stepping)
			rank_stepping(a, a->ranks[i], gen);
	}
	if (a->attempt == 1 && a->cfg->vanish_ms)
		a->t_vanish = loop_timer_add(a->w->loop, a->cfg->vanish_ms,
					     agent_vanish, a);
}

static void on_rank_ctl(struct agent *a, json_t *body)
{
	json_t *msg = json_object_get(body, "msg");
	const char *op = json_string_value(json_object_get(msg, "op"));

	if (!op || strcmp(op, "membership"))
		return;
	log_frame(a, 'M');
	if (a->cfg->stepping)
		rank_stepping(
		    a, (int)json_integer_value(json_object_get(body, "rank")),
		    (int)json_integer_value(
			json_object_get(msg, "generation")));
}

static void on_launch(struct agent *a, json_t *body)
{
	struct hostcfg *h = a->cfg;
	json_t *r;
	size_t i;

	a->attempt = (int)json_integer_value(json_object_get(body, "attempt"));
	a->n_ranks = 0;
	json_array_foreach(json_object_get(body, "ranks"), i, r)
		if (a->n_ranks < 8)
			a->ranks[a->n_ranks++] = (int)json_integer_value(
				json_object_get(r, "rank"));
	a->running = true;
	a->w->launches++;
	if (a->w->on_launch)
		a->w->on_launch(a->w, a);
	if (h->elastic)
		elastic_at_launch(a);
	if (a->attempt == 1 && h->close_at_launch) {
		hang_up_soon(a, 0);
	} else if (a->attempt == 1 && h->hung) {
		agent_send(a, PROTO_HEARTBEAT,
			   json_pack("{s:i, s:i, s:[{s:i, s:I}]}", "seq", 1,
				     "attempt", 1, "hung", "rank", a->ranks[0],
				     "silent_ms", (json_int_t)5000));
	} else if (a->attempt == 1 && h->abort_) {
		agent_send(a, PROTO_ABORT,
			   json_pack("{s:i, s:i, s:i, s:s}", "attempt", 1,
				     "rank", a->ranks[0], "status", 7,
				     "message", "boom"));
	} else if (a->attempt <= MAX_ATTEMPTS && !h->hold[a->attempt]) {
		a->t_exit = loop_timer_add(a->w->loop, h->run_ms, agent_exit, a);
	}
	if (a->attempt == 1 && h->fence) {
		json_t *b = json_pack("{s:i, s:i}", "attempt", 1, "seq", 1);
		char *data = h->fence_data ? malloc(h->fence_data) : NULL;

		if (data)
			memset(data, 'f', h->fence_data);
		conn_send(a->conn, PROTO_FENCE, b, data,
			  data ? h->fence_data : 0, NULL);
		free(data);
		json_decref(b);
	}
}

static void on_stop(struct agent *a, json_t *body)
{
	struct hostcfg *h = a->cfg;
	bool exit_after = json_is_true(json_object_get(body, "exit"));
	int sig = (int)json_integer_value(json_object_get(body, "signal"));

	log_frame(a, !exit_after ? 's' : sig == SIGKILL ? 'K' : 'S');
	if (a->w->on_stop)
		a->w->on_stop(a->w, a, exit_after);
	if (a->running && !h->late_exit)
		send_exits(a, 0, sig, NULL);
	if (!exit_after) {
		if (h->late_exit)
			a->t_late = loop_timer_add(a->w->loop, 100,
						   agent_late_exit, a);
		if (!h->no_stopped && !a->t_stopped)
			a->t_stopped = loop_timer_add(a->w->loop, h->stopped_ms,
						      agent_stopped, a);
		return;
	}
	if (!h->ignore_exit)
		hang_up_soon(a, 0);
}

static void agent_stacks(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	json_t *ranks = json_array();

	(void)loop;
	a->t_stacks = 0;
	for (int i = 0; i < a->n_ranks; i++) {
		if (a->cfg->blank_stack) {
			json_array_append_new(
				ranks,
				json_pack("{s:i, s:s, s:b, s:I, s:s}", "rank",
					  a->ranks[i], "method", "python",
					  "in_collective", false,
					  "last_sign_ms", (json_int_t)500,
					  "error",
					  "not in its script: in herd's "
					  "warm_boot.py:319 (the script had "
					  "raised or returned)"));
			continue;
		}
		json_array_append_new(
			ranks,
			json_pack("{s:i, s:s, s:s, s:b, s:I}", "rank",
				  a->ranks[i], "method", "python", "frame",
				  a->cfg->culprit
					  ? "stuck_in_data_loader (train.py:41)"
					  : "all_reduce (distributed_c10d.py:2050)",
				  "in_collective", !a->cfg->culprit,
				  "last_sign_ms",
				  (json_int_t)(a->cfg->culprit ? 2000 : 1000)));
	}
	agent_send(a, PROTO_STACKS,
		   json_pack("{s:i, s:o}", "attempt", a->attempt, "ranks",
			     ranks));
}

static void on_stacks(struct agent *a)
{
	struct hostcfg *h = a->cfg;

	if (h->close_at_stacks) {
		hang_up_soon(a, 0);
		return;
	}
	if (h->abort_at_stacks && a->running)
		send_exits(a, 0, SIGABRT, NULL);
	if (h->mpi_abort_at_stacks)
		agent_send(a, PROTO_ABORT,
			   json_pack("{s:i, s:i, s:i, s:s}", "attempt",
				     a->attempt, "rank", a->ranks[0], "status",
				     9, "message", "abort while hung"));
	if (!h->no_stacks && !a->t_stacks)
		a->t_stacks = loop_timer_add(a->w->loop, h->stacks_ms,
					     agent_stacks, a);
}

static void agent_check(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->t_check = 0;
	agent_send(a, PROTO_CHECK,
		   json_pack("{s:I, s:i, s:[{s:s, s:s, s:s}]}", "t_ms",
			     (json_int_t)loop_wall_ms(), "held_ms", 0,
			     "checks", "name", "script", "status",
			     a->cfg->unhealthy ? "fail" : "ok", "reason",
			     "scratch missing (test)"));
}

/* The network probe of herd check: a listener says its port and what it
 * received (all 32 MiB in 8 ms, or in 1 s while slow_recv lasts), a
 * sender that it is done. */
static void on_netprobe(struct agent *a, json_t *body)
{
	int round = (int)json_integer_value(json_object_get(body, "round"));
	bool slow = a->cfg->slow_recv > 0;

	if (!strcmp(json_string_value(json_object_get(body, "op")), "listen")) {
		if (slow)
			a->cfg->slow_recv--;
		agent_send(a, PROTO_NETPROBE,
			   json_pack("{s:i, s:s, s:i}", "round", round, "op",
				     "listening", "port", 40000));
		agent_send(a, PROTO_NETPROBE,
			   json_pack("{s:i, s:s, s:I, s:I}", "round", round,
				     "op", "result", "rx_bytes",
				     (json_int_t)33554432, "rx_us",
				     (json_int_t)(slow ? 1000000 : 8000)));
	} else {
		agent_send(a, PROTO_NETPROBE,
			   json_pack("{s:i, s:s, s:i, s:i}", "round", round,
				     "op", "result", "rx_bytes", 0, "rx_us",
				     0));
	}
}

static void on_proc_failed(struct agent *a)
{
	struct hostcfg *h = a->cfg;

	if (h->exit_on_notify && a->running)
		send_exits(a, 0, 0, NULL);
	if (h->abort_on_notify)
		agent_send(a, PROTO_ABORT,
			   json_pack("{s:i, s:i, s:i, s:s}", "attempt",
				     a->attempt, "rank", a->ranks[0], "status",
				     6, "message", "the event's default"));
	if (h->close_on_notify)
		hang_up_soon(a, 0);
}

static void agent_frame(struct conn *conn, struct proto_frame *f, void *arg)
{
	struct agent *a = arg;

	(void)conn;
	switch (f->type) {
	case PROTO_LAUNCH:
		log_frame(a, 'L');
		on_launch(a, f->body);
		break;
	case PROTO_STOP:
		on_stop(a, f->body);
		break;
	case PROTO_HEARTBEAT:
		if (a->n_hb < 64)
			a->hb_ms[a->n_hb++] = loop_now_ms();
		if (a->cfg->answer_hb)
			agent_send(a, PROTO_HEARTBEAT,
				   json_pack("{s:i, s:i, s:[]}", "seq",
					     ++a->hb_seq, "attempt", a->attempt,
					     "hung"));
		break;
	case PROTO_FENCE_DONE:
		log_frame(a,
			  json_integer_value(json_object_get(f->body, "status"))
			      ? 'X'
			      : 'D');
		break;
	case PROTO_CKPT_CONF: /* the memory tier: a fake node has none */
		break;
	case PROTO_PROC_FAILED:
		log_frame(a, 'F');
		on_proc_failed(a);
		break;
	case PROTO_EVENT:
		log_frame(a, 'e');
		break;
	case PROTO_STACKS:
		log_frame(a, 'T');
		on_stacks(a);
		break;
	case PROTO_CHECK:
		log_frame(a, 'c');
		if (a->cfg->close_at_check)
			hang_up_soon(a, 0);
		else if (!a->t_check)
			a->t_check = loop_timer_add(a->w->loop, a->cfg->check_ms,
						    agent_check, a);
		break;
	case PROTO_NETPROBE:
		on_netprobe(a, f->body);
		break;
	case PROTO_RANK_CTL:
		on_rank_ctl(a, f->body);
		break;
	default:
		log_frame(a, '?');
		break;
	}
	proto_frame_free(f);
}

static void agent_close(struct conn *conn, const char *reason, int clean,
			void *arg)
{
	struct agent *a = arg;

	(void)conn;
	(void)reason;
	(void)clean;
	hang_up_soon(a, 0);	/* not inside its own callback */
}

static void agent_free(struct agent *a)
{
	long *timers[] = {&a->t_hello, &a->t_exit,  &a->t_stopped,
			  &a->t_close, &a->t_late,  &a->t_stacks,
			  &a->t_check, &a->t_vanish};

	for (size_t i = 0; i < sizeof(timers) / sizeof(timers[0]); i++)
		if (*timers[i])
			loop_timer_del(a->w->loop, *timers[i]);
	conn_free(a->conn);
	a->conn = NULL;
}

/* --- the fake transport ------------------------------------------------- */

static struct hostcfg *host(struct world *w, const char *name)
{
	for (int i = 0; i < w->n_hosts; i++)
		if (!strcmp(w->hosts[i].host, name))
			return &w->hosts[i];
	assert_true(w->n_hosts < MAX_HOSTS);
	snprintf(w->hosts[w->n_hosts].host, sizeof(w->hosts[0].host), "%s",
		 name);
	return &w->hosts[w->n_hosts++];
}

static int fake_start(struct transport *t, const char *name,
		      struct herd_err *err)
{
	struct world *w = t->priv;
	struct hostcfg *h = host(w, name);
	struct agent *a;
	int sv[2];

	h->starts++;
	if (h->starts <= h->fail_starts)
		return herd_errprintf(err, "%s: cannot start (test)", name);
	assert_true(w->n_agents < MAX_AGENTS);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	a = &w->agents[w->n_agents++];
	memset(a, 0, sizeof(*a));
	a->w = w;
	a->cfg = h;
	a->fd = sv[1];
	a->conn = conn_new(w->loop, sv[1], sv[1], PROTO_FRAME_MAX, agent_frame,
			   agent_close, a);
	assert_non_null(a->conn);
	if (h->starts <= h->fail_starts + h->gone_starts) {
		conn_free(a->conn);	/* gone before herd reads a byte */
		a->conn = NULL;
	} else if (h->starts <= h->fail_starts + h->error_starts) {
		agent_send(a, PROTO_ERROR,
			   json_pack("{s:s, s:s}", "stage",
				     h->error_stage ? h->error_stage : "agent",
				     "message",
				     h->error_message ? h->error_message
						      : "agent failed (test)"));
		hang_up_soon(a, 0);
	} else if (h->hello_ms) {
		a->t_hello = loop_timer_add(w->loop, h->hello_ms, agent_hello,
					    a);
	} else if (!h->no_hello) {
		send_hello(a);
	}
	return sv[0];
}

static const struct transport_ops fake_ops = {
	.name = "fake",
	.start = fake_start,
};

/* --- the world ------------------------------------------------------------ */

static void trace(struct ctl *c, enum ctl_state from, const struct ctl_ev *ev,
		  const struct ctl_row *row, void *arg)
{
	struct world *w = arg;
	size_t len = strlen(w->states);

	(void)c;
	w->n_events[ev->type]++;
	if (row) {
		row_hit[row - ctl_table] = true;
		if (row->next != from && len + 1 < sizeof(w->states)) {
			w->states[len] = state_letter[row->next];
			w->states[len + 1] = '\0';
		}
	}
	if (w->hook)
		w->hook(w, from, ev, row);
}

static int setup(void **state)
{
	static const char yaml[] = "name: unit\n"
				   "nodes:\n"
				   "  hosts: n[1-2]\n"
				   "  slots: 1\n"
				   "launch:\n"
				   "  command: \"true\"\n";
	struct world *w = calloc(1, sizeof(*w));
	struct herd_err err;

	assert_non_null(w);
	herd_err_clear(&err);
	snprintf(w->dir, sizeof(w->dir), "/tmp/herd-test-ctl-XXXXXX");
	assert_non_null(mkdtemp(w->dir));
	{
		/* The node record of each test is its own. */
		char st[sizeof(w->dir) + 8];

		snprintf(st, sizeof(st), "%s/state", w->dir);
		setenv("XDG_STATE_HOME", st, 1);
	}
	w->spec = spec_parse(yaml, sizeof(yaml) - 1, "unit.yaml", &err);
	assert_non_null(w->spec);
	/* Fast: a unit test waits for nothing real. */
	w->spec->health.grace_ms = 100;
	w->spec->health.heartbeat_ms = 1000;
	w->spec->health.timeout_ms = 20000;
	w->spec->restart.max = 0;
	w->spec->restart.backoff_ms = 0;
	w->loop = loop_new();
	assert_non_null(w->loop);
	w->t_raise = w->t_post = 0;
	w->saved_stderr = -1;
	snprintf(w->states, sizeof(w->states), "C");
	*state = w;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct world *w = *state;

	if (w->saved_stderr >= 0) { /* a test that failed inside run_err */
		fflush(stderr);
		dup2(w->saved_stderr, 2);
		close(w->saved_stderr);
	}
	ctl_free(w->c);
	for (int i = 0; i < w->n_agents; i++)
		agent_free(&w->agents[i]);
	loop_timer_del(w->loop, w->t_raise);
	loop_timer_del(w->loop, w->t_post);
	loop_free(w->loop);
	resolve_free(&w->res);
	spec_free(w->spec);
	free(w->events);
	nftw(w->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(w);
	return 0;
}

static void on_backstop(struct loop *loop, void *arg)
{
	struct world *w = arg;

	w->timed_out = true;
	loop_stop(loop);
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0;

	assert_non_null(f);
	assert_true(getdelim(&buf, &len, '\0', f) >= 0);
	fclose(f);
	return buf;
}

/* Runs the job to its end; returns herd's exit status. */
static int run(struct world *w)
{
	struct transport *t = calloc(1, sizeof(*t));
	struct herd_err err;
	char path[512];
	long backstop;

	herd_err_clear(&err);
	assert_non_null(t);
	t->ops = &fake_ops;
	t->spec = w->spec;
	t->agent_path = strdup("herd-agent");
	t->priv = w;
	assert_int_equal(resolve_nodes(w->spec, &w->res, &err), 0);
	w->c = ctl_new(w->spec, &w->opt);
	assert_non_null(w->c);
	assert_true(asprintf(&w->c->log_dir, "%s/runs", w->dir) > 0);
	w->c->trace = trace;
	w->c->trace_arg = w;
	assert_int_equal(ctl_start(w->c, w->loop, &w->res, t), 0);
	if (w->before_loop)
		w->before_loop(w);
	backstop = loop_timer_add(w->loop, 30000, on_backstop, w);
	assert_int_equal(loop_run(w->loop), 0);
	loop_timer_del(w->loop, backstop);
	assert_false(w->timed_out);
	assert_int_equal(w->c->state, CTL_END);
	w->status = ctl_end(w->c);
	if (!w->c->lt) /* herd check: no log tree */
		return w->status;
	snprintf(path, sizeof(path), "%s/events.jsonl",
		 logtree_run_dir(w->c->lt));
	w->events = read_file(path);
	return w->status;
}

/* run() with what herd writes to its terminal (stderr) into *said
 * (the test frees it). */
static int run_err(struct world *w, char **said)
{
	char path[sizeof(w->dir) + 16];
	int fd, status;

	snprintf(path, sizeof(path), "%s/stderr", w->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	w->saved_stderr = dup(2);
	assert_true(w->saved_stderr >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	close(fd);
	status = run(w);
	fflush(stderr);
	dup2(w->saved_stderr, 2);
	close(w->saved_stderr);
	w->saved_stderr = -1;
	*said = read_file(path);
	return status;
}

/* Lines of events.jsonl for event name that also hold `also` (or any). */
static int count_ev(struct world *w, const char *name, const char *also)
{
	char key[128];
	int k = 0;

	snprintf(key, sizeof(key), "\"event\":\"%s\"", name);
	for (char *line = w->events; line && *line;) {
		char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char *copy = strndup(line, len);

		assert_non_null(copy);
		if (strstr(copy, key) && (!also || strstr(copy, also)))
			k++;
		free(copy);
		line += len + (end ? 1 : 0);
	}
	return k;
}

static void on_raise(struct loop *loop, void *arg)
{
	struct world *w = arg;

	(void)loop;
	w->t_raise = 0;
	raise(SIGINT);
}

static void raise_soon(struct world *w)
{
	if (!w->t_raise)
		w->t_raise = loop_timer_add(w->loop, 10, on_raise, w);
}

static void set_hosts(struct world *w, const char *hosts, const char *spares)
{
	free(w->spec->nodes.hosts);
	w->spec->nodes.hosts = strdup(hosts);
	if (spares)
		w->spec->nodes.spares = strdup(spares);
}

/* --- connect ------------------------------------------------------------- */

/* Both nodes up, both ranks exit 0: connect, run, stop, end. */
static void test_complete(void **state)
{
	struct world *w = *state;

	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n1")->log, "LS");
	assert_string_equal(host(w, "n2")->log, "LS");
	assert_int_equal(count_ev(w, "attempt_end", "\"completed\""), 1);
	assert_int_equal(count_ev(w, "node_failed", NULL), 0);
}

/* The job ends before the loop turns once: no agent starts.  The
 * controller still ends from the loop, with status 1. */
static void test_no_node_starts(void **state)
{
	struct world *w = *state;

	host(w, "n1")->fail_starts = 1;
	host(w, "n2")->fail_starts = 1;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CSE");
	assert_int_equal(count_ev(w, "node_failed",
				  "transport could not start"),
			 2);
	assert_int_equal(w->n_agents, 0);
}

static void interrupt_now(struct world *w)
{
	(void)w;
	raise(SIGINT);
}

/* Ctrl-C before the loop runs, an agent still connecting: it is
 * hung up on and the job ends with 128 + SIGINT. */
static void test_interrupt_before_loop(void **state)
{
	struct world *w = *state;

	host(w, "n1")->no_hello = true;
	w->before_loop = interrupt_now;
	assert_int_equal(run(w), 128 + SIGINT);
	assert_string_equal(w->states, "CSE");
	assert_string_equal(host(w, "n1")->log, "");
	assert_string_equal(host(w, "n2")->log, "S");
}

/* An agent gone before herd read a byte: the spare takes its place. */
static void test_connect_spare_taken(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-2]", "s1");
	host(w, "n2")->gone_starts = 1;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_int_equal(count_ev(w, "node_failed", "\"host\":\"n2\""), 1);
	assert_int_equal(count_ev(w, "spare_used", "\"host\":\"s1\""), 1);
	assert_string_equal(host(w, "s1")->log, "LS");
	assert_string_equal(host(w, "n2")->log, "");
}

/* A member that fails is remembered in the job's node record
 * with its reason; a spare that stands in is not. */
static void test_failure_recorded(void **state)
{
	struct world *w = *state;
	struct noderec *r = NULL;
	struct noderec_host *h;
	struct herd_err err;

	set_hosts(w, "n[1-2]", "s1");
	host(w, "n2")->gone_starts = 1;
	assert_int_equal(run(w), 0);
	herd_err_clear(&err);
	assert_int_equal(noderec_load("unit", &r, &err), 0);
	assert_int_equal(r->n, 1);
	assert_non_null(h = noderec_find(r, "n2"));
	assert_int_equal(h->n, 1);
	assert_string_equal(h->f[0].kind, "failed");
	assert_non_null(h->f[0].run);
	assert_int_equal(r->quarantine_after, 3);
	noderec_free(r);
}

/* A node herd could not log in to (ssh auth, host key) is herd's setup,
 * not the node's health: nothing is recorded against it. */
static void test_setup_error_not_recorded(void **state)
{
	struct world *w = *state;
	struct noderec *r = NULL;
	struct herd_err err;

	set_hosts(w, "n[1-2]", "s1");
	host(w, "n2")->error_starts = 1;
	host(w, "n2")->error_stage = "auth";
	assert_int_equal(run(w), 0);
	assert_int_equal(count_ev(w, "node_failed", "\"host\":\"n2\""), 1);
	herd_err_clear(&err);
	if (noderec_load("unit", &r, &err) == 0) {
		assert_null(noderec_find(r, "n2"));
		noderec_free(r);
	}
}

/* An agent's ERROR text is shown with its controls made '?': a node
 * cannot send escape sequences to herd's terminal (or its events). */
static void test_error_text_cleaned(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-2]", "s1");
	host(w, "n2")->error_starts = 1;
	host(w, "n2")->error_message = "bad\x1b]0;owned\x07\x1b[2J end";
	assert_int_equal(run(w), 0);
	assert_int_equal(
	    count_ev(w, "node_failed", "bad?]0;owned??[2J end"), 1);
	assert_int_equal(count_ev(w, "node_failed", "\\u001b"), 0);
}

/* What a node says in its HELLO (its hostname, why it has no topology,
 * its version) reaches herd's terminal, its events and the node record
 * with its controls made '?'. */
static void test_hello_text_cleaned(void **state)
{
	struct world *w = *state;
	struct noderec *r = NULL;
	struct noderec_host *h;
	struct herd_err err;
	char *said;

	set_hosts(w, "n[1-3]", "s1");
	host(w, "n1")->hello_hostname = "n1\x1b]0;pwned\x07";
	host(w, "n2")->topo_error = "no hwloc\x1b]0;pwned\x07";
	host(w, "n3")->hello_version = "0.0\x1b]0;pwned\x07";
	assert_int_equal(run_err(w, &said), 0);
	assert_null(strchr(said, '\x1b'));
	assert_null(strchr(said, '\x07'));
	assert_non_null(strstr(said, "n2: no topology (no hwloc?]0;pwned?)"));
	assert_non_null(strstr(said, "herd-agent version 0.0?]0;pwned?"));
	assert_int_equal(
	    count_ev(w, "node_up", "\"hostname\":\"n1?]0;pwned?\""), 1);
	assert_int_equal(count_ev(w, "node_failed", "0.0?]0;pwned?"), 1);
	assert_null(strstr(w->events, "\\u001b"));
	assert_null(strstr(w->events, "\\u0007"));
	herd_err_clear(&err);
	assert_int_equal(noderec_load("unit", &r, &err), 0);
	assert_non_null(h = noderec_find(r, "n3"));
	assert_non_null(strstr(h->f[0].reason, "0.0?]0;pwned?"));
	assert_null(strchr(h->f[0].reason, '\x1b'));
	noderec_free(r);
	free(said);
}

/* A rank's EXIT error (the agent's words for a failed exec) too. */
static void test_exit_text_cleaned(void **state)
{
	struct world *w = *state;
	char *said;

	set_hosts(w, "n1", NULL);
	host(w, "n1")->exit_code[1] = 3;
	host(w, "n1")->exit_error = "exec failed\x1b[2J\x1b]0;pwned\x07";
	assert_int_equal(run_err(w, &said), 3);
	assert_null(strchr(said, '\x1b'));
	assert_null(strchr(said, '\x07'));
	assert_non_null(strstr(said, "exec failed?[2J?]0;pwned?"));
	assert_int_equal(count_ev(w, "rank_exit", "exec failed?[2J?]0;pwned?"),
			 1);
	assert_null(strstr(w->events, "\\u001b"));
	free(said);
}

/* pmix mode: rank 0 exits with code before it ever connected to its
 * PMIx server; herd fails the attempt (status 1) and says so. */
static void unconnected(struct world *w, int code, const char *expect)
{
	char *said;

	set_hosts(w, "n1", NULL);
	host(w, "n1")->exit_code[1] = code;
	host(w, "n1")->pmix_unconnected = true;
	assert_int_equal(run_err(w, &said), 1);
	assert_non_null(strstr(said, expect));
	free(said);
}

/* A failure before the connection (Open MPI's singleton fallback that
 * could not start its daemon) is named as one. */
static void test_exit_unconnected(void **state)
{
	unconnected(*state, 1,
		    "exited with status 1 without ever connecting to herd's "
		    "PMIx server");
}

/* exit 0 so: the singleton trap, a failure all the same. */
static void test_exit_singleton(void **state)
{
	unconnected(*state, 0,
		    "exited 0 without ever connecting to herd's PMIx server "
		    "(ran as a singleton?");
}

static void quarantine(const char *hostname, int times)
{
	struct herd_err err;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	herd_err_clear(&err);
	for (int i = 0; i < times; i++)
		assert_int_equal(
		    noderec_note("unit", hostname,
				 (int64_t)ts.tv_sec * 1000 - 1000 + i, "failed",
				 "heartbeats silent for 3.4 s", NULL, 3,
				 86400000L, &err),
		    0);
}

/* A quarantined member is never started; a spare takes its place. */
static void test_quarantined_member(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-2]", "s[1-2]");
	quarantine("n2", 3);
	quarantine("s1", 3);
	quarantine("n1", 2); /* below quarantine_after: used */
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_int_equal(count_ev(w, "node_quarantined",
				  "\"host\":\"n2\""),
			 1);
	assert_int_equal(count_ev(w, "node_quarantined",
				  "\"last_reason\":\"heartbeats silent"),
			 2);
	assert_int_equal(count_ev(w, "node_quarantined", "\"spare\":true"), 1);
	assert_int_equal(count_ev(w, "spare_used", "\"host\":\"s2\""), 1);
	assert_int_equal(count_ev(w, "job_start", "\"spares\":1"), 1);
	assert_string_equal(host(w, "n2")->log, "");
	assert_string_equal(host(w, "s1")->log, "");
	assert_string_equal(host(w, "s2")->log, "LS");
	assert_int_equal(count_ev(w, "attempt_start", "\"nodes\":2"), 1);
}

/* No spare: nodes.min decides, as for a node that fails. */
static void test_quarantined_no_spare(void **state)
{
	struct world *w = *state;

	quarantine("n2", 3);
	assert_int_equal(run(w), 1);
	assert_int_equal(count_ev(w, "node_quarantined", NULL), 1);
	assert_string_equal(host(w, "n2")->log, "");
}

static void test_quarantined_shrink(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	quarantine("n2", 3);
	assert_int_equal(run(w), 0);
	assert_int_equal(count_ev(w, "attempt_start", "\"nodes\":1"), 1);
	assert_string_equal(host(w, "n2")->log, "");
}

/* quarantine_after 0: nothing is quarantined. */
static void test_quarantine_off(void **state)
{
	struct world *w = *state;

	w->spec->health.quarantine_after = 0;
	quarantine("n2", 5);
	assert_int_equal(run(w), 0);
	assert_int_equal(count_ev(w, "node_quarantined", NULL), 0);
	assert_string_equal(host(w, "n2")->log, "LS");
}

/* nodes.min: a node that fails at HELLO, the job starts with the rest. */
static void test_connect_shrink(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", NULL);
	w->spec->nodes.min = 2;
	host(w, "n3")->error_starts = 1;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_int_equal(count_ev(w, "attempt_start", "\"nodes\":2"), 1);
	assert_int_equal(count_ev(w, "node_failed", "agent failed (test)"), 1);
}

/* A frame an agent never sends (LAUNCH) fails the node: the wire
 * table's gate (proto_frame_check) refuses it before the dispatch table,
 * whose default would too.  Nothing after it is read (its HELLO). */
static void test_protocol_error(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	host(w, "n2")->bad_frame = true;
	assert_int_equal(run(w), 0);
	assert_int_equal(
		count_ev(w, "node_failed",
			 "n2: protocol error: LAUNCH frame from agent: only herd "
			 "sends LAUNCH"),
		1);
	assert_string_equal(host(w, "n2")->log, "");
	assert_int_equal(count_ev(w, "node_up", "\"host\":\"n2\""), 0);
	assert_int_equal(count_ev(w, "attempt_start", "\"nodes\":1"), 1);
}

/* A node evicted while the others connect is probed again after
 * nodes.readmit_after, comes back as a warm spare and is taken in place
 * of itself when the connect ends. */
static void test_connect_readmit(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	w->spec->nodes.readmit_after_ms = 20;
	host(w, "n1")->hello_ms = 600;
	host(w, "n2")->error_starts = 1;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_int_equal(count_ev(w, "node_readmitted", "\"host\":\"n2\""), 1);
	assert_int_equal(host(w, "n2")->starts, 2);
	assert_string_equal(host(w, "n1")->log, "LS");
	assert_string_equal(host(w, "n2")->log, "LS");
	assert_int_equal(count_ev(w, "spare_used", "\"host\":\"n2\""), 1);
}

/* --- run and recover ------------------------------------------------------ */

static void close_n2_at_launch(struct world *w, enum ctl_state from,
			       const struct ctl_ev *ev,
			       const struct ctl_row *row)
{
	(void)from;
	(void)row;
	if (ev->type != CTL_EV_LAUNCH || w->n_events[CTL_EV_LAUNCH] != 1)
		return;
	for (int i = 0; i < w->n_agents; i++) {
		if (!strcmp(w->agents[i].cfg->host, "n2")) {
			conn_free(w->agents[i].conn);
			w->agents[i].conn = NULL;
		}
	}
}

/* n2's agent is gone when LAUNCH is sent to it: the send fails,
 * the node fails once, from the loop, after every LAUNCH went out; n1
 * gets LAUNCH, then the recover STOP, then the next attempt's LAUNCH —
 * never a STOP before the LAUNCH of the same attempt. */
static void test_launch_send_fails(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	w->spec->restart.max = 1;
	host(w, "n1")->hold[1] = true;
	w->hook = close_n2_at_launch;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "node_failed", "\"host\":\"n2\""), 1);
	assert_int_equal(count_ev(w, "node_evicted", "\"host\":\"n2\""), 1);
	assert_string_equal(host(w, "n1")->log, "LsLS");
	assert_string_equal(host(w, "n2")->log, "");
	assert_int_equal(count_ev(w, "attempt_start", "\"nodes\":1"), 1);
}

/* A LAUNCH that cannot be encoded (a command past the 1 MiB JSON limit)
 * is never dropped in silence: the node fails with the reason, and the
 * attempt with it. */
static void test_launch_too_big(void **state)
{
	struct world *w = *state;
	size_t len = 2u * 1024 * 1024;
	char *cmd = malloc(len + 1);

	assert_non_null(cmd);
	memset(cmd, 'x', len);
	cmd[len] = '\0';
	free(w->spec->launch.command);
	w->spec->launch.command = cmd;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRSE");
	/* n1's failure ends the attempt; n2's comes while stopping. */
	assert_int_equal(
	    count_ev(w, "node_failed", "herd could not send it LAUNCH"), 1);
	assert_int_equal(count_ev(w, "attempt_end", "could not send it"), 1);
	assert_string_equal(host(w, "n1")->log, "");
}

/* A node lost during the attempt: the spare is started, joins, and the
 * next attempt runs on it. */
static void test_spare_taken(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-2]", "s1");
	w->spec->restart.max = 1;
	host(w, "n1")->hold[1] = true;
	host(w, "n2")->close_at_launch = true;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "spare_used",
				  "\"host\":\"s1\",\"attempt\":2"),
			 1);
	assert_string_equal(host(w, "n1")->log, "LsLS");
	assert_string_equal(host(w, "n2")->log, "L");
	assert_string_equal(host(w, "s1")->log, "LS");
	assert_int_equal(count_ev(w, "attempt_start", "\"nodes\":2"), 2);
}

/* nodes.min below the job's size: no spare, the next attempt runs on
 * fewer nodes. */
static void test_shrink_nodes_min(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	w->spec->restart.max = 1;
	host(w, "n1")->hold[1] = true;
	host(w, "n2")->close_at_launch = true;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "attempt_start",
				  "\"attempt\":2,\"nodes\":1"),
			 1);
}

/* Below nodes.min after a failure: give up (from RECOVER). */
static void test_below_min_gives_up(void **state)
{
	struct world *w = *state;

	w->spec->restart.max = 3;
	host(w, "n1")->hold[1] = true;
	host(w, "n2")->close_at_launch = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRVSE");
	assert_string_equal(host(w, "n1")->log, "LsS");
	assert_int_equal(count_ev(w, "attempt_start", NULL), 1);
}

/* restart.max spent: the last failure ends the job with its status. */
static void test_restart_exhausted(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n1", NULL);
	w->spec->restart.max = 1;
	host(w, "n1")->exit_code[1] = 3;
	host(w, "n1")->exit_code[2] = 4;
	assert_int_equal(run(w), 4);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "attempt_end", "\"status\":3"), 1);
	assert_int_equal(count_ev(w, "attempt_end", "\"status\":4"), 1);
	assert_string_equal(host(w, "n1")->log, "LsLS");
}

/* Hung ranks fail the attempt, after every node gave its ranks' stacks:
 * the culprit is the rank that does not wait in a collective while the
 * others do. */
static void test_hung(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hung = true;
	host(w, "n1")->culprit = true;
	host(w, "n2")->hold[1] = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRHRSE");
	assert_string_equal(host(w, "n1")->log, "LTS");
	assert_string_equal(host(w, "n2")->log, "LTS");
	assert_int_equal(count_ev(w, "rank_hung", NULL), 1);
	assert_int_equal(count_ev(w, "rank_hung",
				  "\"rank\":0,\"host\":\"n1\",\"silent_ms\":"
				  "5000,\"method\":\"python\",\"in_collective\""
				  ":false,\"culprit\":true,\"frame\":\"stuck_in_"
				  "data_loader (train.py:41)\""),
			 1);
	assert_int_equal(count_ev(w, "attempt_end",
				  "rank 0 on n1 hung in stuck_in_data_loader"),
			 1);
}

/* The node that reports the hang waits in all_reduce; the culprit is on
 * the other node, not reported hung (yet): it gets a rank_hung too. */
static void test_hung_culprit_elsewhere(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hung = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->culprit = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRHRSE");
	assert_int_equal(count_ev(w, "rank_hung", NULL), 2);
	assert_int_equal(count_ev(w, "rank_hung",
				  "\"rank\":0,\"host\":\"n1\",\"silent_ms\":"
				  "5000,\"method\":\"python\",\"in_collective\""
				  ":true,\"culprit\":false,\"frame\":\"all_reduce"),
			 1);
	assert_int_equal(count_ev(w, "rank_hung",
				  "\"rank\":1,\"host\":\"n2\""),
			 1);
	assert_int_equal(count_ev(w, "rank_hung", "\"culprit\":true,\"frame"
						  "\":\"stuck_in_data_loader"),
			 1);
}

/* Stacks are taken one node after another: a rank whose peer died of
 * its SIGABRT first may have raised out of its script (no frame, and its
 * progress the oldest).  The culprit is the rank seen in its own code,
 * not that one. */
static void test_hung_blank_not_culprit(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", NULL);
	host(w, "n1")->hung = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->culprit = true;
	host(w, "n3")->hold[1] = true;
	host(w, "n3")->blank_stack = true;
	assert_int_equal(run(w), 1);
	assert_int_equal(count_ev(w, "rank_hung", "\"culprit\":true"), 1);
	assert_int_equal(count_ev(w, "rank_hung",
				  "\"rank\":1,\"host\":\"n2\""),
			 1);
	assert_int_equal(count_ev(w, "rank_hung", "\"culprit\":true,\"frame"
						  "\":\"stuck_in_data_loader"),
			 1);
	assert_int_equal(count_ev(w, "attempt_end",
				  "rank 1 on n2 hung in stuck_in_data_loader"),
			 1);
}

/* Only ranks without a frame beside those in a collective: one of them
 * is named. */
static void test_hung_blank_only(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hung = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->blank_stack = true;
	assert_int_equal(run(w), 1);
	assert_int_equal(count_ev(w, "rank_hung",
				  "\"rank\":1,\"host\":\"n2\""),
			 1);
	assert_int_equal(count_ev(w, "attempt_end", "rank 1 on n2 hung"), 1);
}

/* Both nodes report hung ranks: the second report is merged into the
 * collection under way, not a second one. */
static void test_hung_two_nodes(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hung = true;
	host(w, "n2")->hung = true;
	host(w, "n2")->culprit = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRHRSE");
	assert_string_equal(host(w, "n1")->log, "LTS");
	assert_string_equal(host(w, "n2")->log, "LTS");
	assert_int_equal(count_ev(w, "rank_hung", NULL), 2);
	assert_int_equal(count_ev(w, "rank_hung", "\"rank\":1,\"host\":\"n2"
						  "\",\"silent_ms\":5000"),
			 1);
	assert_int_equal(count_ev(w, "rank_hung", "\"culprit\":true"), 1);
}

static void shorten_stacks_wait(struct world *w)
{
	w->c->stacks_wait_ms = 300;
}

/* A node that never answers STACKS is not waited for past the bound;
 * the rank that answered is the culprit, the other has no stack. */
static void test_hung_no_answer(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hung = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->no_stacks = true;
	w->before_loop = shorten_stacks_wait;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRHRSE");
	assert_int_equal(count_ev(w, "rank_hung", NULL), 1);
	assert_int_equal(count_ev(w, "rank_hung",
				  "\"rank\":0,\"host\":\"n1\""),
			 1);
	assert_string_equal(host(w, "n2")->log, "LTS");
}

/* A node that fails while the stacks come in is out as usual (and
 * probed again after nodes.readmit_after, which passes meanwhile); the
 * attempt fails for the hang when the other node answered.  Its ranks
 * died of the SIGABRT first: that is noted, not a second failure. */
static void test_hung_node_fails(void **state)
{
	struct world *w = *state;

	w->spec->nodes.readmit_after_ms = 20;
	host(w, "n1")->hung = true;
	host(w, "n1")->culprit = true;
	host(w, "n1")->abort_at_stacks = true;
	host(w, "n1")->stacks_ms = 400;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->close_at_stacks = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRHRSE");
	assert_int_equal(count_ev(w, "node_failed", "\"host\":\"n2\""), 1);
	assert_true(w->n_events[CTL_EV_READMIT] >= 1);
	assert_int_equal(count_ev(w, "rank_exit", "\"signal\":6"), 1);
	assert_int_equal(count_ev(w, "rank_hung", "\"culprit\":true"), 1);
	assert_int_equal(count_ev(w, "attempt_end", "hung in stuck_in"), 1);
}

/* MPI_Abort while the stacks come in: no restart after this attempt. */
static void test_hung_mpi_abort(void **state)
{
	struct world *w = *state;

	w->spec->restart.max = 2;
	host(w, "n1")->hung = true;
	host(w, "n1")->culprit = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->mpi_abort_at_stacks = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRHRSE");
	assert_int_equal(count_ev(w, "attempt_start", NULL), 1);
}

static void post_finish_in_stacks(struct world *w, enum ctl_state from,
				  const struct ctl_ev *ev,
				  const struct ctl_row *row)
{
	(void)from;
	(void)ev;
	if (row && row->next == CTL_STACKS && from == CTL_RUN)
		ctl_post(w->c, CTL_EV_FINISH, NULL, SIGTERM, NULL);
}

/* FINISH while the stacks come in: the evidence so far is written, the
 * job ends. */
static void test_hung_finish(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hung = true;
	host(w, "n1")->culprit = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->no_stacks = true;
	w->hook = post_finish_in_stacks;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRHSE");
	assert_int_equal(count_ev(w, "rank_hung", "\"culprit\":true"), 1);
}

static void raise_in(struct world *w, enum ctl_state from,
		     const struct ctl_ev *ev, const struct ctl_row *row);

/* Ctrl-C while the stacks come in. */
static void test_hung_interrupt(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hung = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->no_stacks = true;
	w->raise_state = CTL_STACKS;
	w->hook = raise_in;
	assert_int_equal(run(w), 128 + SIGINT);
	assert_string_equal(w->states, "CRHSE");
	assert_int_equal(count_ev(w, "attempt_end", "interrupted"), 1);
	assert_int_equal(count_ev(w, "rank_hung", NULL), 1);
}

/* MPI_Abort ends the job at once with its status, restarts or not. */
static void test_abort(void **state)
{
	struct world *w = *state;

	w->spec->restart.max = 3;
	host(w, "n1")->hold[1] = true;
	host(w, "n2")->abort_ = true;
	assert_int_equal(run(w), 7);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n1")->log, "LS");
}

/* Two ranks fail in the same attempt: the second is said, not a second
 * recovery. */
static void test_two_ranks_fail(void **state)
{
	struct world *w = *state;

	w->spec->restart.max = 1;
	host(w, "n1")->exit_code[1] = 1;
	host(w, "n2")->exit_code[1] = 2;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->run_ms = 20;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "attempt_end", NULL), 2);
}

/* --- survivors kept (ctl/rejoin.c) --------------------------------------- */

/* n1, n2 and the spare s1 speak herd.elastic, their ranks run until
 * told; n2 hangs up 50 ms after LAUNCH; "stepping" names the hosts whose
 * ranks step in a new generation. */
static void rejoin_world(struct world *w, long timeout_ms, const char *stepping)
{
	static const char *const names[] = {"n1", "n2", "s1"};

	set_hosts(w, "n[1-2]", "s1");
	w->spec->restart.max = 1;
	w->spec->health.rejoin_timeout_ms = timeout_ms;
	for (int i = 0; i < 3; i++) {
		struct hostcfg *h = host(w, names[i]);

		h->elastic = true;
		h->stepping = strstr(stepping, names[i]) != NULL;
		h->hold[1] = true;
	}
	host(w, "n2")->vanish_ms = 50;
}

/* n1 and n2 speak herd.elastic; n2 is lost mid-run: n1 is told the new
 * membership and keeps its rank, n2's rank starts on the spare s1 in
 * generation 1, and when both step in it the rejoin is over: one
 * attempt, no recovery. */
static void test_rejoin_spare(void **state)
{
	struct world *w = *state;

	rejoin_world(w, 5000, "n1 n2 s1");
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n1")->log, "LMS");
	assert_string_equal(host(w, "n2")->log, "L");
	assert_string_equal(host(w, "s1")->log, "LS");
	assert_int_equal(count_ev(w, "attempt_start", NULL), 1);
	assert_int_equal(count_ev(w, "node_failed", "\"host\":\"n2\""), 1);
	assert_int_equal(count_ev(w, "spare_used", "\"host\":\"s1\""), 1);
	assert_int_equal(count_ev(w, "rejoin", "\"fell_back\":false"), 1);
	assert_int_equal(count_ev(w, "rejoin", "\"replacement\":[\"s1\"]"), 1);
	assert_int_equal(count_ev(w, "attempt_end", "\"completed\""), 1);
}

/* The replacement never steps: at health.rejoin_timeout the job falls
 * back to the restart of every rank (attempt 2, on n1 and s1). */
static void test_rejoin_timeout(void **state)
{
	struct world *w = *state;

	rejoin_world(w, 300, "n1");
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_string_equal(host(w, "n1")->log, "LMsLS");
	assert_string_equal(host(w, "s1")->log, "LsLS");
	assert_int_equal(count_ev(w, "attempt_start", NULL), 2);
	assert_int_equal(count_ev(w, "rejoin", "\"fell_back\":true"), 1);
	assert_int_equal(
	    count_ev(w, "rejoin",
		     "did not rejoin within health.rejoin_timeout"),
	    1);
	assert_int_equal(count_ev(w, "attempt_end", "\"completed\""), 1);
}

/* --- timers: stop, readmit, backoff ----------------------------------------- */

/* A survivor that never confirms its ranks stopped is failed after
 * health.grace + 5 s; with nobody left the job ends. */
static void test_recover_stop_timeout(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	w->spec->restart.max = 1;
	host(w, "n1")->hold[1] = true;
	host(w, "n1")->no_stopped = true;
	host(w, "n2")->close_at_launch = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRVSE");
	assert_int_equal(count_ev(w, "node_failed",
				  "did not confirm that its ranks stopped"),
			 1);
}

/* Readmitted while recovering (n1 confirms late): the warm spare is
 * taken for the next attempt. */
static void test_readmit_in_recover(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", NULL);
	w->spec->nodes.min = 2;
	w->spec->nodes.readmit_after_ms = 30;
	w->spec->restart.max = 1;
	host(w, "n1")->hold[1] = true;
	host(w, "n1")->stopped_ms = 600;
	host(w, "n2")->hold[1] = true;
	host(w, "n3")->close_at_launch = true;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "node_readmitted", "\"host\":\"n3\""), 1);
	assert_int_equal(count_ev(w, "attempt_start",
				  "\"attempt\":2,\"nodes\":3"),
			 1);
	assert_string_equal(host(w, "n3")->log, "LLS");
}

/* Readmitted during the backoff: a warm spare, not a member. */
static void test_readmit_in_backoff(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	w->spec->nodes.readmit_after_ms = 50;
	w->spec->restart.max = 1;
	w->spec->restart.backoff_ms = 600;
	host(w, "n1")->hold[1] = true;
	host(w, "n2")->close_at_launch = true;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "node_readmitted", "\"host\":\"n2\""), 1);
	assert_int_equal(count_ev(w, "attempt_start",
				  "\"attempt\":2,\"nodes\":1"),
			 1);
	assert_string_equal(host(w, "n2")->log, "LS");
}

/* Readmitted while the next attempt runs. */
static void test_readmit_in_run(void **state)
{
	struct world *w = *state;

	w->spec->nodes.min = 1;
	w->spec->nodes.readmit_after_ms = 150;
	w->spec->restart.max = 1;
	host(w, "n1")->hold[1] = true;
	host(w, "n1")->run_ms = 600;
	host(w, "n2")->close_at_launch = true;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "node_readmitted", "\"host\":\"n2\""), 1);
	assert_string_equal(host(w, "n2")->log, "LS");
}

/* During the backoff a rank that never ran reports late (said), then a
 * node is lost: below nodes.min when the backoff ends, the job ends. */
static void test_backoff_below_min(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", NULL);
	w->spec->nodes.min = 2;
	w->spec->restart.max = 2;
	w->spec->restart.backoff_ms = 800;
	host(w, "n1")->hold[1] = true;
	host(w, "n1")->late_exit = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->die_after_stopped = true;
	host(w, "n3")->close_at_launch = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRVBSE");
	assert_int_equal(count_ev(w, "rank_exit", "\"reason\":\"late\""), 1);
	assert_int_equal(count_ev(w, "node_failed", "\"host\":\"n2\""), 1);
	assert_int_equal(count_ev(w, "attempt_start", NULL), 1);
}

/* restart.backoff is for a crash loop: a first failure whose lost members
 * were all replaced by spares, or that ran healthy (30 s), waits nothing;
 * a first failure otherwise waits restart.backoff; each further quick
 * failure without progress doubles it, up to 60 s. */
static void test_backoff_rule(void **state)
{
	struct spec spec;
	struct ctl c;

	(void)state;
	memset(&spec, 0, sizeof(spec));
	memset(&c, 0, sizeof(c));
	spec.restart.backoff_ms = 2000;
	c.spec = &spec;
	c.attempt = 1;
	c.attempt_started_ms = 100000;
	/* A rank crash at once: the first failure waits the backoff. */
	assert_int_equal(ctl_backoff_ms(&c, 101000), 2000);
	/* A node lost and replaced by a spare (warm or cold): none. */
	c.spares_cold_taken = 1;
	assert_int_equal(ctl_backoff_ms(&c, 101000), 0);
	c.spares_cold_taken = 0;
	c.spares_warm_taken = 1;
	assert_int_equal(ctl_backoff_ms(&c, 101000), 0);
	/* ... unless some were not replaced (the job shrinks). */
	c.recover_short = true;
	assert_int_equal(ctl_backoff_ms(&c, 101000), 2000);
	c.recover_short = false;
	c.spares_warm_taken = 0;
	/* Ran healthy: none, whatever came before. */
	c.attempt = 4;
	assert_int_equal(ctl_backoff_ms(&c, 130000), 0);
	/* Quick failures with no progress since attempt 1: doubling. */
	assert_int_equal(ctl_backoff_ms(&c, 101000), 16000);
	c.spares_warm_taken = 1;
	assert_int_equal(ctl_backoff_ms(&c, 101000), 16000);
	c.spares_warm_taken = 0;
	/* A newer checkpoint at attempt 4's start: its failure is a first. */
	c.progress_attempt = 4;
	assert_int_equal(ctl_backoff_ms(&c, 101000), 2000);
	c.progress_attempt = 0;
	c.attempt = 20;
	assert_int_equal(ctl_backoff_ms(&c, 101000), 60000);
}

/* --- interrupts and the end --------------------------------------------- */

static void raise_at_launches(struct world *w, struct agent *a)
{
	(void)a;
	if (w->launches == 2)
		raise_soon(w);
}

static void raise_at_first_stop(struct world *w, struct agent *a,
				bool exit_after)
{
	(void)a;
	if (exit_after && !strcmp(a->cfg->host, "n1") &&
	    !strcmp(a->cfg->log, "LS"))
		raise_soon(w);
}

/* Ctrl-C once: the ranks get SIGINT with health.grace; twice: SIGKILL at
 * once.  Agents that never go are hung up on after grace + 5 s. */
static void test_interrupt_twice(void **state)
{
	struct world *w = *state;

	host(w, "n1")->hold[1] = true;
	host(w, "n2")->hold[1] = true;
	host(w, "n1")->ignore_exit = true;
	host(w, "n2")->ignore_exit = true;
	w->on_launch = raise_at_launches;
	w->on_stop = raise_at_first_stop;
	assert_int_equal(run(w), 128 + SIGINT);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n1")->log, "LSK");
	assert_string_equal(host(w, "n2")->log, "LSK");
	assert_int_equal(count_ev(w, "attempt_end", "interrupted"), 1);
}

static void raise_in(struct world *w, enum ctl_state from,
		     const struct ctl_ev *ev, const struct ctl_row *row)
{
	(void)from;
	(void)ev;
	if (row && row->next != from && row->next == w->raise_state)
		raise_soon(w);
}

/* Ctrl-C while recovering. */
static void test_interrupt_recover(void **state)
{
	struct world *w = *state;

	w->spec->restart.max = 1;
	w->spec->nodes.min = 1;
	host(w, "n1")->hold[1] = true;
	host(w, "n1")->no_stopped = true;
	host(w, "n2")->close_at_launch = true;
	w->raise_state = CTL_RECOVER;
	w->hook = raise_in;
	/* The attempt's first failure (n2) gives the status. */
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRVSE");
	assert_string_equal(host(w, "n1")->log, "LsS");
}

/* Ctrl-C during the backoff. */
static void test_interrupt_backoff(void **state)
{
	struct world *w = *state;

	w->raise_state = CTL_BACKOFF;
	w->spec->restart.max = 1;
	w->spec->restart.backoff_ms = 5000;
	w->spec->nodes.min = 1;
	host(w, "n1")->hold[1] = true;
	host(w, "n2")->close_at_launch = true;
	w->hook = raise_in;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRVBSE");
	assert_string_equal(host(w, "n1")->log, "LsS");
}

static void post_finish(struct loop *loop, void *arg)
{
	struct world *w = arg;

	(void)loop;
	w->t_post = 0;
	ctl_post(w->c, CTL_EV_FINISH, NULL, SIGTERM, NULL);
	ctl_post(w->c, CTL_EV_FINISH, NULL, SIGTERM, NULL);
}

static void post_at_launch(struct world *w, struct agent *a)
{
	(void)a;
	if (!w->t_post)
		w->t_post = loop_timer_add(w->loop, 0, post_finish, w);
}

static void post_after_end(struct world *w, enum ctl_state from,
			   const struct ctl_ev *ev, const struct ctl_row *row)
{
	(void)ev;
	if (row && row->next == CTL_END && from != CTL_END)
		ctl_post(w->c, CTL_EV_NODE_FAILED, NULL, 0, "after the end");
}

/* An internal FINISH twice (the second only shortens the grace), and an
 * event after the end (nothing happens). */
static void test_finish_twice(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n1", NULL);
	host(w, "n1")->hold[1] = true;
	w->on_launch = post_at_launch;
	w->hook = post_after_end;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n1")->log, "LSK");
	assert_int_equal(w->n_events[CTL_EV_NODE_FAILED], 2);
}

/* --- metrics ------------------------------------------------------------ */

/* Each agent sends two METRICS at launch (n2's ranks step half as fast),
 * then its ranks exit after run_ms. */
static void send_metrics(struct world *w, struct agent *a)
{
	bool slow = !strcmp(a->cfg->host, "n2");

	(void)w;
	for (int k = 0; k < 2; k++)
		agent_send(
		    a, PROTO_METRICS,
		    json_pack("{s:I, s:i, s:f, s:i, s:[{s:i, s:I, s:I}],"
			      " s:[{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I,"
			      " s:I}], s:[], s:[{s:i, s:i}],"
			      " s:[{s:i, s:i, s:{s:I, s:f, s:I}}]}",
			      "t", (json_int_t)(1000 + 2000 * k), "attempt",
			      a->attempt, "load1", 0.5, "cpus", 2, "ranks",
			      "rank", a->ranks[0], "cpu_ms",
			      (json_int_t)(100 + 2000 * k), "rss_kb",
			      (json_int_t)4096, "net", "dev", "eth0",
			      "rx_bytes", (json_int_t)(1000000 * k),
			      "tx_bytes", (json_int_t)(500000 * k),
			      "rx_packets", (json_int_t)k, "tx_packets",
			      (json_int_t)k, "rx_drops", (json_int_t)k,
			      "tx_drops", (json_int_t)0, "rx_errors",
			      (json_int_t)0, "tx_errors", (json_int_t)0,
			      "rdma", "gpus", "index", 0, "util_pct", 90 - k,
			      "train", "rank", a->ranks[0], "records", 1 + k,
			      "values", "step", (json_int_t)(slow ? 10 + 2 * k
							     : 10 + 4 * k),
			      "loss", 1.5 + a->ranks[0], "tokens",
			      (json_int_t)(4096 * (k + 1))));
}

/* METRICS feed the table and metrics.jsonl only: the job's states are
 * those of a plain run, and the last line has every node's values, the
 * job-wide ones and the slowest node. */
static void test_metrics_frames(void **state)
{
	struct world *w = *state;
	char path[512], *text, *last;
	json_t *line, *job, *nodes;

	w->on_launch = send_metrics;
	w->spec->metrics.interval_ms = 100;
	host(w, "n1")->run_ms = 400;
	host(w, "n2")->run_ms = 400;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	snprintf(path, sizeof(path), "%s/metrics.jsonl",
		 logtree_run_dir(w->c->lt));
	text = read_file(path);
	/* A tick every 100 ms over a 400 ms run, and the last line. */
	last = text + strlen(text) - 1;
	assert_true(*last == '\n');
	*last = '\0';
	last = strrchr(text, '\n');
	assert_non_null(last);
	line = json_loads(last + 1, 0, NULL);
	assert_non_null(line);
	job = json_object_get(line, "job");
	nodes = json_object_get(line, "nodes");
	assert_int_equal(json_integer_value(json_object_get(line, "attempt")),
			 1);
	assert_int_equal(json_integer_value(json_object_get(line, "nodes_up")),
			 2);
	assert_int_equal(json_integer_value(json_object_get(job, "step")), 12);
	assert_true(json_real_value(json_object_get(job, "loss")) == 1.5);
	assert_int_equal(
		json_integer_value(json_object_get(job, "tokens_total")),
		2 * 8192);
	assert_true(json_real_value(json_object_get(job, "tokens_per_s")) ==
		    4096.0);
	assert_true(json_real_value(json_object_get(job, "steps_per_s")) ==
		    1.0);
	assert_string_equal(
		json_string_value(json_object_get(job, "slowest")), "n2");
	assert_int_equal(json_integer_value(json_object_get(job, "drops")), 2);
	assert_int_equal(json_integer_value(json_object_get(job,
							    "gpu_util_min")),
			 89);
	assert_true(json_real_value(json_object_get(job, "rx_bytes_per_s")) ==
		    1000000.0);
	assert_int_equal(json_array_size(nodes), 2);
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(nodes, 0), "node")),
			    "n1");
	assert_true(json_real_value(json_object_get(json_array_get(nodes, 0),
						    "cpu_pct")) == 100.0);
	json_decref(line);
	free(text);
}

/* --- heartbeats --------------------------------------------------------- */

/* herd beats every SPEC_HERD_BEATS heartbeats (the agents beat every
 * heartbeat, and herd's silence rule counts theirs), to every node in the
 * same tick, so that their answers come back together; nodes that only
 * answer herd's beats are never silent for the limit. */
static void test_heartbeat_cadence(void **state)
{
	struct world *w = *state;
	const int64_t hb = 100, beat = SPEC_HERD_BEATS * hb;
	struct agent *a1 = NULL, *a2 = NULL;

	w->spec->health.heartbeat_ms = hb;
	w->spec->health.timeout_ms = 1000;
	for (int i = 1; i <= 2; i++) {
		struct hostcfg *h = host(w, i == 1 ? "n1" : "n2");

		h->answer_hb = true;
		h->run_ms = 1500;
	}
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_int_equal(count_ev(w, "node_failed", NULL), 0);
	for (int i = 0; i < w->n_agents; i++) {
		if (!strcmp(w->agents[i].cfg->host, "n1"))
			a1 = &w->agents[i];
		if (!strcmp(w->agents[i].cfg->host, "n2"))
			a2 = &w->agents[i];
	}
	assert_non_null(a1);
	assert_non_null(a2);
	/* 1.5 s of ranks: about 7 beats after the one HELLO gets. */
	assert_true(a1->n_hb >= 5);
	assert_true(a2->n_hb >= 5);
	/* The first answers HELLO; the ticks' come every `beat` (a loaded
	 * machine makes a tick late, never early). */
	for (int i = 2; i < a1->n_hb; i++) {
		int64_t gap = a1->hb_ms[i] - a1->hb_ms[i - 1];

		assert_true(gap >= beat - 5);
		assert_true(gap <= beat + 400);
	}
	/* Both nodes in the same tick. */
	for (int i = 1; i < a1->n_hb && i < a2->n_hb; i++) {
		int64_t d = a1->hb_ms[i] - a2->hb_ms[i];

		assert_true(d <= 50 && d >= -50);
	}
}

/* A node in the middle of a large frame (a checkpoint's chunk on a slow
 * link) sends no heartbeat until that frame is through: the bytes that
 * come are its sign of life.  n1's agent, at LAUNCH, trickles one frame
 * over 2 s, 100 ms a piece, with the silence limit at 800 ms; herd
 * failed the node ("no heartbeat") before it counted bytes as well as
 * whole frames. */
static struct {
	char *frame;
	size_t len, off;
	struct agent *a;
	long timer;
} trickle;

static void trickle_piece(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	size_t piece = trickle.len / 20 + 1;

	trickle.timer = 0;
	if (!a->conn)
		return;
	if (piece > trickle.len - trickle.off)
		piece = trickle.len - trickle.off;
	assert_int_equal(write(a->fd, trickle.frame + trickle.off, piece),
			 (ssize_t)piece);
	trickle.off += piece;
	if (trickle.off < trickle.len)
		trickle.timer = loop_timer_add(loop, 100, trickle_piece, a);
	else
		a->t_exit = loop_timer_add(loop, 50, agent_exit, a);
}

static void trickle_at_launch(struct world *w, struct agent *a)
{
	char data[800];
	json_t *b;

	if (a->attempt != 1 || strcmp(a->cfg->host, "n1"))
		return;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = i % 80 == 79 ? '\n' : 'x';
	b = json_pack("{s:i, s:i, s:i}", "rank", a->ranks[0], "fd", 1,
		      "attempt", 1);
	trickle.frame = proto_encode(PROTO_OUTPUT, b, data, sizeof(data),
				     &trickle.len, NULL);
	json_decref(b);
	assert_non_null(trickle.frame);
	trickle.off = 0;
	trickle.a = a;
	trickle.timer = loop_timer_add(w->loop, 100, trickle_piece, a);
}

static void test_heartbeat_large_frame_alive(void **state)
{
	struct world *w = *state;

	w->spec->health.heartbeat_ms = 100;
	w->spec->health.timeout_ms = 300;
	host(w, "n1")->hold[1] = true;
	host(w, "n2")->answer_hb = true;
	host(w, "n2")->run_ms = 2500;
	w->on_launch = trickle_at_launch;
	assert_int_equal(run(w), 0);
	if (trickle.timer)
		loop_timer_del(w->loop, trickle.timer);
	free(trickle.frame);
	memset(&trickle, 0, sizeof(trickle));
	assert_int_equal(count_ev(w, "node_failed", NULL), 0);
	assert_string_equal(w->states, "CRSE");
}

/* --- stragglers --------------------------------------------------------- */

static struct node *node_named(struct world *w, const char *name)
{
	for (int i = 0; i < w->c->n_nodes; i++)
		if (!strcmp(w->c->nodes[i].host, name))
			return &w->c->nodes[i];
	fail_msg("no node %s", name);
	return NULL;
}

/* n3 is marked for eviction and its checkpoint boundary comes (what
 * ctl_straggler_tick posts): it is evicted as a straggler, the attempt
 * fails, the spare takes its place. */
static void straggler_at_launch(struct world *w, struct agent *a)
{
	struct node *n;

	if (a->attempt != 1 || strcmp(a->cfg->host, "n3"))
		return;
	n = node_named(w, "n3");
	n->straggler_evict = true;
	ctl_post(w->c, CTL_EV_STRAGGLER, n, 0, "checkpoint c1 is complete");
}

static void test_straggler_evicted(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", "s1");
	w->spec->restart.max = 1;
	w->spec->restart.backoff_ms = 0;
	w->spec->health.straggler = SPEC_STRAGGLER_EVICT;
	for (int i = 1; i <= 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i);
		host(w, name)->hold[1] = true;
	}
	w->on_launch = straggler_at_launch;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "node_evicted",
				  "\"host\":\"n3\",\"reason\":\"straggler\""),
			 1);
	assert_int_equal(count_ev(w, "attempt_end",
				  "\"reason\":\"node n3 evicted as a "
				  "straggler\""),
			 1);
	assert_int_equal(count_ev(w, "spare_used",
				  "\"host\":\"s1\",\"attempt\":2"),
			 1);
	assert_string_equal(host(w, "s1")->log, "LS");
}

/* Two stragglers, one spare, nodes.min = all: the first can go (the spare
 * takes its place), the second cannot once the first is marked, nor
 * without a restart left. */
static void two_stragglers_at_launch(struct world *w, struct agent *a)
{
	struct node *n3;
	char why[160];

	if (a->attempt != 1 || strcmp(a->cfg->host, "n4"))
		return;
	n3 = node_named(w, "n3");
	assert_true(ctl_straggler_can_evict(w->c, false, why, sizeof(why)));
	assert_string_equal(why, "spare");
	n3->straggler_evict = true;
	assert_false(ctl_straggler_can_evict(w->c, false, why, sizeof(why)));
	assert_string_equal(why, "no spare left for it, and nodes.min 4 needs all 4 nodes");
	w->c->spec->restart.max = 0;
	assert_false(ctl_straggler_can_evict(w->c, false, why, sizeof(why)));
	assert_string_equal(why, "no restart left, restart.max is 0");
	w->c->spec->restart.max = 1;
	/* nodes.min 3: n4 could be left out too. */
	w->c->min_nodes = 3;
	assert_true(ctl_straggler_can_evict(w->c, false, why, sizeof(why)));
	assert_string_equal(why, "fewer nodes");
	w->c->min_nodes = 4;
	ctl_post(w->c, CTL_EV_STRAGGLER, n3, 0, "checkpoint c1 is complete");
}

static void test_straggler_two(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-4]", "s1");
	w->spec->restart.max = 1;
	w->spec->restart.backoff_ms = 0;
	w->spec->health.straggler = SPEC_STRAGGLER_EVICT;
	for (int i = 1; i <= 4; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i);
		host(w, name)->hold[1] = true;
	}
	w->on_launch = two_stragglers_at_launch;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRVBRSE");
	assert_int_equal(count_ev(w, "node_evicted", "\"reason\":\"straggler\""),
			 1);
	assert_int_equal(count_ev(w, "node_evicted", "\"host\":\"n3\""), 1);
	assert_int_equal(count_ev(w, "attempt_start",
				  "\"attempt\":2,\"nodes\":4"),
			 1);
}

/* Each agent's ranks report step_time every 50 ms while they run; n3's
 * take 3x as long. */
static void on_step_metrics(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	bool slow = !strcmp(a->cfg->host, "n3");

	if (!a->running || !a->conn)
		return;
	agent_send(a, PROTO_METRICS,
		   json_pack("{s:I, s:i, s:f, s:i, s:[{s:i, s:I, s:I}], s:[],"
			     " s:[], s:[], s:[{s:i, s:i, s:{s:f}}]}",
			     "t", (json_int_t)loop_wall_ms(), "attempt",
			     a->attempt, "load1", 0.5, "cpus", 2, "ranks",
			     "rank", a->ranks[0], "cpu_ms", (json_int_t)1,
			     "rss_kb", (json_int_t)1, "net", "rdma", "gpus",
			     "train", "rank", a->ranks[0], "records", 1,
			     "values", "step_time", slow ? 0.3 : 0.1));
	loop_timer_add(loop, 50, on_step_metrics, a);
}

static void step_metrics_at_launch(struct world *w, struct agent *a)
{
	loop_timer_add(w->loop, 0, on_step_metrics, a);
}

/* warn: one straggler event for n3 (and nobody else), the job runs on. */
static void test_straggler_warned(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", NULL);
	w->spec->metrics.interval_ms = 100;
	w->spec->health.straggler_window_ms = 200;
	for (int i = 1; i <= 3; i++) {
		char name[8];

		snprintf(name, sizeof(name), "n%d", i);
		host(w, name)->run_ms = 800;
	}
	w->on_launch = step_metrics_at_launch;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_int_equal(count_ev(w, "straggler", NULL), 1);
	assert_int_equal(count_ev(w, "straggler",
				  "\"host\":\"n3\",\"ranks\":[2],"
				  "\"ratio\":3.0"),
			 1);
	assert_int_equal(count_ev(w, "straggler",
				  "\"node_ms\":300,\"median_ms\":100,"
				  "\"window_ms\":200,\"source\":\"step_time\","
				  "\"action\":\"warn\",\"attempt\":1"),
			 1);
}

/* Every row of the table was gone through by some test above. */
/* --- the health gate ---------------------------------------------------- */

/* health.preflight: n2 fails its check before attempt 1 and is evicted;
 * the spare is started, checked and joins; the job completes.  n2's
 * nodes.readmit_after (0) has it probed again during the gate. */
static void test_preflight_spare(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-2]", "s1");
	w->spec->health.preflight = true;
	w->spec->nodes.readmit_after_ms = 0;
	host(w, "n2")->unhealthy = true;
	host(w, "s1")->check_ms = 50;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CPRSE");
	assert_int_equal(count_ev(w, "node_unhealthy",
				  "\"host\":\"n2\",\"check\":\"script\","
				  "\"reason\":\"scratch missing (test)\","
				  "\"attempt\":1"),
			 1);
	assert_int_equal(count_ev(w, "spare_used", "\"host\":\"s1\""), 1);
	assert_int_equal(count_ev(w, "attempt_start", "\"nodes\":2"), 1);
	assert_string_equal(host(w, "n1")->log, "cLS");
	assert_string_equal(host(w, "s1")->log, "cLS");
	assert_int_equal(host(w, "n2")->log[0], 'c');
	assert_null(strchr(host(w, "n2")->log, 'L'));
}

/* The gate before a restart: attempt 1 fails, the survivors are checked
 * again before attempt 2; a rank's late exit from attempt 1 arrives
 * during the gate and changes nothing. */
static void test_preflight_restart(void **state)
{
	struct world *w = *state;

	w->spec->health.preflight = true;
	w->spec->restart.max = 1;
	host(w, "n1")->exit_code[1] = 1;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->late_exit = true;
	host(w, "n1")->check_ms = 300;
	host(w, "n2")->check_ms = 300;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CPRVBPRSE");
	assert_string_equal(host(w, "n1")->log, "cLscLS");
	assert_string_equal(host(w, "n2")->log, "cLscLS");
}

/* A node that hangs up when checked fails as any node; under nodes.min
 * nothing is launched. */
static void test_preflight_node_lost(void **state)
{
	struct world *w = *state;

	w->spec->health.preflight = true;
	host(w, "n2")->close_at_check = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CPSE");
	assert_int_equal(count_ev(w, "node_failed", "\"host\":\"n2\""), 1);
	assert_int_equal(w->launches, 0);
}

/* Ctrl-C during the gate. */
static void test_preflight_interrupt(void **state)
{
	struct world *w = *state;

	w->spec->health.preflight = true;
	host(w, "n1")->check_ms = 5000;
	w->raise_state = CTL_PREFLIGHT;
	w->hook = raise_in;
	assert_int_equal(run(w), 128 + SIGINT);
	assert_string_equal(w->states, "CPSE");
	assert_int_equal(w->launches, 0);
}

/* herd check: every node and spare checked, the network probe (two
 * transfers per link), the table on stdout, status 1 for the unhealthy
 * node; no log tree. */
static void test_check_only(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-2]", "s1");
	w->opt.check_only = true;
	host(w, "s1")->unhealthy = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CPSE");
	assert_null(w->c->lt);
	assert_string_equal(host(w, "n1")->log, "cS");
	assert_string_equal(host(w, "s1")->log, "cS");
	assert_int_equal(w->launches, 0);
	assert_true(w->n_events[CTL_EV_PROBED] >= 6);
}

/* The probe: a node whose receptions are slow once (a busy machine) is
 * probed again and passes; one that stays slow is named. */
static void test_check_probe_retry(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", NULL);
	w->opt.check_only = true;
	w->opt.check_json = true;
	host(w, "n3")->slow_recv = 2;
	assert_int_equal(run(w), 0);
	assert_int_equal(host(w, "n3")->slow_recv, 0);
}

static void test_check_probe_slow(void **state)
{
	struct world *w = *state;

	set_hosts(w, "n[1-3]", NULL);
	w->opt.check_only = true;
	host(w, "n3")->slow_recv = 100;
	assert_int_equal(run(w), 1);
	assert_int_equal(host(w, "n3")->slow_recv, 100 - 4);
}

/* --- PMIx failure events ----------------------------------------------- */

static void pmix_world(struct world *w, long grace_ms)
{
	w->spec->launch.mode = SPEC_MODE_PMIX;
	w->spec->health.notify_grace_ms = grace_ms;
	w->spec->restart.max = 1;
}

/* A rank exits 1: every node with ranks is told before any STOP; the
 * survivor holds, so the attempt waits notify_grace (a second failure
 * told too), then recovers and restarts as without it. */
static void test_notify_grace(void **state)
{
	struct world *w = *state;

	pmix_world(w, 200);
	set_hosts(w, "n[1-3]", NULL);
	host(w, "n1")->exit_code[1] = 1;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->exit_code[1] = 2;
	host(w, "n2")->run_ms = 100;
	host(w, "n3")->hold[1] = true;
	host(w, "n3")->abort_on_notify = true;	/* not the program's end */
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRNRVBRSE");
	/* n1 told of its own rank; n1 (none left running) and n3 of n2's. */
	assert_string_equal(host(w, "n1")->log, "LFFsLS");
	assert_string_equal(host(w, "n3")->log, "LFFsLS");
	assert_int_equal(count_ev(w, "ranks_notified", "\"kind\":\"exit\""),
			 2);
	assert_int_equal(count_ev(w, "attempt_end", "exited with status 1"),
			 1);
}

/* Every survivor exits 0 (one once told, one by itself later): the
 * attempt ends then, long before a notify_grace of 60 s. */
static void test_notify_survivors_exit(void **state)
{
	struct world *w = *state;
	int64_t t0 = loop_now_ms();

	pmix_world(w, 60000);
	w->spec->restart.max = 0;
	set_hosts(w, "n[1-3]", NULL);
	host(w, "n1")->exit_code[1] = 3;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->exit_on_notify = true;
	host(w, "n3")->run_ms = 300;	/* the last one, by itself */
	assert_int_equal(run(w), 3);
	assert_string_equal(w->states, "CRNRSE");
	assert_true(loop_now_ms() - t0 < 10000);
}

/* A survivor's node is lost while waiting: evicted, its ranks told to
 * the others; it is readmitted meanwhile (nodes.readmit_after). */
static void test_notify_node_lost(void **state)
{
	struct world *w = *state;

	pmix_world(w, 400);
	w->spec->nodes.min = 1;
	w->spec->nodes.readmit_after_ms = 20;
	set_hosts(w, "n[1-3]", NULL);
	host(w, "n1")->exit_code[1] = 1;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->close_on_notify = true;
	host(w, "n3")->hold[1] = true;
	assert_int_equal(run(w), 0);
	assert_int_equal(strncmp(w->states, "CRNRV", 5), 0);
	assert_int_equal(count_ev(w, "ranks_notified", "\"kind\":\"node\""),
			 1);
	assert_int_equal(count_ev(w, "node_evicted", "\"host\":\"n2\""), 1);
}

/* Another failure while waiting (a fence times out): the attempt ends
 * at once, with the first failure. */
static void test_notify_then_fence_timeout(void **state)
{
	struct world *w = *state;

	pmix_world(w, 20000);
	w->spec->restart.max = 0;
	w->spec->health.fence_timeout_ms = 300;
	host(w, "n1")->exit_code[1] = 4;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->hold[1] = true;
	host(w, "n2")->fence = true;
	assert_int_equal(run(w), 4);
	assert_string_equal(w->states, "CRNRSE");
	assert_int_equal(count_ev(w, "attempt_end", "status 4"), 1);
}

/* Ctrl-C, and an internal FINISH, while the survivors have their
 * grace. */
static void test_notify_interrupt(void **state)
{
	struct world *w = *state;

	pmix_world(w, 20000);
	host(w, "n1")->exit_code[1] = 1;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->hold[1] = true;
	w->raise_state = CTL_NOTIFY;
	w->hook = raise_in;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRNSE");
}

static void post_finish_in_notify(struct world *w, enum ctl_state from,
				  const struct ctl_ev *ev,
				  const struct ctl_row *row)
{
	(void)ev;
	if (row && from == CTL_RUN && row->next == CTL_NOTIFY && !w->t_post)
		w->t_post = loop_timer_add(w->loop, 0, post_finish, w);
}

static void test_notify_finish(void **state)
{
	struct world *w = *state;

	pmix_world(w, 20000);
	host(w, "n1")->exit_code[1] = 1;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->hold[1] = true;
	w->hook = post_finish_in_notify;
	run(w);
	assert_string_equal(w->states, "CRNSE");
}

/* notify_grace 0s (the default): told, then stopped at once, as
 * before; no NOTIFY state. */
static void test_notify_no_grace(void **state)
{
	struct world *w = *state;

	pmix_world(w, 0);
	w->spec->restart.max = 0;
	host(w, "n1")->exit_code[1] = 1;
	host(w, "n1")->run_ms = 20;
	host(w, "n2")->hold[1] = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n2")->log, "LFS");
}

/* --- PMIx fences -------------------------------------------------------- */

static void lower_fence_max(struct world *w)
{
	w->c->fence_data_max = 1000;
}

/* A PMIx job whose two nodes each contribute bytes to a fence at launch;
 * at most 1000 bytes fit in its FENCE_DONE. */
static void fence_world(struct world *w, size_t bytes)
{
	w->spec->launch.mode = SPEC_MODE_PMIX;
	w->before_loop = lower_fence_max;
	host(w, "n1")->fence = host(w, "n2")->fence = true;
	host(w, "n1")->fence_data = host(w, "n2")->fence_data = bytes;
}

/* Both nodes contribute 400 bytes: 800 fit, both get FENCE_DONE. */
static void test_fence_done(void **state)
{
	struct world *w = *state;

	fence_world(w, 400);
	host(w, "n1")->run_ms = host(w, "n2")->run_ms = 200;
	assert_int_equal(run(w), 0);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n1")->log, "LDS");
	assert_string_equal(host(w, "n2")->log, "LDS");
}

/* 2 x 600 bytes gathered, over what a FENCE_DONE may carry (lowered to
 * 1000 bytes here; a frame's 64 MiB in a job): every node's fence fails
 * at once, not after health.fence_timeout, and the attempt with it. */
static void test_fence_too_big(void **state)
{
	struct world *w = *state;
	int64_t t0 = loop_now_ms();

	fence_world(w, 600);
	w->spec->health.fence_timeout_ms = 60000;
	host(w, "n1")->hold[1] = host(w, "n2")->hold[1] = true;
	assert_int_equal(run(w), 1);
	assert_string_equal(w->states, "CRSE");
	assert_string_equal(host(w, "n1")->log, "LXS");
	assert_string_equal(host(w, "n2")->log, "LXS");
	assert_int_equal(count_ev(w, "attempt_end", "gathered 1200 bytes"), 1);
	assert_true(loop_now_ms() - t0 < 10000);
}

/* --- the state diagram -------------------------------------------------- */

#define STATES_DOT "doc/design/states.dot"

/* The job's lifecycle drawn from ctl_table[]: one node per state (with
 * what it serves), one edge per pair of different states, labelled with
 * the events that take it, in table order.  Rows that stay in their
 * state are the table's business, not the diagram's. */
static void write_states_dot(FILE *out)
{
	static const struct {
		unsigned flag;
		const char *name;
	} serves[] = {{CTL_SERVE_ATTEMPT, "attempt"},
		      {CTL_SERVE_RANKS, "ranks"},
		      {CTL_SERVE_ENDING, "ending"}};
	bool drawn[CTL_STATE_COUNT_][CTL_STATE_COUNT_] = {{false}};
	bool named[CTL_STATE_COUNT_] = {false};

	fprintf(
	    out,
	    "// The job's lifecycle, generated from ctl_table[]\n"
	    "// (launcher/ctl/table.c) by tests/unit/test_ctl.c, which fails\n"
	    "// when this file and the table differ.  Regenerate with:\n"
	    "//   HERD_WRITE_STATES_DOT=1 build/unit/test_ctl\n"
	    "// Edges change state; rows that stay in a state are not drawn.\n"
	    "digraph job {\n"
	    "\tnode [shape=box, style=rounded];\n");
	/* States in the table's order: the order a job goes through them. */
	for (size_t i = 0; i < ctl_table_len; i++) {
		enum ctl_state s = ctl_table[i].state;
		unsigned f = ctl_state_serves(s);
		const char *sep = "";

		if (named[s])
			continue;
		named[s] = true;

		fprintf(out, "\t%s", ctl_state_name(s));
		if (f) {
			fprintf(out,
				" [label=\"%s\\nserves: ", ctl_state_name(s));
			for (size_t k = 0;
			     k < sizeof(serves) / sizeof(serves[0]); k++)
				if (f & serves[k].flag) {
					fprintf(out, "%s%s", sep,
						serves[k].name);
					sep = ", ";
				}
			fputs("\"]", out);
		}
		fputs(";\n", out);
	}
	for (size_t i = 0; i < ctl_table_len; i++) {
		enum ctl_state from = ctl_table[i].state,
			       to = ctl_table[i].next;
		const char *sep = "";

		if (from == to || drawn[from][to])
			continue;
		drawn[from][to] = true;
		fprintf(out, "\t%s -> %s [label=\"", ctl_state_name(from),
			ctl_state_name(to));
		for (size_t j = i; j < ctl_table_len; j++) {
			if (ctl_table[j].state != from ||
			    ctl_table[j].next != to)
				continue;
			fprintf(out, "%s%s", sep,
				ctl_table[j].event == CTL_EV_ANY_
				    ? "any"
				    : ctl_event_name(ctl_table[j].event));
			sep = "\\n";
		}
		fputs("\"];\n", out);
	}
	fputs("}\n", out);
}

/* doc/design/states.dot is the table's picture: regenerated here and
 * compared, so a row added without the diagram fails (run from the top
 * of the tree, as make unit does). */
static void test_states_dot(void **state)
{
	char *want = NULL, *have = NULL;
	size_t want_len = 0, have_len = 0;
	FILE *f;

	(void)state;
	f = open_memstream(&want, &want_len);
	assert_non_null(f);
	write_states_dot(f);
	assert_int_equal(fclose(f), 0);
	if (getenv("HERD_WRITE_STATES_DOT")) {
		f = fopen(STATES_DOT, "w");
		assert_non_null(f);
		assert_int_equal(fwrite(want, 1, want_len, f), want_len);
		assert_int_equal(fclose(f), 0);
	}
	f = fopen(STATES_DOT, "r");
	if (!f)
		fail_msg("%s: %s (run from the top of the tree)", STATES_DOT,
			 strerror(errno));
	assert_true(getdelim(&have, &have_len, '\0', f) >= 0);
	fclose(f);
	if (strcmp(want, have))
		fail_msg("%s differs from ctl_table[]: regenerate it with "
			 "HERD_WRITE_STATES_DOT=1 build/unit/test_ctl",
			 STATES_DOT);
	free(want);
	free(have);
}

static void test_every_row(void **state)
{
	int missing = 0;

	(void)state;
	for (size_t i = 0; i < ctl_table_len; i++) {
		if (row_hit[i])
			continue;
		fprintf(stderr, "row not covered: %s, %s -> %s\n",
			ctl_state_name(ctl_table[i].state),
			ctl_table[i].event == CTL_EV_ANY_
				? "any"
				: ctl_event_name(ctl_table[i].event),
			ctl_state_name(ctl_table[i].next));
		missing++;
	}
	assert_int_equal(missing, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_notify_grace, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_notify_survivors_exit,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_notify_node_lost, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_notify_then_fence_timeout,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_notify_interrupt, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_notify_finish, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_notify_no_grace, setup,
						teardown),
		cmocka_unit_test(test_states_dot),
		cmocka_unit_test_setup_teardown(test_complete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fence_done, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fence_too_big, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_node_starts, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_interrupt_before_loop,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_connect_spare_taken, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_connect_shrink, setup,
						teardown),
	    cmocka_unit_test_setup_teardown(test_setup_error_not_recorded,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_error_text_cleaned, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_hello_text_cleaned, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_exit_text_cleaned, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_exit_unconnected, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_exit_singleton, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_failure_recorded, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_quarantined_member, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_quarantined_no_spare,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_quarantined_shrink, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_quarantine_off, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_protocol_error, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_connect_readmit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_launch_send_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_launch_too_big, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_straggler_evicted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_straggler_warned, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_straggler_two, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_spare_taken, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_shrink_nodes_min, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_below_min_gives_up, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_restart_exhausted, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hung, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_blank_not_culprit,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_blank_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hung_culprit_elsewhere,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_hung_two_nodes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hung_no_answer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hung_node_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hung_mpi_abort, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hung_finish, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hung_interrupt, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_ranks_fail, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rejoin_spare, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rejoin_timeout, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_recover_stop_timeout,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_readmit_in_recover, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_readmit_in_backoff, setup,
						teardown),
		cmocka_unit_test(test_backoff_rule),
		cmocka_unit_test_setup_teardown(test_readmit_in_run, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_backoff_below_min, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_interrupt_twice, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_interrupt_recover, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_interrupt_backoff, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_finish_twice, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_metrics_frames, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_heartbeat_large_frame_alive,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_heartbeat_cadence, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_preflight_spare, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_preflight_restart, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_preflight_node_lost, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_preflight_interrupt, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_check_only, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_check_probe_retry, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_check_probe_slow, setup,
						teardown),
		cmocka_unit_test(test_every_row),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
