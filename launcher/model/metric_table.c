/* metrics.c — the controller's metrics table (metrics.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/model/metric_table.h"

/* 64 samples at most in a node's rate window: 10 s at 150 ms. */
#define RATE_WIN 64
/* 10 s and 4 steps: tokens/s and steps/s are the tokens and steps made
 * between the samples that saw a step end, over at least this long and
 * at least this many steps (the longer of the two).  A rate from one
 * sample to the next is a count per interval, not a rate: steps longer
 * than the interval read 0 between two steps and a burst after. */
#define RATE_WINDOW_MS 10000
#define RATE_WINDOW_STEPS 4
/* 5 %: the slowest node is named only when its step rate is this much
 * below the next slowest node's; closer is a tie (none named). */
#define SLOWEST_MARGIN 0.95

struct mnode {
	char *name;
	enum metrics_state state;
	json_t *prev, *cur; /* bodies; prev NULL before the second */
	int64_t cur_t;
	int cur_attempt;

	/* Derived at each feed; has_rates false until two samples. */
	bool has_rates;
	double rx_rate, tx_rate, cpu_pct;
	bool has_tokens_rate;
	double tokens_rate;
	uint64_t rx_bytes, tx_bytes, drops, errors; /* current sums */
	uint64_t drops_acc;			    /* since the job started */
	uint64_t tokens_acc;			    /* since the job started */
	uint64_t rss_kib;

	/* Training values of the current attempt. */
	bool has_step, has_loss, has_loss_step;
	int64_t step, loss_step; /* loss_step: the step of loss_rank */
	double loss;
	int loss_rank;
	/* The rate window: the attempt's first sample (a baseline, until a
	 * second step ended), then each sample that saw the step or the
	 * tokens change. */
	struct {
		int64_t t, step;
		uint64_t tokens;
		bool has_step;
	} win[RATE_WIN];
	int n_win;
	bool win_base;
	bool has_step_rate;
	double step_rate;
};

struct metrics {
	struct mnode *nodes;
	int n;
	int attempt;
	struct metrics_downsample ds;
	int64_t last_detail_ms; /* elapsed_ms of the last line with nodes */
	int64_t next_detail_ms; /* not before (the bytes_per_s budget) */
	bool any_detail;
	const char *slowest;
	/* The job's last rates while it trained, and whether the line to
	 * write is the last (metrics_set_final): the ranks have ended by
	 * then, so its own rates would be 0, not what the job ran at. */
	bool final;
	bool has_tok, has_steps;
	double tok, steps;
};

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

static uint64_t u64(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) && json_integer_value(v) > 0
		   ? (uint64_t)json_integer_value(v)
		   : 0;
}

static bool num(json_t *o, const char *key, double *out)
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
static json_t *match(json_t *array, json_t *like, const char *key,
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
		json_t *p = pnet ? match(pnet, d, "dev", NULL) : NULL;
		bool reset = false;

		nd->rx_bytes += u64(d, "rx_bytes");
		nd->tx_bytes += u64(d, "tx_bytes");
		nd->errors += u64(d, "rx_errors") + u64(d, "tx_errors");
		for (size_t k = 0; k < 2; k++) {
			uint64_t v = u64(d, net_drop_keys[k]);

			nd->drops += v;
			/* The node's first sample is the baseline: drops
			 * from before the job are not the job's. */
			if (nd->prev)
				nd->drops_acc +=
				    grew(u64(p, net_drop_keys[k]), v, &reset);
		}
		if (!p)
			continue; /* a new device: its rate next time */
		reset = false;
		drx += grew(u64(p, "rx_bytes"), u64(d, "rx_bytes"), &reset);
		dtx += grew(u64(p, "tx_bytes"), u64(d, "tx_bytes"), &reset);
		if (reset)
			rate_ok = false;
	}
	json_array_foreach(rdma, i, d)
	{
		json_t *p = prdma ? match(prdma, d, "dev", "port") : NULL;
		bool reset = false;

		for (size_t k = 0; k < 2; k++) {
			uint64_t v = u64(d, rdma_err_keys[k]);

			nd->drops += v;
			if (nd->prev)
				nd->drops_acc +=
				    grew(u64(p, rdma_err_keys[k]), v, &reset);
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
		json_t *p = pranks ? match(pranks, r, "rank", NULL) : NULL;
		bool reset = false;

		nd->rss_kib += u64(r, "rss_kb");
		if (!p)
			continue;
		dcpu += grew(u64(p, "cpu_ms"), u64(r, "cpu_ms"), &reset);
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
		nd->tokens_rate = (double)(nd->win[last].tokens -
					   nd->win[first].tokens) *
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
		json_t *p = ptrain ? match(ptrain, r, "rank", NULL) : NULL;
		int rank = (int)json_integer_value(json_object_get(r, "rank"));
		double v;

		if (num(vals, "step", &v) &&
		    (!nd->has_step || (int64_t)v < nd->step)) {
			nd->has_step = true;
			nd->step = (int64_t)v;
		}
		if (num(vals, "loss", &v) &&
		    (nd->loss_rank < 0 || rank < nd->loss_rank)) {
			nd->has_loss = true;
			nd->loss = v;
			nd->loss_rank = rank;
			nd->has_loss_step = num(vals, "step", &v);
			if (nd->has_loss_step)
				nd->loss_step = (int64_t)v;
		}
		if (num(vals, "tokens", &v) && v >= 0) {
			double pv = 0;
			bool reset = false;

			any_tokens = true;
			if (p)
				num(json_object_get(p, "values"), "tokens",
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
static bool trains(const struct metrics *m, const struct mnode *nd)
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
		if (!trains(m, nd))
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

/* --- metrics.jsonl -------------------------------------------------------- */

static const char *state_name(enum metrics_state s)
{
	static const char *const names[] = {"connecting", "up", "failed",
					    "spare", "gone"};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static void set_real(json_t *o, const char *key, double v)
{
	json_object_set_new(o, key, json_real(v));
}

static void set_int(json_t *o, const char *key, json_int_t v)
{
	json_object_set_new(o, key, json_integer(v));
}

static json_t *job_json(const struct metrics_job *j)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if (j->has_step)
		set_int(o, "step", j->step);
	if (j->has_loss)
		set_real(o, "loss", j->loss);
	if (j->has_loss && j->has_loss_step)
		set_int(o, "loss_step", j->loss_step);
	if (j->has_tokens)
		set_int(o, "tokens_total", (json_int_t)j->tokens_total);
	if (j->has_tokens_rate)
		set_real(o, "tokens_per_s", j->tokens_per_s);
	if (j->has_steps_rate)
		set_real(o, "steps_per_s", j->steps_per_s);
	if (j->has_gpu) {
		set_int(o, "gpu_util_min", j->gpu_util_min);
		set_real(o, "gpu_util_avg", j->gpu_util_avg);
	}
	if (j->has_net) {
		set_real(o, "rx_bytes_per_s", j->rx_bytes_per_s);
		set_real(o, "tx_bytes_per_s", j->tx_bytes_per_s);
	}
	set_int(o, "drops", (json_int_t)j->drops);
	if (j->slowest)
		json_object_set_new(o, "slowest", json_string(j->slowest));
	return o;
}

/* A GPU of the body as metrics.jsonl writes it: gpu (the index), the
 * integer values NVML gave, power in watts. */
static json_t *gpu_json(json_t *g)
{
	static const char *const keys[] = {
	    "util_pct",	     "mem_used",	"mem_total", "temp_c", "sm_mhz",
	    "ecc_corrected", "ecc_uncorrected", "throttle",  "xid"};
	json_t *o = json_object();
	json_t *v;

	if (!o)
		return NULL;
	set_int(o, "gpu", json_integer_value(json_object_get(g, "index")));
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (json_is_integer(v = json_object_get(g, keys[k])))
			json_object_set(o, keys[k], v);
	if (json_is_integer(v = json_object_get(g, "power_mw")))
		set_real(o, "power_w", (double)json_integer_value(v) / 1000.0);
	return o;
}

static json_t *rdma_json(const struct mnode *nd, json_t *d)
{
	json_t *o = json_object();
	json_t *p = nd->prev ? match(json_object_get(nd->prev, "rdma"), d,
				     "dev", "port")
			     : NULL;
	int64_t dt =
	    nd->cur_t - json_integer_value(json_object_get(nd->prev, "t"));

	if (!o)
		return NULL;
	json_object_set(o, "dev", json_object_get(d, "dev"));
	json_object_set(o, "port", json_object_get(d, "port"));
	if (p && dt > 0 && u64(d, "rx_bytes") >= u64(p, "rx_bytes") &&
	    u64(d, "tx_bytes") >= u64(p, "tx_bytes")) {
		set_real(o, "rx_bytes_per_s",
			 (double)(u64(d, "rx_bytes") - u64(p, "rx_bytes")) *
			     1000.0 / (double)dt);
		set_real(o, "tx_bytes_per_s",
			 (double)(u64(d, "tx_bytes") - u64(p, "tx_bytes")) *
			     1000.0 / (double)dt);
	}
	set_int(o, "link_downed", (json_int_t)u64(d, "link_downed"));
	set_int(o, "symbol_error", (json_int_t)u64(d, "symbol_error"));
	set_int(o, "rcv_errors", (json_int_t)u64(d, "rcv_errors"));
	return o;
}

static json_t *node_json(const struct metrics *m, const struct mnode *nd)
{
	json_t *o = json_object(), *a, *v;
	size_t i;

	if (!o)
		return NULL;
	json_object_set_new(o, "node", json_string(nd->name));
	json_object_set_new(o, "state", json_string(state_name(nd->state)));
	/* A failed (evicted) node's last values are not current: its line
	 * says only that it failed. */
	if (!nd->cur || nd->state == METRICS_FAILED)
		return o;
	if (json_is_number(v = json_object_get(nd->cur, "load1")))
		json_object_set(o, "load1", v);
	if (nd->cpu_pct >= 0 && nd->prev)
		set_real(o, "cpu_pct", nd->cpu_pct);
	set_int(o, "rss_kib", (json_int_t)nd->rss_kib);
	if (nd->has_rates) {
		set_real(o, "rx_bytes_per_s", nd->rx_rate);
		set_real(o, "tx_bytes_per_s", nd->tx_rate);
	}
	set_int(o, "rx_bytes", (json_int_t)nd->rx_bytes);
	set_int(o, "tx_bytes", (json_int_t)nd->tx_bytes);
	set_int(o, "drops", (json_int_t)nd->drops_acc);
	set_int(o, "errors", (json_int_t)nd->errors);
	if (trains(m, nd) || (nd->state != METRICS_UP && nd->cur)) {
		if (nd->has_step)
			set_int(o, "step", nd->step);
		if (nd->has_step_rate)
			set_real(o, "steps_per_s", nd->step_rate);
		if (nd->has_loss)
			set_real(o, "loss", nd->loss);
		if (nd->has_tokens_rate)
			set_real(o, "tokens_per_s", nd->tokens_rate);
	}
	a = json_object_get(nd->cur, "gpus");
	if (json_array_size(a)) {
		json_t *gs = json_array();

		json_array_foreach(a, i, v)
		    json_array_append_new(gs, gpu_json(v));
		json_object_set_new(o, "gpus", gs);
	}
	if (json_is_string(v = json_object_get(nd->cur, "gpu_error")))
		json_object_set(o, "gpu_error", v);
	a = json_object_get(nd->cur, "rdma");
	if (json_array_size(a)) {
		json_t *rs = json_array();

		json_array_foreach(a, i, v)
		    json_array_append_new(rs, rdma_json(nd, v));
		json_object_set_new(o, "rdma", rs);
	}
	return o;
}

/* Whether the line at elapsed_ms carries per-node detail. */
static bool detail_due(struct metrics *m, int64_t elapsed_ms)
{
	int64_t every;

	if (!m->any_detail)
		return true;
	if (elapsed_ms < m->next_detail_ms)
		return false;
	if (elapsed_ms < m->ds.full_ms)
		return true;
	every = elapsed_ms < m->ds.late_ms ? m->ds.mid_every_ms
					   : m->ds.late_every_ms;
	/* On the grid: one line per period whatever the interval, even
	 * when a tick comes a little early. */
	return elapsed_ms / every != m->last_detail_ms / every;
}

void metrics_set_final(struct metrics *m)
{
	m->final = true;
}

json_t *metrics_line(struct metrics *m, int64_t t_ms, int64_t elapsed_ms,
		     bool force_nodes)
{
	struct metrics_job j;
	json_t *o, *nodes;

	metrics_job(m, &j);
	if (!m->final) {
		if (j.has_tokens_rate && j.tokens_per_s > 0) {
			m->has_tok = true;
			m->tok = j.tokens_per_s;
		}
		if (j.has_steps_rate && j.steps_per_s > 0) {
			m->has_steps = true;
			m->steps = j.steps_per_s;
		}
	} else {
		if (m->has_tok && (!j.has_tokens_rate || j.tokens_per_s <= 0)) {
			j.has_tokens_rate = true;
			j.tokens_per_s = m->tok;
		}
		if (m->has_steps && (!j.has_steps_rate || j.steps_per_s <= 0)) {
			j.has_steps_rate = true;
			j.steps_per_s = m->steps;
		}
	}
	o = json_pack("{s:I, s:i, s:I, s:i, s:i, s:o}", "t", (json_int_t)t_ms,
		      "attempt", j.attempt, "elapsed_ms",
		      (json_int_t)elapsed_ms, "nodes_up", j.nodes_up, "spares",
		      j.spares, "job", job_json(&j));
	if (!o)
		return NULL;
	if (!force_nodes && !detail_due(m, elapsed_ms))
		return o;
	m->any_detail = true;
	m->last_detail_ms = elapsed_ms;
	nodes = json_array();
	for (int i = 0; i < m->n; i++)
		json_array_append_new(nodes, node_json(m, &m->nodes[i]));
	json_object_set_new(o, "nodes", nodes);
	if (m->ds.bytes_per_s > 0) {
		/* The size as written (JSON_COMPACT; reals are shorter
		 * with a precision, so this is an upper bound). */
		size_t bytes = json_dumpb(o, NULL, 0, JSON_COMPACT);

		m->next_detail_ms =
		    elapsed_ms +
		    (int64_t)(bytes * 1000 / (size_t)m->ds.bytes_per_s);
	}
	return o;
}

/* --- Prometheus ----------------------------------------------------------- */

/* A label value in the exposition format: \, " and newline escaped. */
static void put_label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (const char *p = value; *p; p++) {
		if (*p == '\\' || *p == '"')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void value(FILE *f, double v)
{
	if (v == floor(v) && fabs(v) < 1e15)
		fprintf(f, " %.0f\n", v);
	else
		fprintf(f, " %.9g\n", v);
}

/* The nodes whose samples are current (an agent up: member or warm
 * spare). */
static bool exposed(const struct mnode *nd)
{
	return nd->cur &&
	       (nd->state == METRICS_UP || nd->state == METRICS_SPARE);
}

/* One family per call: key of each entry of array in every exposed node's
 * latest body, labelled node and dev_label=entry[dev_key] (and port). */
struct dev_family {
	const char *name, *type, *help;
	const char *array, *key;
	double scale;
};

static void dev_families(FILE *f, struct metrics *m,
			 const struct dev_family *fams, size_t n_fams,
			 bool rdma)
{
	for (size_t k = 0; k < n_fams; k++) {
		const struct dev_family *df = &fams[k];
		bool any = false;

		for (int i = 0; i < m->n; i++) {
			struct mnode *nd = &m->nodes[i];
			size_t j;
			json_t *d, *v;

			if (!exposed(nd))
				continue;
			json_array_foreach(json_object_get(nd->cur, df->array),
					   j, d)
			{
				if (!json_is_integer(
					v = json_object_get(d, df->key)))
					continue;
				if (!any)
					family(f, df->name, df->type, df->help);
				any = true;
				fputs(df->name, f);
				fputc('{', f);
				put_label(f, "node", nd->name);
				fputc(',', f);
				if (!strcmp(df->array, "gpus")) {
					fprintf(
					    f,
					    "gpu=\"%" JSON_INTEGER_FORMAT "\"",
					    json_integer_value(
						json_object_get(d, "index")));
				} else {
					put_label(
					    f, "device",
					    json_string_value(
						json_object_get(d, "dev")));
				}
				if (rdma)
					fprintf(
					    f,
					    ",port=\"%" JSON_INTEGER_FORMAT
					    "\"",
					    json_integer_value(
						json_object_get(d, "port")));
				fputc('}', f);
				value(f, (double)json_integer_value(v) *
					     df->scale);
			}
		}
	}
}

static const struct dev_family gpu_fams[] = {
    {"herd_gpu_utilization_ratio", "gauge", "GPU utilisation (NVML), 0 to 1.",
     "gpus", "util_pct", 0.01},
    {"herd_gpu_memory_used_bytes", "gauge", "GPU memory used.", "gpus",
     "mem_used", 1},
    {"herd_gpu_memory_total_bytes", "gauge", "GPU memory in all.", "gpus",
     "mem_total", 1},
    {"herd_gpu_temperature_celsius", "gauge", "GPU temperature.", "gpus",
     "temp_c", 1},
    {"herd_gpu_power_watts", "gauge", "GPU power draw.", "gpus", "power_mw",
     0.001},
    {"herd_gpu_sm_clock_hertz", "gauge", "GPU SM clock.", "gpus", "sm_mhz",
     1e6},
    {"herd_gpu_throttle_reasons", "gauge",
     "NVML clocks throttle reasons (bitmask; 0: none).", "gpus", "throttle", 1},
};

static const struct dev_family net_fams[] = {
    {"herd_network_receive_bytes_total", "counter",
     "Bytes received by the node's interface since its agent started.", "net",
     "rx_bytes", 1},
    {"herd_network_transmit_bytes_total", "counter",
     "Bytes sent by the node's interface since its agent started.", "net",
     "tx_bytes", 1},
    {"herd_network_receive_drops_total", "counter",
     "Received packets dropped since the node's agent started.", "net",
     "rx_drops", 1},
    {"herd_network_transmit_drops_total", "counter",
     "Packets to send dropped since the node's agent started.", "net",
     "tx_drops", 1},
    {"herd_network_receive_errors_total", "counter",
     "Receive errors since the node's agent started.", "net", "rx_errors", 1},
    {"herd_network_transmit_errors_total", "counter",
     "Transmit errors since the node's agent started.", "net", "tx_errors", 1},
};

static const struct dev_family rdma_fams[] = {
    {"herd_rdma_receive_bytes_total", "counter",
     "Bytes received by the RDMA port (port_rcv_data x 4).", "rdma", "rx_bytes",
     1},
    {"herd_rdma_transmit_bytes_total", "counter",
     "Bytes sent by the RDMA port (port_xmit_data x 4).", "rdma", "tx_bytes",
     1},
    {"herd_rdma_link_downed_total", "counter",
     "Times the RDMA port's link went down.", "rdma", "link_downed", 1},
    {"herd_rdma_symbol_errors_total", "counter", "RDMA port symbol errors.",
     "rdma", "symbol_error", 1},
    {"herd_rdma_receive_errors_total", "counter", "RDMA port receive errors.",
     "rdma", "rcv_errors", 1},
};

static void ecc_family(FILE *f, struct metrics *m)
{
	static const char *const keys[] = {"ecc_corrected", "ecc_uncorrected"};
	bool any = false;

	for (int i = 0; i < m->n; i++) {
		struct mnode *nd = &m->nodes[i];
		size_t j;
		json_t *g, *v;

		if (!exposed(nd))
			continue;
		json_array_foreach(json_object_get(nd->cur, "gpus"), j,
				   g) for (size_t k = 0; k < 2; k++)
		{
			if (!json_is_integer(v = json_object_get(g, keys[k])))
				continue;
			if (!any)
				family(f, "herd_gpu_ecc_errors_total",
				       "counter",
				       "GPU ECC errors (NVML, volatile).");
			any = true;
			fputs("herd_gpu_ecc_errors_total{", f);
			put_label(f, "node", nd->name);
			fprintf(
			    f, ",gpu=\"%" JSON_INTEGER_FORMAT "\",type=\"%s\"}",
			    json_integer_value(json_object_get(g, "index")),
			    k ? "uncorrected" : "corrected");
			value(f, (double)json_integer_value(v));
		}
	}
}

/* Per-node (and per-rank) values of exposed nodes. */
static void node_families(FILE *f, struct metrics *m)
{
	bool any;

	any = false;
	for (int i = 0; i < m->n; i++) {
		struct mnode *nd = &m->nodes[i];
		double v;

		if (!exposed(nd) || !num(nd->cur, "load1", &v))
			continue;
		if (!any)
			family(f, "herd_node_load1", "gauge",
			       "The node's 1-minute load average.");
		any = true;
		fputs("herd_node_load1{", f);
		put_label(f, "node", nd->name);
		fputc('}', f);
		value(f, v);
	}
	any = false;
	for (int i = 0; i < m->n; i++) {
		struct mnode *nd = &m->nodes[i];

		if (!exposed(nd) || !trains(m, nd) || !nd->has_step_rate)
			continue;
		if (!any)
			family(f, "herd_node_steps_per_second", "gauge",
			       "Training steps per second of the node's "
			       "slowest rank.");
		any = true;
		fputs("herd_node_steps_per_second{", f);
		put_label(f, "node", nd->name);
		fputc('}', f);
		value(f, nd->step_rate);
	}
	for (int pass = 0; pass < 2; pass++) {
		const char *name = pass ? "herd_rank_resident_memory_bytes"
					: "herd_rank_cpu_seconds_total";

		any = false;
		for (int i = 0; i < m->n; i++) {
			struct mnode *nd = &m->nodes[i];
			size_t j;
			json_t *r;

			if (!exposed(nd))
				continue;
			json_array_foreach(json_object_get(nd->cur, "ranks"), j,
					   r)
			{
				if (!any)
					family(f, name,
					       pass ? "gauge" : "counter",
					       pass ? "Resident memory of the "
						      "rank's processes."
						    : "CPU time of the rank's "
						      "processes.");
				any = true;
				fprintf(f, "%s{", name);
				put_label(f, "node", nd->name);
				fprintf(f,
					",rank=\"%" JSON_INTEGER_FORMAT "\"}",
					json_integer_value(
					    json_object_get(r, "rank")));
				value(f,
				      pass ? (double)u64(r, "rss_kb") * 1024
					   : (double)u64(r, "cpu_ms") / 1000.0);
			}
		}
	}
}

char *metrics_prometheus(struct metrics *m, size_t *len)
{
	struct metrics_job j;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	metrics_job(m, &j);
	family(f, "herd_attempt", "gauge",
	       "The job's attempt (1 is the first; restarts count up).");
	fprintf(f, "herd_attempt %d\n", j.attempt);
	family(f, "herd_nodes", "gauge", "Nodes of the job by state.");
	fprintf(f, "herd_nodes{state=\"up\"} %d\n", j.nodes_up);
	fprintf(f, "herd_nodes{state=\"failed\"} %d\n", j.nodes_failed);
	fprintf(f, "herd_nodes{state=\"spare\"} %d\n", j.spares);
	if (j.has_step) {
		family(f, "herd_train_step", "gauge",
		       "The step every rank has reached.");
		fprintf(f, "herd_train_step %" PRId64 "\n", j.step);
	}
	if (j.has_loss) {
		family(f, "herd_train_loss", "gauge",
		       "The latest loss of the lowest rank reporting one.");
		fputs("herd_train_loss", f);
		value(f, j.loss);
	}
	family(f, "herd_train_tokens_total", "counter",
	       "Tokens the ranks reported since the job started.");
	fprintf(f, "herd_train_tokens_total %" PRIu64 "\n", j.tokens_total);
	if (j.has_tokens_rate) {
		family(f, "herd_train_tokens_per_second", "gauge",
		       "Tokens per second, summed over the ranks.");
		fputs("herd_train_tokens_per_second", f);
		value(f, j.tokens_per_s);
	}
	node_families(f, m);
	dev_families(f, m, gpu_fams, sizeof(gpu_fams) / sizeof(gpu_fams[0]),
		     false);
	ecc_family(f, m);
	dev_families(f, m, net_fams, sizeof(net_fams) / sizeof(net_fams[0]),
		     false);
	dev_families(f, m, rdma_fams, sizeof(rdma_fams) / sizeof(rdma_fams[0]),
		     true);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* --- the status line ------------------------------------------------------ */

/* 1234 -> "1234", 65536 -> "65.5k", 1.2e9 -> "1.2G". */
static void human(char *buf, size_t size, double v)
{
	static const char units[] = " kMGTP";
	int u = 0;

	while (fabs(v) >= 1000 && u < 5) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%.0f", v);
	else
		snprintf(buf, size, "%.*f%c",
			 v < 10	   ? 2
			 : v < 100 ? 1
				   : 0,
			 v, units[u]);
}

char *metrics_status(struct metrics *m, char *buf, size_t size, int width)
{
	struct metrics_job j;
	char a[32], b[32];
	size_t len = 0, max;

	metrics_job(m, &j);
#define PUT(...)                                                               \
	do {                                                                   \
		if (len < size)                                                \
			len += (size_t)snprintf(buf + len, size - len,         \
						__VA_ARGS__);                  \
	} while (0)
	PUT("attempt %d | nodes %d up", j.attempt, j.nodes_up);
	if (j.spares)
		PUT(", %d spare%s", j.spares, j.spares == 1 ? "" : "s");
	if (j.nodes_failed)
		PUT(", %d failed", j.nodes_failed);
	/* The step and loss the lowest rank reporting a loss (rank 0, which
	 * prints them) reported; "(min N)" when some rank is behind it. */
	PUT(" | step ");
	if (j.has_loss && j.has_loss_step) {
		PUT("%" PRId64, j.loss_step);
		if (j.has_step && j.step < j.loss_step)
			PUT(" (min %" PRId64 ")", j.step);
	} else if (j.has_step) {
		PUT("%" PRId64, j.step);
	} else {
		PUT("-");
	}
	PUT(" | loss ");
	if (j.has_loss)
		PUT("%.4g", j.loss);
	else
		PUT("-");
	PUT(" | tok/s ");
	if (j.has_tokens_rate) {
		human(a, sizeof(a), j.tokens_per_s);
		PUT("%s", a);
	} else {
		PUT("-");
	}
	PUT(" | GPU ");
	if (j.has_gpu)
		PUT("%d/%.0f%%", j.gpu_util_min, j.gpu_util_avg);
	else
		PUT("-");
	PUT(" | net ");
	if (j.has_net) {
		human(a, sizeof(a), j.rx_bytes_per_s);
		human(b, sizeof(b), j.tx_bytes_per_s);
		PUT("rx %sB/s tx %sB/s", a, b);
	} else {
		PUT("-");
	}
	PUT(" | drops %" PRIu64, j.drops);
	PUT(" | slowest %s", j.slowest ? j.slowest : "-");
#undef PUT
	max = width > 1 ? (size_t)width - 1 : 0;
	if (len >= size)
		len = size - 1;
	if (len > max)
		len = max;
	buf[len] = '\0';
	/* Node names are the user's: nothing but printable ASCII on the
	 * terminal. */
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 ||
		    (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	return buf;
}
