/* view/report_timeline.c — the timeline of herd report: attempts,
 * failures, evictions, spares and checkpoints as rows over time, and the
 * table of events (at most RUNLOG_MARKS_MAX rows). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/view/report_int.h"

/* Timeline rows. */
enum {
	ROW_ATTEMPTS,
	ROW_FAILED,
	ROW_EVICTED,
	ROW_SPARE,
	ROW_CKPT,
	ROW_OTHER,
	ROW_N_
};

void report_timeline(struct ctx *c)
{
	static const char *const rows[ROW_N_] = {"attempts",   "node failed",
						 "evicted",    "spare used",
						 "checkpoint", "other"};
	const struct runlog *rl = c->rl;
	struct svgplot_span *spans = calloc(rl->n_attempts + 1, sizeof(*spans));
	struct svgplot_mark *marks = calloc(rl->n_marks + 1, sizeof(*marks));
	char **labels =
	    calloc(rl->n_attempts + rl->n_marks + 1, sizeof(char *));
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
			     report_stopped_by_user(a) ? ", stopped by the user"
						       : "",
			     a->checkpoint ? ", from " : "",
			     a->checkpoint ? a->checkpoint : "") < 0)
			l = NULL;
		labels[nl++] = l;
		spans[i] = (struct svgplot_span){
		    .x0 = (a->start_t - c->t0_ms) / 1000.0,
		    .x1 = a->ended ? (a->end_t - c->t0_ms) / 1000.0 : c->x_max,
		    .row = ROW_ATTEMPTS,
		    .label = l,
		    .color = !a->ended			 ? "#4c72b0"
			     : a->status == 0		 ? "#55a868"
			     : report_stopped_by_user(a) ? C_STOPPED
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
		marks[i] =
		    (struct svgplot_mark){.x = (m->t - c->t0_ms) / 1000.0,
					  .row = row,
					  .label = l,
					  .color = color};
	}
	svgplot_timeline(c->out, &ax, rows, ROW_N_, spans, rl->n_attempts,
			 marks, rl->n_marks);
	/* The same as a table in time order, readable without hovering. */
	fprintf(c->out,
		"<table class=\"events\"><tr><th>time</th><th>attempt"
		"</th><th>event</th><th>node</th><th>detail</th></tr>\n");
	{
		size_t ia = 0, im = 0, half = 0;

		/* Attempts give two rows each (start, end): half says which
		 * one is next. */
		while (ia < rl->n_attempts || im < rl->n_marks) {
			const struct runlog_attempt *a =
			    ia < rl->n_attempts ? &rl->attempts[ia] : NULL;
			int64_t ta = !a	    ? INT64_MAX
				     : half ? a->end_t
					    : a->start_t;
			char e[48];

			if (a && half && !a->ended) {
				ia++;
				half = 0;
				continue;
			}
			if (a && (im >= rl->n_marks || ta <= rl->marks[im].t)) {
				svgplot_format_elapsed(
				    e, sizeof(e), (ta - c->t0_ms) / 1000.0);
				fprintf(c->out,
					"<tr><td>%s</td><td>%d</td><td>"
					"%s</td><td></td><td>",
					e, a->attempt,
					half ? "attempt_end" : "attempt_start");
				if (!half && a->checkpoint) {
					fprintf(c->out, "resumed from ");
					report_esc(c, a->checkpoint);
				} else if (half) {
					report_esc(c, a->reason);
					fprintf(c->out, " (status %d)",
						a->status);
				}
				fprintf(c->out, "</td></tr>\n");
				if (half)
					ia++;
				half = !half;
				continue;
			}
			{
				const struct runlog_mark *m = &rl->marks[im++];

				svgplot_format_elapsed(
				    e, sizeof(e), (m->t - c->t0_ms) / 1000.0);
				fprintf(c->out,
					"<tr><td>%s</td><td>%d</td><td>", e,
					m->attempt);
				report_esc(c, m->event);
				fprintf(c->out, "</td><td>");
				report_esc(c, m->host);
				fprintf(c->out, "</td><td>");
				report_esc(c, m->detail);
				fprintf(c->out, "</td></tr>\n");
			}
		}
	}
	fprintf(c->out, "</table>\n");
	if (rl->marks_dropped)
		fprintf(c->out,
			"<p class=\"note\">%llu more events not shown."
			"</p>\n",
			(unsigned long long)rl->marks_dropped);
out:
	for (size_t i = 0; labels && i < nl; i++)
		free(labels[i]);
	free(labels);
	free(spans);
	free(marks);
}
