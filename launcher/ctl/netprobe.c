/* ctl/netprobe.c — herd check's network probe: the checked nodes in a
 * ring, each pair moving CHECK_PROBE_BYTES one way, then the other
 * (agent/netprobe.c), the pairs of a round disjoint; a link well below
 * the typical rate is probed once more before it is judged slow.  The
 * verdicts go to the "network" column of the gate (ctl/check.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/text.h"
#include "launcher/ctl/check_int.h"

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

	if (!check_job_network(c)) {
		snprintf(s->probe_skip, sizeof(s->probe_skip), "%s",
			 c->local ? "local transport"
				  : "no network every node shares");
		return 0;
	}
	ring = calloc((size_t)c->n_nodes, sizeof(*ring));
	if (!ring)
		return 0;
	for (int i = 0; i < c->n_nodes; i++)
		if (check_checked_up(&c->nodes[i]) && s->nodes[i].answered &&
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
double check_xfer_rate(const struct probe_edge *pe)
{
	double cur = pe->err[0] || pe->us_a <= 0
			 ? 0
			 : (double)pe->rx_a / (double)pe->us_a;

	return cur > pe->prev ? cur : pe->prev;
}

/* Link l's rate: its slower direction; *err: the first error, or NULL. */
double check_link_rate(const struct ctl_check *s, int l, const char **err)
{
	const struct probe_edge *x = &s->edges[2 * l],
				*y = &s->edges[2 * l + 1];
	double rx = check_xfer_rate(x), ry = check_xfer_rate(y);

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
		double rate = check_link_rate(s, l, &err);
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
		double ab = check_xfer_rate(&s->edges[2 * l]);
		double ba = check_xfer_rate(&s->edges[2 * l + 1]);
		/* 2 nodes: the faster direction is the reference */
		double ref = s->n_links == 1 ? (ab < ba ? ba : ab) : s->typical;

		if (check_link_rate(s, l, &err) * CHECK_PROBE_SLOW_RATIO >= ref)
			continue;
		for (int e = 2 * l; e <= 2 * l + 1; e++) {
			struct probe_edge *pe = &s->edges[e];

			/* A transfer that ran into its deadline is slow
			 * beyond what a busy machine explains: no retry. */
			if (pe->err[0] || pe->rx_a < CHECK_PROBE_BYTES ||
			    check_xfer_rate(pe) * CHECK_PROBE_SLOW_RATIO >= ref)
				continue;
			pe->prev = check_xfer_rate(pe);
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
		check_set_v(&cn->v[COL_NETWORK], "ok", NULL, v);
	}
	if (s->n_links == 1) {
		/* Two nodes: one link; its two directions are compared. */
		struct probe_edge *x = &s->edges[0], *y = &s->edges[1];
		double rx = check_xfer_rate(x), ry = check_xfer_rate(y);
		double lo = rx < ry ? rx : ry, hi = rx < ry ? ry : rx;

		check_link_rate(s, 0, &err);
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
		check_set_v(&s->nodes[x->a].v[COL_NETWORK], "fail", r, NULL);
		check_set_v(&s->nodes[x->b].v[COL_NETWORK], "fail", r, NULL);
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
		check_set_v(&s->nodes[i].v[COL_NETWORK], "fail", r, NULL);
	}
	for (int l = 0; l < s->n_links; l++) {
		double rate = check_link_rate(s, l, &err);
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
		check_add_fail(&s->nodes[x].v[COL_NETWORK], r);
		check_add_fail(&s->nodes[y].v[COL_NETWORK], r);
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
	const char *err;

	if (!s || !s->probe_started || s->probe_done || round != s->round)
		return; /* late */
	/* The error is shown in herd check's table. */
	herd_json_clean(json_object_get(f->body, "error"));
	err = json_string_value(json_object_get(f->body, "error"));
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
	struct ctl_check *s = check_state(c);
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
