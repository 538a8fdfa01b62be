/* cmd/report.c — `herd report RUNDIR|JOB.yaml -o report.html`: one
 * self-contained HTML file (no script, no network: inline CSS and SVG
 * drawn by svgplot.h) with the run's summary, loss and tokens/s over
 * time, GPU utilisation and network per node as small multiples, and the
 * timeline of attempts, failures, evictions, spares and checkpoints.
 *
 * Size is bounded for runs of any length: each line is at most
 * SVGPLOT_POINTS_MAX points, at most REPORT_NODES_MAX nodes get small
 * multiples, the event table lists at most RUNLOG_MARKS_MAX rows.  The
 * file is written beside its destination and renamed over it, so a
 * reader never sees half a report.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/view/report.h"
#include "herd/checkpoint.h"
#include "herd/runlog.h"
#include "herd/spec.h"
#include "herd/svgplot.h"
#include "launcher/view/rundir.h"

/* Small multiples beyond this many nodes say nothing a person can read;
 * the slowest node is always among them. */
#define REPORT_NODES_MAX 64

/* Line colours (the report test counts their pixels). */
#define C_LOSS "#1f77b4"
#define C_LOSS_RAW "#b9d3ea"
#define C_TOKENS "#2ca02c"
#define C_TOKENS_RAW "#bde5bd"
#define C_CPU "#e377c2"
#define C_STOPPED "#999999"
#define C_RSS "#7f7f7f"
#define C_STEPS "#17becf"
#define C_GPU "#d62728"
#define C_GPU_MIN "#8c564b"
#define C_RX "#9467bd"
#define C_TX "#ff7f0e"

static void report_usage(FILE *out)
{
	fprintf(out,
		"usage: herd report JOB|RUNDIR|LOGDIR|JOB.yaml -o report.html\n"
		"                   [--time] [--one-run]\n"
		"\n"
		"JOB is a job's id or name (herd list shows them).\n"
		"Writes one self-contained HTML file (no script, no network) about\n"
		"a run, from its events.jsonl and metrics.jsonl: a summary (each\n"
		"attempt's world size and how it ended), loss against step and\n"
		"tokens/s over time (each sample faint, a moving average bold;\n"
		"attempts, node failures and evictions marked as dashed lines),\n"
		"GPU utilisation and network rx/tx per node as small multiples\n"
		"(CPU %% and RSS for a node without GPUs; at most %d nodes, the\n"
		"slowest among them), the job's command and settings from its\n"
		"job.yaml with the checkpoints written, and the timeline:\n"
		"attempts (a stop by the user in grey, not as a failure), node\n"
		"failures, evictions, spares used and checkpoints resumed\n"
		"from.  Plots are SVG drawn by herd, at most %d points a\n"
		"line.  Works while the job runs (a snapshot) and after it\n"
		"ended.\n"
		"\n"
		"  -o, --output FILE  where to write the report (required; '-'\n"
		"                     for stdout)\n"
		"  --time             plot loss against time, not step\n"
		"  --one-run          only this run (by default a run resumed\n"
		"                     with herd run --resume is shown with the\n"
		"                     runs before it, followed through their\n"
		"                     run.json)\n"
		"  -h, --help         show this text\n"
		"\n"
		"Exit status: 0 written; 1 a file could not be read or written;\n"
		"2 bad usage, a missing or non-run directory, or a bad job file.\n",
		REPORT_NODES_MAX, SVGPLOT_POINTS_MAX);
}

struct ctx {
	FILE *out;
	const struct runlog *rl;
	double t0_ms; /* time 0 of every x axis */
	double x_max; /* seconds: the end of the shown time */
	double *xs;   /* scratch: seconds of a series */
	bool by_time; /* --time: loss against time, not step */
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
static bool stopped_by_user(const struct runlog_attempt *a)
{
	return a->ended && a->reason &&
	       !strncmp(a->reason, "interrupted", strlen("interrupted"));
}

/* The job's step at time t (ms): of the last line at or before t, else
 * the first after. */
static bool step_at(const struct runlog *rl, double t, double *step)
{
	const struct runlog_series *s = &rl->job_s[RUNLOG_JOB_STEP];
	size_t i;

	if (!s->n)
		return false;
	for (i = 0; i + 1 < s->n && s->t[i + 1] <= t;)
		i++;
	*step = s->v[i];
	return true;
}

static void add_vline(struct ctx *c, double t_ms, char *label,
		      const char *color, bool at_first_after)
{
	const struct runlog *rl = c->rl;
	const struct runlog_series *s = &rl->job_s[RUNLOG_JOB_STEP];
	double step = NAN;

	if (at_first_after) {
		/* An attempt's first step: the first line at or after its
		 * start. */
		for (size_t i = 0; i < s->n; i++)
			if (s->t[i] >= t_ms) {
				step = s->v[i];
				break;
			}
	} else if (!step_at(rl, t_ms, &step)) {
		step = NAN;
	}
	c->vlabels[c->n_v] = label;
	c->vt[c->n_v] = (struct svgplot_vline){
	    .x = (t_ms - c->t0_ms) / 1000.0, .label = label, .color = color};
	c->vs[c->n_v] = (struct svgplot_vline){
	    .x = step, .label = label, .color = color};
	c->n_v++;
}

/* The marks: every attempt after the first (its start, resumed from a
 * checkpoint or not) and every node failure and eviction. */
static void make_vlines(struct ctx *c)
{
	const struct runlog *rl = c->rl;
	size_t max = rl->n_attempts + rl->n_marks + 1;

	c->vt = calloc(max, sizeof(*c->vt));
	c->vs = calloc(max, sizeof(*c->vs));
	c->vlabels = calloc(max, sizeof(*c->vlabels));
	if (!c->vt || !c->vs || !c->vlabels)
		return;
	for (size_t i = 1; i < rl->n_attempts; i++) {
		const struct runlog_attempt *a = &rl->attempts[i];
		char *l = NULL;

		if (asprintf(&l, "attempt %d starts%s%s", a->attempt,
			     a->checkpoint ? ", resumed from " : "",
			     a->checkpoint ? a->checkpoint : "") < 0)
			l = NULL;
		add_vline(c, (double)a->start_t, l, "#4c72b0", true);
	}
	for (size_t i = 0; i < rl->n_marks; i++) {
		const struct runlog_mark *m = &rl->marks[i];
		bool failed = !strcmp(m->event, "node_failed");
		char *l = NULL;

		if (!failed && strcmp(m->event, "node_evicted"))
			continue;
		if (asprintf(&l, "%s %s%s%s", failed ? "failed:" : "evicted:",
			     m->host ? m->host : "?", m->detail ? ": " : "",
			     m->detail ? m->detail : "") < 0)
			l = NULL;
		add_vline(c, (double)m->t, l, failed ? "#c44e52" : "#dd8452",
			  false);
	}
}

static void free_vlines(struct ctx *c)
{
	for (size_t i = 0; c->vlabels && i < c->n_v; i++)
		free(c->vlabels[i]);
	free(c->vlabels);
	free(c->vt);
	free(c->vs);
}

/* A trailing moving average of y over w points into out; restarts where
 * restart_on_drop and x falls (a new attempt resumed further back). */
static void smooth(const double *x, const double *y, size_t n, size_t w,
		   bool restart_on_drop, double *out)
{
	double sum = 0;
	size_t start = 0;

	for (size_t i = 0; i < n; i++) {
		if (restart_on_drop && i && x[i] < x[i - 1]) {
			start = i;
			sum = 0;
		}
		sum += y[i];
		if (i - start >= w)
			sum -= y[i - w];
		out[i] = sum / (double)(i - start + 1 < w ? i - start + 1 : w);
	}
}

/* The window of the moving averages: about 1/50 of the points, 1 to 50. */
static size_t smooth_window(size_t n)
{
	size_t w = n / 50;

	return w < 1 ? 1 : w > 50 ? 50 : w;
}

/* The series' times as seconds since t0, in c->xs (RUNLOG_SERIES_MAX). */
static const double *secs(struct ctx *c, const struct runlog_series *s,
			  double *buf)
{
	for (size_t i = 0; i < s->n; i++)
		buf[i] = (s->t[i] - c->t0_ms) / 1000.0;
	return buf;
}

static void esc(struct ctx *c, const char *s)
{
	svgplot_escape(c->out, s);
}

static void iso_time(char *b, size_t len, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(b, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(b, len, "?");
}

static void summary_row(struct ctx *c, const char *k, const char *v)
{
	fprintf(c->out, "<tr><th>");
	esc(c, k);
	fprintf(c->out, "</th><td>");
	esc(c, v);
	fprintf(c->out, "</td></tr>\n");
}

/* The job's hosts (every node the events or metrics named), at most 32
 * named. */
static void summary_hosts(struct ctx *c)
{
	const struct runlog *rl = c->rl;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (!rl->n_nodes || !(f = open_memstream(&buf, &len)))
		return;
	for (size_t i = 0; i < rl->n_nodes && i < 32; i++)
		fprintf(f, "%s%s", i ? ", " : "", rl->nodes[i].name);
	if (rl->n_nodes > 32)
		fprintf(f, " and %zu more", rl->n_nodes - 32);
	if (fclose(f) == 0)
		summary_row(c, "hosts", buf);
	free(buf);
}

static int by_natural(const void *a, const void *b)
{
	return checkpoint_name_cmp(*(char *const *)a, *(char *const *)b);
}

/* checkpoint.dir and what is in it now: the checkpoints the job wrote
 * (the matches of checkpoint.pattern, in natural order, at most 24
 * named) and the newest complete one, as herd would resume from it.  A
 * relative dir is the job file's (run.json), as herd run takes it. */
static void checkpoints(struct ctx *c, const struct spec *sp)
{
	struct checkpoint_result res = {0};
	struct herd_err err;
	char *dir = NULL, *jf = NULL, *pat = NULL, b[1024];
	glob_t g = {0};

	herd_err_clear(&err);
	summary_row(c, "checkpoint.dir", sp->checkpoint.dir);
	if (sp->checkpoint.dir[0] != '/') {
		char *path = NULL;
		json_t *run = NULL;
		const char *f, *slash;

		if (asprintf(&path, "%s/run.json", c->job_dir) >= 0)
			run = json_load_file(path, 0, NULL);
		free(path);
		f = json_string_value(json_object_get(run, "job_file"));
		if (f && (slash = strrchr(f, '/')))
			jf = strndup(f, (size_t)(slash - f));
		json_decref(run);
		if (!jf || asprintf(&dir, "%s/%s", jf, sp->checkpoint.dir) < 0)
			dir = NULL;
	} else {
		dir = strdup(sp->checkpoint.dir);
	}
	if (!dir)
		goto out;
	if (sp->checkpoint.pattern &&
	    asprintf(&pat, "%s/%s", dir, sp->checkpoint.pattern) >= 0 &&
	    glob(pat, GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc) {
		size_t len = 0;

		for (size_t i = 0; i < g.gl_pathc; i++) {
			char *slash = strrchr(g.gl_pathv[i], '/');

			if (slash)
				memmove(g.gl_pathv[i], slash + 1,
					strlen(slash + 1) + 1);
		}
		qsort(g.gl_pathv, g.gl_pathc, sizeof(*g.gl_pathv),
		      by_natural);
		len = (size_t)snprintf(b, sizeof(b), "%zu: ", g.gl_pathc);
		for (size_t i = 0; i < g.gl_pathc && len < sizeof(b); i++) {
			if (i == 24) {
				len += (size_t)snprintf(b + len, sizeof(b) - len,
							", ...");
				break;
			}
			len += (size_t)snprintf(b + len, sizeof(b) - len,
						"%s%s", i ? ", " : "",
						g.gl_pathv[i]);
		}
		summary_row(c, "checkpoints written", b);
	}
	if (checkpoint_find(dir, sp->checkpoint.latest_file,
			    sp->checkpoint.pattern, sp->checkpoint.complete_marker,
			    &res, &err) == 0)
		summary_row(c, "newest complete checkpoint",
			    res.path ? res.path : "none");
	checkpoint_result_free(&res);
out:
	globfree(&g);
	free(pat);
	free(dir);
	free(jf);
}

/* The job as its run directory's job.yaml (the exact bytes herd ran)
 * says: command, hosts and the settings that shape a run.  Values of
 * launch.env are left out (they may be secrets): only their names. */
static void job_table(struct ctx *c)
{
	struct herd_err err;
	struct spec *sp;
	char *path = NULL, b[512];

	herd_err_clear(&err);
	if (!c->job_dir || asprintf(&path, "%s/job.yaml", c->job_dir) < 0)
		return;
	sp = spec_load(path, &err);
	free(path);
	if (!sp)
		return; /* a run from before job.yaml, or not readable */
	fprintf(c->out, "<h2>Job</h2>\n<table class=\"summary\">\n");
	/* The command's lines as lines. */
	fprintf(c->out, "<tr><th>command</th><td><pre class=\"cmd\">");
	for (const char *p = sp->launch.command; p && *p;) {
		size_t n = strcspn(p, "\n");
		char *line = strndup(p, n);

		esc(c, line);
		free(line);
		p += n;
		if (*p == '\n' && *++p)
			fputc('\n', c->out);
	}
	fprintf(c->out, "</pre></td></tr>\n");
	if (sp->launch.workdir)
		summary_row(c, "workdir", sp->launch.workdir);
	switch (sp->nodes.source) {
	case SPEC_SOURCE_HOSTS:
		summary_row(c, "nodes.hosts", sp->nodes.hosts);
		break;
	case SPEC_SOURCE_HOSTFILE:
		summary_row(c, "nodes.hostfile", sp->nodes.hostfile);
		break;
	case SPEC_SOURCE_COMMAND:
		summary_row(c, "nodes.command", sp->nodes.command);
		break;
	case SPEC_SOURCE_INVENTORY:
		summary_row(c, "nodes.inventory", sp->nodes.inventory.url);
		break;
	default:
		summary_row(c, "nodes.hosts", "localhost");
	}
	if (sp->nodes.spares)
		summary_row(c, "nodes.spares", sp->nodes.spares);
	snprintf(b, sizeof(b), "%ld", sp->nodes.slots);
	summary_row(c, "nodes.slots", sp->nodes.slots ? b : "auto (GPUs)");
	snprintf(b, sizeof(b), "max %d", sp->restart.max);
	summary_row(c, "restart", b);
	if (sp->checkpoint.dir)
		checkpoints(c, sp);
	if (sp->launch.n_env) {
		FILE *f;
		char *names = NULL;
		size_t len = 0;

		if ((f = open_memstream(&names, &len))) {
			for (size_t i = 0; i < sp->launch.n_env; i++)
				fprintf(f, "%s%s", i ? ", " : "",
					sp->launch.env[i].key);
			if (fclose(f) == 0)
				summary_row(c, "launch.env (names)", names);
			free(names);
		}
	}
	fprintf(c->out, "</table>\n");
	spec_free(sp);
}

static void summary(struct ctx *c)
{
	const struct runlog *rl = c->rl;
	char b[512], e[48];
	double v;

	fprintf(c->out, "<table class=\"summary\">\n");
	summary_row(c, "run", rl->run_id ? rl->run_id : "?");
	if (rl->ended)
		snprintf(b, sizeof(b), "ended, exit status %d, %d attempt%s",
			 rl->end_status, rl->end_attempts,
			 rl->end_attempts == 1 ? "" : "s");
	else
		snprintf(b, sizeof(b), "running (snapshot), %zu attempt%s",
			 rl->n_attempts, rl->n_attempts == 1 ? "" : "s");
	summary_row(c, "state", b);
	if (c->t0_ms > 0) {
		iso_time(b, sizeof(b), (int64_t)c->t0_ms);
		summary_row(c, "started", b);
		svgplot_format_elapsed(e, sizeof(e), c->x_max);
		summary_row(c, rl->ended ? "ran" : "so far", e);
	}
	if (rl->mode || rl->transport) {
		snprintf(b, sizeof(b), "%s, transport %s",
			 rl->mode ? rl->mode : "?",
			 rl->transport ? rl->transport : "?");
		summary_row(c, "mode", b);
	}
	snprintf(b, sizeof(b), "%d wanted, %d spare%s; %zu named", rl->want_nodes,
		 rl->spares, rl->spares == 1 ? "" : "s", rl->n_nodes);
	summary_row(c, "nodes", b);
	/* The step rank 0 reported last (with its loss), as it printed
	 * it; else the step every rank reached. */
	if (runlog_job_value(rl, "loss_step", &v) ||
	    runlog_job_value(rl, "step", &v)) {
		snprintf(b, sizeof(b), "%.0f", v);
		summary_row(c, "last step", b);
	}
	if (runlog_job_value(rl, "loss", &v)) {
		snprintf(b, sizeof(b), "%.4g", v);
		summary_row(c, "last loss", b);
	}
	if (runlog_job_value(rl, "tokens_per_s", &v)) {
		svgplot_format(b, sizeof(b), v, SVGPLOT_PLAIN);
		summary_row(c, "tokens/s (last)", b);
	}
	{
		const char *slow = json_string_value(json_object_get(
		    json_object_get(rl->last, "job"), "slowest"));

		summary_row(c, "slowest node", slow ? slow : "none named");
	}
	if (c->runs)
		summary_row(c, "runs (resumed with --resume)", c->runs);
	summary_hosts(c);
	for (size_t i = 0; i < rl->n_attempts; i++) {
		const struct runlog_attempt *a = &rl->attempts[i];
		int len;

		len = snprintf(b, sizeof(b), "world size %d on %d node%s",
			       a->world_size, a->nodes,
			       a->nodes == 1 ? "" : "s");
		if (a->ended && a->end_t >= a->start_t && a->start_t) {
			svgplot_format_elapsed(e, sizeof(e),
					       (double)(a->end_t - a->start_t) /
						   1000.0);
			len += snprintf(
			    b + len, sizeof(b) - (size_t)len, ", ran %s, %s%s",
			    e, a->reason ? a->reason : "ended",
			    stopped_by_user(a) ? " (stopped by the user)" : "");
		} else if (!a->ended) {
			len += snprintf(b + len, sizeof(b) - (size_t)len,
					", running");
		}
		if (a->checkpoint && len > 0 && (size_t)len < sizeof(b))
			snprintf(b + len, sizeof(b) - (size_t)len,
				 ", resumed from %s", a->checkpoint);
		snprintf(e, sizeof(e), "attempt %d", a->attempt);
		summary_row(c, e, b);
	}
	for (size_t i = 0; i < rl->n_attempts; i++)
		if (rl->attempts[i].checkpoint) {
			snprintf(b, sizeof(b), "%s (attempt %d)",
				 rl->attempts[i].checkpoint,
				 rl->attempts[i].attempt);
			summary_row(c, "resumed from", b);
		}
	summary_row(c, "logs", rl->dir);
	if (rl->ev.bad || rl->met.bad) {
		snprintf(b, sizeof(b), "%llu in events.jsonl, %llu in metrics.jsonl",
			 (unsigned long long)rl->ev.bad,
			 (unsigned long long)rl->met.bad);
		summary_row(c, "lines skipped", b);
	}
	fprintf(c->out, "</table>\n");
}

static void job_chart(struct ctx *c, const char *title, enum svgplot_unit unit,
		      const int *keys, const char *const *labels,
		      const char *const *colors, size_t n, double *bufs)
{
	struct svgplot_axes ax = {.title = title,
				  .width = 560,
				  .height = 240,
				  .x_min = 0,
				  .x_max = c->x_max,
				  .unit = unit,
				  .y_from_zero = keys[0] != RUNLOG_JOB_LOSS,
				  .vlines = c->vt,
				  .n_vlines = c->vt ? c->n_v : 0};
	struct svgplot_line lines[4];

	for (size_t i = 0; i < n; i++) {
		const struct runlog_series *s = &c->rl->job_s[keys[i]];

		lines[i] = (struct svgplot_line){
		    .label = labels[i],
		    .color = colors[i],
		    .x = secs(c, s, bufs + i * RUNLOG_SERIES_MAX),
		    .y = s->v,
		    .n = s->n};
	}
	svgplot_lines(c->out, &ax, lines, n);
}

/* Loss against step (or, --time, against time): each sample faint, a
 * moving average over it bold; an attempt resumed further back starts a
 * new segment; attempts, failures and evictions marked. */
static void loss_chart(struct ctx *c, double *bufs)
{
	const struct runlog *rl = c->rl;
	const struct runlog_series *s =
	    c->by_time ? &rl->job_s[RUNLOG_JOB_LOSS] : &rl->loss_by_step;
	const double *x = c->by_time ? secs(c, s, bufs) : s->t;
	double *sm = bufs + RUNLOG_SERIES_MAX;
	size_t w = smooth_window(s->n), n_seg = 1, k = 0, from = 0;
	struct svgplot_line *lines;
	char label[64];
	struct svgplot_axes ax = {.title = c->by_time ? "loss" : "loss by step",
				  .width = 560,
				  .height = 240,
				  .x_min = 0,
				  .x_max = c->by_time ? c->x_max : 0,
				  .unit = SVGPLOT_PLAIN,
				  .x_label = c->by_time ? NULL : "step",
				  .vlines = c->by_time ? c->vt : c->vs,
				  .n_vlines = c->vt ? c->n_v : 0};

	smooth(x, s->v, s->n, w, !c->by_time, sm);
	for (size_t i = 1; i < s->n; i++)
		n_seg += !c->by_time && x[i] < x[i - 1];
	lines = calloc(2 * n_seg, sizeof(*lines));
	if (!lines)
		return;
	snprintf(label, sizeof(label), "mean of %zu", w);
	for (size_t i = 1; i <= s->n; i++) {
		if (i < s->n && (c->by_time || x[i] >= x[i - 1]))
			continue;
		lines[k++] = (struct svgplot_line){.label =
						       from ? NULL : "each",
						   .color = C_LOSS_RAW,
						   .x = x + from,
						   .y = s->v + from,
						   .n = i - from};
		lines[k++] = (struct svgplot_line){
		    .label = from || w == 1 ? NULL : label,
		    .color = C_LOSS,
		    .x = x + from,
		    .y = sm + from,
		    .n = i - from};
		from = i;
	}
	svgplot_lines(c->out, &ax, lines, k);
	free(lines);
}

/* tokens/s over time: each sample faint, a moving average bold. */
static void tokens_chart(struct ctx *c, double *bufs)
{
	const struct runlog_series *s = &c->rl->job_s[RUNLOG_JOB_TOKENS_PER_S];
	double *sm = bufs + RUNLOG_SERIES_MAX;
	size_t w = smooth_window(s->n);
	char label[64];
	struct svgplot_line lines[2];
	struct svgplot_axes ax = {.title = "tokens/s",
				  .width = 560,
				  .height = 240,
				  .x_min = 0,
				  .x_max = c->x_max,
				  .unit = SVGPLOT_PLAIN,
				  .y_from_zero = true,
				  .vlines = c->vt,
				  .n_vlines = c->vt ? c->n_v : 0};

	smooth(s->t, s->v, s->n, w, false, sm);
	snprintf(label, sizeof(label), "mean of %zu", w);
	lines[0] = (struct svgplot_line){.label = "each",
					 .color = C_TOKENS_RAW,
					 .x = secs(c, s, bufs),
					 .y = s->v,
					 .n = s->n};
	lines[1] = (struct svgplot_line){.label = w == 1 ? NULL : label,
					 .color = C_TOKENS,
					 .x = bufs,
					 .y = sm,
					 .n = s->n};
	svgplot_lines(c->out, &ax, lines, 2);
}

static bool has_series(const struct runlog_node *n)
{
	for (int k = 0; k < RUNLOG_NODE_N_; k++)
		if (n->s[k].n)
			return true;
	return false;
}

static const struct runlog *sort_rl;

static int by_name(const void *a, const void *b)
{
	return strverscmp(sort_rl->nodes[*(const size_t *)a].name,
			  sort_rl->nodes[*(const size_t *)b].name);
}

/* The nodes to draw: name order, at most REPORT_NODES_MAX, the slowest
 * always among them. */
static size_t pick_nodes(const struct runlog *rl, size_t *idx)
{
	const char *slow = json_string_value(
	    json_object_get(json_object_get(rl->last, "job"), "slowest"));
	size_t n = 0;
	bool have_slow = false;

	for (size_t i = 0; i < rl->n_nodes && n < REPORT_NODES_MAX; i++) {
		/* Nodes without a value (never in the metrics, an idle
		 * spare) have nothing to draw. */
		if (!has_series(&rl->nodes[i]))
			continue;
		idx[n++] = i;
		if (slow && !strcmp(rl->nodes[i].name, slow))
			have_slow = true;
	}
	if (slow && !have_slow && n) {
		const struct runlog_node *sn = runlog_node(rl, slow);

		if (sn && has_series(sn))
			idx[n - 1] = (size_t)(sn - rl->nodes);
	}
	sort_rl = rl;
	qsort(idx, n, sizeof(*idx), by_name);
	return n;
}

static void node_charts(struct ctx *c, double *bufs)
{
	const struct runlog *rl = c->rl;
	const char *slow = json_string_value(
	    json_object_get(json_object_get(rl->last, "job"), "slowest"));
	size_t *idx = calloc(REPORT_NODES_MAX, sizeof(*idx)), n;

	if (!idx)
		return;
	n = pick_nodes(rl, idx);
	{
		size_t with = 0;

		for (size_t i = 0; i < rl->n_nodes; i++)
			with += has_series(&rl->nodes[i]);
		if (with > n)
			fprintf(c->out,
				"<p class=\"note\">%zu of %zu nodes shown.</p>\n",
				n, with);
	}
	/* Nodes without GPUs: said once, not in every panel. */
	{
		size_t no_gpu = 0;
		const char *why = NULL;

		for (size_t k = 0; k < n; k++) {
			const struct runlog_node *nd = &rl->nodes[idx[k]];

			if (nd->s[RUNLOG_NODE_GPU_UTIL].n)
				continue;
			no_gpu++;
			if (!why)
				why = json_string_value(
				    json_object_get(nd->last, "gpu_error"));
		}
		if (no_gpu) {
			fprintf(c->out,
				"<p class=\"note\">%zu node%s without GPU "
				"values%s",
				no_gpu, no_gpu == 1 ? "" : "s",
				why ? " (" : "");
			esc(c, why);
			fprintf(c->out, "%s: CPU %% and RSS of the ranks "
					"instead.</p>\n",
				why ? ")" : "");
		}
	}
	fprintf(c->out, "<div class=\"grid\">\n");
	for (size_t k = 0; k < n; k++) {
		const struct runlog_node *nd = &rl->nodes[idx[k]];
		bool is_slow = slow && !strcmp(slow, nd->name);
		struct svgplot_axes ax = {.width = 300,
					  .height = 150,
					  .x_min = 0,
					  .x_max = c->x_max,
					  .unit = SVGPLOT_PERCENT,
					  .y_from_zero = true};
		const struct runlog_series *g = &nd->s[RUNLOG_NODE_GPU_UTIL];
		const struct runlog_series *rx = &nd->s[RUNLOG_NODE_RX_BYTES_PER_S];
		const struct runlog_series *tx = &nd->s[RUNLOG_NODE_TX_BYTES_PER_S];
		struct svgplot_line gl = {.color = C_GPU,
					  .x = secs(c, g, bufs),
					  .y = g->v,
					  .n = g->n};
		struct svgplot_line nl[2] = {
		    {.label = "rx", .color = C_RX,
		     .x = secs(c, rx, bufs + RUNLOG_SERIES_MAX), .y = rx->v,
		     .n = rx->n},
		    {.label = "tx", .color = C_TX,
		     .x = secs(c, tx, bufs + 2 * RUNLOG_SERIES_MAX), .y = tx->v,
		     .n = tx->n}};

		fprintf(c->out, "<div class=\"node%s\"><h3>",
			is_slow ? " slow" : "");
		esc(c, nd->name);
		fprintf(c->out, " <small>");
		esc(c, nd->state ? nd->state : "");
		if (is_slow)
			fprintf(c->out, ", slowest");
		fprintf(c->out, "</small></h3>\n");
		if (g->n) {
			ax.title = "GPU util";
			svgplot_lines(c->out, &ax, &gl, 1);
		} else {
			const struct runlog_series *cpu =
			    &nd->s[RUNLOG_NODE_CPU_PCT];
			const struct runlog_series *rss =
			    &nd->s[RUNLOG_NODE_RSS_KIB];
			double *rb = bufs + 3 * RUNLOG_SERIES_MAX;
			struct svgplot_line cl = {.color = C_CPU,
						  .x = secs(c, cpu, bufs),
						  .y = cpu->v,
						  .n = cpu->n};
			struct svgplot_line rl_ = {
			    .color = C_RSS,
			    .x = secs(c, rss, bufs + RUNLOG_SERIES_MAX),
			    .y = rb,
			    .n = rss->n};

			for (size_t i = 0; i < rss->n; i++)
				rb[i] = rss->v[i] * 1024.0;
			ax.title = "CPU % (100 = a core)";
			ax.unit = SVGPLOT_PLAIN;
			svgplot_lines(c->out, &ax, &cl, 1);
			ax.title = "RSS (bytes)";
			svgplot_lines(c->out, &ax, &rl_, 1);
			nl[0].x = secs(c, rx, bufs + RUNLOG_SERIES_MAX);
			nl[1].x = secs(c, tx, bufs + 2 * RUNLOG_SERIES_MAX);
		}
		ax.title = "network";
		ax.unit = SVGPLOT_BYTES_PER_S;
		svgplot_lines(c->out, &ax, nl, 2);
		fprintf(c->out, "</div>\n");
	}
	fprintf(c->out, "</div>\n");
	free(idx);
}

/* Timeline rows. */
enum { ROW_ATTEMPTS, ROW_FAILED, ROW_EVICTED, ROW_SPARE, ROW_CKPT, ROW_OTHER,
       ROW_N_ };

static void timeline(struct ctx *c)
{
	static const char *const rows[ROW_N_] = {
	    "attempts", "node failed", "evicted", "spare used", "checkpoint",
	    "other"};
	const struct runlog *rl = c->rl;
	struct svgplot_span *spans = calloc(rl->n_attempts + 1, sizeof(*spans));
	struct svgplot_mark *marks = calloc(rl->n_marks + 1, sizeof(*marks));
	char **labels = calloc(rl->n_attempts + rl->n_marks + 1, sizeof(char *));
	size_t nl = 0;
	struct svgplot_axes ax = {.title = "timeline",
				  .width = 1140,
				  .height = 26 + 38 + 28 * ROW_N_,
				  .x_min = 0,
				  .x_max = c->x_max};

	if (!spans || !marks || !labels)
		goto out;
	for (size_t i = 0; i < rl->n_attempts; i++) {
		const struct runlog_attempt *a = &rl->attempts[i];
		char *l = NULL;

		if (asprintf(&l, "attempt %d: %s%s%s%s", a->attempt,
			     a->ended ? (a->reason ? a->reason : "ended")
				      : "running",
			     stopped_by_user(a) ? ", stopped by the user" : "",
			     a->checkpoint ? ", from " : "",
			     a->checkpoint ? a->checkpoint : "") < 0)
			l = NULL;
		labels[nl++] = l;
		spans[i] = (struct svgplot_span){
		    .x0 = (a->start_t - c->t0_ms) / 1000.0,
		    .x1 = a->ended ? (a->end_t - c->t0_ms) / 1000.0 : c->x_max,
		    .row = ROW_ATTEMPTS,
		    .label = l,
		    .color = !a->ended		? "#4c72b0"
			     : a->status == 0	? "#55a868"
			     : stopped_by_user(a) ? C_STOPPED
						: "#c44e52"};
	}
	for (size_t i = 0; i < rl->n_marks; i++) {
		const struct runlog_mark *m = &rl->marks[i];
		const char *ev = m->event;
		int row = ROW_OTHER;
		const char *color = "#937860";
		char *l = NULL;

		if (!strcmp(ev, "node_failed")) {
			row = ROW_FAILED;
			color = "#c44e52";
		} else if (!strcmp(ev, "node_evicted")) {
			row = ROW_EVICTED;
			color = "#dd8452";
		} else if (!strcmp(ev, "spare_used")) {
			row = ROW_SPARE;
			color = "#55a868";
		} else if (!strcmp(ev, "checkpoint_found")) {
			row = ROW_CKPT;
			color = "#8172b3";
		}
		if (asprintf(&l, "%s%s%s%s%s", ev, m->host ? " " : "",
			     m->host ? m->host : "", m->detail ? ": " : "",
			     m->detail ? m->detail : "") < 0)
			l = NULL;
		labels[nl++] = l;
		marks[i] = (struct svgplot_mark){
		    .x = (m->t - c->t0_ms) / 1000.0,
		    .row = row,
		    .label = l,
		    .color = color};
	}
	svgplot_timeline(c->out, &ax, rows, ROW_N_, spans, rl->n_attempts,
			 marks, rl->n_marks);
	/* The same as a table in time order, readable without hovering. */
	fprintf(c->out, "<table class=\"events\"><tr><th>time</th><th>attempt"
			"</th><th>event</th><th>node</th><th>detail</th></tr>\n");
	{
		size_t ia = 0, im = 0, half = 0;

		/* Attempts give two rows each (start, end): half says which
		 * one is next. */
		while (ia < rl->n_attempts || im < rl->n_marks) {
			const struct runlog_attempt *a =
			    ia < rl->n_attempts ? &rl->attempts[ia] : NULL;
			int64_t ta = !a ? INT64_MAX
				     : half ? a->end_t
					    : a->start_t;
			char e[48];

			if (a && half && !a->ended) {
				ia++;
				half = 0;
				continue;
			}
			if (a && (im >= rl->n_marks || ta <= rl->marks[im].t)) {
				svgplot_format_elapsed(e, sizeof(e),
						       (ta - c->t0_ms) / 1000.0);
				fprintf(c->out, "<tr><td>%s</td><td>%d</td><td>"
						"%s</td><td></td><td>",
					e, a->attempt,
					half ? "attempt_end" : "attempt_start");
				if (!half && a->checkpoint) {
					fprintf(c->out, "resumed from ");
					esc(c, a->checkpoint);
				} else if (half) {
					esc(c, a->reason);
					fprintf(c->out, " (status %d)", a->status);
				}
				fprintf(c->out, "</td></tr>\n");
				if (half)
					ia++;
				half = !half;
				continue;
			}
			{
				const struct runlog_mark *m = &rl->marks[im++];

				svgplot_format_elapsed(e, sizeof(e),
						       (m->t - c->t0_ms) / 1000.0);
				fprintf(c->out, "<tr><td>%s</td><td>%d</td><td>",
					e, m->attempt);
				esc(c, m->event);
				fprintf(c->out, "</td><td>");
				esc(c, m->host);
				fprintf(c->out, "</td><td>");
				esc(c, m->detail);
				fprintf(c->out, "</td></tr>\n");
			}
		}
	}
	fprintf(c->out, "</table>\n");
	if (rl->marks_dropped)
		fprintf(c->out, "<p class=\"note\">%llu more events not shown."
				"</p>\n",
			(unsigned long long)rl->marks_dropped);
out:
	for (size_t i = 0; labels && i < nl; i++)
		free(labels[i]);
	free(labels);
	free(spans);
	free(marks);
}

static const char style[] =
    "body{font-family:sans-serif;margin:20px;color:#222;background:#fff}"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
    "h3{font-size:13px;margin:4px 0}small{color:#666;font-weight:normal}"
    "table{border-collapse:collapse;font-size:12px}"
    "th,td{text-align:left;padding:2px 10px 2px 0;vertical-align:top}"
    "table.events td,table.events th{border-bottom:1px solid #eee}"
    ".row{display:flex;flex-wrap:wrap;gap:12px}"
    ".grid{display:flex;flex-wrap:wrap;gap:10px}"
    ".node{border:1px solid #ddd;padding:4px}"
    ".node.slow{border:2px solid #c44e52}"
    ".note{color:#666;font-size:12px}"
    ".node .note{max-width:290px;overflow-wrap:anywhere;margin:2px 0}"
    "svg.chart{display:block}"
    "pre.cmd{margin:0;font-size:12px;white-space:pre-wrap}";

/* Writes the whole page to out. */
struct report_opts {
	bool by_time;
	const char *job_dir, *runs;
};

static int write_report(FILE *out, const struct runlog *rl,
			const struct report_opts *o)
{
	struct ctx c = {.out = out,
			.rl = rl,
			.by_time = o->by_time,
			.job_dir = o->job_dir,
			.runs = o->runs};
	double end_ms = 0, *bufs;
	static const int steps_k[] = {RUNLOG_JOB_STEPS_PER_S};
	static const int gpu_k[] = {RUNLOG_JOB_GPU_UTIL_AVG,
				    RUNLOG_JOB_GPU_UTIL_MIN};
	static const int net_k[] = {RUNLOG_JOB_RX_BYTES_PER_S,
				    RUNLOG_JOB_TX_BYTES_PER_S};
	static const char *const loss_l[] = {NULL};
	static const char *const steps_c[] = {C_STEPS};
	static const char *const gpu_l[] = {"avg", "min"},
				 *const gpu_c[] = {C_GPU, C_GPU_MIN};
	static const char *const net_l[] = {"rx", "tx"},
				 *const net_c[] = {C_RX, C_TX};

	bufs = malloc(4 * RUNLOG_SERIES_MAX * sizeof(*bufs));
	if (!bufs)
		return -1;
	c.t0_ms = (double)(rl->start_t ? rl->start_t : rl->first_metrics_t);
	/* The shown time ends with the last thing the files say. */
	end_ms = (double)rl->last_metrics_t;
	if (rl->ended && rl->end_t > end_ms)
		end_ms = (double)rl->end_t;
	for (size_t i = 0; i < rl->n_marks; i++)
		if (rl->marks[i].t > end_ms)
			end_ms = (double)rl->marks[i].t;
	for (size_t i = 0; i < rl->n_attempts; i++) {
		if (rl->attempts[i].start_t > end_ms)
			end_ms = (double)rl->attempts[i].start_t;
		if (rl->attempts[i].end_t > end_ms)
			end_ms = (double)rl->attempts[i].end_t;
	}
	c.x_max = end_ms > c.t0_ms ? (end_ms - c.t0_ms) / 1000.0 : 1;
	make_vlines(&c);

	fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
		     "<meta charset=\"utf-8\">\n<title>herd report: ");
	esc(&c, rl->job ? rl->job : "?");
	fprintf(out, " ");
	esc(&c, rl->run_id ? rl->run_id : "");
	fprintf(out, "</title>\n<style>%s</style></head>\n<body>\n<h1>herd "
		     "report: job ",
		style);
	esc(&c, rl->job ? rl->job : "?");
	fprintf(out, "</h1>\n");
	summary(&c);
	job_table(&c);
	report_failures(out, rl, c.t0_ms);

	fprintf(out, "<h2>Training</h2>\n");
	if (!rl->met.lines) {
		fprintf(out, "<p class=\"note\">No metrics.jsonl in this run "
			     "directory: no plots.</p>\n");
		goto timeline;
	}
	fprintf(out, "<div class=\"row\">\n");
	loss_chart(&c, bufs);
	tokens_chart(&c, bufs);
	job_chart(&c, "steps/s (slowest node)", SVGPLOT_PLAIN, steps_k, loss_l,
		  steps_c, 1, bufs);
	fprintf(out, "</div>\n<h2>Cluster</h2>\n<div class=\"row\">\n");
	job_chart(&c, "GPU utilisation", SVGPLOT_PERCENT, gpu_k, gpu_l, gpu_c,
		  2, bufs);
	job_chart(&c, "network (all nodes)", SVGPLOT_BYTES_PER_S, net_k, net_l,
		  net_c, 2, bufs);
	fprintf(out, "</div>\n<h2>Per node</h2>\n");
	node_charts(&c, bufs);
timeline:
	fprintf(out, "<h2>Timeline</h2>\n");
	timeline(&c);
	fprintf(out, "<p class=\"note\">Made by herd report from ");
	esc(&c, rl->dir);
	fprintf(out, ".</p>\n</body></html>\n");
	free_vlines(&c);
	free(bufs);
	return ferror(out) ? -1 : 0;
}

/* Writes the report to a temporary file beside path and renames it over
 * path.  Returns 0, or -1 after saying why. */
static int write_file(const char *path, const struct runlog *rl,
		      const struct report_opts *o)
{
	char *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, rc = -1;
	mode_t um;

	if (!strcmp(path, "-"))
		return write_report(stdout, rl, o) < 0 || fflush(stdout)
			   ? -1
			   : 0;
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		cli_error("report: out of memory");
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	/* A report is for reading: 0666 less the umask, like any file. */
	um = umask(0);
	umask(um);
	(void)fchmod(fd, 0666 & ~um);
	f = fdopen(fd, "w");
	if (!f) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (write_report(f, rl, o) < 0 || fflush(f) != 0 || fsync(fileno(f)) < 0) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	if (fclose(f) != 0) {
		f = NULL;
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	f = NULL;
	if (rename(tmp, path) < 0) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	rc = 0;
out:
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	return rc;
}

/* --- the runs of a job: herd run --resume makes a new run directory -- */

/* 64: runs followed back through resumed_from. */
#define REPORT_RUNS_MAX 64

/* The run id dir's run.json says it resumed, or NULL (the caller
 * frees). */
static char *resumed_from(const char *dir)
{
	char *path = NULL, *id = NULL;
	json_t *run;
	const char *v;

	if (asprintf(&path, "%s/run.json", dir) < 0)
		return NULL;
	run = json_load_file(path, 0, NULL);
	free(path);
	v = json_string_value(json_object_get(run, "resumed_from"));
	/* A run id names a sibling directory: nothing else. */
	if (v && *v && !strchr(v, '/') && strcmp(v, ".") && strcmp(v, ".."))
		id = strdup(v);
	json_decref(run);
	return id;
}

/* Feeds path's lines into rl as one of its later runs: attempts
 * numbered on after offset, the later run's job_start left out (the
 * job started with the first run). */
static void feed_run_file(struct runlog *rl, const char *path, int offset,
			  bool events)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f)
		return;
	while ((n = getline(&line, &cap, f)) > 0) {
		json_t *o, *a;
		char *text;
		const char *ev;

		if (line[n - 1] != '\n')
			break; /* a partial last line: the writer is mid-line */
		line[--n] = '\0';
		o = json_loadb(line, (size_t)n, 0, NULL);
		ev = json_string_value(json_object_get(o, "event"));
		if (events && ev && !strcmp(ev, "job_start")) {
			json_decref(o);
			continue;
		}
		if (json_is_integer(a = json_object_get(o, "attempt")))
			json_object_set_new(
			    o, "attempt",
			    json_integer(json_integer_value(a) + offset));
		if (events && ev && !strcmp(ev, "job_end") &&
		    json_is_integer(a = json_object_get(o, "attempts")))
			json_object_set_new(
			    o, "attempts",
			    json_integer(json_integer_value(a) + offset));
		text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		if (events)
			runlog_feed_event(rl, text ? text : line,
					  text ? strlen(text) : (size_t)n);
		else
			runlog_feed_metrics(rl, text ? text : line,
					    text ? strlen(text) : (size_t)n);
		free(text);
		json_decref(o);
	}
	free(line);
	fclose(f);
}

/* The runs of dir's job, oldest first (dir last), following each run's
 * resumed_from to its sibling directory.  Returns the count (1: dir
 * alone); dirs[] are the caller's to free. */
static size_t run_chain(const char *dir, char **dirs)
{
	size_t n = 0;
	char *cur = strdup(dir);

	while (cur && n < REPORT_RUNS_MAX) {
		char *id, *slash, *prev = NULL;
		bool seen = false;
		struct stat st;

		dirs[n++] = cur;
		if (!(id = resumed_from(cur)))
			break;
		slash = strrchr(cur, '/');
		if (asprintf(&prev, "%.*s%s", slash ? (int)(slash - cur + 1) : 0,
			     cur, id) < 0)
			prev = NULL;
		free(id);
		for (size_t i = 0; prev && i < n; i++)
			seen |= !strcmp(dirs[i], prev);
		if (!prev || seen || stat(prev, &st) < 0 || !S_ISDIR(st.st_mode)) {
			free(prev);
			break;
		}
		cur = prev;
	}
	/* Oldest first. */
	for (size_t i = 0; i < n / 2; i++) {
		char *t = dirs[i];

		dirs[i] = dirs[n - 1 - i];
		dirs[n - 1 - i] = t;
	}
	return n;
}

/* One model of every run of the chain: the first read as it is, the
 * later ones fed into it.  Returns NULL (said on stderr) on failure. */
static struct runlog *merge_runs(char **dirs, size_t n, int *status)
{
	struct runlog *rl = rundir_read("report", dirs[0], 0, status);

	for (size_t i = 1; rl && i < n; i++) {
		int offset = rl->n_attempts
				 ? rl->attempts[rl->n_attempts - 1].attempt
				 : 0;
		char *ev = NULL, *met = NULL;

		if (asprintf(&ev, "%s/events.jsonl", dirs[i]) >= 0) {
			feed_run_file(rl, ev, offset, true);
			free(ev);
		}
		if (asprintf(&met, "%s/metrics.jsonl", dirs[i]) >= 0) {
			feed_run_file(rl, met, offset, false);
			free(met);
		}
	}
	if (rl)
		failcost_steps(&rl->failures, rl->job_s[RUNLOG_JOB_STEP].t,
			       rl->job_s[RUNLOG_JOB_STEP].v,
			       rl->job_s[RUNLOG_JOB_STEP].n);
	return rl;
}

/* "ID, ID, ..." of the runs (their directories' names). */
static char *run_names(char **dirs, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *slash = strrchr(dirs[i], '/');

		fprintf(f, "%s%s", i ? ", " : "", slash ? slash + 1 : dirs[i]);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"time", no_argument, NULL, 't'},
	    {"one-run", no_argument, NULL, '1'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *output = NULL;
	struct runlog *rl;
	struct report_opts ro = {0};
	bool one_run = false;
	char *dirs[REPORT_RUNS_MAX], *names = NULL, *real = NULL;
	size_t n_runs = 0;
	int c, status;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 't':
			ro.by_time = true;
			break;
		case '1':
			one_run = true;
			break;
		case 'h':
			report_usage(stdout);
			return 0;
		default:
			return cli_bad_option("report", argv[optind - 1],
					      report_usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("report", "expected one JOB (%s), got %d "
					   "arguments",
				 "id, name, run directory or JOB.yaml",
				 argc - optind);
	if (!output)
		return cli_usage("report",
				 "say where to write it: -o report.html");
	rl = rundir_open("report", argv[optind], 0, &status);
	if (!rl)
		return status;
	/* A run directory's real path: its resumed_from names a sibling of
	 * the directory itself, not of a `latest` link. */
	real = realpath(rl->dir, NULL);
	ro.job_dir = rl->dir;
	if (!one_run && real && (n_runs = run_chain(real, dirs)) > 1) {
		struct runlog *all = merge_runs(dirs, n_runs, &status);

		if (!all)
			goto out;
		names = run_names(dirs, n_runs);
		ro.runs = names;
		status = write_file(output, all, &ro) < 0 ? 1 : 0;
		runlog_free(all);
	} else {
		status = write_file(output, rl, &ro) < 0 ? 1 : 0;
	}
out:
	for (size_t i = 0; i < n_runs; i++)
		free(dirs[i]);
	free(names);
	free(real);
	if (rl)
		runlog_free(rl);
	return status;
}
