/* ctl/check.c — the health gate: `herd check` and health.preflight.
 *
 * The controller (ctl/preflight.c) enters CTL_PREFLIGHT once the nodes are up
 * and sends every member a CHECK (ctl_check_send); each agent answers with its
 * checks (agent/check.c).  What one node cannot judge alone is judged
 * here, across the answers (ctl_check_judge):
 *  - clock: the agent's clock against herd's, NTP's way: offset = agent's
 *    time - the midpoint of the round trip (the time the agent held the
 *    CHECK taken out); over CHECK_CLOCK_MAX_MS is a failure;
 *  - rdma: each port's rate against the highest rate of the same port
 *    name on the other checked nodes;
 *  - agent: a node whose agent did not start or answer fails this one,
 *    with the transport's words.
 * `herd check` then runs the network probe (ctl/netprobe.c) and prints
 * the table (ctl_check_print).  Preflight acts on the verdicts in
 * ctl/preflight.c. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/text.h"
#include "launcher/ctl/check_int.h"

struct ctl_check *check_state(struct ctl *c)
{
	if (!c->check) {
		c->check = calloc(1, sizeof(*c->check));
		if (c->check)
			c->check->nodes =
			    calloc((size_t)(c->n_nodes ? c->n_nodes : 1),
				   sizeof(struct check_node));
		if (c->check && !c->check->nodes) {
			free(c->check);
			c->check = NULL;
		}
		if (c->check)
			c->check->rdma_max = json_object();
	}
	return c->check;
}

static struct check_node *cnode(struct ctl *c, struct node *n)
{
	struct ctl_check *s = check_state(c);

	return s ? &s->nodes[n - c->nodes] : NULL;
}

/* GPUs node n is expected to have: with bind.gpu auto, those its
 * topology (hwloc) shows, else slurm.gpus_per_node; -1: none asked for
 * (then a node without NVML is "skipped", not failed). */
static int expected_gpus(struct ctl *c, struct node *n)
{
	json_t *g = json_object_get(n->topo, "gpus");

	if (c->spec->bind.gpu == SPEC_BIND_GPU_AUTO && json_array_size(g) > 0)
		return (int)json_array_size(g);
	if (c->spec->slurm.gpus_per_node > 0 &&
	    c->spec->slurm.gpus_per_node <= PROTO_METRICS_DEVS_MAX)
		return (int)c->spec->slurm.gpus_per_node;
	return -1;
}

/* Node n's address on addr's network, or NULL. */
static const char *addr_on(struct node *n, const char *addr)
{
	return json_string_value(
	    json_object_get(ctl_node_addr_on(n, addr), "addr"));
}

bool check_checked_up(struct node *n)
{
	return n->member && n->state == NODE_UP;
}

/* The job's network as MASTER_ADDR would be on it: the first node's
 * address that every other checked node shares (ctl/launch.c's rule);
 * fills each node's addr.  NULL when there is none. */
const char *check_job_network(struct ctl *c)
{
	struct node *first = NULL;
	size_t i;
	json_t *a;

	for (int k = 0; k < c->n_nodes && !first; k++)
		if (check_checked_up(&c->nodes[k]))
			first = &c->nodes[k];
	if (!first || c->local)
		return NULL;
	json_array_foreach(first->addrs, i, a)
	{
		const char *ad = json_string_value(json_object_get(a, "addr"));
		bool shared = ad != NULL;

		for (int k = 0; k < c->n_nodes && shared; k++)
			if (check_checked_up(&c->nodes[k]) &&
			    !addr_on(&c->nodes[k], ad))
				shared = false;
		if (shared) {
			for (int k = 0; k < c->n_nodes; k++)
				if (check_checked_up(&c->nodes[k]))
					snprintf(
					    c->check->nodes[k].addr,
					    sizeof(c->check->nodes[k].addr),
					    "%s", addr_on(&c->nodes[k], ad));
			return ad;
		}
	}
	return NULL;
}

static void on_gate_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->check->timer = 0;
	c->check->timed_out = true;
	/* Who has not answered fails "agent" (judge_node). */
	for (int i = 0; i < c->n_nodes; i++)
		c->check->nodes[i].pending = false;
	ctl_post(c, CTL_EV_CHECKED, NULL, 0, "timeout");
}

void ctl_check_begin(struct ctl *c)
{
	struct ctl_check *s = check_state(c);

	if (!s)
		return;
	for (int i = 0; i < c->n_nodes; i++) {
		struct check_node *cn = &s->nodes[i];
		bool failed = cn->failed;
		char why[sizeof(cn->fail_why)];

		/* A node that failed before the gate keeps its reason. */
		memcpy(why, cn->fail_why, sizeof(why));
		json_decref(cn->checks);
		memset(cn, 0, sizeof(*cn));
		cn->probe_index = -1;
		if (failed && c->nodes[i].state != NODE_UP) {
			cn->failed = true;
			memcpy(cn->fail_why, why, sizeof(why));
		}
	}
	json_object_clear(s->rdma_max);
	s->timed_out = false;
}

bool ctl_check_sent(struct ctl *c, struct node *n)
{
	struct check_node *cn = cnode(c, n);

	return !cn || cn->sent;
}

void ctl_check_send(struct ctl *c, struct node *n)
{
	struct check_node *cn = cnode(c, n);
	const struct spec *sp = c->spec;
	const char *net;
	json_t *body;

	if (!cn)
		return;
	net = check_job_network(c);
	body = json_pack("{s:I, s:i, s:I, s:I}", "min_free",
			 (json_int_t)sp->health.min_free, "gpus",
			 expected_gpus(c, n), "check_timeout_ms",
			 (json_int_t)CHECK_SCRIPT_TIMEOUT_MS, "t_ms",
			 (json_int_t)loop_wall_ms());
	if (!body)
		return;
	if (sp->launch.workdir)
		json_object_set_new(body, "workdir",
				    json_string(sp->launch.workdir));
	if (sp->checkpoint.dir)
		json_object_set_new(body, "checkpoint_dir",
				    json_string(sp->checkpoint.dir));
	if (sp->health.check_command)
		json_object_set_new(body, "check_command",
				    json_string(sp->health.check_command));
	if (net)
		json_object_set_new(body, "master_addr", json_string(net));
	cn->sent = true;
	cn->pending = true;
	/* The gate waits for the last CHECK sent (a spare's comes later). */
	if (c->check->timer)
		loop_timer_del(c->loop, c->check->timer);
	c->check->timer = loop_timer_add(
	    c->loop, CHECK_SCRIPT_TIMEOUT_MS + CHECK_ANSWER_SLACK_MS,
	    on_gate_timeout, c);
	cn->sent_wall = json_integer_value(json_object_get(body, "t_ms"));
	ctl_send(c, n, PROTO_CHECK, body, NULL, 0);
	json_decref(body);
}

int ctl_check_pending(struct ctl *c)
{
	int k = 0;

	for (int i = 0; c->check && i < c->n_nodes; i++)
		if (c->check->nodes[i].pending)
			k++;
	return k;
}

void ctl_check_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	struct check_node *cn = cnode(c, n);

	if (!cn || !cn->pending)
		return; /* a late answer to a gate that is over */
	cn->pending = false;
	cn->answered = true;
	cn->recv_wall = loop_wall_ms();
	cn->agent_t = json_integer_value(json_object_get(f->body, "t_ms"));
	cn->held_ms = json_integer_value(json_object_get(f->body, "held_ms"));
	json_decref(cn->checks);
	cn->checks = json_incref(json_object_get(f->body, "checks"));
	/* Reasons, values and port names are printed in herd check's
	 * table and the preflight's lines. */
	herd_json_clean(cn->checks);
	ctl_post(c, CTL_EV_CHECKED, n, 0, NULL);
}

void ctl_check_node_failed(struct ctl *c, struct node *n, const char *why)
{
	struct check_node *cn;

	if (!c->check && !c->opt->check_only && !c->spec->health.preflight)
		return;
	if (!(cn = cnode(c, n)))
		return;
	cn->pending = false;
	if (!cn->failed) {
		cn->failed = true;
		snprintf(cn->fail_why, sizeof(cn->fail_why), "%s", why);
	}
}

void check_set_v(struct verdict *v, const char *status, const char *reason,
		 const char *value)
{
	v->status = status;
	snprintf(v->reason, sizeof(v->reason), "%s", reason ? reason : "");
	snprintf(v->value, sizeof(v->value), "%s", value ? value : "");
}

/* Adds a failure to a column (several RDMA ports may fail). */
void check_add_fail(struct verdict *v, const char *reason)
{
	size_t len;

	if (!v->status || strcmp(v->status, "fail")) {
		check_set_v(v, "fail", reason, NULL);
		return;
	}
	len = strlen(v->reason);
	snprintf(v->reason + len, sizeof(v->reason) - len, "; %s", reason);
}

static int col_of(const char *name)
{
	for (size_t i = 0; i < N_COLS; i++)
		if (!strcmp(check_cols[i], name))
			return (int)i;
	return -1;
}

/* One node's answer into its columns. */
static void judge_node(struct ctl *c, struct check_node *cn)
{
	struct ctl_check *s = c->check;
	size_t i;
	json_t *e;
	char why[128];

	if (cn->failed || !cn->answered) {
		check_set_v(&cn->v[0], "fail",
			    cn->failed
				? cn->fail_why
				: "the agent did not answer CHECK in time",
			    NULL);
		cn->judged = true;
		return;
	}
	check_set_v(&cn->v[0], "ok", NULL, NULL);
	json_array_foreach(cn->checks, i, e)
	{
		const char *name =
		    json_string_value(json_object_get(e, "name"));
		const char *st =
		    json_string_value(json_object_get(e, "status"));
		const char *reason =
		    json_string_value(json_object_get(e, "reason"));
		const char *value =
		    json_string_value(json_object_get(e, "value"));
		const char *port =
		    json_string_value(json_object_get(e, "port"));
		json_t *rate = json_object_get(e, "rate");
		int k = col_of(name);

		if (k < 0 || k == (int)COL_NETWORK || k == 0)
			continue; /* a check this herd does not know */
		if (!strcmp(st, "fail")) {
			check_add_fail(&cn->v[k], reason ? reason : name);
			continue;
		}
		if (cn->v[k].status && !strcmp(cn->v[k].status, "fail"))
			continue;
		if (!strcmp(name, "rdma") && port && rate) {
			json_t *m = json_object_get(s->rdma_max, port);
			double r = json_number_value(rate);

			if (!m || json_number_value(m) < r)
				json_object_set_new(s->rdma_max, port,
						    json_real(r));
		}
		if (!cn->v[k].status || !strcmp(st, "ok"))
			check_set_v(&cn->v[k], st, reason, value);
	}
	/* The clock: the midpoint of the round trip, less the time the
	 * agent held the CHECK. */
	cn->offset_ms =
	    cn->agent_t - (cn->sent_wall + cn->recv_wall - cn->held_ms) / 2;
	snprintf(why, sizeof(why), "%+" PRId64 " ms", cn->offset_ms);
	if (llabs((long long)cn->offset_ms) > CHECK_CLOCK_MAX_MS) {
		char r[160];

		snprintf(r, sizeof(r),
			 "clock %lld ms %s herd's (at most %d ms)",
			 llabs((long long)cn->offset_ms),
			 cn->offset_ms > 0 ? "ahead of" : "behind",
			 CHECK_CLOCK_MAX_MS);
		check_set_v(&cn->v[col_of("clock")], "fail", r, why);
	} else {
		check_set_v(&cn->v[col_of("clock")], "ok", NULL, why);
	}
	cn->judged = true;
}

/* RDMA ports slower than the same port on another checked node. */
static void judge_rdma(struct ctl *c, struct check_node *cn)
{
	size_t i;
	json_t *e;

	json_array_foreach(cn->checks, i, e)
	{
		const char *port =
		    json_string_value(json_object_get(e, "port"));
		json_t *rate = json_object_get(e, "rate");
		json_t *m;
		char r[256];

		if (!port || !rate ||
		    !(m = json_object_get(c->check->rdma_max, port)) ||
		    json_number_value(rate) >= json_number_value(m))
			continue;
		snprintf(r, sizeof(r),
			 "RDMA port %s at %g Gb/sec, others at %g Gb/sec", port,
			 json_number_value(rate), json_number_value(m));
		check_add_fail(&cn->v[col_of("rdma")], r);
	}
}

int ctl_check_judge(struct ctl *c)
{
	struct ctl_check *s = check_state(c);
	int bad = 0;

	if (!s)
		return 0;
	for (int i = 0; i < c->n_nodes; i++) {
		struct check_node *cn = &s->nodes[i];

		if ((cn->sent || cn->failed) && !cn->judged && !cn->pending)
			judge_node(c, cn);
	}
	for (int i = 0; i < c->n_nodes; i++)
		if (s->nodes[i].judged && s->nodes[i].answered)
			judge_rdma(c, &s->nodes[i]);
	for (int i = 0; i < c->n_nodes; i++)
		if (ctl_check_failure(c, &c->nodes[i], NULL))
			bad++;
	return bad;
}

const char *ctl_check_failure(struct ctl *c, struct node *n, const char **check)
{
	struct check_node *cn =
	    c->check ? &c->check->nodes[n - c->nodes] : NULL;

	if (!cn || !cn->judged)
		return NULL;
	for (size_t k = 0; k < N_COLS; k++) {
		if (cn->v[k].status && !strcmp(cn->v[k].status, "fail")) {
			if (check)
				*check = check_cols[k];
			return cn->v[k].reason;
		}
	}
	return NULL;
}

/* --- herd check's table ----------------------------------------------------
 */

static const char *shown(const struct verdict *v)
{
	if (!v->status)
		return "-";
	if (!strcmp(v->status, "fail"))
		return "FAIL";
	return v->status;
}

/* A column as wide as its name, and "skipped". */
static int col_w(size_t k)
{
	int len = (int)strlen(check_cols[k]);

	return len < 7 ? 7 : len;
}

static bool node_healthy(struct ctl *c, int i)
{
	return ctl_check_failure(c, &c->nodes[i], NULL) == NULL;
}

static int print_json(struct ctl *c, int healthy)
{
	struct ctl_check *s = c->check;
	json_t *doc = json_object(), *nodes = json_array(),
	       *links = json_array();
	int rc;

	for (int i = 0; i < c->n_nodes; i++) {
		struct check_node *cn = &s->nodes[i];
		json_t *checks = json_object();
		json_t *o =
		    json_pack("{s:s, s:b, s:o}", "host", c->nodes[i].host,
			      "healthy", node_healthy(c, i), "checks", checks);

		for (size_t k = 0; k < N_COLS; k++) {
			const struct verdict *v = &cn->v[k];
			json_t *e;

			if (!v->status)
				continue;
			e = json_pack("{s:s}", "status", v->status);
			if (v->reason[0])
				json_object_set_new(e, "reason",
						    json_string(v->reason));
			if (v->value[0])
				json_object_set_new(e, "value",
						    json_string(v->value));
			json_object_set_new(checks, check_cols[k], e);
		}
		if (cn->answered)
			json_object_set_new(o, "clock_offset_ms",
					    json_integer(cn->offset_ms));
		json_array_append_new(nodes, o);
	}
	for (int l = 0; l < s->n_links; l++) {
		const struct probe_edge *x = &s->edges[2 * l];
		const struct probe_edge *y = &s->edges[2 * l + 1];
		const char *err;
		/* x: b sends to a; y the other way */
		json_t *o =
		    json_pack("{s:s, s:s, s:f, s:f, s:f}", "a",
			      c->nodes[x->a].host, "b", c->nodes[x->b].host,
			      "mb_per_s", check_link_rate(s, l, &err), "a_to_b",
			      check_xfer_rate(y), "b_to_a", check_xfer_rate(x));

		if (err)
			json_object_set_new(o, "error", json_string(err));
		json_array_append_new(links, o);
	}
	json_object_set_new(doc, "nodes", nodes);
	json_object_set_new(doc, "healthy", json_integer(healthy));
	json_object_set_new(doc, "total", json_integer(c->n_nodes));
	json_object_set_new(doc, "links", links);
	if (s->probe_skip[0])
		json_object_set_new(doc, "network_skipped",
				    json_string(s->probe_skip));
	rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII) < 0
		 ? -1
		 : 0;
	putchar('\n');
	json_decref(doc);
	return rc;
}

void ctl_check_print(struct ctl *c)
{
	struct ctl_check *s = check_state(c);
	int healthy = 0, w = 4;

	if (!s) {
		fprintf(stderr, "herd: out of memory\n");
		c->status = 1;
		return;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		struct check_node *cn = &s->nodes[i];
		int len = (int)strlen(c->nodes[i].host);

		if (!cn->judged) /* never connected, never checked */
			judge_node(c, cn);
		if (len > w)
			w = len;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		struct verdict *v = &s->nodes[i].v[COL_NETWORK];

		if (s->probe_skip[0] && !v->status && s->nodes[i].answered)
			check_set_v(v, "skipped", s->probe_skip, NULL);
		healthy += node_healthy(c, i);
	}
	c->status = healthy == c->n_nodes ? 0 : 1;
	if (c->opt->check_json) {
		if (print_json(c, healthy) < 0)
			c->status = 1;
		fflush(stdout);
		return;
	}
	printf("%-*s", w, "HOST");
	for (size_t k = 0; k < N_COLS; k++)
		printf("  %-*s", k + 1 < N_COLS ? col_w(k) : 0, check_cols[k]);
	putchar('\n');
	for (int i = 0; i < c->n_nodes; i++) {
		struct check_node *cn = &s->nodes[i];

		printf("%-*s", w, c->nodes[i].host);
		for (size_t k = 0; k < N_COLS; k++)
			printf("  %-*s", k + 1 < N_COLS ? col_w(k) : 0,
			       shown(&cn->v[k]));
		putchar('\n');
		for (size_t k = 0; k < N_COLS; k++) {
			const struct verdict *v = &cn->v[k];

			if (v->status && !strcmp(v->status, "fail"))
				printf("  %s: %s\n", check_cols[k], v->reason);
			else if (c->opt->verbose && v->status &&
				 (v->reason[0] || v->value[0]))
				printf("  %s: %s%s%s\n", check_cols[k],
				       v->reason,
				       v->reason[0] && v->value[0] ? "; " : "",
				       v->value);
		}
	}
	if (s->probe_skip[0])
		printf("network probe skipped: %s\n", s->probe_skip);
	printf("%d of %d nodes healthy\n", healthy, c->n_nodes);
	fflush(stdout);
}

void ctl_check_free(struct ctl *c)
{
	struct ctl_check *s = c->check;

	if (!s)
		return;
	if (c->loop) {
		loop_timer_del(c->loop, s->timer);
		loop_timer_del(c->loop, s->round_timer);
	}
	for (int i = 0; i < c->n_nodes; i++)
		json_decref(s->nodes[i].checks);
	json_decref(s->rdma_max);
	free(s->nodes);
	free(s->edges);
	free(s);
	c->check = NULL;
}

void ctl_check_end(struct ctl *c)
{
	struct ctl_check *s = c->check;

	if (s && s->timer) {
		loop_timer_del(c->loop, s->timer);
		s->timer = 0;
	}
}
