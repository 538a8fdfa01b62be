/* ctl/straggler.c — the controller's side of straggler detection: the
 * agents' METRICS frames feed the detector (model/straggler_rule.c, which
 * says the rule), its verdicts become a `straggler` event, a terminal
 * line, a note against the node (ctl_node_note) and, with
 * health.straggler: evict, the node's eviction at the next checkpoint
 * boundary or restart, whichever comes first.
 *
 * Nothing here changes the job's lifecycle directly: the eviction is a
 * CTL_EV_STRAGGLER posted when a new complete checkpoint appears (polled
 * on the metrics tick), handled by ctl/table.c's table (RUN: the node is
 * evicted with reason "straggler" and the attempt fails, so recovery
 * takes a spare), and ctl/recover.c evicts a node still marked when
 * an attempt fails for another reason first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/ctl_int.h"
#include "herd/checkpoint.h"
#include "launcher/model/straggler_rule.h"

/* Verdicts taken from one evaluation. */
#define VERDICTS_MAX 16

struct ctl_straggler {
	struct straggler *det;
	int attempt;	  /* the attempt det judges */
	char *ckpt_base;  /* newest checkpoint when an eviction was decided */
	bool ckpt_posted; /* the boundary's events are posted */
};

/* The newest complete checkpoint now (NULL: none or no checkpoint.dir). */
static char *newest_checkpoint(const struct ctl *c)
{
	const struct spec *s = c->spec;
	struct checkpoint_result res;
	struct herd_err err;
	char *path = NULL;

	if (!s->checkpoint.dir)
		return NULL;
	herd_err_clear(&err);
	memset(&res, 0, sizeof(res));
	if (checkpoint_find(s->checkpoint.dir, s->checkpoint.latest_file,
			    s->checkpoint.pattern,
			    s->checkpoint.complete_marker, &res, &err) == 0 &&
	    res.path)
		path = strdup(res.path);
	checkpoint_result_free(&res);
	return path;
}

static struct ctl_straggler *cs_get(struct ctl *c)
{
	struct ctl_straggler *cs = c->straggler;
	long interval;

	if (cs)
		return cs;
	if (!(cs = calloc(1, sizeof(*cs))))
		return NULL;
	interval = spec_metrics_interval_ms(c->spec, c->n_nodes);
	cs->det = straggler_new(c->n_nodes, c->spec->health.straggler_ratio,
				c->spec->health.straggler_window_ms,
				3 * (int64_t)interval);
	if (!cs->det) {
		free(cs);
		return NULL;
	}
	c->straggler = cs;
	return cs;
}

void ctl_straggler_free(struct ctl *c)
{
	struct ctl_straggler *cs = c->straggler;

	if (!cs)
		return;
	straggler_free(cs->det);
	free(cs->ckpt_base);
	free(cs);
	c->straggler = NULL;
}

static int members_up(const struct ctl *c)
{
	int k = 0;

	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].member && c->nodes[i].state == NODE_UP)
			k++;
	return k;
}

static int spares_left(const struct ctl *c)
{
	int k = 0;

	for (int i = 0; i < c->n_nodes; i++) {
		const struct node *n = &c->nodes[i];

		if (n->state == NODE_SPARE ||
		    (n->state == NODE_UP && !n->member))
			k++;
	}
	return k;
}

bool ctl_straggler_can_evict(struct ctl *c, bool restarting, char *why,
			     size_t size)
{
	int up = members_up(c), spares = spares_left(c), marked = 0;
	int after, missing;

	/* Other members marked to go count as gone already. */
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].straggler_evict && c->nodes[i].member &&
		    c->nodes[i].state == NODE_UP)
			marked++;
	if (!restarting && c->attempt >= 1 + c->spec->restart.max) {
		snprintf(why, size, "no restart left, restart.max is %d",
			 c->spec->restart.max);
		return false;
	}
	/* The members once this one and the marked ones are out, and the
	 * spares are in (take_spares fills up to the job's size). */
	after = up - marked - 1 + spares;
	if (after > c->want_nodes)
		after = c->want_nodes;
	if (after < c->min_nodes) {
		snprintf(why, size,
			 "no spare%s, and nodes.min %d needs all %d node%s",
			 marked ? " left for it" : "", c->min_nodes, up,
			 up == 1 ? "" : "s");
		return false;
	}
	/* A spare is left for it after the members already missing and
	 * the other marked ones took theirs. */
	missing = c->want_nodes - (up - marked);
	snprintf(why, size, "%s", spares > missing ? "spare" : "fewer nodes");
	return true;
}

/* "10s", "1.5s", "2m". */
static void fmt_window(long ms, char *buf, size_t size)
{
	if (ms >= 60000 && ms % 60000 == 0)
		snprintf(buf, size, "%ldm", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, size, "%lds", ms / 1000);
	else
		snprintf(buf, size, "%.1fs", (double)ms / 1000);
}

static void verdict(struct ctl *c, struct ctl_straggler *cs,
		    const struct straggler_verdict *v)
{
	struct node *n = &c->nodes[v->node];
	bool evict = c->spec->health.straggler == SPEC_STRAGGLER_EVICT;
	char window[32], tail[256] = "", reason[256], whynot[160];
	json_t *ranks = json_array();

	fmt_window(c->spec->health.straggler_window_ms, window, sizeof(window));
	if (evict) {
		if (ctl_straggler_can_evict(c, false, whynot, sizeof(whynot))) {
			bool spare = strcmp(whynot, "spare") == 0;

			if (!c->spec->checkpoint.dir)
				snprintf(tail, sizeof(tail),
					 "; it will be %s at the next restart",
					 spare ? "replaced" : "left out");
			else
				snprintf(tail, sizeof(tail),
					 "; it will be %s at the next "
					 "checkpoint",
					 spare ? "replaced" : "left out");
			if (!spare)
				snprintf(tail + strlen(tail),
					 sizeof(tail) - strlen(tail),
					 " (no spare; the job goes on with "
					 "fewer nodes, nodes.min %d)",
					 c->min_nodes);
			if (!n->straggler_evict) {
				bool first = true;

				for (int i = 0; i < c->n_nodes; i++)
					if (c->nodes[i].straggler_evict)
						first = false;
				n->straggler_evict = true;
				if (first) {
					free(cs->ckpt_base);
					cs->ckpt_base = newest_checkpoint(c);
					cs->ckpt_posted = false;
				}
			}
		} else {
			evict = false;
			snprintf(tail, sizeof(tail),
				 "; herd cannot replace it (%s), so it "
				 "stays: warning only",
				 whynot);
		}
	}
	for (int r = 0; r < n->n_ranks; r++)
		json_array_append_new(ranks, json_integer(n->first_rank + r));
	events_emit(
	    c->ev, "straggler",
	    json_pack("{s:s, s:o, s:f, s:I, s:I, s:I, s:s, s:s, s:i}", "host",
		      n->host, "ranks", ranks, "ratio",
		      (double)(int64_t)(v->ratio * 100 + 0.5) / 100, "node_ms",
		      (json_int_t)(v->node_ms + 0.5), "median_ms",
		      (json_int_t)(v->median_ms + 0.5), "window_ms",
		      (json_int_t)c->spec->health.straggler_window_ms, "source",
		      straggler_source_name(v->source), "action",
		      evict ? "evict" : "warn", "attempt", c->attempt));
	snprintf(reason, sizeof(reason),
		 "its ranks take %.1fx the median step time (%.0f ms vs %.0f "
		 "ms) for %s",
		 v->ratio, v->node_ms, v->median_ms, window);
	fprintf(stderr, "herd: node %s is a straggler: %s%s\n", n->host, reason,
		tail);
	ctl_node_note(c, n, "straggler", reason);
}

static void feed(struct straggler *det, int node, const json_t *body)
{
	json_int_t t = json_integer_value(json_object_get(body, "t"));
	const json_t *e;
	size_t i;

	json_array_foreach(json_object_get(body, "ranks"), i, e)
	{
		const json_t *tj = json_object_get(e, "touches");
		struct straggler_obs o = {0};

		if (!json_is_integer(tj))
			continue;
		o.has_touches = true;
		o.touches = json_integer_value(tj);
		straggler_sample(
		    det, node,
		    (int)json_integer_value(json_object_get(e, "rank")), t, &o);
	}
	json_array_foreach(json_object_get(body, "train"), i, e)
	{
		const json_t *vals = json_object_get(e, "values");
		const json_t *st = json_object_get(vals, "step_time");
		const json_t *step = json_object_get(vals, "step");
		struct straggler_obs o = {0};

		if (json_is_number(st)) {
			o.has_step_time = true;
			o.step_time_s = json_number_value(st);
		}
		if (json_is_number(step)) {
			o.has_step = true;
			o.step = json_number_value(step);
		}
		if (o.has_step_time || o.has_step)
			straggler_sample(
			    det, node,
			    (int)json_integer_value(json_object_get(e, "rank")),
			    t, &o);
	}
}

void ctl_straggler_frame(struct ctl *c, struct node *n, const json_t *body)
{
	struct straggler_verdict v[VERDICTS_MAX];
	struct ctl_straggler *cs;
	int k;

	if (c->spec->health.straggler == SPEC_STRAGGLER_OFF ||
	    !ctl_serves(c, CTL_SERVE_ATTEMPT) || c->attempt < 1 ||
	    json_integer_value(json_object_get(body, "attempt")) !=
		c->attempt ||
	    !(cs = cs_get(c)))
		return;
	if (cs->attempt != c->attempt) {
		straggler_reset(cs->det);
		cs->attempt = c->attempt;
		free(cs->ckpt_base);
		cs->ckpt_base = NULL;
		cs->ckpt_posted = false;
	}
	feed(cs->det, (int)(n - c->nodes), body);
	for (int i = 0; i < c->n_nodes; i++) {
		const struct node *m = &c->nodes[i];

		straggler_set_active(cs->det, i,
				     m->member && m->state == NODE_UP &&
					 m->n_ranks > 0);
	}
	k = straggler_eval(cs->det, loop_now_ms(), v, VERDICTS_MAX);
	for (int i = 0; i < k; i++)
		verdict(c, cs, &v[i]);
}

void ctl_straggler_tick(struct ctl *c)
{
	struct ctl_straggler *cs = c->straggler;
	bool pending = false;
	char *now;

	if (!cs || !ctl_serves(c, CTL_SERVE_ATTEMPT) || cs->ckpt_posted ||
	    !c->spec->checkpoint.dir)
		return;
	for (int i = 0; i < c->n_nodes; i++)
		pending |= c->nodes[i].straggler_evict;
	if (!pending)
		return;
	now = newest_checkpoint(c);
	if (now && (!cs->ckpt_base || strcmp(now, cs->ckpt_base))) {
		char why[600];

		cs->ckpt_posted = true;
		snprintf(why, sizeof(why), "checkpoint %.500s is complete",
			 now);
		for (int i = 0; i < c->n_nodes; i++)
			if (c->nodes[i].straggler_evict)
				ctl_post(c, CTL_EV_STRAGGLER, &c->nodes[i], 0,
					 why);
	}
	free(now);
}
