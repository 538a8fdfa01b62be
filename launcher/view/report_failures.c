/* view/report_failures.c — the "Failures" section of herd report: what each
 * failure cost, from the run's events (failcost.h). */
#include <stdio.h>

#include "herd/failcost.h"
#include "herd/svgplot.h"
#include "launcher/view/report.h"

/* More rows say nothing a person reads; the means cover every one. */
#define REPORT_FAILURES_MAX 200

static void cell_ms(FILE *out, int64_t ms)
{
	if (ms < 0)
		fprintf(out, "<td>?</td>");
	else
		fprintf(out, "<td>%.2f s</td>", (double)ms / 1000.0);
}

static void cell_steps(FILE *out, int64_t n)
{
	if (n < 0)
		fprintf(out, "<td>?</td>");
	else
		fprintf(out, "<td>%lld</td>", (long long)n);
}

void report_failures(FILE *out, const struct runlog *rl, double t0_ms)
{
	static const char *const how[] = {"under way", "restart", "rejoin",
					  "job ended"};
	const struct failcosts *fc = &rl->failures;
	struct failcost_total tot = failcost_total(fc);
	size_t from =
	    fc->n > REPORT_FAILURES_MAX ? fc->n - REPORT_FAILURES_MAX : 0;
	char b[256];

	if (!fc->n)
		return;
	fprintf(out, "<h2>Failures</h2>\n<p class=\"note\">What each failure "
		     "cost: detect (the node silent before herd called it "
		     "failed), rejoin (the survivors kept training) or restart "
		     "(the next attempt started), restore (the slowest rank's "
		     "checkpoint restore) and the steps trained again.</p>\n");
	if (tot.n) {
		fprintf(out, "<p>%zu failure%s; each cost on average: ",
			fc->n + (size_t)fc->dropped, fc->n == 1 ? "" : "s");
		svgplot_escape(out, failcost_format_total(&tot, b, sizeof(b)));
		fprintf(out, "</p>\n");
	}
	if (from || fc->dropped)
		fprintf(out, "<p class=\"note\">The newest %zu shown.</p>\n",
			fc->n - from);
	fprintf(out, "<table class=\"events failures\">\n<tr><th>#</th>"
		     "<th>at</th><th>attempt</th><th>failed</th><th>detect"
		     "</th><th>recovery</th><th>took</th><th>restore</th>"
		     "<th>steps redone</th></tr>\n");
	for (size_t i = from; i < fc->n; i++) {
		const struct failcost *f = &fc->v[i];

		svgplot_format_elapsed(b, sizeof(b),
				       ((double)f->t - t0_ms) / 1000.0);
		fprintf(out, "<tr><td>%zu</td><td>+%s</td><td>%d</td><td>",
			i + 1 + (size_t)fc->dropped, b, f->attempt);
		svgplot_escape(out, f->hosts ? f->hosts : "a rank");
		if (f->reason) {
			fprintf(out, ": ");
			svgplot_escape(out, f->reason);
		}
		fprintf(out, "</td>");
		cell_ms(out, f->detect_ms);
		fprintf(out, "<td>%s</td>", how[f->how]);
		cell_ms(out,
			f->how == FAILCOST_RESTART || f->how == FAILCOST_REJOIN
			    ? f->recover_ms
			    : -1);
		if (f->restore_ms < 0) {
			fprintf(out, "<td>none reported</td>");
		} else {
			fprintf(out, "<td>%.2f s",
				(double)f->restore_ms / 1000.0);
			if (f->restore_tier) {
				fprintf(out, " (");
				svgplot_escape(out, f->restore_tier);
				fprintf(out, ")");
			}
			fprintf(out, "</td>");
		}
		cell_steps(out, f->steps_redone);
		fprintf(out, "</tr>\n");
	}
	fprintf(out, "</table>\n");
}
