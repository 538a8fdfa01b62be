/* view/report_page.c — the whole page of herd report: one self-contained
 * HTML file (no script, no network: inline CSS and SVG drawn by
 * svgplot.h), its sections in order. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "launcher/view/report_int.h"

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

int report_write(FILE *out, const struct runlog *rl,
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
	static const char *const gpu_l[] = {"avg", "min"}, *const gpu_c[] = {
							       C_GPU,
							       C_GPU_MIN};
	static const char *const net_l[] = {"rx", "tx"}, *const net_c[] = {
							     C_RX, C_TX};

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
	report_vlines_make(&c);

	fprintf(out, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
		     "<meta charset=\"utf-8\">\n<title>herd report: ");
	report_esc(&c, rl->job ? rl->job : "?");
	fprintf(out, " ");
	report_esc(&c, rl->run_id ? rl->run_id : "");
	fprintf(out,
		"</title>\n<style>%s</style></head>\n<body>\n<h1>herd "
		"report: job ",
		style);
	report_esc(&c, rl->job ? rl->job : "?");
	fprintf(out, "</h1>\n");
	report_summary(&c);
	report_job_table(&c);
	report_failures(out, rl, c.t0_ms);

	fprintf(out, "<h2>Training</h2>\n");
	if (!rl->met.lines) {
		fprintf(out, "<p class=\"note\">No metrics.jsonl in this run "
			     "directory: no plots.</p>\n");
		goto timeline;
	}
	fprintf(out, "<div class=\"row\">\n");
	report_loss_chart(&c, bufs);
	report_tokens_chart(&c, bufs);
	report_job_chart(&c, "steps/s (slowest node)", SVGPLOT_PLAIN, steps_k,
			 loss_l, steps_c, 1, bufs);
	fprintf(out, "</div>\n<h2>Cluster</h2>\n<div class=\"row\">\n");
	report_job_chart(&c, "GPU utilisation", SVGPLOT_PERCENT, gpu_k, gpu_l,
			 gpu_c, 2, bufs);
	report_job_chart(&c, "network (all nodes)", SVGPLOT_BYTES_PER_S, net_k,
			 net_l, net_c, 2, bufs);
	fprintf(out, "</div>\n<h2>Per node</h2>\n");
	report_node_charts(&c, bufs);
timeline:
	fprintf(out, "<h2>Timeline</h2>\n");
	report_timeline(&c);
	fprintf(out, "<p class=\"note\">Made by herd report from ");
	report_esc(&c, rl->dir);
	fprintf(out, ".</p>\n</body></html>\n");
	report_vlines_free(&c);
	free(bufs);
	return ferror(out) ? -1 : 0;
}
