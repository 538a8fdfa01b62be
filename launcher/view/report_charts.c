/* view/report_charts.c — the charts of herd report: loss, tokens/s and
 * job series over time, and the small multiples per node (at most
 * REPORT_NODES_MAX; the slowest node always among them). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/view/report_int.h"

void report_job_chart(struct ctx *c, const char *title, enum svgplot_unit unit,
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
		    .x = report_secs(c, s, bufs + i * RUNLOG_SERIES_MAX),
		    .y = s->v,
		    .n = s->n};
	}
	svgplot_lines(c->out, &ax, lines, n);
}

/* Loss against step (or, --time, against time): each sample faint, a
 * moving average over it bold; an attempt resumed further back starts a
 * new segment; attempts, failures and evictions marked. */
void report_loss_chart(struct ctx *c, double *bufs)
{
	const struct runlog *rl = c->rl;
	const struct runlog_series *s =
	    c->by_time ? &rl->job_s[RUNLOG_JOB_LOSS] : &rl->loss_by_step;
	const double *x = c->by_time ? report_secs(c, s, bufs) : s->t;
	double *sm = bufs + RUNLOG_SERIES_MAX;
	size_t w = report_smooth_window(s->n), n_seg = 1, k = 0, from = 0;
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

	report_smooth(x, s->v, s->n, w, !c->by_time, sm);
	for (size_t i = 1; i < s->n; i++)
		n_seg += !c->by_time && x[i] < x[i - 1];
	lines = calloc(2 * n_seg, sizeof(*lines));
	if (!lines)
		return;
	snprintf(label, sizeof(label), "mean of %zu", w);
	for (size_t i = 1; i <= s->n; i++) {
		if (i < s->n && (c->by_time || x[i] >= x[i - 1]))
			continue;
		lines[k++] =
		    (struct svgplot_line){.label = from ? NULL : "each",
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
void report_tokens_chart(struct ctx *c, double *bufs)
{
	const struct runlog_series *s = &c->rl->job_s[RUNLOG_JOB_TOKENS_PER_S];
	double *sm = bufs + RUNLOG_SERIES_MAX;
	size_t w = report_smooth_window(s->n);
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

	report_smooth(s->t, s->v, s->n, w, false, sm);
	snprintf(label, sizeof(label), "mean of %zu", w);
	lines[0] = (struct svgplot_line){.label = "each",
					 .color = C_TOKENS_RAW,
					 .x = report_secs(c, s, bufs),
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

void report_node_charts(struct ctx *c, double *bufs)
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
			fprintf(
			    c->out,
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
			report_esc(c, why);
			fprintf(c->out,
				"%s: CPU %% and RSS of the ranks "
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
		const struct runlog_series *rx =
		    &nd->s[RUNLOG_NODE_RX_BYTES_PER_S];
		const struct runlog_series *tx =
		    &nd->s[RUNLOG_NODE_TX_BYTES_PER_S];
		struct svgplot_line gl = {.color = C_GPU,
					  .x = report_secs(c, g, bufs),
					  .y = g->v,
					  .n = g->n};
		struct svgplot_line nl[2] = {
		    {.label = "rx",
		     .color = C_RX,
		     .x = report_secs(c, rx, bufs + RUNLOG_SERIES_MAX),
		     .y = rx->v,
		     .n = rx->n},
		    {.label = "tx",
		     .color = C_TX,
		     .x = report_secs(c, tx, bufs + 2 * RUNLOG_SERIES_MAX),
		     .y = tx->v,
		     .n = tx->n}};

		fprintf(c->out, "<div class=\"node%s\"><h3>",
			is_slow ? " slow" : "");
		report_esc(c, nd->name);
		fprintf(c->out, " <small>");
		report_esc(c, nd->state ? nd->state : "");
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
						  .x =
						      report_secs(c, cpu, bufs),
						  .y = cpu->v,
						  .n = cpu->n};
			struct svgplot_line rl_ = {
			    .color = C_RSS,
			    .x = report_secs(c, rss, bufs + RUNLOG_SERIES_MAX),
			    .y = rb,
			    .n = rss->n};

			for (size_t i = 0; i < rss->n; i++)
				rb[i] = rss->v[i] * 1024.0;
			ax.title = "CPU % (100 = a core)";
			ax.unit = SVGPLOT_PLAIN;
			svgplot_lines(c->out, &ax, &cl, 1);
			ax.title = "RSS (bytes)";
			svgplot_lines(c->out, &ax, &rl_, 1);
			nl[0].x = report_secs(c, rx, bufs + RUNLOG_SERIES_MAX);
			nl[1].x =
			    report_secs(c, tx, bufs + 2 * RUNLOG_SERIES_MAX);
		}
		ax.title = "network";
		ax.unit = SVGPLOT_BYTES_PER_S;
		svgplot_lines(c->out, &ax, nl, 2);
		fprintf(c->out, "</div>\n");
	}
	fprintf(c->out, "</div>\n");
	free(idx);
}
