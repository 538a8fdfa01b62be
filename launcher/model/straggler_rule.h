/* model/straggler_rule.h — the straggler detector: per-rank step times
 * compared across nodes over a sliding window.  Pure: it is fed samples
 * with their times and asked for verdicts; it reads no clock, sends
 * nothing and knows nothing of the controller (ctl/straggler.c drives it).
 *
 * A rank's step time comes from the best source the rank gives, in this
 * order:
 *   STEP_TIME  the `step_time` value it reports through $HERD_METRICS
 *              (seconds of its own work per step, waits excluded): the
 *              latest value;
 *   STEP       the rate of its `step` value;
 *   PROGRESS   the rate of its $HERD_PROGRESS_FILE touches (the agent
 *              counts every touch).
 * A rate is measured over the rank's samples of the last rate span (half
 * the window, at least 3 samples' worth): the time between the oldest and
 * the newest sample divided by the steps between them, and never less
 * than the time since the count last moved (a rank that stopped looks
 * slower and slower).  A rate source counts for a rank only once its
 * count moved once (start-up is not slowness).
 *
 * All nodes are compared with the one source every judged node has (the
 * best such); a node without any is not judged.  A node's step time is
 * the median of its ranks'; the reference is the median over the judged
 * nodes, or with exactly 2 nodes the faster one's (the median of two is
 * their mean, which would hide half the gap); fewer than 2 nodes: no
 * verdict.  A node is slow while its step time is >= ratio x the
 * reference; it is a straggler once it has been slow continuously for
 * the window (a sample where it is not slow starts the count again).
 * Each node is reported once per attempt (straggler_reset starts
 * afresh); one that recovers and relapses is not reported again.
 */
#ifndef HERD_LAUNCHER_STRAGGLER_H
#define HERD_LAUNCHER_STRAGGLER_H

#include <stdbool.h>
#include <stdint.h>

enum straggler_source {
	STRAGGLER_SRC_STEP_TIME = 0,
	STRAGGLER_SRC_STEP,
	STRAGGLER_SRC_PROGRESS,
	STRAGGLER_SRC_COUNT_,
};

/* "step_time", "step", "progress". */
const char *straggler_source_name(enum straggler_source s);

/* What one sample says of one rank; a has_ flag false: not given. */
struct straggler_obs {
	bool has_step_time;
	double step_time_s;
	bool has_step;
	double step;
	bool has_touches;
	int64_t touches;
};

struct straggler_verdict {
	int node;
	double ratio; /* node_ms / median_ms */
	double node_ms;
	double median_ms; /* the reference */
	int64_t slow_ms;  /* how long it has been slow */
	enum straggler_source source;
};

struct straggler;

/* A detector for n_nodes nodes (indexes 0..n_nodes-1): slow means
 * ratio (> 1) times the reference for window_ms; min_span_ms is the
 * shortest rate span (3 sample intervals).  NULL when out of memory. */
struct straggler *straggler_new(int n_nodes, double ratio, int64_t window_ms,
				int64_t min_span_ms);
void straggler_free(struct straggler *s);
/* Forgets every sample and verdict (a new attempt). */
void straggler_reset(struct straggler *s);
/* Forgets node's samples and slowness (it left the job, or came in). */
void straggler_node_reset(struct straggler *s, int node);
/* Whether node is judged (a member running ranks): default false. */
void straggler_set_active(struct straggler *s, int node, bool active);
/* A sample of rank (global rank number) on node taken at t_ms (the
 * node's clock: only differences of one rank's times are used).
 * Returns 0, or -1 when out of memory (the sample is dropped). */
int straggler_sample(struct straggler *s, int node, int rank, int64_t t_ms,
		     const struct straggler_obs *obs);
/* Judges the active nodes at now_ms (any one monotonic clock, the same
 * for every call).  New stragglers go to out (at most max); returns how
 * many.  A node is returned once per reset. */
int straggler_eval(struct straggler *s, int64_t now_ms,
		   struct straggler_verdict *out, int max);
/* The node's current step time by source src (ms), or -1 when it has
 * none; for tests and the event. */
double straggler_node_ms(const struct straggler *s, int node,
			 enum straggler_source src);

#endif
