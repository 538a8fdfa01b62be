/* cmd/status.c — `herd status RUNDIR|JOB.yaml [--json]`: a summary of a
 * run, while it runs and after it ended, from its events.jsonl and
 * metrics.jsonl (runlog.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "herd/failcost.h"
#include "herd/runlog.h"
#include "herd/svgplot.h"
#include "herd/text.h"
#include "launcher/view/jobview.h"
#include "launcher/view/rundir.h"

static void status_usage(FILE *out)
{
	fprintf(out,
		"usage: herd status RUNDIR|LOGDIR|JOB.yaml|JOB [--json]\n"
		"\n"
		"JOB is a job id or name as `herd list` shows them.\n"
		"Summarises one run of a job from its run directory (events.jsonl\n"
		"and metrics.jsonl), while it runs or after it ended: job, run id,\n"
		"state (running, or ended with its exit status), the attempts and\n"
		"how each ended, the nodes (up, failed, evicted, spares used), the\n"
		"latest job-wide metrics (step, loss, tokens/s, GPU utilisation,\n"
		"network), the slowest node, the checkpoints resumed from and\n"
		"where the logs are.  Given a job file, its log.dir/latest is read;\n"
		"given a log.dir, its latest run.  A job counts as running until\n"
		"its job_end event is written, or lost when its controller is gone\n"
		"without writing it (`herd run --resume RUNDIR` starts it again).\n"
		"Lines that cannot be parsed are skipped and counted.  A job that\n"
		"runs on another host (herd run --detach --on) is asked there.\n"
		"\n"
		"  --json      one JSON object instead of text\n"
		"  -h, --help  show this text\n"
		"\n"
		"Exit status: 0 shown; 1 a file could not be read; 2 bad usage,\n"
		"a missing or non-run directory, or a bad job file.\n");
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The time the run started: job_start, else the first metrics line. */
static int64_t run_start(const struct runlog *rl)
{
	return rl->start_t ? rl->start_t : rl->first_metrics_t;
}

struct node_counts {
	int up, failed, evicted, spares_used;
};

static struct node_counts count_nodes(const struct runlog *rl)
{
	struct node_counts c = {0};

	for (size_t i = 0; i < rl->n_nodes; i++) {
		const char *s = rl->nodes[i].state;

		if (!s)
			continue;
		if (!strcmp(s, "up") || !strcmp(s, "readmitted"))
			c.up++;
		else if (!strcmp(s, "failed"))
			c.failed++;
		else if (!strcmp(s, "evicted"))
			c.evicted++;
		if (rl->nodes[i].spare_used)
			c.spares_used++;
	}
	return c;
}

static json_t *status_json(const struct runlog *rl,
			   const struct jobreg_entry *e)
{
	json_t *o = json_object(), *a = json_array(), *nl = json_array();
	json_t *cp = json_array(), *m;
	struct node_counts c = count_nodes(rl);
	int64_t start = run_start(rl);
	double v;

	json_object_set_new(o, "dir", json_string(rl->dir));
	if (rl->job)
		json_object_set_new(o, "job", json_string(rl->job));
	if (rl->run_id)
		json_object_set_new(o, "run", json_string(rl->run_id));
	if (rl->mode)
		json_object_set_new(o, "mode", json_string(rl->mode));
	if (rl->transport)
		json_object_set_new(o, "transport", json_string(rl->transport));
	json_object_set_new(
	    o, "state", json_string(jobview_state_name(jobview_state(e, rl))));
	if (e->pid > 0)
		json_object_set_new(o, "pid", json_integer(e->pid));
	if (rl->ended) {
		json_object_set_new(o, "exit_status",
				    json_integer(rl->end_status));
		json_object_set_new(o, "end_t", json_integer(rl->end_t));
	}
	if (start) {
		json_object_set_new(o, "start_t", json_integer(start));
		json_object_set_new(
		    o, "elapsed_ms",
		    json_integer((rl->ended ? rl->end_t : now_ms()) - start));
	}
	for (size_t i = 0; i < rl->n_attempts; i++) {
		const struct runlog_attempt *at = &rl->attempts[i];
		json_t *j = json_pack("{s:i, s:I, s:i, s:s}", "attempt",
				      at->attempt, "start_t",
				      (json_int_t)at->start_t, "nodes",
				      at->nodes, "state",
				      at->ended ? "ended" : "running");

		if (at->ended) {
			json_object_set_new(j, "end_t",
					    json_integer(at->end_t));
			json_object_set_new(j, "status",
					    json_integer(at->status));
			if (at->reason)
				json_object_set_new(j, "reason",
						    json_string(at->reason));
		}
		if (at->checkpoint) {
			json_object_set_new(j, "checkpoint",
					    json_string(at->checkpoint));
			json_array_append_new(
			    cp, json_pack("{s:i, s:s}", "attempt", at->attempt,
					  "path", at->checkpoint));
		}
		json_array_append_new(a, j);
	}
	json_object_set_new(o, "attempts", a);
	for (size_t i = 0; i < rl->n_nodes; i++) {
		const struct runlog_node *n = &rl->nodes[i];
		json_t *j = json_pack("{s:s, s:s, s:b}", "node", n->name,
				      "state", n->state ? n->state : "unknown",
				      "spare_used", n->spare_used);

		if (n->reason)
			json_object_set_new(j, "reason", json_string(n->reason));
		json_array_append_new(nl, j);
	}
	json_object_set_new(
	    o, "nodes",
	    json_pack("{s:i, s:i, s:i, s:i, s:i, s:o}", "up", c.up, "failed",
		      c.failed, "evicted", c.evicted, "spares", rl->spares,
		      "spares_used", c.spares_used, "list", nl));
	m = json_object_get(rl->last, "job");
	if (m) {
		json_t *j = json_deep_copy(m);

		json_object_set_new(j, "t", json_integer(rl->last_metrics_t));
		if (runlog_number(rl->last, "attempt", &v))
			json_object_set_new(j, "attempt", json_integer((json_int_t)v));
		json_object_set_new(o, "metrics", j);
		if (json_is_string(json_object_get(m, "slowest")))
			json_object_set(o, "slowest",
					json_object_get(m, "slowest"));
	}
	json_object_set_new(o, "checkpoints", cp);
	{
		json_t *f = failcost_json(&rl->failures);

		if (f)
			json_object_set_new(o, "failures", f);
	}
	json_object_set_new(o, "logs", json_string(rl->dir));
	json_object_set_new(
	    o, "skipped_lines",
	    json_pack("{s:I, s:I}", "events.jsonl", (json_int_t)rl->ev.bad,
		      "metrics.jsonl", (json_int_t)rl->met.bad));
	return o;
}

static void print_elapsed(const char *prefix, int64_t ms)
{
	char b[48];

	svgplot_format_elapsed(b, sizeof(b), (double)ms / 1000.0);
	printf("%s%s", prefix, b);
}

/* ", loss 1.93" for the latest job line's key, when it has one. */
static void print_value(const char *label, const char *key,
			enum svgplot_unit unit, const struct runlog *rl,
			int *first)
{
	char b[48];
	double v;

	if (!runlog_job_value(rl, key, &v))
		return;
	if (!strcmp(key, "loss"))
		snprintf(b, sizeof(b), "%.4g", v);
	else if (!strcmp(key, "step") || !strcmp(key, "drops"))
		snprintf(b, sizeof(b), "%.0f", v);
	else
		svgplot_format(b, sizeof(b), v, unit);
	printf("%s%s %s", *first ? "" : ", ", label, b);
	*first = 0;
}

/* What each failure cost (the newest STATUS_FAILURES_MAX), and the mean
 * over those that ended. */
#define STATUS_FAILURES_MAX 10
static void status_failures(const struct runlog *rl, int64_t start)
{
	const struct failcosts *fc = &rl->failures;
	struct failcost_total tot = failcost_total(fc);
	size_t from = fc->n > STATUS_FAILURES_MAX ? fc->n - STATUS_FAILURES_MAX
						  : 0;
	char b[256];

	if (!fc->n)
		return;
	printf("failures: %zu", fc->n + (size_t)fc->dropped);
	if (tot.n)
		printf("; each cost on average: %s",
		       failcost_format_total(&tot, b, sizeof(b)));
	printf("\n");
	if (from)
		printf("  (%zu older not shown)\n", from + (size_t)fc->dropped);
	for (size_t i = from; i < fc->n; i++) {
		const struct failcost *f = &fc->v[i];
		char who[160];

		/* events.jsonl's text: no control character printed. */
		snprintf(who, sizeof(who), "%s%s", f->hosts ? "node " : "a rank",
			 f->hosts ? f->hosts : "");
		printf("  failure %zu (attempt %d", i + 1 + (size_t)fc->dropped,
		       f->attempt);
		if (start)
			print_elapsed(", +", f->t - start);
		printf(", %s): %s\n", herd_text_clean(who),
		       failcost_format(f, b, sizeof(b)));
	}
}

static void status_text(const struct runlog *rl,
			const struct jobreg_entry *e)
{
	struct node_counts c = count_nodes(rl);
	int64_t start = run_start(rl);
	int shown = 0;
	bool lost = false;

	printf("job %s, run %s", rl->job ? rl->job : "?",
	       rl->run_id ? rl->run_id : "?");
	if (rl->mode || rl->transport)
		printf(" (%s%s%s)", rl->mode ? rl->mode : "",
		       rl->mode && rl->transport ? ", transport " : "",
		       rl->transport ? rl->transport : "");
	printf("\n");
	if (rl->ended) {
		printf("state: ended, exit status %d, %d attempt%s",
		       rl->end_status, rl->end_attempts,
		       rl->end_attempts == 1 ? "" : "s");
		if (start)
			print_elapsed(", ran ", rl->end_t - start);
	} else {
		int64_t last = rl->last_metrics_t;

		lost = jobview_state(e, rl) == JOBVIEW_LOST;
		if (lost)
			printf("state: lost (no job_end, and its controller, "
			       "pid %ld, is gone)",
			       e->pid);
		else
			printf("state: running (no job_end yet)");
		if (rl->n_attempts)
			printf(", attempt %d",
			       rl->attempts[rl->n_attempts - 1].attempt);
		if (start)
			print_elapsed(", for ", now_ms() - start);
		/* A controller that died leaves no job_end: how old the
		 * newest line is tells. */
		if (rl->n_marks && rl->marks[rl->n_marks - 1].t > last)
			last = rl->marks[rl->n_marks - 1].t;
		if (rl->n_attempts &&
		    rl->attempts[rl->n_attempts - 1].start_t > last)
			last = rl->attempts[rl->n_attempts - 1].start_t;
		if (last)
			print_elapsed(", last update ", now_ms() - last);
		if (last)
			printf(" ago");
	}
	printf("\n");
	if (lost)
		printf("resume: herd run --resume %s (from the newest complete "
		       "checkpoint)\n",
		       rl->dir);
	for (size_t i = 0; i < rl->n_attempts; i++) {
		const struct runlog_attempt *a = &rl->attempts[i];

		printf("attempt %d:", a->attempt);
		if (start)
			print_elapsed(" started +", a->start_t - start);
		printf(", %d node%s", a->nodes, a->nodes == 1 ? "" : "s");
		if (a->ended) {
			print_elapsed(", ran ", a->end_t - a->start_t);
			printf(", %s (status %d)",
			       a->reason ? a->reason : "ended", a->status);
		} else {
			printf(", running");
		}
		if (a->checkpoint)
			printf(", resumed from %s", a->checkpoint);
		printf("\n");
	}
	if (rl->attempts_dropped)
		printf("(%llu more attempts not shown)\n",
		       (unsigned long long)rl->attempts_dropped);
	status_failures(rl, start);
	printf("nodes: %d up, %d failed, %d evicted; spares: %d, %d used\n",
	       c.up, c.failed, c.evicted, rl->spares, c.spares_used);
	/* The nodes that are not simply up, with why (at most 20). */
	for (size_t i = 0; i < rl->n_nodes; i++) {
		const struct runlog_node *n = &rl->nodes[i];

		/* Up as planned, or a spare still waiting: nothing to say. */
		if (n->state && !n->spare_used &&
		    (!strcmp(n->state, "up") || !strcmp(n->state, "spare")))
			continue;
		if (++shown > 20) {
			printf("  ...\n");
			break;
		}
		printf("  %s: %s%s%s%s\n", n->name,
		       n->state ? n->state : "unknown",
		       n->spare_used ? " (spare used)" : "",
		       n->reason ? ": " : "", n->reason ? n->reason : "");
	}
	if (rl->last) {
		int first = 1;
		double v;

		printf("metrics");
		if (start)
			print_elapsed(" at +", rl->last_metrics_t - start);
		printf(": ");
		print_value("step", "step", SVGPLOT_PLAIN, rl, &first);
		print_value("loss", "loss", SVGPLOT_PLAIN, rl, &first);
		print_value("tokens/s", "tokens_per_s", SVGPLOT_PLAIN, rl,
			    &first);
		print_value("steps/s", "steps_per_s", SVGPLOT_PLAIN, rl,
			    &first);
		print_value("GPU util min", "gpu_util_min", SVGPLOT_PERCENT,
			    rl, &first);
		print_value("avg", "gpu_util_avg", SVGPLOT_PERCENT, rl,
			    &first);
		print_value("net rx", "rx_bytes_per_s", SVGPLOT_BYTES_PER_S,
			    rl, &first);
		print_value("tx", "tx_bytes_per_s", SVGPLOT_BYTES_PER_S, rl,
			    &first);
		print_value("drops", "drops", SVGPLOT_PLAIN, rl, &first);
		if (first)
			printf("none yet");
		printf("\n");
		(void)v;
	} else {
		printf("metrics: none (no metrics.jsonl yet)\n");
	}
	{
		const char *slow = json_string_value(
		    json_object_get(json_object_get(rl->last, "job"),
				    "slowest"));
		char shown_slow[256];

		/* metrics.jsonl's text: no control character printed. */
		snprintf(shown_slow, sizeof(shown_slow), "%s",
			 slow ? slow : "none named");
		printf("slowest node: %s\n", herd_text_clean(shown_slow));
	}
	shown = 0;
	for (size_t i = 0; i < rl->n_attempts; i++)
		if (rl->attempts[i].checkpoint) {
			printf("%s%s (attempt %d)",
			       shown++ ? ", " : "checkpoints resumed from: ",
			       rl->attempts[i].checkpoint,
			       rl->attempts[i].attempt);
		}
	if (shown)
		printf("\n");
	printf("logs: %s\n", rl->dir);
	if (rl->ev.bad || rl->met.bad)
		printf("skipped: %llu bad line%s in events.jsonl, %llu in "
		       "metrics.jsonl\n",
		       (unsigned long long)rl->ev.bad,
		       rl->ev.bad == 1 ? "" : "s",
		       (unsigned long long)rl->met.bad);
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct runlog *rl;
	struct jobreg_entry e;
	int json = 0, c, status;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			status_usage(stdout);
			return 0;
		default:
			return cli_bad_option("status", cli_bad_word(argc, argv),
					      status_usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("status",
				 "expected one JOB (id, name, run directory or "
				 "JOB.yaml), got %d arguments",
				 argc - optind);
	if (jobview_resolve("status", argv[optind], &e, &status) < 0)
		return status;
	if (remote_entry_is_remote(&e)) {
		char *rargv[] = {"status", json ? "--json" : e.id, e.id};

		status = remote_proxy(&e, json ? 3 : 2, rargv);
		jobreg_entry_clear(&e);
		return status;
	}
	rl = rundir_read("status", e.run_dir, VIEW_TAIL, &status);
	if (!rl) {
		jobreg_entry_clear(&e);
		return status;
	}
	if (json) {
		json_t *o = status_json(rl, &e);
		/* ASCII: a C1 control in a name reaches no terminal raw */
		char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS |
						JSON_ENSURE_ASCII)
			    : NULL;

		json_decref(o);
		if (!s) {
			cli_error("status: out of memory");
			runlog_free(rl);
			jobreg_entry_clear(&e);
			return 1;
		}
		printf("%s\n", s);
		free(s);
	} else {
		status_text(rl, &e);
	}
	runlog_free(rl);
	jobreg_entry_clear(&e);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("status: cannot write the output");
		return 1;
	}
	return 0;
}
