/* model/metric_table.h — the controller's table of what the agents measure.
 *
 * Each node's agent sends a METRICS frame every metrics.interval (proto.h
 * states its body).  The table keeps, per node, the latest and the
 * previous body and derives rates from their difference over the agent's
 * clock `t`; tokens/s and steps/s come over the last steps instead (the
 * samples that saw a step end: a step can be longer than an interval).
 * Counters are cumulative since the agent started, so a counter lower
 * than before means a restarted agent or a new attempt's ranks: the new
 * value is a new baseline (counted from 0 in totals), never a negative
 * rate.  From the table come the job-wide values (I12-CONTRACT
 * "Controller"), one metrics.jsonl line, the Prometheus text exposition
 * and the terminal's status line.
 *
 * The table knows nodes by index and name; their state (up, failed,
 * spare) is the controller's and is set here before each use.  Not
 * thread-safe; no I/O: callers write what it returns.
 */
#ifndef HERD_LAUNCHER_METRICS_H
#define HERD_LAUNCHER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum metrics_state {
	METRICS_CONNECTING, /* agent starting */
	METRICS_UP,	    /* a member of the job, agent up */
	METRICS_FAILED,	    /* evicted */
	METRICS_SPARE,	    /* a spare: idle, or warm and not a member */
	METRICS_GONE,	    /* agent exited at the end of the job */
};

/* How metrics.jsonl thins out per-node detail on long runs (the job line
 * is written every sample): detail on every sample for the first
 * full_ms, then at most once every mid_every_ms until late_ms, then once
 * every late_every_ms; and never more than bytes_per_s on average (a big
 * job's detail line is big: 1,000 nodes with 8 GPUs each make 1.6 MB, so
 * the next one waits 1.6 MB / bytes_per_s).  metrics_new() sets the
 * defaults below; tests shrink them. */
struct metrics_downsample {
	int64_t full_ms;       /* 10 min */
	int64_t mid_every_ms;  /* 10 s */
	int64_t late_ms;       /* 1 h */
	int64_t late_every_ms; /* 60 s */
	int64_t bytes_per_s;   /* 64 KiB/s */
};

/* The job-wide values; has_* false: unknown (left out of every output). */
struct metrics_job {
	int attempt;
	int nodes_up, nodes_failed, spares;
	bool has_step, has_loss, has_loss_step, has_tokens, has_tokens_rate;
	bool has_steps_rate;
	bool has_gpu, has_net;
	int64_t step;	       /* min over ranks reporting one */
	double loss;	       /* of the lowest rank reporting one */
	int64_t loss_step;     /* the step that rank reported with it */
	uint64_t tokens_total; /* counted since the job started */
	double tokens_per_s;   /* sum over nodes, over their rate windows */
	double steps_per_s;    /* of the slowest node */
	int gpu_util_min;
	double gpu_util_avg;
	double rx_bytes_per_s, tx_bytes_per_s; /* sum over nodes */
	uint64_t drops;	     /* net drops + RDMA errors since the start */
	const char *slowest; /* node name, or NULL; owned by the table */
};

struct metrics;

/* A table for n nodes named names[i] (copied).  Returns NULL when out of
 * memory. */
struct metrics *metrics_new(int n, const char *const *names);
void metrics_free(struct metrics *m);

/* The job's current attempt: training values of other attempts are not
 * counted (a new attempt's ranks start again from step 0 or a
 * checkpoint). */
void metrics_set_attempt(struct metrics *m, int attempt);
/* Node i's state, as the controller sees it. */
void metrics_set_state(struct metrics *m, int i, enum metrics_state state);

/* Takes node i's METRICS body (checked by proto_frame_check; the table
 * keeps a reference).  A body whose t is not after the latest one's is
 * ignored.  Returns 0, or -1 when it was ignored. */
int metrics_feed(struct metrics *m, int i, json_t *body);

/* The job-wide values now. */
void metrics_job(struct metrics *m, struct metrics_job *job);

/* One metrics.jsonl object (I12-CONTRACT "metrics.jsonl"): t (wall ms),
 * attempt, elapsed_ms, nodes_up, spares, job; and nodes when the
 * downsampling rule says so for elapsed_ms, or when force_nodes (the last
 * line of the job).  Returns a new object, or NULL when out of memory. */
/* The next line is the job's last: its job-wide tokens/s and steps/s are
 * the last ones seen while the job trained (the ranks have ended by
 * then, and their own rates would read 0). */
void metrics_set_final(struct metrics *m);
json_t *metrics_line(struct metrics *m, int64_t t_ms, int64_t elapsed_ms,
		     bool force_nodes);
/* The downsampling rule (tests shrink it). */
struct metrics_downsample *metrics_downsample(struct metrics *m);

/* The Prometheus text exposition (format 0.0.4) of the table: a string
 * the caller frees, its length in *len; NULL when out of memory. */
char *metrics_prometheus(struct metrics *m, size_t *len);

/* The terminal's status line: at most width - 1 columns (never wraps),
 * plain ASCII, no newline.  Returns buf. */
char *metrics_status(struct metrics *m, char *buf, size_t size, int width);

#endif
