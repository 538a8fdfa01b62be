/* metric_table_int.h — the controller's metrics table as its parts
 * (model/metric_table.c: feeding and the job-wide view; metric_line.c:
 * metrics.jsonl and the status line; metric_prom.c: Prometheus) see it.
 * Private to launcher/model/metric_*.c. */
#ifndef HERD_LAUNCHER_METRIC_TABLE_INT_H
#define HERD_LAUNCHER_METRIC_TABLE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "launcher/model/metric_table.h"

/* 64 samples at most in a node's rate window: 10 s at 150 ms. */
#define RATE_WIN 64

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

/* A body's non-negative integer key, 0 when absent or not one. */
uint64_t mtab_u64(json_t *o, const char *key);
/* A body's finite number key into *out; false when absent or not one. */
bool mtab_num(json_t *o, const char *key, double *out);
/* The entry of array (objects) whose key equals that of like (a string or
 * integer key; key2 when not NULL must match too), or NULL. */
json_t *mtab_match(json_t *array, json_t *like, const char *key,
		   const char *key2);
/* Whether node nd's training values count for the job now. */
bool mtab_trains(const struct metrics *m, const struct mnode *nd);

#endif
