/* ctl.c — the job controller's lifecycle (DESIGN.md steps 3-8).
 *
 * One loop, one table of states.  Every node is a conn (conn.h) whose
 * frames arrive here whichever transport started its agent.  An attempt
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

#include "cli.h"
#include "ctl_int.h"
#include "plan.h"
#include "herd/checkpoint.h"
#include "herd/render.h"
#include "herd/version.h"

static const struct {
	enum ctl_state from;
	enum ctl_state to;
} ctl_transitions[] = {
	{CTL_CONNECT, CTL_RUN},	      /* enough nodes up */
	{CTL_CONNECT, CTL_STOPPING},  /* too few nodes, or Ctrl-C */
	{CTL_RUN, CTL_RECOVER},	      /* the attempt failed; restarts left */
	{CTL_RUN, CTL_STOPPING},      /* all ranks done, last failure, Ctrl-C */
	{CTL_RECOVER, CTL_BACKOFF},   /* ranks gone, enough nodes */
	{CTL_RECOVER, CTL_STOPPING},  /* below nodes.min, or Ctrl-C */
	{CTL_BACKOFF, CTL_RUN},	      /* the next attempt */
	{CTL_BACKOFF, CTL_STOPPING},  /* below nodes.min, or Ctrl-C */
	{CTL_STOPPING, CTL_END},      /* every agent gone, or grace over */
};

static const char *const ctl_state_names[] = {
	"connect", "run", "recover", "backoff", "stopping", "end"};

/* The longest wait between attempts, however often restart.backoff
 * doubles. */
#define CTL_BACKOFF_MAX_MS 60000

static void set_state(struct ctl *c, enum ctl_state to)
{
	for (size_t i = 0;
	     i < sizeof(ctl_transitions) / sizeof(ctl_transitions[0]); i++) {
		if (ctl_transitions[i].from == c->state &&
		    ctl_transitions[i].to == to) {
			c->state = to;
			if (to == CTL_END)
				loop_stop(c->loop);
			return;
		}
	}
	/* Not a transition of the table: a bug, kept visible. */
	fprintf(stderr, "herd: internal: no transition %s -> %s\n",
		ctl_state_names[c->state], ctl_state_names[to]);
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
		return;
	}
	n->conn = conn_new(c->loop, fd, fd, PROTO_FRAME_MAX, on_frame,
			   on_close, c);
	if (!n->conn)
		n->state = NODE_EVICTED;
}

/* --- the end ------------------------------------------------------------ */

static void maybe_end(struct ctl *c)
{
	if (c->state != CTL_STOPPING)
		return;
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].conn)
			return;
	set_state(c, CTL_END);
}

static void node_failed(struct ctl *c, struct node *n, const char *reason);

static void on_stop_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->stop_timer = 0;
	if (c->state == CTL_RECOVER) {
		/* A survivor that cannot confirm its ranks gone is not
		 * trusted with the next attempt. */
		for (int i = 0; i < c->n_nodes; i++) {
			struct node *n = &c->nodes[i];

			if (n->member && n->state == NODE_UP && !n->stopped)
				node_failed(c, n,
					    "did not confirm that its ranks "
					    "stopped within health.grace");
		}
		return;
	}
	if (c->state != CTL_STOPPING)
		return;
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
	set_state(c, CTL_END);
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
static void finish(struct ctl *c, long grace_ms, int sig)
{
	if (c->state == CTL_STOPPING || c->state == CTL_END) {
		/* A second request only shortens the grace. */
		for (int i = 0; i < c->n_nodes; i++)
			send_stop(&c->nodes[i], grace_ms, SIGKILL, true);
		return;
	}
	if (c->backoff_timer) {
		loop_timer_del(c->loop, c->backoff_timer);
		c->backoff_timer = 0;
	}
	set_state(c, CTL_STOPPING);
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

/* --- failure and recovery ------------------------------------------------ */

static void launch(struct ctl *c);
static void fences_clear(struct ctl *c);
static void check_recovered(struct ctl *c);
static void check_connected(struct ctl *c);

static void summary(struct ctl *c)
{
	bool any_evicted = false;

	if (c->attempt <= 1 && !c->final_failure)
		return;
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

static struct ctl *the_ctl;	/* for node timers: one controller a process */

static void on_readmit(struct loop *loop, void *arg)
{
	struct node *n = arg;
	struct ctl *c = the_ctl;

	(void)loop;
	n->readmit_timer = 0;
	if (n->state != NODE_EVICTED || c->state == CTL_STOPPING ||
	    c->state == CTL_END)
		return;
	start_node(c, n, false);	/* a probe: HELLO readmits it */
	if (n->state == NODE_EVICTED)
		evict(c, n, "readmit probe failed");
	else
		transport_commit(c->transport);
}

/* The attempt failed: stop its ranks everywhere, then recover or end. */
static void attempt_failed(struct ctl *c, int status, const char *why)
{
	bool restarts_left;

	if (c->state != CTL_RUN)
		return;
	record_failure(c, status, why);
	c->failed_at_ms = loop_now_ms();
	events_emit(c->ev, "attempt_end",
		    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
			      "reason", why, "status", status));
	restarts_left = c->attempt < 1 + c->spec->restart.max &&
			c->interrupts == 0 && !c->no_restart;
	if (!restarts_left) {
		if (c->interrupts == 0 && !c->no_restart &&
		    c->spec->restart.max > 0)
			fprintf(stderr,
				"herd: restart limit reached (restart.max "
				"%d)\n",
				c->spec->restart.max);
		c->final_failure = true;
		finish(c, c->spec->health.grace_ms, SIGTERM);
		return;
	}
	fprintf(stderr, "herd: attempt %d failed: %s; recovering\n",
		c->attempt, why);
	set_state(c, CTL_RECOVER);
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

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

/* A node failed: channel broken, heartbeats silent, agent error. */
static void node_failed(struct ctl *c, struct node *n, const char *reason)
{
	char why[512];

	if (n->state == NODE_EVICTED || n->state == NODE_GONE ||
	    n->state == NODE_SPARE)
		return;
	if (c->state == CTL_STOPPING || c->state == CTL_END) {
		drop_conn(c, n);
		n->state = NODE_GONE;
		maybe_end(c);
		return;
	}
	if (!n->member) {
		/* A probe or a warm spare: quietly out again. */
		evict(c, n, reason);
		return;
	}
	events_emit(c->ev, "node_failed",
		    json_pack("{s:s, s:s, s:i}", "host", n->host, "reason",
			      reason, "attempt", c->attempt));
	if (c->state == CTL_CONNECT) {
		if (c->tty)
			fputc('\n', stderr);
		fprintf(stderr, "herd: %s\n", reason);
	} else {
		fprintf(stderr, "herd: node %s failed: %s\n", n->host, reason);
	}
	evict(c, n, reason);
	snprintf(why, sizeof(why), "node %s failed: %s", n->host, reason);
	switch (c->state) {
	case CTL_CONNECT:
		progress(c, false);
		check_connected(c);
		break;
	case CTL_RUN:
		attempt_failed(c, 1, why);
		break;
	case CTL_RECOVER:
		check_recovered(c);
		break;
	default:
		break;
	}
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
			bool warm = n->state == NODE_UP && !n->member;
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
			} else {
				start_node(c, n, true);
				if (n->state == NODE_EVICTED)
					continue;
				started = true;
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

static void on_backoff(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->backoff_timer = 0;
	if (c->state != CTL_BACKOFF)
		return;
	if (count_nodes(c, NODE_UP, 1) < c->min_nodes) {
		char why[160];

		snprintf(why, sizeof(why),
			 "only %d nodes left, nodes.min is %d",
			 count_nodes(c, NODE_UP, 1), c->min_nodes);
		fprintf(stderr, "herd: %s\n", why);
		c->final_failure = true;
		finish(c, 0, SIGTERM);
		return;
	}
	launch(c);
}

/* Recovery goes on until every surviving member confirmed its ranks
 * gone and every joining spare is up or failed. */
static void check_recovered(struct ctl *c)
{
	int64_t backoff;
	int up;

	if (c->state != CTL_RECOVER)
		return;
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->member && n->state == NODE_UP && !n->stopped)
			return;
	}
	if (take_spares(c) > 0)
		return;
	up = count_nodes(c, NODE_UP, 1);
	if (up < c->min_nodes) {
		char why[160];

		snprintf(why, sizeof(why),
			 "only %d node%s left, nodes.min is %d", up,
			 up == 1 ? "" : "s", c->min_nodes);
		fprintf(stderr, "herd: %s; giving up\n", why);
		c->final_failure = true;
		finish(c, 0, SIGTERM);
		return;
	}
	if (up < c->want_nodes)
		fprintf(stderr,
			"herd: no spare left; continuing with %d of %d nodes "
			"(nodes.min %d)\n",
			up, c->want_nodes, c->min_nodes);
	set_state(c, CTL_BACKOFF);
	/* Doubles with every attempt since training last moved on to a
	 * newer checkpoint: a crash loop backs off, a long job that fails
	 * now and then waits restart.backoff each time. */
	backoff = c->spec->restart.backoff_ms;
	for (int k = c->progress_attempt > 1 ? c->progress_attempt : 1;
	     k < c->attempt && backoff < CTL_BACKOFF_MAX_MS; k++)
		backoff *= 2;
	if (backoff > CTL_BACKOFF_MAX_MS)
		backoff = CTL_BACKOFF_MAX_MS;
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
		fprintf(stderr, "herd: attempt %d resumes from %s\n", c->attempt,
			res.path);
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
	finish(c, 0, SIGTERM);
}

static void launch(struct ctl *c)
{
	struct herd_err err;
	struct attempt_note *notes;
	char *command = NULL, *before;

	herd_err_clear(&err);
	notes = realloc(c->notes, (size_t)(c->attempt + 1) * sizeof(*notes));
	if (!notes) {
		fprintf(stderr, "herd: out of memory\n");
		c->status = 1;
		finish(c, 0, SIGTERM);
		return;
	}
	c->notes = notes;
	memset(&c->notes[c->attempt], 0, sizeof(*notes));
	c->attempt++;
	c->failed = false;
	fences_clear(c);
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
		finish(c, 0, SIGTERM);
		return;
	}
	if (c->opt->plan_only) {
		print_plan(c);
		free(command);
		return;
	}
	set_state(c, CTL_RUN);
	events_emit(c->ev, "attempt_start",
		    json_pack("{s:i, s:i, s:i, s:s, s:s?}", "attempt",
			      c->attempt, "nodes", count_nodes(c, NODE_UP, 1),
			      "world_size", c->world_size, "master_addr",
			      c->master_addr, "checkpoint", c->checkpoint));
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];
		json_t *body;

		if (!n->member || n->state != NODE_UP)
			continue;
		body = ctl_launch_body(c, n, command);
		conn_send(n->conn, PROTO_LAUNCH, body, NULL, 0, NULL);
		json_decref(body);
		for (int l = 0; l < n->n_ranks; l++)
			events_emit(c->ev, "rank_start",
				    json_pack("{s:i, s:i, s:s, s:i, s:i}",
					      "attempt", c->attempt, "rank",
					      n->first_rank + l, "host",
					      n->host, "local_rank", l,
					      "node_rank", n->index));
	}
	free(command);
}

/* --- connecting ----------------------------------------------------------- */

static void check_connected(struct ctl *c)
{
	int up;

	if (c->state != CTL_CONNECT)
		return;
	if (count_nodes(c, NODE_CONNECTING, 1) > 0)
		return;
	/* Fill in for nodes that never came up, from the spares. */
	if (take_spares(c) > 0)
		return;
	progress(c, true);
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
		finish(c, 0, SIGTERM);
		return;
	}
	launch(c);
}

static void on_hello(struct ctl *c, struct node *n, json_t *body)
{
	const char *version = json_string_value(json_object_get(body, "version"));
	const char *hostname =
		json_string_value(json_object_get(body, "hostname"));
	json_t *hb;

	if (!version || strcmp(version, HERD_VERSION)) {
		char why[256];

		snprintf(why, sizeof(why),
			 "%s: herd-agent version %s does not match herd %s",
			 n->host, version ? version : "?", HERD_VERSION);
		node_failed(c, n, why);
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
	if (!n->member) {
		events_emit(c->ev, "node_readmitted",
			    json_pack("{s:s}", "host", n->host));
		fprintf(stderr, "herd: %s answers again; readmitted as a "
				"spare\n",
			n->host);
		check_recovered(c);
		return;
	}
	events_emit(c->ev, "node_up",
		    json_pack("{s:s, s:s}", "host", n->host, "hostname",
			      n->hostname));
	progress(c, false);
	check_connected(c);
	check_recovered(c);
}

/* --- PMIx fences and aborts ---------------------------------------------- */

static void fence_free(struct ctl *c, int k)
{
	struct fence *f = &c->fences[k];

	if (f->timer)
		loop_timer_del(c->loop, f->timer);
	for (int i = 0; f->parts && i < c->n_nodes; i++)
		free(f->parts[i]);
	free(f->parts);
	free(f->part_len);
	free(f->got);
	c->fences[k] = c->fences[--c->n_fences];
}

static void fences_clear(struct ctl *c)
{
	while (c->n_fences > 0)
		fence_free(c, 0);
	free(c->fences);
	c->fences = NULL;
}

static int fence_find(struct ctl *c, int seq)
{
	for (int k = 0; k < c->n_fences; k++)
		if (c->fences[k].seq == seq)
			return k;
	return -1;
}

static bool fence_member(const struct node *n)
{
	return n->member && n->state == NODE_UP && n->n_ranks > 0;
}

static void on_fence_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = the_ctl;
	int seq = (int)(intptr_t)arg, k = fence_find(c, seq);
	char why[512];
	size_t len;

	(void)loop;
	if (k < 0)
		return;
	c->fences[k].timer = 0;
	len = (size_t)snprintf(why, sizeof(why),
			       "PMIx fence %d timed out after %.0f s; never "
			       "contributed:",
			       seq, (double)c->spec->health.fence_timeout_ms /
					    1000.0);
	for (int i = 0; i < c->n_nodes && len < sizeof(why); i++)
		if (fence_member(&c->nodes[i]) && !c->fences[k].got[i])
			len += (size_t)snprintf(why + len, sizeof(why) - len,
						" %s", c->nodes[i].host);
	fence_free(c, k);
	fprintf(stderr, "herd: %s\n", why);
	attempt_failed(c, 1, why);
}

static void on_fence(struct ctl *c, struct node *n, struct proto_frame *f)
{
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	json_t *att = json_object_get(f->body, "attempt");
	int idx = (int)(n - c->nodes), k, want = 0;
	struct fence *fe;
	char *all = NULL;
	size_t total = 0, off = 0;

	if (c->state != CTL_RUN || !fence_member(n) ||
	    json_integer_value(att) != c->attempt)
		return;
	k = fence_find(c, seq);
	if (k < 0) {
		struct fence *nf = realloc(c->fences, (size_t)(c->n_fences + 1) *
							      sizeof(*nf));

		if (!nf)
			return;
		c->fences = nf;
		k = c->n_fences++;
		fe = &c->fences[k];
		memset(fe, 0, sizeof(*fe));
		fe->seq = seq;
		fe->got = calloc((size_t)c->n_nodes, sizeof(*fe->got));
		fe->parts = calloc((size_t)c->n_nodes, sizeof(*fe->parts));
		fe->part_len = calloc((size_t)c->n_nodes, sizeof(*fe->part_len));
		if (!fe->got || !fe->parts || !fe->part_len) {
			fence_free(c, k);
			return;
		}
		fe->timer = loop_timer_add(c->loop,
					   c->spec->health.fence_timeout_ms,
					   on_fence_timeout,
					   (void *)(intptr_t)seq);
	}
	fe = &c->fences[k];
	if (fe->got[idx])
		return;
	fe->got[idx] = true;
	fe->n_got++;
	if (f->data_len) {
		fe->parts[idx] = malloc(f->data_len);
		if (!fe->parts[idx])
			return;
		memcpy(fe->parts[idx], f->data, f->data_len);
		fe->part_len[idx] = f->data_len;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		want += fence_member(&c->nodes[i]);
		total += fe->part_len[i];
	}
	if (fe->n_got < want)
		return;
	/* Everyone is in: the concatenation, in node order, to all. */
	if (total && !(all = malloc(total))) {
		fence_free(c, k);
		attempt_failed(c, 1, "out of memory gathering a PMIx fence");
		return;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		if (fe->part_len[i])
			memcpy(all + off, fe->parts[i], fe->part_len[i]);
		off += fe->part_len[i];
	}
	for (int i = 0; i < c->n_nodes; i++) {
		json_t *body;

		if (!fence_member(&c->nodes[i]))
			continue;
		body = json_pack("{s:i, s:i, s:i}", "attempt", c->attempt,
				 "seq", seq, "status", 0);
		conn_send(c->nodes[i].conn, PROTO_FENCE_DONE, body, all, total,
			  NULL);
		json_decref(body);
	}
	free(all);
	fence_free(c, k);
}

/* MPI_Abort: the program itself ends the job, at once and everywhere,
 * with the abort's status; no restart. */
static void on_abort(struct ctl *c, struct node *n, json_t *body)
{
	int rank = (int)json_integer_value(json_object_get(body, "rank"));
	int status = (int)json_integer_value(json_object_get(body, "status"));
	const char *msg = json_string_value(json_object_get(body, "message"));
	char why[512];

	if (c->state != CTL_RUN ||
	    json_integer_value(json_object_get(body, "attempt")) != c->attempt)
		return;
	if (status <= 0 || status > 255)
		status = 1;
	snprintf(why, sizeof(why), "rank %d on %s called MPI_Abort (status %d)%s%.300s",
		 rank, n->host, status, msg && *msg ? ": " : "",
		 msg ? msg : "");
	fprintf(stderr, "herd: %s; stopping every rank\n", why);
	c->no_restart = true;
	attempt_failed(c, status, why);
}

/* --- running ------------------------------------------------------------- */

static void on_rank_exit(struct ctl *c, struct node *n, json_t *body)
{
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
	if (!c->ranks || rank < 0 || rank >= c->world_size ||
	    &c->nodes[c->ranks[rank].node] != n)
		return;
	r = &c->ranks[rank];
	if (r->done)
		return;
	r->done = true;
	c->ranks_done++;
	ctl_print(c, rank, 1, "", 0, true);
	ctl_print(c, rank, 2, "", 0, true);
	ctl_close_rank_log(c, rank);
	status = json_is_integer(sig) ? 128 + (int)json_integer_value(sig)
				       : (int)json_integer_value(code);
	singleton = status == 0 &&
		    json_is_false(json_object_get(body, "pmix_connected"));
	if (singleton)
		status = 1;
	ev = json_pack("{s:i, s:i, s:s, s:i, s:O, s:O}", "attempt", c->attempt,
		       "rank", rank, "host", n->host, "status", status, "code",
		       code ? code : json_null(), "signal",
		       sig ? sig : json_null());
	if (ev && error) {
		json_object_set_new(ev, "reason", json_string(error));
		json_object_set(ev, "errno", json_object_get(body, "errno"));
	}
	events_emit(c->ev, "rank_exit", ev);
	if (c->state != CTL_RUN) {
		/* Said per rank even when the attempt is already stopping
		 * for another one: each node may fail its own way. */
		if (error && status != 0)
			fprintf(stderr, "herd: rank %d on %s: %s\n", rank,
				n->host, error);
		return;
	}
	if (status != 0) {
		char why[512];

		if (error)
			snprintf(why, sizeof(why), "rank %d on %s: %s", rank,
				 n->host, error);
		else if (singleton)
			snprintf(why, sizeof(why),
				 "rank %d on %s exited 0 without ever "
				 "connecting to herd's PMIx server (ran as a "
				 "singleton? Open MPI needs "
				 "OMPI_MCA_schizo=^orte)",
				 rank, n->host);
		else if (json_is_integer(sig))
			snprintf(why, sizeof(why),
				 "rank %d on %s was killed by signal %d (%s)",
				 rank, n->host, (int)json_integer_value(sig),
				 strsignal((int)json_integer_value(sig)));
		else
			snprintf(why, sizeof(why),
				 "rank %d on %s exited with status %d", rank,
				 n->host, status);
		fprintf(stderr, "herd: %s; stopping the attempt\n", why);
		attempt_failed(c, status, why);
		return;
	}
	if (c->ranks_done == c->world_size) {
		events_emit(c->ev, "attempt_end",
			    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
				      "reason", "completed", "status", 0));
		finish(c, c->spec->health.grace_ms, SIGTERM);
	}
}

static void on_heartbeat(struct ctl *c, struct node *n, json_t *body)
{
	json_t *hung = json_object_get(body, "hung"), *h;
	json_t *att = json_object_get(body, "attempt");
	char why[512] = "";
	size_t i, len = 0;

	if (!json_is_array(hung) || json_array_size(hung) == 0 ||
	    c->state != CTL_RUN || !n->member ||
	    (json_is_integer(att) && json_integer_value(att) != c->attempt))
		return;
	json_array_foreach(hung, i, h)
	{
		int rank = (int)json_integer_value(json_object_get(h, "rank"));
		json_int_t silent =
			json_integer_value(json_object_get(h, "silent_ms"));

		events_emit(c->ev, "rank_hung",
			    json_pack("{s:i, s:i, s:s, s:I}", "attempt",
				      c->attempt, "rank", rank, "host", n->host,
				      "silent_ms", silent));
		len += (size_t)snprintf(why + len, sizeof(why) - len,
					"%s%d", i ? ", " : "rank ", rank);
		if (len >= sizeof(why))
			len = sizeof(why) - 1;
	}
	snprintf(why + len, sizeof(why) - len,
		 " on %s hung (no output and no progress for %.1f s)", n->host,
		 (double)c->spec->health.progress_timeout_ms / 1000.0);
	fprintf(stderr, "herd: %s; stopping the attempt\n", why);
	attempt_failed(c, 1, why);
}

static struct node *node_of(struct ctl *c, struct conn *conn)
{
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].conn == conn)
			return &c->nodes[i];
	return NULL;
}

static void on_frame(struct conn *conn, struct proto_frame *f, void *arg)
{
	struct ctl *c = arg;
	struct node *n = node_of(c, conn);

	if (!n)
		goto out;
	n->last_rx_ms = loop_now_ms();
	switch (f->type) {
	case PROTO_HELLO:
		if (n->state == NODE_CONNECTING)
			on_hello(c, n, f->body);
		break;
	case PROTO_OUTPUT: {
		int rank = (int)json_integer_value(json_object_get(f->body, "rank"));
		int fd = (int)json_integer_value(json_object_get(f->body, "fd"));
		json_t *att = json_object_get(f->body, "attempt");

		if (!c->ranks || rank < 0 || rank >= c->world_size ||
		    (fd != 1 && fd != 2) ||
		    (json_is_integer(att) &&
		     json_integer_value(att) != c->attempt))
			break;
		/* Written at once: the log is how a person (or a test)
		 * follows a rank while it runs. */
		ctl_log_write(c, rank, f->data, f->data_len);
		ctl_print(c, rank, fd, (const char *)f->data, f->data_len,
			  false);
		break;
	}
	case PROTO_EXIT:
		on_rank_exit(c, n, f->body);
		break;
	case PROTO_STOPPED:
		n->stopped = true;
		check_recovered(c);
		break;
	case PROTO_HEARTBEAT:
		on_heartbeat(c, n, f->body);
		break;
	case PROTO_FENCE:
		on_fence(c, n, f);
		break;
	case PROTO_ABORT:
		on_abort(c, n, f->body);
		break;
	case PROTO_ERROR: {
		const char *msg =
			json_string_value(json_object_get(f->body, "message"));

		node_failed(c, n, msg ? msg : "agent reported an error");
		break;
	}
	default:
		break;
	}
out:
	proto_frame_free(f);
}

static void on_close(struct conn *conn, const char *reason, int clean,
		     void *arg)
{
	struct ctl *c = arg;
	struct node *n = node_of(c, conn);
	char why[512];

	if (!n)
		return;
	if (c->state == CTL_STOPPING || c->state == CTL_END) {
		drop_conn(c, n);
		n->state = NODE_GONE;
		maybe_end(c);
		return;
	}
	snprintf(why, sizeof(why), "%s: connection to the agent lost (%s)",
		 n->host, clean ? "end of stream" : reason);
	node_failed(c, n, why);
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
	int64_t beat = c->hb_sent_ms + c->spec->health.heartbeat_ms - now;

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

/* Heartbeats: herd sends its own every health.heartbeat, and fails a node
 * it has not heard from for the silence limit (a partition is caught
 * here, not by TCP) unless herd itself was the one not running. */
static void on_heartbeat_tick(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	int64_t now = loop_now_ms();
	int64_t stall = own_stall(c, now);
	bool send;

	ctl_check_events(c);
	if (stall > 0)
		restart_silence_clocks(c, now, stall, "herd did not run");
	send = now - c->hb_sent_ms >= c->spec->health.heartbeat_ms;
	if (send)
		c->hb_sent_ms = now;
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];
		json_t *body;

		if (n->state != NODE_UP || !n->conn)
			continue;
		if (now - n->last_rx_ms >= silence_limit(c)) {
			char why[256];

			snprintf(why, sizeof(why),
				 "no heartbeat for %.1f s (health.timeout "
				 "%.1f s + heartbeat %.2f s + %.2f s for "
				 "TCP's retransmission)",
				 (double)(now - n->last_rx_ms) / 1000.0,
				 (double)c->spec->health.timeout_ms / 1000.0,
				 (double)c->spec->health.heartbeat_ms / 1000.0,
				 SPEC_SILENCE_RTO_MS / 1000.0);
			node_failed(c, n, why);
			continue;
		}
		if (!send)
			continue;
		body = json_pack("{s:I, s:I}", "interval_ms",
				 (json_int_t)c->spec->health.heartbeat_ms,
				 "timeout_ms",
				 (json_int_t)c->spec->health.timeout_ms);
		conn_send(n->conn, PROTO_HEARTBEAT, body, NULL, 0, NULL);
		json_decref(body);
	}
	now = loop_now_ms();
	c->hb_due_ms = now + silence_wait(c, now);
	c->hb_timer =
		loop_timer_add(loop, c->hb_due_ms - now, on_heartbeat_tick, c);
}

/* --- signals ------------------------------------------------------------- */

/* Local agents and the Slurm transport's keeper are children of herd. */
static void on_sigchld(struct loop *loop, int sig, void *arg)
{
	(void)loop;
	(void)sig;
	(void)arg;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

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

	signal(SIGTSTP, SIG_DFL);
	raise(SIGTSTP);
	/* Continued (or never stopped). */
	if (loop_on_signal(c->loop, SIGTSTP, on_suspend, c) < 0)
		fprintf(stderr, "herd: SIGTSTP: %s\n", strerror(errno));
	resume(c, loop_now_ms() - t0);
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
	struct ctl *c = arg;
	char why[64];

	(void)loop;
	if (c->pause_timer) {
		loop_timer_del(loop, c->pause_timer);
		c->pause_timer = 0;
		c->paused = false;
	}
	c->interrupts++;
	snprintf(why, sizeof(why), "interrupted (%s)", strsignal(sig));
	record_failure(c, 128 + sig, why);
	if (c->state == CTL_RUN)
		events_emit(c->ev, "attempt_end",
			    json_pack("{s:i, s:s, s:i}", "attempt", c->attempt,
				      "reason", why, "status", 128 + sig));
	if (c->interrupts == 1) {
		fprintf(stderr,
			"\nherd: %s: stopping all ranks (again to kill them "
			"at once)\n",
			strsignal(sig));
		finish(c, c->spec->health.grace_ms, sig);
	} else {
		fprintf(stderr, "\nherd: killing all ranks\n");
		finish(c, 0, SIGKILL);
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

static void ctl_cleanup(struct ctl *c)
{
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		conn_free(n->conn);
		free(n->host);
		free(n->hostname);
		json_decref(n->addrs);
		json_decref(n->topo);
		ctl_node_unplan(n);
	}
	free(c->nodes);
	bind_platform_free(c->platform);
	ctl_free_ranks(c);
	fences_clear(c);
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
	if (c->loop)
		loop_free(c->loop);
}

static int add_nodes(struct ctl *c, struct resolved *res)
{
	size_t total = res->nodes->count + res->spares->count;

	c->nodes = calloc(total ? total : 1, sizeof(*c->nodes));
	if (!c->nodes)
		return -1;
	for (size_t i = 0; i < total; i++) {
		bool spare = i >= res->nodes->count;
		const struct hostfile_entry *e =
			spare ? &res->spares->entries[i - res->nodes->count]
			      : &res->nodes->entries[i];
		struct node *n = &c->nodes[c->n_nodes++];

		n->host = strdup(e->host);
		if (!n->host)
			return -1;
		n->slots = c->spec->nodes.slots > 0 ? (int)c->spec->nodes.slots
						    : e->slots;
		n->state = NODE_SPARE;
		n->index = -1;
	}
	c->want_nodes = (int)res->nodes->count;
	c->min_nodes = c->spec->nodes.min > 0 ? (int)c->spec->nodes.min
					      : c->want_nodes;
	return 0;
}

int ctl_run(struct spec *spec, const struct ctl_options *opt)
{
	struct ctl c = {.spec = spec, .opt = opt};
	struct resolved res = {0};
	struct herd_err err;
	int status = 1;

	herd_err_clear(&err);
	if (resolve_nodes(spec, &res, &err) < 0) {
		fprintf(stderr, "herd: %s\n", err.text);
		return res.fail == RESOLVE_FAIL_INPUT ? EXIT_SPEC : 1;
	}
	c.local = res.nodes->count == 1 &&
		  !strcmp(res.nodes->entries[0].host, "localhost");
	c.log_dir = render_log_dir(spec, &err);
	if (!c.log_dir) {
		fprintf(stderr, "herd: log.dir: %s\n", err.text);
		resolve_free(&res);
		return EXIT_SPEC;
	}
	if (opt->dry_run) {
		status = ctl_dry_run(&c, &res);
		ctl_cleanup(&c);
		resolve_free(&res);
		return status;
	}

	the_ctl = &c;
	c.tty = isatty(2);
	c.loop = loop_new();
	/* herd plan leaves no trace: no log tree. */
	if (!opt->plan_only &&
	    (!(c.lt = logtree_open(c.log_dir, spec->log.mode, &err)) ||
	     !(c.ev = events_open(c.lt, &err)))) {
		fprintf(stderr, "herd: %s\n", err.text);
		goto out;
	}
	if (!c.loop) {
		fprintf(stderr, "herd: %s\n", strerror(errno));
		goto out;
	}
	if (c.lt)
		fprintf(stderr, "herd: logs in %s\n", logtree_run_dir(c.lt));
	if (ctl_term_open(&c) < 0) {
		fprintf(stderr, "herd: %s\n", strerror(errno));
		goto out;
	}
	if (spec->bind.topology_file &&
	    !(c.platform = bind_platform_load(spec->bind.topology_file, &err))) {
		fprintf(stderr, "herd: bind.topology_file: %s\n", err.text);
		status = EXIT_SPEC;
		goto out;
	}
	c.transport = transport_new(transport_pick(spec, c.local), spec,
				    opt->agent_path, &err);
	if (c.transport) {
		c.transport->verbose = opt->verbose;
		c.transport->loop = c.loop;
	}
	if (!c.transport || add_nodes(&c, &res) < 0) {
		fprintf(stderr, "herd: %s\n",
			c.transport ? "out of memory" : err.text);
		goto out;
	}
	if (loop_on_signal(c.loop, SIGINT, on_interrupt, &c) < 0 ||
	    loop_on_signal(c.loop, SIGTERM, on_interrupt, &c) < 0 ||
	    /* nohup (or a parent that ignores SIGHUP for us) means: keep
	     * running when the terminal goes; SIGINT stays ours even in
	     * the background, where scripts send it to stop a job. */
	    loop_on_signal_unless_ignored(c.loop, SIGHUP, on_interrupt, &c) <
		    0 ||
	    loop_on_signal(c.loop, SIGCHLD, on_sigchld, &c) < 0 ||
	    pause_signals_init(&c) < 0) {
		fprintf(stderr, "herd: signals: %s\n", strerror(errno));
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);

	events_emit(c.ev, "job_start",
		    json_pack("{s:s, s:s?, s:i, s:i, s:s, s:s}", "job",
			      spec->name, "run",
			      c.lt ? logtree_run_id(c.lt) : NULL, "nodes",
			      c.want_nodes, "spares", c.n_nodes - c.want_nodes,
			      "mode", spec_mode_name(spec->launch.mode),
			      "transport", c.transport->ops->name));
	ctl_check_events(&c);
	for (int i = 0; i < c.want_nodes; i++) {
		start_node(&c, &c.nodes[i], true);
		if (c.nodes[i].state == NODE_EVICTED)
			events_emit(c.ev, "node_failed",
				    json_pack("{s:s, s:s, s:i}", "host",
					      c.nodes[i].host, "reason",
					      "transport could not start",
					      "attempt", 0));
	}
	transport_commit(c.transport);
	progress(&c, false);
	c.hb_sent_ms = loop_now_ms();
	c.hb_due_ms = c.hb_sent_ms + check_interval(&c);
	c.boot_gap_ms = boot_gap_ms();
	c.hb_timer = loop_timer_add(c.loop, check_interval(&c),
				    on_heartbeat_tick, &c);
	check_connected(&c);
	if (c.state != CTL_END)
		loop_run(c.loop);
	status = c.status;
	/* Rank output still held for a slow reader comes before the
	 * summary. */
	ctl_term_close(&c);
	summary(&c);
	for (int r = 0; r < c.world_size; r++)
		ctl_close_rank_log(&c, r);
	events_emit(c.ev, "job_end",
		    json_pack("{s:i, s:i, s:I}", "status", status, "attempts",
			      c.attempt, "log_bytes_lost",
			      (json_int_t)(c.log_lost + events_lost(c.ev))));
	report_lost(&c);
out:
	ctl_cleanup(&c);	/* loop_free puts the signals back */
	resolve_free(&res);
	the_ctl = NULL;
	return status;
}
