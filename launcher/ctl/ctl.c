/* ctl/ctl.c — the job controller: setup, the nodes' connections, teardown.
 *
 * One loop, one table.  Every node is a conn (conn.h, its arg is the node)
 * whose frames arrive in ctl/frames.c whichever transport started its
 * agent.  What happens to the job is posted (ctl/engine.c) and handled
 * through ctl_table[] (ctl/table.c).  An attempt fails when a rank exits
 * non-zero, hangs, or its node fails (channel broken, heartbeats silent
 * for health.timeout); then the controller stops the ranks everywhere,
 * waits for every surviving agent to confirm, evicts failed nodes, takes
 * spares or shrinks within nodes.min (ctl/recover.c), finds the newest
 * complete checkpoint and launches the next attempt after restart.backoff
 * (ctl/attempt.c), until restart.max is spent; then it ends (ctl/stop.c).
 *
 * A node's state changes only through ctl_node_set(), here.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "herd/proc.h"
#include "herd/render.h"
#include "herd/usage.h"
#include "launcher/cli.h"
#include "launcher/ctl/ctl_int.h"
#include "launcher/model/jobrun.h"

/* A node's lifecycle: from a spare (or a member not yet started) to
 * connecting, up, evicted (and back to connecting when readmitted), gone
 * at the end.  A hot spare that could not be started is a spare again,
 * tried when needed; herd run --dry-run plans spares as up, without
 * agents. */
static const unsigned node_next[] = {
    [NODE_SPARE] = 1u << NODE_CONNECTING | 1u << NODE_UP,
    [NODE_CONNECTING] = 1u << NODE_UP | 1u << NODE_EVICTED | 1u << NODE_GONE,
    [NODE_UP] = 1u << NODE_EVICTED | 1u << NODE_GONE,
    [NODE_EVICTED] = 1u << NODE_CONNECTING | 1u << NODE_SPARE,
    [NODE_GONE] = 0,
};

static const char *const node_state_names[] = {
    [NODE_SPARE] = "spare", [NODE_CONNECTING] = "connecting",
    [NODE_UP] = "up",	    [NODE_EVICTED] = "evicted",
    [NODE_GONE] = "gone",
};

void ctl_node_set(struct ctl *c, struct node *n, enum node_state state)
{
	(void)c;
	if (state != n->state && !(node_next[n->state] & (1u << state)))
		/* Not a transition of a node: a bug, kept visible. */
		fprintf(stderr, "herd: internal: node %s went from %s to %s\n",
			n->host, node_state_names[n->state],
			node_state_names[state]);
	n->state = state;
}

/* A send that failed: when the conn is dead its close handler fails the
 * node from the loop (ctl_on_close); a frame that could not be queued
 * (too big to encode, out of memory) leaves the agent without what it
 * must know, so the node fails now, with the reason. */
static void send_failed(struct ctl *c, struct node *n, enum proto_type type,
			const char *reason)
{
	char why[HERD_ERR_MAX + 128];

	if (conn_is_dead(n->conn))
		return;
	snprintf(why, sizeof(why), "%s: herd could not send it %s: %s", n->host,
		 proto_type_name((int)type), reason);
	ctl_frame_failed(c, n, why);
}

int ctl_send(struct ctl *c, struct node *n, enum proto_type type,
	     const json_t *body, const void *data, size_t data_len)
{
	struct herd_err err;

	if (!n->conn)
		return -1; /* dropped: the node is already out */
	herd_err_clear(&err);
	if (conn_send(n->conn, type, body, data, data_len, &err) == 0)
		return 0;
	send_failed(c, n, type, err.text);
	return -1;
}

int ctl_send_encoded(struct ctl *c, struct node *n, enum proto_type type,
		     const char *frame, size_t len)
{
	struct herd_err err;

	if (!n->conn)
		return -1;
	herd_err_clear(&err);
	if (conn_send_encoded(n->conn, frame, len, &err) == 0)
		return 0;
	send_failed(c, n, type, err.text);
	return -1;
}

int ctl_count_nodes(const struct ctl *c, enum node_state state, int member)
{
	int k = 0;

	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].state == state &&
		    (member < 0 || c->nodes[i].member == (member > 0)))
			k++;
	return k;
}

void ctl_progress(struct ctl *c, bool final)
{
	int up = ctl_count_nodes(c, NODE_UP, 1);
	int failed = ctl_count_nodes(c, NODE_EVICTED, -1);

	if (!c->tty)
		return;
	fprintf(stderr, "\rherd: %d/%d nodes up", up, c->want_nodes);
	if (failed)
		fprintf(stderr, ", %d failed", failed);
	fputs(final ? "\n" : "   ", stderr);
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

void ctl_drop_conn(struct ctl *c, struct node *n)
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

/* Starts node n's agent; member says whether it joins the job or is a
 * readmit probe. */
void ctl_start_node(struct ctl *c, struct node *n, bool member)
{
	struct herd_err err;
	int fd;

	herd_err_clear(&err);
	n->member = member;
	ctl_node_set(c, n, NODE_CONNECTING);
	n->stopped = false;
	n->last_rx_ms = loop_now_ms();
	fd = transport_start(c->transport, n->host, &err);
	if (fd < 0) {
		ctl_node_set(c, n, NODE_EVICTED);
		fprintf(stderr, "herd: %s: %s\n", n->host, err.text);
		ctl_check_node_failed(c, n, err.text);
		return;
	}
	n->conn = conn_new(c->loop, fd, fd, PROTO_FRAME_MAX, ctl_on_frame,
			   ctl_on_close, n);
	if (!n->conn)
		ctl_node_set(c, n, NODE_EVICTED);
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
	if (!getcwd(cwd, sizeof(cwd)) ||
	    asprintf(&abs, "%s/%s", cwd, dir) < 0) {
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
	ctl_queue_clear(c);
	ctl_nodes_flush(c); /* failures noted in the last loop turn */
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
	ctl_notify_stop(c);
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

/* The nodes, then the spares, less those the node record quarantines.
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
		ctl_node_set(c, n, NODE_SPARE);
		n->index = -1;
	}
	/* herd check: spares are checked as members are. */
	c->want_nodes =
	    c->opt->check_only ? (int)total : (int)res->nodes->count;
	c->min_nodes =
	    c->spec->nodes.min > 0 ? (int)c->spec->nodes.min : c->want_nodes;
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
	c->fence_data_max = CTL_FENCE_DATA_MAX;
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
	if (ctl_signals_init(c) < 0 ||
	    /* Children (local agents, srun) are reaped by proc.h. */
	    proc_watch(c->loop) < 0) {
		fprintf(stderr, "herd: signals: %s\n", strerror(errno));
		return 1;
	}
	if (c->lt)
		fprintf(stderr, "herd: logs in %s\n", logtree_run_dir(c->lt));
	/* The socket first: the entry records where it listens. */
	if (ctl_sock_listen(c) < 0) /* herd attach, herd stop */
		return 1;
	if (c->lt && jobrun_register(c->lt, spec->name, c->opt, c->opt->detach,
				     ctl_sock_path(c), &err) < 0) {
		if (c->opt->detach) { /* nobody could find it again */
			fprintf(stderr, "herd: job not registered: %s\n",
				err.text);
			return 1;
		}
		fprintf(stderr,
			"herd: warning: job not registered (herd "
			"list will not show it): %s\n",
			err.text);
	}
	if (ctl_term_open(c) < 0) {
		fprintf(stderr, "herd: %s\n", strerror(errno));
		return 1;
	}
	if (spec->bind.topology_file &&
	    !(c->platform =
		  bind_platform_load(spec->bind.topology_file, &err))) {
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
			      c->n_nodes - (c->want_nodes - left_out), "mode",
			      spec_mode_name(spec->launch.mode), "transport",
			      c->transport->ops->name, "resumed_from",
			      c->opt->resumed_from));
	for (size_t k = 0; k < json_array_size(c->quarantined); k++)
		events_emit(c->ev, "node_quarantined",
			    json_incref(json_array_get(c->quarantined, k)));
	ctl_check_events(c);
	/* Members the node record quarantined are not in c->nodes: the
	 * first want_nodes - left_out are the members, spares stand in for
	 * the rest at once (take_spares). */
	for (int i = 0; i < c->want_nodes - left_out; i++) {
		ctl_start_node(c, &c->nodes[i], true);
		if (c->nodes[i].state == NODE_EVICTED)
			events_emit(c->ev, "node_failed",
				    json_pack("{s:s, s:s, s:i}", "host",
					      c->nodes[i].host, "reason",
					      "transport could not start",
					      "attempt", 0));
	}
	/* Hot spares (ctl/warm.c): up before they are needed. */
	for (int i = c->want_nodes - left_out;
	     ctl_warm_spares(c) && !c->opt->check_only && i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (n->state != NODE_SPARE)
			continue;
		ctl_start_node(c, n, false);
		n->hot = n->state == NODE_CONNECTING;
		if (!n->hot)
			/* tried again when needed */
			ctl_node_set(c, n, NODE_SPARE);
	}
	transport_commit(c->transport);
	if (left_out > 0)
		ctl_take_spares(c);
	ctl_progress(c, false);
	ctl_heartbeat_start(c);
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
	ctl_summary(c);
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
	ctl_report_lost(c);
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
	loop_free(loop); /* puts the signals back */
	return status;
}
