/* view/report_summary.c — the summary and the job table of herd report:
 * the run, its nodes, checkpoints and attempts. */
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "herd/checkpoint.h"
#include "herd/spec.h"
#include "launcher/view/report_int.h"

static void summary_row(struct ctx *c, const char *k, const char *v)
{
	fprintf(c->out, "<tr><th>");
	report_esc(c, k);
	fprintf(c->out, "</th><td>");
	report_esc(c, v);
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
		qsort(g.gl_pathv, g.gl_pathc, sizeof(*g.gl_pathv), by_natural);
		len = (size_t)snprintf(b, sizeof(b), "%zu: ", g.gl_pathc);
		for (size_t i = 0; i < g.gl_pathc && len < sizeof(b); i++) {
			if (i == 24) {
				len += (size_t)snprintf(
				    b + len, sizeof(b) - len, ", ...");
				break;
			}
			len +=
			    (size_t)snprintf(b + len, sizeof(b) - len, "%s%s",
					     i ? ", " : "", g.gl_pathv[i]);
		}
		summary_row(c, "checkpoints written", b);
	}
	if (checkpoint_find(dir, sp->checkpoint.latest_file,
			    sp->checkpoint.pattern,
			    sp->checkpoint.complete_marker, &res, &err) == 0)
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
void report_job_table(struct ctx *c)
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

		report_esc(c, line);
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

void report_summary(struct ctx *c)
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
		report_iso_time(b, sizeof(b), (int64_t)c->t0_ms);
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
	snprintf(b, sizeof(b), "%d wanted, %d spare%s; %zu named",
		 rl->want_nodes, rl->spares, rl->spares == 1 ? "" : "s",
		 rl->n_nodes);
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

		len =
		    snprintf(b, sizeof(b), "world size %d on %d node%s",
			     a->world_size, a->nodes, a->nodes == 1 ? "" : "s");
		if (a->ended && a->end_t >= a->start_t && a->start_t) {
			svgplot_format_elapsed(e, sizeof(e),
					       (double)(a->end_t - a->start_t) /
						   1000.0);
			len += snprintf(
			    b + len, sizeof(b) - (size_t)len, ", ran %s, %s%s",
			    e, a->reason ? a->reason : "ended",
			    report_stopped_by_user(a) ? " (stopped by the user)"
						      : "");
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
		snprintf(b, sizeof(b),
			 "%llu in events.jsonl, %llu in metrics.jsonl",
			 (unsigned long long)rl->ev.bad,
			 (unsigned long long)rl->met.bad);
		summary_row(c, "lines skipped", b);
	}
	fprintf(c->out, "</table>\n");
}
