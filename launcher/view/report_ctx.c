/* view/report_ctx.c — what every section of herd report draws with: the
 * marks of the training plots, moving averages, times and escaping; see
 * report_int.h. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/view/report_int.h"

bool report_stopped_by_user(const struct runlog_attempt *a)
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
	c->vs[c->n_v] =
	    (struct svgplot_vline){.x = step, .label = label, .color = color};
	c->n_v++;
}

/* The marks: every attempt after the first (its start, resumed from a
 * checkpoint or not) and every node failure and eviction. */
void report_vlines_make(struct ctx *c)
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

void report_vlines_free(struct ctx *c)
{
	for (size_t i = 0; c->vlabels && i < c->n_v; i++)
		free(c->vlabels[i]);
	free(c->vlabels);
	free(c->vt);
	free(c->vs);
}

/* A trailing moving average of y over w points into out; restarts where
 * restart_on_drop and x falls (a new attempt resumed further back). */
void report_smooth(const double *x, const double *y, size_t n, size_t w,
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
size_t report_smooth_window(size_t n)
{
	size_t w = n / 50;

	return w < 1 ? 1 : w > 50 ? 50 : w;
}

/* The series' times as seconds since t0, in c->xs (RUNLOG_SERIES_MAX). */
const double *report_secs(struct ctx *c, const struct runlog_series *s,
			  double *buf)
{
	for (size_t i = 0; i < s->n; i++)
		buf[i] = (s->t[i] - c->t0_ms) / 1000.0;
	return buf;
}

void report_esc(struct ctx *c, const char *s)
{
	svgplot_escape(c->out, s);
}

void report_iso_time(char *b, size_t len, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) ||
	    !strftime(b, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(b, len, "?");
}
