/* cmd_report.c — `herd report RUNDIR|JOB.yaml -o report.html`: one
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
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "herd/runlog.h"
#include "herd/svgplot.h"
#include "rundir.h"

/* Small multiples beyond this many nodes say nothing a person can read;
 * the slowest node is always among them. */
#define REPORT_NODES_MAX 64

/* Line colours (the report test counts their pixels). */
#define C_LOSS "#1f77b4"
#define C_TOKENS "#2ca02c"
#define C_STEPS "#17becf"
#define C_GPU "#d62728"
#define C_GPU_MIN "#8c564b"
#define C_RX "#9467bd"
#define C_TX "#ff7f0e"

static void report_usage(FILE *out)
{
	fprintf(out,
		"usage: herd report JOB|RUNDIR|LOGDIR|JOB.yaml -o report.html\n"
		"\n"
		"JOB is a job's id or name (herd list shows them).\n"
		"Writes one self-contained HTML file (no script, no network) about\n"
		"a run, from its events.jsonl and metrics.jsonl: a summary, loss\n"
		"and tokens/s over time, GPU utilisation and network rx/tx per\n"
		"node as small multiples (at most %d nodes, the slowest among\n"
		"them), and the job's timeline: attempts, node failures,\n"
		"evictions, spares used and checkpoints resumed from.  Plots are\n"
		"SVG drawn by herd, at most %d points a line.  Works while the\n"
		"job runs (a snapshot) and after it ended.\n"
		"\n"
		"  -o, --output FILE  where to write the report (required; '-'\n"
		"                     for stdout)\n"
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
};

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
	if (runlog_job_value(rl, "step", &v)) {
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
				  .y_from_zero = keys[0] != RUNLOG_JOB_LOSS};
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
		{
			const char *ge = json_string_value(
			    json_object_get(nd->last, "gpu_error"));

			if (ge) {
				fprintf(c->out, "<p class=\"note\">");
				esc(c, ge);
				fprintf(c->out, "</p>\n");
			}
		}
		ax.title = "GPU util";
		svgplot_lines(c->out, &ax, &gl, 1);
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

		if (asprintf(&l, "attempt %d: %s%s%s", a->attempt,
			     a->ended ? (a->reason ? a->reason : "ended")
				      : "running",
			     a->checkpoint ? ", from " : "",
			     a->checkpoint ? a->checkpoint : "") < 0)
			l = NULL;
		labels[nl++] = l;
		spans[i] = (struct svgplot_span){
		    .x0 = (a->start_t - c->t0_ms) / 1000.0,
		    .x1 = a->ended ? (a->end_t - c->t0_ms) / 1000.0 : c->x_max,
		    .row = ROW_ATTEMPTS,
		    .label = l,
		    .color = !a->ended ? "#4c72b0"
			     : a->status == 0 ? "#55a868"
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
    "svg.chart{display:block}";

/* Writes the whole page to out. */
static int write_report(FILE *out, const struct runlog *rl)
{
	struct ctx c = {.out = out, .rl = rl};
	double end_ms = 0, *bufs;
	static const int loss_k[] = {RUNLOG_JOB_LOSS};
	static const int tok_k[] = {RUNLOG_JOB_TOKENS_PER_S};
	static const int steps_k[] = {RUNLOG_JOB_STEPS_PER_S};
	static const int gpu_k[] = {RUNLOG_JOB_GPU_UTIL_AVG,
				    RUNLOG_JOB_GPU_UTIL_MIN};
	static const int net_k[] = {RUNLOG_JOB_RX_BYTES_PER_S,
				    RUNLOG_JOB_TX_BYTES_PER_S};
	static const char *const loss_l[] = {NULL}, *const loss_c[] = {C_LOSS};
	static const char *const tok_c[] = {C_TOKENS};
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

	fprintf(out, "<h2>Training</h2>\n");
	if (!rl->met.lines) {
		fprintf(out, "<p class=\"note\">No metrics.jsonl in this run "
			     "directory: no plots.</p>\n");
		goto timeline;
	}
	fprintf(out, "<div class=\"row\">\n");
	job_chart(&c, "loss", SVGPLOT_PLAIN, loss_k, loss_l, loss_c, 1, bufs);
	job_chart(&c, "tokens/s", SVGPLOT_PLAIN, tok_k, loss_l, tok_c, 1, bufs);
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
	free(bufs);
	return ferror(out) ? -1 : 0;
}

/* Writes the report to a temporary file beside path and renames it over
 * path.  Returns 0, or -1 after saying why. */
static int write_file(const char *path, const struct runlog *rl)
{
	char *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, rc = -1;
	mode_t um;

	if (!strcmp(path, "-"))
		return write_report(stdout, rl) < 0 || fflush(stdout) ? -1 : 0;
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
	if (write_report(f, rl) < 0 || fflush(f) != 0 || fsync(fileno(f)) < 0) {
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

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *output = NULL;
	struct runlog *rl;
	int c, status;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
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
	status = write_file(output, rl) < 0 ? 1 : 0;
	runlog_free(rl);
	return status;
}
