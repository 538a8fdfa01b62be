/* cmd_list.c — `herd list [--running|--all] [--json]`, `herd list
 * --forget-ended`: the user's jobs known on this
 * machine (the registry, herd/jobreg.h), newest first, each with its
 * state read from its run directory (runlog.h) or, for a job on another
 * host, asked there (remote.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "herd/jobreg.h"
#include "herd/runlog.h"
#include "jobview.h"

/* What `herd status --json` on a host may answer: a few KiB. */
#define LIST_REMOTE_MAX (1u << 20)

/* herd list on a terminal, without --all: the running jobs and this many
 * of the others (the newest): every failed try stays in the registry
 * until --forget-ended. */
#define LIST_TERMINAL_OTHERS 10

/* list reads events.jsonl whole and only this much of metrics.jsonl (it
 * shows nothing of it). */
#define LIST_METRICS_TAIL 1

static void list_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd list [--running|--all] [--json]\n"
	    "       herd list --forget-ended\n"
	    "\n"
	    "The jobs you ran on this machine (every herd run registers its\n"
	    "job in $XDG_STATE_HOME/herd/jobs, default\n"
	    "~/.local/state/herd/jobs), newest first: id, name, state, the\n"
	    "latest attempt, its nodes, when it started, the Slurm job it ran\n"
	    "in and its run directory.  State is running, ended (status N),\n"
	    "lost (no job_end and its controller is gone: `herd run --resume\n"
	    "RUNDIR` starts it again), gone (its run directory was removed);\n"
	    "a job started on another host (herd run --detach --on HOST) is\n"
	    "asked there, and is unknown (HOST unreachable) when HOST does\n"
	    "not answer.  On a terminal, without --all: the running jobs and\n"
	    "the %d newest others.\n"
	    "\n"
	    "  --running       only the running jobs\n"
	    "  --all           every job (the default when stdout is not a\n"
	    "                  terminal)\n"
	    "  --forget-ended  remove the registry entries of the jobs that\n"
	    "                  ended, are lost or gone (never a running or\n"
	    "                  unknown one); their run directories stay\n"
	    "  --json          one JSON array of objects instead of the table\n"
	    "  -h, --help      show this text\n"
	    "\n"
	    "Exit status: 0; 1 the job registry could not be read or an\n"
	    "entry could not be removed; 2 bad usage.\n",
	    LIST_TERMINAL_OTHERS);
}

struct row {
	const struct jobreg_entry *e;
	char state[160];
	const char *state_word; /* running, ended, lost, gone, unknown */
	int status;		/* ended: the exit status */
	int attempt, nodes;	/* 0: not known */
	char started[32];
};

static void started_text(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms <= 0 || !localtime_r(&t, &tm) ||
	    !strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, size, "-");
}

/* A job of this machine: from its run directory. */
static void local_row(struct row *r)
{
	struct herd_err err;
	struct runlog *rl;
	enum jobview_state s;

	herd_err_clear(&err);
	rl = runlog_open(r->e->run_dir, &err);
	if (rl) {
		runlog_metrics_tail(rl, LIST_METRICS_TAIL);
		if (runlog_update(rl, &err) < 0) {
			runlog_free(rl);
			rl = NULL;
		}
	}
	if (!rl) {
		r->state_word = "gone";
		snprintf(r->state, sizeof(r->state), "gone (no run directory)");
		return;
	}
	s = jobview_state(r->e, rl);
	r->state_word = jobview_state_name(s);
	if (s == JOBVIEW_ENDED) {
		r->status = rl->end_status;
		snprintf(r->state, sizeof(r->state), "ended (status %d)",
			 rl->end_status);
	} else {
		snprintf(r->state, sizeof(r->state), "%s", r->state_word);
	}
	if (rl->n_attempts) {
		const struct runlog_attempt *a =
		    &rl->attempts[rl->n_attempts - 1];

		r->attempt = a->attempt;
		r->nodes = a->nodes;
	}
	if (!r->nodes)
		r->nodes = rl->want_nodes;
	runlog_free(rl);
}

/* A job on another host: `herd status --json ID` there. */
static void remote_row(struct row *r)
{
	char *argv[] = {"status", "--json", r->e->id}, *out = NULL;
	struct herd_err err;
	json_t *o = NULL, *a;
	int rc;

	herd_err_clear(&err);
	rc = remote_query(r->e, 3, argv, &out, LIST_REMOTE_MAX, &err);
	if (rc != 0 || !out || !(o = json_loads(out, 0, NULL)) ||
	    !json_is_object(o)) {
		r->state_word = "unknown";
		snprintf(r->state, sizeof(r->state), "unknown (%s %s)",
			 r->e->host, rc < 0 ? "unreachable" : "did not answer");
		goto out;
	}
	r->state_word = json_string_value(json_object_get(o, "state"));
	if (!r->state_word)
		r->state_word = "unknown";
	/* state_word must outlive o: take a static name. */
	r->state_word = !strcmp(r->state_word, "ended")	    ? "ended"
			: !strcmp(r->state_word, "lost")    ? "lost"
			: !strcmp(r->state_word, "running") ? "running"
							    : "unknown";
	if (!strcmp(r->state_word, "ended")) {
		r->status =
		    (int)json_integer_value(json_object_get(o, "exit_status"));
		snprintf(r->state, sizeof(r->state), "ended (status %d)",
			 r->status);
	} else {
		snprintf(r->state, sizeof(r->state), "%s", r->state_word);
	}
	a = json_object_get(o, "attempts");
	if (json_is_array(a) && json_array_size(a)) {
		json_t *last = json_array_get(a, json_array_size(a) - 1);

		r->attempt =
		    (int)json_integer_value(json_object_get(last, "attempt"));
		r->nodes =
		    (int)json_integer_value(json_object_get(last, "nodes"));
	}
out:
	json_decref(o);
	free(out);
}

static json_t *row_json(const struct row *r)
{
	const struct jobreg_entry *e = r->e;
	json_t *o = json_pack(
	    "{s:s, s:s?, s:s, s:s, s:I, s:s?, s:I, s:b, s:s?, s:s?}", "id",
	    e->id, "name", e->name, "state", r->state_word, "state_text",
	    r->state, "started", (json_int_t)e->started_ms, "run_dir",
	    e->run_dir, "pid", (json_int_t)e->pid, "detached", e->detached,
	    "host", e->host, "job_file", e->job_file);

	if (!o)
		return NULL;
	if (e->slurm_job)
		json_object_set_new(o, "slurm_job_id",
				    json_string(e->slurm_job));
	if (!strcmp(r->state_word, "ended"))
		json_object_set_new(o, "exit_status", json_integer(r->status));
	if (r->attempt)
		json_object_set_new(o, "attempt", json_integer(r->attempt));
	if (r->nodes)
		json_object_set_new(o, "nodes", json_integer(r->nodes));
	return o;
}

static int width(const char *s)
{
	return s ? (int)strlen(s) : 1;
}

static void print_table(const struct row *rows, size_t n)
{
	int wid = 2, wname = 4, wstate = 5;

	for (size_t i = 0; i < n; i++) {
		if (width(rows[i].e->id) > wid)
			wid = width(rows[i].e->id);
		if (width(rows[i].e->name) > wname)
			wname = width(rows[i].e->name);
		if (width(rows[i].state) > wstate)
			wstate = width(rows[i].state);
	}
	printf("%-*s  %-*s  %-*s  %7s  %5s  %-19s  %-8s  %s\n", wid, "ID",
	       wname, "NAME", wstate, "STATE", "ATTEMPT", "NODES", "STARTED",
	       "SLURM", "RUN-DIR");
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		char att[16] = "-", nodes[16] = "-", dir[4200];

		if (r->attempt)
			snprintf(att, sizeof(att), "%d", r->attempt);
		if (r->nodes)
			snprintf(nodes, sizeof(nodes), "%d", r->nodes);
		if (r->e->host)
			snprintf(dir, sizeof(dir), "%s:%s", r->e->host,
				 r->e->run_dir);
		else
			snprintf(dir, sizeof(dir), "%s", r->e->run_dir);
		printf("%-*s  %-*s  %-*s  %7s  %5s  %-19s  %-8s  %s\n", wid,
		       r->e->id, wname, r->e->name ? r->e->name : "-", wstate,
		       r->state, att, nodes, r->started,
		       r->e->slurm_job ? r->e->slurm_job : "-", dir);
	}
}

/* --forget-ended: the registry entries of the jobs that cannot run any
 * more.  A running job, or one whose controller may live on another
 * machine or host (running, unknown), is never touched; a gone one only
 * when its controller is known to be dead. */
static int forget_ended(const struct row *rows, size_t n)
{
	size_t forgot = 0;
	int status = 0;

	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		struct herd_err err;

		if (strcmp(r->state_word, "ended") &&
		    strcmp(r->state_word, "lost") &&
		    (strcmp(r->state_word, "gone") ||
		     jobview_controller_alive(r->e) != 0))
			continue;
		herd_err_clear(&err);
		if (jobreg_forget(r->e->id, &err) < 0) {
			cli_error("list: %s", err.text);
			status = 1;
			continue;
		}
		printf("forgot %s (%s, %s)\n", r->e->id,
		       r->e->name ? r->e->name : "-", r->state);
		forgot++;
	}
	if (!forgot && !status)
		fprintf(stderr, "herd: list: no ended job to forget\n");
	if (fflush(stdout) != 0)
		status = 1;
	return status;
}

int cmd_list_jobs(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"running", no_argument, NULL, 'r'},
	    {"all", no_argument, NULL, 'a'},
	    {"forget-ended", no_argument, NULL, 'F'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct jobreg_entry *v = NULL;
	struct row *rows = NULL;
	struct herd_err err;
	size_t n = 0, shown = 0, others = 0, hidden = 0;
	int json = 0, running = 0, all = 0, forget = 0, c, status = 1;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'r':
			running = 1;
			break;
		case 'a':
			all = 1;
			break;
		case 'F':
			forget = 1;
			break;
		case 'h':
			list_usage(stdout);
			return 0;
		default:
			return cli_bad_option("list", argv[optind - 1],
					      list_usage);
		}
	}
	if (optind != argc)
		return cli_usage("list", "takes no arguments, not '%s'",
				 argv[optind]);
	if (running && all)
		return cli_usage("list", "--running or --all, not both");
	if (forget && (running || all || json))
		return cli_usage("list", "--forget-ended goes alone");
	/* Scripts (no terminal) get every job, as before. */
	if (!running && !json && !isatty(STDOUT_FILENO))
		all = 1;
	if (json && !running)
		all = 1;
	herd_err_clear(&err);
	if (jobreg_list(&v, &n, &err) < 0) {
		cli_error("list: %s", err.text);
		return 1;
	}
	if (n && !(rows = calloc(n, sizeof(*rows)))) {
		cli_error("list: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		rows[i].e = &v[i];
		started_text(v[i].started_ms, rows[i].started,
			     sizeof(rows[i].started));
		if (remote_entry_is_remote(&v[i]))
			remote_row(&rows[i]);
		else
			local_row(&rows[i]);
	}
	if (forget) {
		status = forget_ended(rows, n);
		goto out;
	}
	/* Which rows to show: rows[k] for k < shown, kept newest first. */
	for (size_t i = 0; i < n; i++) {
		bool run = !strcmp(rows[i].state_word, "running");

		if (!run &&
		    (running || (!all && others++ >= LIST_TERMINAL_OTHERS))) {
			hidden++;
			continue;
		}
		if (shown != i) {
			struct row t = rows[shown];

			rows[shown] = rows[i];
			rows[i] = t;
		}
		shown++;
	}
	if (json) {
		json_t *a = json_array();
		char *s;

		for (size_t i = 0; a && i < shown; i++)
			json_array_append_new(a, row_json(&rows[i]));
		s = a ? json_dumps(a, JSON_INDENT(2)) : NULL;
		json_decref(a);
		if (!s) {
			cli_error("list: out of memory");
			goto out;
		}
		printf("%s\n", s);
		free(s);
	} else if (shown) {
		print_table(rows, shown);
	} else if (running && n) {
		fprintf(stderr, "herd: list: no job is running\n");
	} else if (!n) {
		fprintf(stderr, "herd: list: no jobs yet (each herd run "
				"registers its job)\n");
	}
	if (hidden && !running && !json)
		fprintf(stderr,
			"herd: list: %zu older job%s not shown (herd list "
			"--all; herd list --forget-ended forgets the ended "
			"ones)\n",
			hidden, hidden == 1 ? "" : "s");
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("list: cannot write the output");
		goto out;
	}
	status = 0;
out:
	free(rows);
	jobreg_entries_free(v, n);
	return status;
}
