/* model/straggler_rule.c — the straggler detector (model/straggler_rule.h says the rule). */
#include <stdlib.h>
#include <string.h>

#include "launcher/model/straggler_rule.h"

/* 64: samples of one rank's rate history; with the shortest metrics
 * interval (100 ms) that is 6 s, and the span is cut to what it holds. */
#define RATE_SAMPLES 64

struct rate_sample {
	int64_t t;
	double v;
};

/* A counter's recent history: its rate over the span. */
struct rate {
	bool have;  /* a sample was seen */
	bool moved; /* the count changed at least once */
	double last;
	int64_t changed_t; /* when it last changed (or was first seen) */
	int head, n;	   /* ring: oldest at head */
	struct rate_sample h[RATE_SAMPLES];
};

struct srank {
	int rank;
	bool has_st;
	double st_ms;
	struct rate step, touch;
};

struct snode {
	bool active;
	bool reported;
	bool slow;
	int64_t since; /* slow since (now_ms of eval) */
	struct srank *ranks;
	int n_ranks, cap;
};

struct straggler {
	int n_nodes;
	double ratio;
	int64_t window_ms, span_ms;
	struct snode *nodes;
	double *scratch; /* n_nodes or a node's ranks, for medians */
	int scratch_cap;
};

const char *straggler_source_name(enum straggler_source s)
{
	static const char *const names[] = {"step_time", "step", "progress"};

	return s < STRAGGLER_SRC_COUNT_ ? names[s] : "?";
}

struct straggler *straggler_new(int n_nodes, double ratio, int64_t window_ms,
				int64_t min_span_ms)
{
	struct straggler *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->n_nodes = n_nodes;
	s->ratio = ratio > 1 ? ratio : 1.3;
	s->window_ms = window_ms > 0 ? window_ms : 0;
	s->span_ms = window_ms / 2 > min_span_ms ? window_ms / 2 : min_span_ms;
	s->nodes = calloc(n_nodes > 0 ? (size_t)n_nodes : 1, sizeof(*s->nodes));
	if (!s->nodes) {
		free(s);
		return NULL;
	}
	return s;
}

void straggler_node_reset(struct straggler *s, int node)
{
	struct snode *n;

	if (!s || node < 0 || node >= s->n_nodes)
		return;
	n = &s->nodes[node];
	n->n_ranks = 0;
	n->slow = false;
	n->since = 0;
}

void straggler_reset(struct straggler *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n_nodes; i++) {
		straggler_node_reset(s, i);
		s->nodes[i].reported = false;
	}
}

void straggler_free(struct straggler *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n_nodes; i++)
		free(s->nodes[i].ranks);
	free(s->nodes);
	free(s->scratch);
	free(s);
}

void straggler_set_active(struct straggler *s, int node, bool active)
{
	if (s && node >= 0 && node < s->n_nodes)
		s->nodes[node].active = active;
}

/* --- rates ---------------------------------------------------------------- */

static void rate_add(struct rate *r, int64_t t, double v, int64_t span)
{
	if (r->have && v < r->last) {
		/* Went back (the program restarted its count): a fresh
		 * history. */
		r->n = r->head = 0;
		r->moved = false;
		r->changed_t = t;
	} else if (r->have && v != r->last) {
		r->moved = true;
		r->changed_t = t;
	} else if (!r->have) {
		r->changed_t = t;
	}
	r->have = true;
	r->last = v;
	if (r->n == RATE_SAMPLES) {
		r->head = (r->head + 1) % RATE_SAMPLES;
		r->n--;
	}
	r->h[(r->head + r->n) % RATE_SAMPLES] = (struct rate_sample){t, v};
	r->n++;
	/* The oldest goes while the next is still a span old. */
	while (r->n > 2 && t - r->h[(r->head + 1) % RATE_SAMPLES].t >= span) {
		r->head = (r->head + 1) % RATE_SAMPLES;
		r->n--;
	}
}

/* ms per step, or -1 when it cannot be said yet. */
static double rate_ms(const struct rate *r)
{
	const struct rate_sample *o, *nw;
	double dv, ms, since;

	if (!r->moved || r->n < 2)
		return -1;
	o = &r->h[r->head];
	nw = &r->h[(r->head + r->n - 1) % RATE_SAMPLES];
	dv = nw->v - o->v;
	since = (double)(nw->t - r->changed_t);
	ms = dv > 0 ? (double)(nw->t - o->t) / dv : since;
	if (since > ms)
		ms = since;
	return ms > 0 ? ms : -1;
}

static struct srank *rank_get(struct snode *n, int rank)
{
	struct srank *r;

	for (int i = 0; i < n->n_ranks; i++)
		if (n->ranks[i].rank == rank)
			return &n->ranks[i];
	if (n->n_ranks == n->cap) {
		int cap = n->cap ? n->cap * 2 : 4;

		r = realloc(n->ranks, (size_t)cap * sizeof(*r));
		if (!r)
			return NULL;
		n->ranks = r;
		n->cap = cap;
	}
	r = &n->ranks[n->n_ranks++];
	memset(r, 0, sizeof(*r));
	r->rank = rank;
	return r;
}

int straggler_sample(struct straggler *s, int node, int rank, int64_t t_ms,
		     const struct straggler_obs *obs)
{
	struct srank *r;

	if (!s || node < 0 || node >= s->n_nodes)
		return 0;
	if (!(r = rank_get(&s->nodes[node], rank)))
		return -1;
	if (obs->has_step_time && obs->step_time_s >= 0) {
		r->has_st = true;
		r->st_ms = obs->step_time_s * 1000.0;
	}
	if (obs->has_step)
		rate_add(&r->step, t_ms, obs->step, s->span_ms);
	if (obs->has_touches)
		rate_add(&r->touch, t_ms, (double)obs->touches, s->span_ms);
	return 0;
}

/* --- verdicts ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int scratch(struct straggler *s, int need)
{
	double *p;

	if (need <= s->scratch_cap)
		return 0;
	if (!(p = realloc(s->scratch, (size_t)need * sizeof(*p))))
		return -1;
	s->scratch = p;
	s->scratch_cap = need;
	return 0;
}

static double rank_ms(const struct srank *r, enum straggler_source src)
{
	switch (src) {
	case STRAGGLER_SRC_STEP_TIME:
		return r->has_st && r->st_ms > 0 ? r->st_ms : -1;
	case STRAGGLER_SRC_STEP:
		return rate_ms(&r->step);
	case STRAGGLER_SRC_PROGRESS:
		return rate_ms(&r->touch);
	default:
		return -1;
	}
}

/* The median over the node's ranks that have src, or -1; uses s's
 * scratch from index 'at'. */
static double node_value(struct straggler *s, int node,
			 enum straggler_source src, int at)
{
	const struct snode *n = &s->nodes[node];
	int k = 0;

	if (scratch(s, at + n->n_ranks + 1) < 0)
		return -1;
	for (int i = 0; i < n->n_ranks; i++) {
		double v = rank_ms(&n->ranks[i], src);

		if (v > 0)
			s->scratch[at + k++] = v;
	}
	return k ? median(s->scratch + at, k) : -1;
}

double straggler_node_ms(const struct straggler *s, int node,
			 enum straggler_source src)
{
	if (!s || node < 0 || node >= s->n_nodes)
		return -1;
	return node_value((struct straggler *)s, node, src, 0);
}

int straggler_eval(struct straggler *s, int64_t now_ms,
		   struct straggler_verdict *out, int max)
{
	int with[STRAGGLER_SRC_COUNT_] = {0}, any = 0, judged = 0, found = 0;
	enum straggler_source src = STRAGGLER_SRC_COUNT_;
	double *val, ref;

	if (!s || scratch(s, s->n_nodes + 1) < 0)
		return 0;
	/* Which sources each active node has. */
	for (int i = 0; i < s->n_nodes; i++) {
		bool some = false;

		if (!s->nodes[i].active)
			continue;
		for (int k = 0; k < STRAGGLER_SRC_COUNT_; k++)
			if (node_value(s, i, (enum straggler_source)k, 0) > 0) {
				with[k]++;
				some = true;
			}
		any += some;
	}
	for (int k = 0; k < STRAGGLER_SRC_COUNT_; k++)
		if (any >= 2 && with[k] == any) {
			src = (enum straggler_source)k;
			break;
		}
	if (src == STRAGGLER_SRC_COUNT_) {
		for (int i = 0; i < s->n_nodes; i++)
			s->nodes[i].slow = false;
		return 0;
	}
	/* Node values in a table of their own (node_value uses the
	 * scratch). */
	val = malloc((size_t)s->n_nodes * sizeof(*val));
	if (!val)
		return 0;
	for (int i = 0; i < s->n_nodes; i++)
		val[i] = s->nodes[i].active ? node_value(s, i, src, 0) : -1;
	for (int i = 0; i < s->n_nodes; i++)
		if (val[i] > 0)
			s->scratch[judged++] = val[i];
	if (judged == 2)
		ref = s->scratch[0] < s->scratch[1] ? s->scratch[0]
						    : s->scratch[1];
	else
		ref = median(s->scratch, judged);
	for (int i = 0; i < s->n_nodes; i++) {
		struct snode *n = &s->nodes[i];

		if (val[i] <= 0 || ref <= 0 || val[i] < s->ratio * ref) {
			n->slow = false;
			continue;
		}
		if (!n->slow) {
			n->slow = true;
			n->since = now_ms;
		}
		if (now_ms - n->since >= s->window_ms && !n->reported &&
		    found < max) {
			n->reported = true;
			out[found++] = (struct straggler_verdict){
			    .node = i,
			    .ratio = val[i] / ref,
			    .node_ms = val[i],
			    .median_ms = ref,
			    .slow_ms = now_ms - n->since,
			    .source = src,
			};
		}
	}
	free(val);
	return found;
}
