/* view/report_runs.c — the runs of a job as one model for herd report:
 * herd run --resume makes a new run directory, whose run.json names the
 * run it resumed (resumed_from); see report.h. */
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "herd/failcost.h"
#include "herd/runlog.h"
#include "launcher/view/report.h"
#include "launcher/view/rundir.h"

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
size_t report_run_chain(const char *dir, char **dirs)
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
		if (asprintf(&prev, "%.*s%s",
			     slash ? (int)(slash - cur + 1) : 0, cur, id) < 0)
			prev = NULL;
		free(id);
		for (size_t i = 0; prev && i < n; i++)
			seen |= !strcmp(dirs[i], prev);
		if (!prev || seen || stat(prev, &st) < 0 ||
		    !S_ISDIR(st.st_mode)) {
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
struct runlog *report_merge_runs(char **dirs, size_t n, int *status)
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
char *report_run_names(char **dirs, size_t n)
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
