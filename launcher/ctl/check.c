/* ctl/check.c — the health gate (issue 14): `herd check` and
 * health.preflight.
 *
 * The controller (ctl/ctl.c) enters CTL_PREFLIGHT once the nodes are up and
 * sends every member a CHECK (ctl_check_send); each agent answers with its
 * checks (agent/check.c).  What one node cannot judge alone is judged
 * here, across the answers (ctl_check_judge):
 *  - clock: the agent's clock against herd's, NTP's way: offset = agent's
 *    time - the midpoint of the round trip (the time the agent held the
 *    CHECK taken out); over CHECK_CLOCK_MAX_MS is a failure;
 *  - rdma: each port's rate against the highest rate of the same port
 *    name on the other checked nodes;
 *  - agent: a node whose agent did not start or answer fails this one,
 *    with the transport's words.
 * `herd check` then runs the network probe (ctl_netprobe_step): the
 * nodes in a ring, each pair moving CHECK_PROBE_BYTES one way, then the other
 * (agent/netprobe.c), the pairs of a round disjoint; and prints the table
 * (ctl_check_print).  Preflight acts on the verdicts in ctl/ctl.c. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/ctl_int.h"

/* The clock check's bound: 1 s, far beyond what NTP keeps a cluster to
 * (milliseconds) and below what breaks a job (TLS, Kerberos, files whose
 * times lie, logs that cannot be lined up). */
#define CHECK_CLOCK_MAX_MS 1000
/* health.check_command is killed after this long. */
#define CHECK_SCRIPT_TIMEOUT_MS 60000
/* An agent that has not answered CHECK this long after the script's
 * timeout is failed ("agent"). */
#define CHECK_ANSWER_SLACK_MS 15000
/* The network probe: 32 MiB one way per transfer, at most 2 s (5 s a
 * round with its set-up): tens of ms per transfer on a healthy link, a
 * few seconds for the whole ring.  4 MiB (a few ms) proved too short to
 * time on a busy machine: one preemption of the sender halved a rate. */
#define CHECK_PROBE_BYTES      (32LL << 20)
#define CHECK_PROBE_TIMEOUT_MS 2000
#define CHECK_PROBE_ROUND_MS   5000
/* A link is slow below a fifth of the typical rate (the median of the
 * nodes' best links).  Not health.straggler_ratio (1.3): transfers of a
 * few MiB vary by up to 3x between healthy links on a busy machine
 * (measured on the test cluster: 190 to 810 MB/s); a port that
 * negotiated a lower speed, a bad cable or a rate limit is off by far
 * more. */
#define CHECK_PROBE_SLOW_RATIO 5.0

/* The columns of the table, in order. */
static const char *const check_cols[] = {"agent", "workdir", "checkpoint",
					 "clock", "gpus",    "rdma",
					 "net",	  "script",  "network"};
#define N_COLS	    (sizeof(check_cols) / sizeof(check_cols[0]))
#define COL_NETWORK (N_COLS - 1)

struct verdict {
	const char *status; /* "ok", "fail", "skipped", NULL: not run */
	char reason[512];
	char value[512];
};

struct check_node {
	bool sent;    /* CHECK went out in this gate */
	bool pending; /* no answer yet */
	bool answered;
	bool failed; /* the agent failed (fail_why) */
	char fail_why[512];
	json_t *checks; /* the answer's checks */
	int64_t sent_wall, recv_wall, agent_t, held_ms;
	int64_t offset_ms;
	struct verdict v[N_COLS];
	bool judged;
	/* the network probe */
	char addr[64];	 /* its address on the job's network */
	int probe_index; /* in the ring, -1: not probed */
};

/* One transfer: b sends to a.  Transfers 2L and 2L + 1 are link L's two
 * directions. */
struct probe_edge {
	int a, b;  /* node indexes (a listens and receives, b
		    * connects and sends) */
	int round; /* 1.. */
	int port;  /* a's, once it listens */
	bool connect_sent;
	bool got_a, got_b;
	long long rx_a, us_a, rx_b, us_b; /* a received from b, ... */
	double prev; /* MB/s of the first try, when this is a retry */
	char err[256];
};

struct ctl_check {
	struct check_node *nodes; /* [c->n_nodes] */
	long timer;
	bool timed_out;
	/* RDMA: the highest rate seen per port name ("mlx5_0/1") */
	json_t *rdma_max;
	/* the network probe */
	bool probe_started, probe_done;
	char probe_skip[256];	  /* why it did not run ("" it ran) */
	struct probe_edge *edges; /* transfers */
	int n_edges, n_rounds, round;
	int n_links; /* n_edges / 2 */
	long round_timer;
	bool round_timed_out;
	bool retried;	/* the slow links were probed again */
	double typical; /* MB/s */
};

static struct ctl_check *state(struct ctl *c)
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
	struct ctl_check *s = state(c);

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

static bool checked_up(struct node *n)
{
	return n->member && n->state == NODE_UP;
}

/* The job's network as MASTER_ADDR would be on it: the first node's
 * address that every other checked node shares (ctl/launch.c's rule);
 * fills each node's addr.  NULL when there is none. */
static const char *job_network(struct ctl *c)
{
	struct node *first = NULL;
	size_t i;
	json_t *a;

	for (int k = 0; k < c->n_nodes && !first; k++)
		if (checked_up(&c->nodes[k]))
			first = &c->nodes[k];
	if (!first || c->local)
		return NULL;
	json_array_foreach(first->addrs, i, a)
	{
		const char *ad = json_string_value(json_object_get(a, "addr"));
		bool shared = ad != NULL;

		for (int k = 0; k < c->n_nodes && shared; k++)
			if (checked_up(&c->nodes[k]) &&
			    !addr_on(&c->nodes[k], ad))
				shared = false;
		if (shared) {
			for (int k = 0; k < c->n_nodes; k++)
				if (checked_up(&c->nodes[k]))
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
	struct ctl_check *s = state(c);

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
	net = job_network(c);
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

static void set_v(struct verdict *v, const char *status, const char *reason,
		  const char *value)
{
	v->status = status;
	snprintf(v->reason, sizeof(v->reason), "%s", reason ? reason : "");
	snprintf(v->value, sizeof(v->value), "%s", value ? value : "");
}

/* Adds a failure to a column (several RDMA ports may fail). */
static void add_fail(struct verdict *v, const char *reason)
{
	size_t len;

	if (!v->status || strcmp(v->status, "fail")) {
		set_v(v, "fail", reason, NULL);
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
		set_v(&cn->v[0], "fail",
		      cn->failed ? cn->fail_why
				 : "the agent did not answer CHECK in time",
		      NULL);
		cn->judged = true;
		return;
	}
	set_v(&cn->v[0], "ok", NULL, NULL);
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
			add_fail(&cn->v[k], reason ? reason : name);
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
			set_v(&cn->v[k], st, reason, value);
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
		set_v(&cn->v[col_of("clock")], "fail", r, why);
	} else {
		set_v(&cn->v[col_of("clock")], "ok", NULL, why);
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
		add_fail(&cn->v[col_of("rdma")], r);
	}
}

int ctl_check_judge(struct ctl *c)
{
	struct ctl_check *s = state(c);
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

/* --- the network probe ---------------------------------------------------- */

static void on_round_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->check->round_timer = 0;
	c->check->round_timed_out = true;
	ctl_post(c, CTL_EV_PROBED, NULL, 0, "timeout");
}

static void probe_send(struct ctl *c, struct node *n, int round, const char *op,
		       const char *addr, int port, const char *peer)
{
	json_t *b =
	    json_pack("{s:i, s:s, s:s, s:I, s:i}", "round", round, "op", op,
		      "addr", addr, "bytes", (json_int_t)CHECK_PROBE_BYTES,
		      "timeout_ms", CHECK_PROBE_TIMEOUT_MS);

	(void)c;
	if (port > 0)
		json_object_set_new(b, "port", json_integer(port));
	if (peer)
		json_object_set_new(b, "peer", json_string(peer));
	if (n->conn)
		ctl_send(c, n, PROTO_NETPROBE, b, NULL, 0);
	json_decref(b);
}

static void probe_round_start(struct ctl *c)
{
	struct ctl_check *s = c->check;

	s->round_timed_out = false;
	for (int e = 0; e < s->n_edges; e++) {
		struct probe_edge *pe = &s->edges[e];

		if (pe->round == s->round)
			probe_send(c, &c->nodes[pe->a], s->round, "listen",
				   s->nodes[pe->a].addr, 0,
				   s->nodes[pe->b].addr);
	}
	s->round_timer =
	    loop_timer_add(c->loop, CHECK_PROBE_ROUND_MS, on_round_timeout, c);
}

/* Puts transfer e in the first round from `first` on where neither of
 * its nodes has a transfer yet. */
static void assign_round(struct ctl_check *s, int e, int first)
{
	struct probe_edge *pe = &s->edges[e];

	for (int r = first;; r++) {
		bool busy = false;

		for (int k = 0; k < s->n_edges && !busy; k++)
			busy =
			    k != e && s->edges[k].round == r &&
			    (s->edges[k].a == pe->a || s->edges[k].b == pe->a ||
			     s->edges[k].a == pe->b || s->edges[k].b == pe->b);
		if (!busy) {
			pe->round = r;
			break;
		}
	}
	if (pe->round > s->n_rounds)
		s->n_rounds = pe->round;
}

/* The ring: links (0,1), (1,2), ..., (n-1,0) (one link for 2 nodes),
 * each probed both ways; every transfer goes in the first round where
 * neither of its nodes has one yet. */
static int probe_plan(struct ctl *c)
{
	struct ctl_check *s = c->check;
	int *ring, n = 0;

	if (!job_network(c)) {
		snprintf(s->probe_skip, sizeof(s->probe_skip), "%s",
			 c->local ? "local transport"
				  : "no network every node shares");
		return 0;
	}
	ring = calloc((size_t)c->n_nodes, sizeof(*ring));
	if (!ring)
		return 0;
	for (int i = 0; i < c->n_nodes; i++)
		if (checked_up(&c->nodes[i]) && s->nodes[i].answered &&
		    s->nodes[i].addr[0])
			ring[n++] = i;
	if (n < 2) {
		snprintf(s->probe_skip, sizeof(s->probe_skip),
			 "fewer than 2 nodes");
		free(ring);
		return 0;
	}
	s->n_links = n == 2 ? 1 : n;
	s->n_edges = 2 * s->n_links;
	s->edges = calloc((size_t)s->n_edges, sizeof(*s->edges));
	if (!s->edges) {
		free(ring);
		return 0;
	}
	for (int e = 0; e < s->n_edges; e++) {
		struct probe_edge *pe = &s->edges[e];
		int l = e / 2;

		pe->a = ring[e % 2 ? (l + 1) % n : l];
		pe->b = ring[e % 2 ? l : (l + 1) % n];
		assign_round(s, e, 1);
	}
	for (int k = 0; k < n; k++)
		s->nodes[ring[k]].probe_index = k;
	free(ring);
	return 1;
}

/* One transfer's rate in MB/s (bytes per microsecond); 0 on an error;
 * the better of two tries. */
static double xfer_rate(const struct probe_edge *pe)
{
	double cur = pe->err[0] || pe->us_a <= 0
			 ? 0
			 : (double)pe->rx_a / (double)pe->us_a;

	return cur > pe->prev ? cur : pe->prev;
}

/* Link l's rate: its slower direction; *err: the first error, or NULL. */
static double link_rate(const struct ctl_check *s, int l, const char **err)
{
	const struct probe_edge *x = &s->edges[2 * l],
				*y = &s->edges[2 * l + 1];
	double rx = xfer_rate(x), ry = xfer_rate(y);

	*err = x->err[0] ? x->err : y->err[0] ? y->err : NULL;
	return rx < ry ? rx : ry;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Each node's best link into best[] and the typical rate (the median of
 * those).  Returns -1 when out of memory. */
static int probe_typical(struct ctl *c, double *best)
{
	struct ctl_check *s = c->check;
	double *sorted = calloc((size_t)c->n_nodes, sizeof(*sorted));
	const char *err;
	int n = 0;

	if (!sorted)
		return -1;
	memset(best, 0, (size_t)c->n_nodes * sizeof(*best));
	for (int l = 0; l < s->n_links; l++) {
		double rate = link_rate(s, l, &err);
		int x = s->edges[2 * l].a, y = s->edges[2 * l].b;

		if (rate > best[x])
			best[x] = rate;
		if (rate > best[y])
			best[y] = rate;
	}
	for (int i = 0; i < c->n_nodes; i++)
		if (s->nodes[i].probe_index >= 0)
			sorted[n++] = best[i];
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
	s->typical = n ? sorted[n / 2] : 0;
	free(sorted);
	return 0;
}

/* After the first pass: a slow transfer that completed (all its bytes,
 * only slower than the others) is run again and keeps its better rate,
 * so that one preempted sender on a busy node is not named.  Transfers
 * cut at their deadline or failed are not retried.  Returns how many. */
static int probe_retry(struct ctl *c)
{
	struct ctl_check *s = c->check;
	double *best = calloc((size_t)c->n_nodes, sizeof(*best));
	int first = s->n_rounds + 1, k = 0;
	const char *err;

	if (!best || probe_typical(c, best) < 0) {
		free(best);
		return 0;
	}
	for (int l = 0; l < s->n_links; l++) {
		double ab = xfer_rate(&s->edges[2 * l]);
		double ba = xfer_rate(&s->edges[2 * l + 1]);
		/* 2 nodes: the faster direction is the reference */
		double ref = s->n_links == 1 ? (ab < ba ? ba : ab) : s->typical;

		if (link_rate(s, l, &err) * CHECK_PROBE_SLOW_RATIO >= ref)
			continue;
		for (int e = 2 * l; e <= 2 * l + 1; e++) {
			struct probe_edge *pe = &s->edges[e];

			/* A transfer that ran into its deadline is slow
			 * beyond what a busy machine explains: no retry. */
			if (pe->err[0] || pe->rx_a < CHECK_PROBE_BYTES ||
			    xfer_rate(pe) * CHECK_PROBE_SLOW_RATIO >= ref)
				continue;
			pe->prev = xfer_rate(pe);
			pe->port = 0;
			pe->connect_sent = pe->got_a = pe->got_b = false;
			pe->rx_a = pe->us_a = pe->rx_b = pe->us_b = 0;
			pe->err[0] = '\0';
			pe->round = 0;
			assign_round(s, e, first);
			k++;
		}
	}
	free(best);
	return k;
}

/* The verdicts of the probe. */
static void probe_judge(struct ctl *c)
{
	struct ctl_check *s = c->check;
	double *best = calloc((size_t)c->n_nodes, sizeof(*best));
	const char *err;
	char r[512];

	if (!best || probe_typical(c, best) < 0)
		goto out;
	for (int i = 0; i < c->n_nodes; i++) {
		struct check_node *cn = &s->nodes[i];
		char v[64];

		if (cn->probe_index < 0)
			continue;
		snprintf(v, sizeof(v), "%.0f MB/s", best[i]);
		set_v(&cn->v[COL_NETWORK], "ok", NULL, v);
	}
	if (s->n_links == 1) {
		/* Two nodes: one link; its two directions are compared. */
		struct probe_edge *x = &s->edges[0], *y = &s->edges[1];
		double rx = xfer_rate(x), ry = xfer_rate(y);
		double lo = rx < ry ? rx : ry, hi = rx < ry ? ry : rx;

		link_rate(s, 0, &err);
		if (err)
			snprintf(r, sizeof(r), "link %s-%s: %s",
				 c->nodes[x->a].host, c->nodes[x->b].host, err);
		else if (lo * CHECK_PROBE_SLOW_RATIO < hi)
			snprintf(r, sizeof(r),
				 "link %s-%s slow (%.1f MB/s one way, %.1f "
				 "the other; with 2 nodes herd cannot tell "
				 "which node)",
				 c->nodes[x->a].host, c->nodes[x->b].host, lo,
				 hi);
		else
			goto out;
		set_v(&s->nodes[x->a].v[COL_NETWORK], "fail", r, NULL);
		set_v(&s->nodes[x->b].v[COL_NETWORK], "fail", r, NULL);
		goto out;
	}
	/* A node all of whose links are slow is the slow node; a slow link
	 * between two nodes that are fine otherwise is named as a link. */
	for (int i = 0; i < c->n_nodes; i++) {
		if (s->nodes[i].probe_index < 0 ||
		    best[i] * CHECK_PROBE_SLOW_RATIO >= s->typical)
			continue;
		snprintf(r, sizeof(r),
			 "slow node: its links reach %.1f MB/s at best, "
			 "typical %.1f MB/s",
			 best[i], s->typical);
		set_v(&s->nodes[i].v[COL_NETWORK], "fail", r, NULL);
	}
	for (int l = 0; l < s->n_links; l++) {
		double rate = link_rate(s, l, &err);
		int x = s->edges[2 * l].a, y = s->edges[2 * l].b;

		if (rate * CHECK_PROBE_SLOW_RATIO >= s->typical)
			continue;
		if (best[x] * CHECK_PROBE_SLOW_RATIO < s->typical ||
		    best[y] * CHECK_PROBE_SLOW_RATIO < s->typical)
			continue; /* explained by a slow node */
		if (err)
			snprintf(r, sizeof(r), "link %s-%s: %s",
				 c->nodes[x].host, c->nodes[y].host, err);
		else
			snprintf(r, sizeof(r),
				 "slow link %s-%s (%.1f MB/s, typical %.1f "
				 "MB/s)",
				 c->nodes[x].host, c->nodes[y].host, rate,
				 s->typical);
		add_fail(&s->nodes[x].v[COL_NETWORK], r);
		add_fail(&s->nodes[y].v[COL_NETWORK], r);
	}
out:
	free(best);
}

void ctl_netprobe_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	struct ctl_check *s = c->check;
	int idx = (int)(n - c->nodes);
	int round = (int)json_integer_value(json_object_get(f->body, "round"));
	const char *op = json_string_value(json_object_get(f->body, "op"));
	const char *err = json_string_value(json_object_get(f->body, "error"));

	if (!s || !s->probe_started || s->probe_done || round != s->round)
		return; /* late */
	for (int e = 0; e < s->n_edges; e++) {
		struct probe_edge *pe = &s->edges[e];
		bool is_a = pe->a == idx;

		if (pe->round != round || (pe->a != idx && pe->b != idx))
			continue;
		if (!strcmp(op, "listening")) {
			pe->port = (int)json_integer_value(
			    json_object_get(f->body, "port"));
		} else {
			if (err && !pe->err[0])
				snprintf(pe->err, sizeof(pe->err), "%s: %s",
					 n->host, err);
			if (is_a) {
				pe->got_a = true;
				pe->rx_a = json_integer_value(
				    json_object_get(f->body, "rx_bytes"));
				pe->us_a = json_integer_value(
				    json_object_get(f->body, "rx_us"));
			} else {
				pe->got_b = true;
				pe->rx_b = json_integer_value(
				    json_object_get(f->body, "rx_bytes"));
				pe->us_b = json_integer_value(
				    json_object_get(f->body, "rx_us"));
			}
		}
		ctl_post(c, CTL_EV_PROBED, n, 0, NULL);
		return;
	}
}

int ctl_netprobe_step(struct ctl *c)
{
	struct ctl_check *s = state(c);
	bool round_done = true;

	if (!s || s->probe_done)
		return 0;
	if (c->opt->check_no_net) {
		snprintf(s->probe_skip, sizeof(s->probe_skip), "--no-net");
		s->probe_done = true;
		return 0;
	}
	if (!s->probe_started) {
		s->probe_started = true;
		if (!probe_plan(c)) {
			s->probe_done = true;
			return 0;
		}
		if (c->tty)
			fprintf(stderr,
				"herd: probing the network (%d transfers, "
				"%d rounds)\n",
				s->n_edges, s->n_rounds);
		s->round = 1;
		probe_round_start(c);
		return 1;
	}
	for (int e = 0; e < s->n_edges; e++) {
		struct probe_edge *pe = &s->edges[e];
		bool a_gone = c->nodes[pe->a].state != NODE_UP;
		bool b_gone = c->nodes[pe->b].state != NODE_UP;

		if (pe->round != s->round)
			continue;
		if (pe->port > 0 && !pe->connect_sent && !b_gone) {
			pe->connect_sent = true;
			probe_send(c, &c->nodes[pe->b], s->round, "connect",
				   s->nodes[pe->a].addr, pe->port, NULL);
		}
		if ((pe->got_a || a_gone) && (pe->got_b || b_gone))
			continue;
		if (a_gone || b_gone || s->round_timed_out) {
			if (!pe->err[0])
				snprintf(pe->err, sizeof(pe->err),
					 "no result within %d ms",
					 CHECK_PROBE_ROUND_MS);
			continue;
		}
		/* A listener whose partner got nothing to connect to (its
		 * listen failed) has its answer: the error. */
		if (pe->got_a && pe->err[0] && !pe->connect_sent)
			continue;
		round_done = false;
	}
	if (!round_done)
		return 1;
	if (s->round_timer) {
		loop_timer_del(c->loop, s->round_timer);
		s->round_timer = 0;
	}
	if (s->round >= s->n_rounds && !s->retried) {
		s->retried = true;
		probe_retry(c);
	}
	if (s->round < s->n_rounds) {
		s->round++;
		probe_round_start(c);
		return 1;
	}
	s->probe_done = true;
	probe_judge(c);
	return 0;
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
		json_t *o = json_pack(
		    "{s:s, s:s, s:f, s:f, s:f}", "a", c->nodes[x->a].host, "b",
		    c->nodes[x->b].host, "mb_per_s", link_rate(s, l, &err),
		    "a_to_b", xfer_rate(y), "b_to_a", xfer_rate(x));

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
	rc = json_dumpf(doc, stdout, JSON_INDENT(2)) < 0 ? -1 : 0;
	putchar('\n');
	json_decref(doc);
	return rc;
}

void ctl_check_print(struct ctl *c)
{
	struct ctl_check *s = state(c);
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
			set_v(v, "skipped", s->probe_skip, NULL);
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
