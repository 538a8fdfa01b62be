/* report_int.h — what the sections of herd report (view/report_*.c)
 * share: the page's context, its colours and the helpers every section
 * draws with.  Private to launcher/view/report_*.c. */
#ifndef HERD_LAUNCHER_REPORT_INT_H
#define HERD_LAUNCHER_REPORT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "herd/runlog.h"
#include "herd/svgplot.h"
#include "launcher/view/report.h"

/* Line colours (the report test counts their pixels). */
#define C_LOSS	     "#1f77b4"
#define C_LOSS_RAW   "#b9d3ea"
#define C_TOKENS     "#2ca02c"
#define C_TOKENS_RAW "#bde5bd"
#define C_CPU	     "#e377c2"
#define C_STOPPED    "#999999"
#define C_RSS	     "#7f7f7f"
#define C_STEPS	     "#17becf"
#define C_GPU	     "#d62728"
#define C_GPU_MIN    "#8c564b"
#define C_RX	     "#9467bd"
#define C_TX	     "#ff7f0e"

struct ctx {
	FILE *out;
	const struct runlog *rl;
	double t0_ms;	     /* time 0 of every x axis */
	double x_max;	     /* seconds: the end of the shown time */
	double *xs;	     /* scratch: seconds of a series */
	bool by_time;	     /* --time: loss against time, not step */
	const char *job_dir; /* the run whose job.yaml is shown */
	const char *runs;    /* "ID, ID" when several runs are merged */
	/* The marks of the training plots: attempts' starts (resumes),
	 * node failures and evictions; x in seconds, and the step then. */
	struct svgplot_vline *vt, *vs;
	char **vlabels;
	size_t n_v;
};

/* A user's stop (herd stop, Ctrl-C) ends an attempt "interrupted (...)":
 * not a failure. */
bool report_stopped_by_user(const struct runlog_attempt *a);

/* The marks of the training plots into c (vt, vs, vlabels, n_v): every
 * attempt after the first and every node failure and eviction.  Freed by
 * report_vlines_free(). */
void report_vlines_make(struct ctx *c);
void report_vlines_free(struct ctx *c);

/* A trailing moving average of y over w points into out; restarts where
 * restart_on_drop and x falls (a new attempt resumed further back). */
void report_smooth(const double *x, const double *y, size_t n, size_t w,
		   bool restart_on_drop, double *out);
/* The window of the moving averages: about 1/50 of the points, 1 to 50. */
size_t report_smooth_window(size_t n);
/* The series' times as seconds since c->t0_ms, in buf
 * (RUNLOG_SERIES_MAX); returns buf. */
const double *report_secs(struct ctx *c, const struct runlog_series *s,
			  double *buf);
/* s, HTML-escaped, to the page. */
void report_esc(struct ctx *c, const char *s);
/* ms since the epoch as "YYYY-MM-DD HH:MM:SS UTC" into b. */
void report_iso_time(char *b, size_t len, int64_t ms);

/* The sections, in the page's order (report_page.c calls them). */
void report_summary(struct ctx *c);   /* report_summary.c */
void report_job_table(struct ctx *c); /* report_summary.c */
/* report_charts.c: one chart of job series keys[0..n) (labels, colors)
 * in unit; bufs: 4 x RUNLOG_SERIES_MAX doubles of scratch. */
void report_job_chart(struct ctx *c, const char *title, enum svgplot_unit unit,
		      const int *keys, const char *const *labels,
		      const char *const *colors, size_t n, double *bufs);
void report_loss_chart(struct ctx *c, double *bufs);
void report_tokens_chart(struct ctx *c, double *bufs);
void report_node_charts(struct ctx *c, double *bufs);
void report_timeline(struct ctx *c); /* report_timeline.c */

#endif
