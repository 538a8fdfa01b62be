/* model/metric_table.c — the controller's metrics table (metric_table.h):
 * each node's samples fed in, rates derived, the job-wide view. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/model/metric_table_int.h"

/* 10 s and 4 steps: tokens/s and steps/s are the tokens and steps made
 * between the samples that saw a step end, over at least this long and
 * at least this many steps (the longer of the two).  A rate from one
 * sample to the next is a count per interval, not a rate: steps longer
 * than the interval read 0 between two steps and a burst after. */
#define RATE_WINDOW_MS	  10000
#define RATE_WINDOW_STEPS 4
/* 5 %: the slowest node is named only when its step rate is this much
 * below the next slowest node's; closer is a tie (none named). */
#define SLOWEST_MARGIN 0.95

struct metrics *metrics_new(int n, const char *const *names)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->nodes = calloc(n > 0 ? (size_t)n : 1, sizeof(*m->nodes));
	if (!m->nodes)
		goto fail;
	m->n = n;
	for (int i = 0; i < n; i++)
		if (!(m->nodes[i].name = strdup(names[i])))
			goto fail;
	m->ds.full_ms = 10 * 60 * 1000;
	m->ds.mid_every_ms = 10 * 1000;
	m->ds.late_ms = 60 * 60 * 1000;
	m->ds.late_every_ms = 60 * 1000;
	m->ds.bytes_per_s = 64 * 1024;
	return m;
fail:
	metrics_free(m);
	return NULL;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n; i++) {
		free(m->nodes[i].name);
		json_decref(m->nodes[i].prev);
		json_decref(m->nodes[i].cur);
	}
	free(m->nodes);
	free(m);
}

struct metrics_downsample *metrics_downsample(struct metrics *m)
{
	return &m->ds;
}

void metrics_set_attempt(struct metrics *m, int attempt)
{
	m->attempt = attempt;
}

void metrics_set_state(struct metrics *m, int i, enum metrics_state state)
{
	if (i >= 0 && i < m->n)
		m->nodes[i].state = state;
}

/* --- reading bodies ------------------------------------------------------- */

uint64_t mtab_u64(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) && json_integer_value(v) > 0
		   ? (uint64_t)json_integer_value(v)
		   : 0;
}

bool mtab_num(json_t *o, const char *key, double *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_number(v))
		return false;
	*out = json_number_value(v);
	return isfinite(*out);
}

/* How much a cumulative counter grew: a lower value than before is a new
 * baseline (the agent or the rank started again from 0). */
static uint64_t grew(uint64_t prev, uint64_t cur, bool *reset)
{
	if (cur >= prev)
		return cur - prev;
	*reset = true;
	return cur;
}

/* The entry of array (objects) whose key equals that of like (a string or
 * integer key; key2 when not NULL must match too). */
json_t *mtab_match(json_t *array, json_t *like, const char *key,
		   const char *key2)
{
	size_t i;
	json_t *e;

	json_array_foreach(
	    array, i,
	    e) if (json_equal(json_object_get(e, key),
			      json_object_get(like, key)) &&
		   (!key2 || json_equal(json_object_get(e, key2),
					json_object_get(like, key2)))) return e;
	return NULL;
}

static const char *const net_drop_keys[] = {"rx_drops", "tx_drops"};
static const char *const rdma_err_keys[] = {"symbol_error", "rcv_errors"};

/* Net and RDMA: sums, rates and drops since the start. */
static void derive_net(struct mnode *nd, double dt_s)
{
	json_t *net = json_object_get(nd->cur, "net");
	json_t *pnet = nd->prev ? json_object_get(nd->prev, "net") : NULL;
	json_t *rdma = json_object_get(nd->cur, "rdma");
	json_t *prdma = nd->prev ? json_object_get(nd->prev, "rdma") : NULL;
	uint64_t drx = 0, dtx = 0;
	bool rate_ok = dt_s > 0;
	size_t i;
	json_t *d;

	nd->rx_bytes = nd->tx_bytes = nd->drops = nd->errors = 0;
	json_array_foreach(net, i, d)
	{
		json_t *p = pnet ? mtab_match(pnet, d, "dev", NULL) : NULL;
		bool reset = false;

		nd->rx_bytes += mtab_u64(d, "rx_bytes");
		nd->tx_bytes += mtab_u64(d, "tx_bytes");
		nd->errors +=
		    mtab_u64(d, "rx_errors") + mtab_u64(d, "tx_errors");
		for (size_t k = 0; k < 2; k++) {
			uint64_t v = mtab_u64(d, net_drop_keys[k]);

			nd->drops += v;
			/* The node's first sample is the baseline: drops
			 * from before the job are not the job's. */
			if (nd->prev)
				nd->drops_acc += grew(
				    mtab_u64(p, net_drop_keys[k]), v, &reset);
		}
		if (!p)
			continue; /* a new device: its rate next time */
		reset = false;
		drx += grew(mtab_u64(p, "rx_bytes"), mtab_u64(d, "rx_bytes"),
			    &reset);
		dtx += grew(mtab_u64(p, "tx_bytes"), mtab_u64(d, "tx_bytes"),
			    &reset);
		if (reset)
			rate_ok = false;
	}
	json_array_foreach(rdma, i, d)
	{
		json_t *p = prdma ? mtab_match(prdma, d, "dev", "port") : NULL;
		bool reset = false;

		for (size_t k = 0; k < 2; k++) {
			uint64_t v = mtab_u64(d, rdma_err_keys[k]);

			nd->drops += v;
			if (nd->prev)
				nd->drops_acc += grew(
				    mtab_u64(p, rdma_err_keys[k]), v, &reset);
		}
	}
	nd->has_rates = nd->prev && rate_ok;
	if (nd->has_rates) {
		nd->rx_rate = (double)drx / dt_s;
		nd->tx_rate = (double)dtx / dt_s;
	}
}

/* Ranks' CPU (percent of one core, summed) and RSS. */
static void derive_ranks(struct mnode *nd, double dt_s)
{
	json_t *ranks = json_object_get(nd->cur, "ranks");
	json_t *pranks = nd->prev ? json_object_get(nd->prev, "ranks") : NULL;
	uint64_t dcpu = 0;
	bool ok = nd->prev && dt_s > 0;
	size_t i;
	json_t *r;

	nd->rss_kib = 0;
	json_array_foreach(ranks, i, r)
	{
		json_t *p = pranks ? mtab_match(pranks, r, "rank", NULL) : NULL;
		bool reset = false;

		nd->rss_kib += mtab_u64(r, "rss_kb");
		if (!p)
			continue;
		dcpu +=
		    grew(mtab_u64(p, "cpu_ms"), mtab_u64(r, "cpu_ms"), &reset);
		if (reset)
			ok = false;
	}
	if (ok)
		nd->cpu_pct = (double)dcpu / 10.0 / dt_s; /* ms/s -> % */
	else
		nd->cpu_pct = -1;
}

/* Adds the sample at nd->cur_t to the rate window when it is the
 * attempt's first or saw the step or the tokens change. */
static void window_add(struct mnode *nd, bool same_attempt)
{
	int last = nd->n_win - 1;

	if (!same_attempt ||
	    (nd->has_step && last >= 0 && nd->win[last].has_step &&
	     nd->step < nd->win[last].step))
		nd->n_win = 0; /* a new attempt, or resumed further back */
	last = nd->n_win - 1;
	if (last >= 0 && nd->win[last].tokens == nd->tokens_acc &&
	    nd->win[last].has_step == nd->has_step &&
	    (!nd->has_step || nd->win[last].step == nd->step))
		return; /* nothing ended since */
	if (nd->n_win == 0) {
		nd->win_base = true;
	} else if (nd->n_win == RATE_WIN || (nd->win_base && nd->n_win == 2)) {
		/* Full; or a second step ended: the baseline (which holds
		 * the ranks' start-up) goes. */
		memmove(nd->win, nd->win + 1,
			(size_t)(nd->n_win - 1) * sizeof(nd->win[0]));
		nd->n_win--;
		nd->win_base = false;
	}
	nd->win[nd->n_win].t = nd->cur_t;
	nd->win[nd->n_win].step = nd->step;
	nd->win[nd->n_win].has_step = nd->has_step;
	nd->win[nd->n_win].tokens = nd->tokens_acc;
	nd->n_win++;
}

/* Tokens/s and steps/s from the rate window: what was made between its
 * first and last sample over the time between them.  While no step ends
 * the rate holds; once the wait is longer than two of the window's mean
 * step times, that wait counts too (a stalled job falls towards 0). */
static void window_rates(struct mnode *nd, bool any_tokens)
{
	int last = nd->n_win - 1, first = 0, sfirst;
	double span, gap, open, denom;

	nd->has_step_rate = nd->has_tokens_rate = false;
	if (nd->n_win < 2)
		return;
	while (first < last - 1 &&
	       nd->win[last].t - nd->win[first + 1].t >= RATE_WINDOW_MS &&
	       last - (first + 1) >= RATE_WINDOW_STEPS)
		first++;
	span = (double)(nd->win[last].t - nd->win[first].t);
	if (span <= 0)
		return;
	gap = span / (double)(last - first);
	open = (double)(nd->cur_t - nd->win[last].t);
	denom = span + (open > 2 * gap ? open - 2 * gap : 0);
	if (any_tokens) {
		nd->has_tokens_rate = true;
		nd->tokens_rate =
		    (double)(nd->win[last].tokens - nd->win[first].tokens) *
		    1000.0 / denom;
	}
	/* Steps from the first sample that had one (a baseline before the
	 * first record has none: a resumed job starts far from 0). */
	for (sfirst = first; sfirst < last && !nd->win[sfirst].has_step;)
		sfirst++;
	if (nd->has_step && sfirst < last &&
	    nd->win[last].t > nd->win[sfirst].t) {
		span = (double)(nd->win[last].t - nd->win[sfirst].t);
		gap = span / (double)(last - sfirst);
		denom = span + (open > 2 * gap ? open - 2 * gap : 0);
		nd->has_step_rate = true;
		nd->step_rate =
		    (double)(nd->win[last].step - nd->win[sfirst].step) *
		    1000.0 / denom;
	}
}

/* Training values of the current attempt: step (min over ranks), loss
 * and its step (lowest rank's), tokens (summed, counted since the job
 * started), and the rates over the window. */
static void derive_train(struct mnode *nd, bool same_attempt)
{
	json_t *train = json_object_get(nd->cur, "train");
	json_t *ptrain = nd->prev && same_attempt
			     ? json_object_get(nd->prev, "train")
			     : NULL;
	uint64_t dtok = 0;
	bool any_tokens = false;
	size_t i;
	json_t *r;

	nd->has_step = nd->has_loss = nd->has_loss_step = false;
	nd->loss_rank = -1;
	json_array_foreach(train, i, r)
	{
		json_t *vals = json_object_get(r, "values");
		json_t *p = ptrain ? mtab_match(ptrain, r, "rank", NULL) : NULL;
		int rank = (int)json_integer_value(json_object_get(r, "rank"));
		double v;

		if (mtab_num(vals, "step", &v) &&
		    (!nd->has_step || (int64_t)v < nd->step)) {
			nd->has_step = true;
			nd->step = (int64_t)v;
		}
		if (mtab_num(vals, "loss", &v) &&
		    (nd->loss_rank < 0 || rank < nd->loss_rank)) {
			nd->has_loss = true;
			nd->loss = v;
			nd->loss_rank = rank;
			nd->has_loss_step = mtab_num(vals, "step", &v);
			if (nd->has_loss_step)
				nd->loss_step = (int64_t)v;
		}
		if (mtab_num(vals, "tokens", &v) && v >= 0) {
			double pv = 0;
			bool reset = false;

			any_tokens = true;
			if (p)
				mtab_num(json_object_get(p, "values"), "tokens",
					 &pv);
			dtok += grew(pv > 0 ? (uint64_t)pv : 0, (uint64_t)v,
				     &reset);
		}
	}
	nd->tokens_acc += dtok;
	window_add(nd, same_attempt);
	window_rates(nd, any_tokens);
}

int metrics_feed(struct metrics *m, int i, json_t *body)
{
	struct mnode *nd;
	int64_t t, prev_t;
	int attempt;
	bool same_attempt;
	double dt_s;

	if (i < 0 || i >= m->n || !json_is_object(body))
		return -1;
	nd = &m->nodes[i];
	t = json_integer_value(json_object_get(body, "t"));
	attempt = (int)json_integer_value(json_object_get(body, "attempt"));
	if (nd->cur && t <= nd->cur_t)
		return -1;
	prev_t = nd->cur ? nd->cur_t : t;
	same_attempt = nd->cur && attempt == nd->cur_attempt;
	json_decref(nd->prev);
	nd->prev = nd->cur;
	nd->cur = json_incref(body);
	nd->cur_t = t;
	nd->cur_attempt = attempt;
	dt_s = (double)(t - prev_t) / 1000.0;
	derive_net(nd, dt_s);
	derive_ranks(nd, dt_s);
	derive_train(nd, same_attempt);
	return 0;
}

/* --- job-wide ------------------------------------------------------------- */

/* Whether node nd's training values count for the job now. */
bool mtab_trains(const struct metrics *m, const struct mnode *nd)
{
	return nd->state == METRICS_UP && nd->cur &&
	       nd->cur_attempt == m->attempt;
}

void metrics_job(struct metrics *m, struct metrics_job *job)
{
	const struct mnode *slow = NULL;
	double next_slow = 0;
	bool has_next = false;
	int n_gpu = 0, loss_rank = -1;
	double util_sum = 0;

	memset(job, 0, sizeof(*job));
	job->attempt = m->attempt;
	for (int i = 0; i < m->n; i++) {
		const struct mnode *nd = &m->nodes[i];
		size_t k;
		json_t *g;

		job->nodes_up += nd->state == METRICS_UP;
		job->nodes_failed += nd->state == METRICS_FAILED;
		job->spares += nd->state == METRICS_SPARE;
		job->drops += nd->drops_acc;
		job->tokens_total += nd->tokens_acc;
		job->has_tokens |= nd->tokens_acc > 0;
		if (nd->state != METRICS_UP || !nd->cur)
			continue;
		if (nd->has_rates) {
			job->has_net = true;
			job->rx_bytes_per_s += nd->rx_rate;
			job->tx_bytes_per_s += nd->tx_rate;
		}
		json_array_foreach(json_object_get(nd->cur, "gpus"), k, g)
		{
			json_t *u = json_object_get(g, "util_pct");
			int v;

			if (!json_is_integer(u))
				continue;
			v = (int)json_integer_value(u);
			if (!n_gpu || v < job->gpu_util_min)
				job->gpu_util_min = v;
			util_sum += v;
			n_gpu++;
		}
		if (!mtab_trains(m, nd))
			continue;
		if (nd->has_step && (!job->has_step || nd->step < job->step)) {
			job->has_step = true;
			job->step = nd->step;
		}
		if (nd->has_loss &&
		    (loss_rank < 0 || nd->loss_rank < loss_rank)) {
			job->has_loss = true;
			job->loss = nd->loss;
			job->has_loss_step = nd->has_loss_step;
			job->loss_step = nd->loss_step;
			loss_rank = nd->loss_rank;
		}
		if (nd->has_tokens_rate) {
			job->has_tokens_rate = true;
			job->tokens_per_s += nd->tokens_rate;
		}
		if (nd->has_step_rate) {
			if (!slow || nd->step_rate < slow->step_rate) {
				if (slow) {
					next_slow = slow->step_rate;
					has_next = true;
				}
				slow = nd;
			} else if (!has_next || nd->step_rate < next_slow) {
				next_slow = nd->step_rate;
				has_next = true;
			}
			job->has_steps_rate = true;
		}
	}
	if (n_gpu) {
		job->has_gpu = true;
		job->gpu_util_avg = util_sum / n_gpu;
	}
	if (slow) {
		job->steps_per_s = slow->step_rate;
		/* Named only when clearly the slowest: a tie names none. */
		if (has_next && slow->step_rate < SLOWEST_MARGIN * next_slow)
			job->slowest = slow->name;
	}
	m->slowest = job->slowest;
}
