/* runlog.h — reads a run directory (log.dir/RUN-ID: events.jsonl, see
 * events.h, and metrics.jsonl) into one model that `herd status`,
 * `herd top` and `herd report` show.
 *
 * Reading is incremental: runlog_update() reads what the two files gained
 * since the last call, so a view can follow a running job.  Only whole
 * lines count: a partial last line (the writer is mid-line, or the disk
 * filled) is left for the next update.  A line that is not a JSON object
 * or lacks what its kind needs is skipped and counted, never fatal.
 *
 * Memory is bounded for runs of any length: each time series keeps at most
 * RUNLOG_SERIES_MAX points (when full, every other point is dropped and
 * later points are taken at half the rate), the timeline keeps at most
 * RUNLOG_MARKS_MAX marks and RUNLOG_ATTEMPTS_MAX attempts (more are
 * counted), and a line over RUNLOG_LINE_MAX bytes is skipped.
 *
 * Fields are public: the views read them directly.  Everything is owned by
 * the runlog and lives until runlog_free().  Not thread-safe.
 */
#ifndef HERD_RUNLOG_H
#define HERD_RUNLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "herd/err.h"
#include "herd/failcost.h"

/* A metrics line of 4096 nodes with 8 GPUs each is about 6 MiB. */
#define RUNLOG_LINE_MAX (16u << 20)
/* Twice what a plot draws (svgplot draws at most ~1,000 points a line). */
#define RUNLOG_SERIES_MAX 2048
#define RUNLOG_MARKS_MAX 4096
#define RUNLOG_ATTEMPTS_MAX 4096

/* Job-wide values of metrics.jsonl "job", one series each. */
enum runlog_job_key {
	RUNLOG_JOB_STEP,
	RUNLOG_JOB_LOSS,
	RUNLOG_JOB_TOKENS_PER_S,
	RUNLOG_JOB_STEPS_PER_S,
	RUNLOG_JOB_GPU_UTIL_MIN,
	RUNLOG_JOB_GPU_UTIL_AVG,
	RUNLOG_JOB_RX_BYTES_PER_S,
	RUNLOG_JOB_TX_BYTES_PER_S,
	RUNLOG_JOB_DROPS,
	RUNLOG_JOB_N_
};

/* Per-node values of metrics.jsonl "nodes"; gpu_util is the mean over
 * the node's GPUs. */
enum runlog_node_key {
	RUNLOG_NODE_GPU_UTIL,
	RUNLOG_NODE_RX_BYTES_PER_S,
	RUNLOG_NODE_TX_BYTES_PER_S,
	RUNLOG_NODE_STEPS_PER_S,
	RUNLOG_NODE_CPU_PCT,
	RUNLOG_NODE_RSS_KIB,
	RUNLOG_NODE_N_
};

/* The JSON key of each, for messages and --json. */
extern const char *const runlog_job_keys[RUNLOG_JOB_N_];
extern const char *const runlog_node_keys[RUNLOG_NODE_N_];

/* t in Unix milliseconds (as double), v the value. */
struct runlog_series {
	double *t, *v;
	size_t n;
	unsigned int stride;  /* keep one point in stride */
	unsigned int skipped; /* points skipped since the last kept */
};

struct runlog_attempt {
	int attempt;
	int64_t start_t, end_t; /* end_t 0 while it runs */
	int nodes, world_size;
	char *checkpoint; /* resumed from, or NULL */
	char *reason;	  /* attempt_end reason, NULL while it runs */
	int status;
	bool ended;
};

/* A node named by the events or the metrics. */
struct runlog_node {
	char *name;
	const char *state; /* "up", "failed", "evicted", "readmitted",
			    * "quarantined" (node_quarantined),
			    * or from metrics when events never named it */
	char *reason;	   /* of the last failure or eviction, or NULL */
	bool spare_used;   /* came in as a spare (spare_used) */
	int failures, evictions;
	json_t *last;	   /* latest node object of metrics.jsonl, or NULL */
	int64_t last_t;	   /* its line's t */
	struct runlog_series s[RUNLOG_NODE_N_];
};

/* Something that happened to the job, for the timeline. */
struct runlog_mark {
	int64_t t;
	char *event; /* node_failed, node_evicted, spare_used,
		      * node_readmitted, checkpoint_found, rank_hung,
		      * job_paused, job_resumed, job_end */
	char *host;  /* or NULL */
	char *detail; /* reason / path / status, or NULL */
	int attempt;
};

/* One file being followed. */
struct runlog_file {
	const char *name; /* "events.jsonl" */
	int fd;		  /* -1 until it exists */
	char *buf;	  /* the partial line after the last newline */
	size_t len, cap;
	bool discarding;  /* inside a line over RUNLOG_LINE_MAX */
	bool missing;	  /* not there (yet) */
	uint64_t tail;	  /* read only the last tail bytes at open (0: all) */
	uint64_t lines, bad;
};

struct runlog {
	char *dir;
	struct runlog_file ev, met;

	/* events.jsonl */
	char *job, *run_id, *mode, *transport;
	int want_nodes, spares; /* job_start nodes, spares */
	int64_t start_t;	/* job_start t, or 0 */
	bool ended;		/* job_end seen */
	int end_status, end_attempts;
	int64_t end_t;
	struct runlog_attempt *attempts;
	size_t n_attempts;
	uint64_t attempts_dropped;
	struct runlog_node *nodes;
	size_t n_nodes;
	json_t *node_index; /* name -> index into nodes */
	struct runlog_mark *marks;
	size_t n_marks;
	uint64_t marks_dropped;
	/* What each failure cost (failcost.h); runlog_update() refreshes
	 * the steps from the job's step series. */
	struct failcosts failures;

	/* metrics.jsonl */
	json_t *last;	   /* latest line */
	json_t *last_full; /* latest line with "nodes" */
	int64_t first_metrics_t, last_metrics_t;
	struct runlog_series job_s[RUNLOG_JOB_N_];
	/* Loss against step: t holds the step (job loss_step, else step),
	 * v the loss; a line whose step is lower than the one before
	 * (a resume from further back) is kept too. */
	struct runlog_series loss_by_step;
};

/* Opens the run directory dir: it must be a directory holding
 * events.jsonl or metrics.jsonl.  Reads nothing yet.  Returns NULL with
 * err ("DIR: not a run directory (no events.jsonl or metrics.jsonl)",
 * "DIR: No such file or directory"). */
struct runlog *runlog_open(const char *dir, struct herd_err *err);

/* Before the first runlog_update(): read only about the last bytes of
 * metrics.jsonl (from the first line that starts in them), for views that
 * show the latest values only; the series then cover that part only. */
void runlog_metrics_tail(struct runlog *rl, uint64_t bytes);

/* Reads the whole lines both files gained since the last call (a file
 * that appears later is opened then).  Returns 1 when anything was read,
 * 0 when nothing, -1 with err when a file could not be read. */
int runlog_update(struct runlog *rl, struct herd_err *err);

/* Feeds one line (without its newline) as if read from events.jsonl or
 * metrics.jsonl.  Returns 0, or -1 when the line was skipped (counted in
 * ev.bad / met.bad). */
int runlog_feed_event(struct runlog *rl, const char *line, size_t len);
int runlog_feed_metrics(struct runlog *rl, const char *line, size_t len);

/* The node named name, or NULL. */
struct runlog_node *runlog_node(const struct runlog *rl, const char *name);

/* The number of a value of the latest job line (metrics "job") under
 * key; returns false when the line does not have it. */
bool runlog_job_value(const struct runlog *rl, const char *key, double *v);

/* The number under key in obj (integer or real); false when absent or
 * not a number. */
bool runlog_number(const json_t *obj, const char *key, double *v);

/* Mean util_pct over the GPUs of a metrics node object; false when it has
 * none. */
bool runlog_node_gpu_util(const json_t *node, double *v);
/* Sum of mem_used and of mem_total over its GPUs; false when none. */
bool runlog_node_gpu_mem(const json_t *node, double *used, double *total);

/* Appends a point to s (bounded, see above).  Returns 0 or -1 (out of
 * memory). */
int runlog_series_add(struct runlog_series *s, double t, double v);

void runlog_free(struct runlog *rl);

#endif
