/* cmd/nodes.c — `herd nodes [JOB.yaml|NAME] [--json] [--clear HOST ...]
 * [--clear-all]`: the nodes a job remembers as failed (herd/noderec.h),
 * which of them are quarantined, and clearing them. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "herd/jobreg.h"
#include "herd/noderec.h"
#include "herd/spec.h"
#include "herd/text.h"
#include "launcher/cli.h"

/* Hosts one --clear list may name. */
#define NODES_CLEAR_MAX 4096

static void nodes_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd nodes [JOB.yaml|NAME] [--json] [--clear HOST ...]\n"
	    "                  [--clear-all]\n"
	    "\n"
	    "The nodes your jobs remember as failed.  A member node that\n"
	    "fails during a run (crash, partition, heartbeats silent), fails\n"
	    "the health gate or is evicted as a straggler is recorded with\n"
	    "the reason and time in the job's node record,\n"
	    "$XDG_STATE_HOME/herd/nodes/NAME@HASH.json (default\n"
	    "~/.local/state/herd/nodes; HASH: of the job file's path, so\n"
	    "that jobs of the same name in two projects keep their own).\n"
	    "What is herd's set-up is not held against a node: a refused\n"
	    "connection (a wrong ssh.port), a host name that does not\n"
	    "resolve, a failed login or host key, the same failure on every\n"
	    "node at once, and a stop (herd stop, Ctrl-C, scancel).\n"
	    "A node with health.quarantine_after\n"
	    "(default 3; 0: never) failures within health.quarantine_for\n"
	    "(default 24h) is quarantined: later runs of the job leave it out\n"
	    "(a spare takes its place) until the failures age out or it is\n"
	    "cleared here.\n"
	    "\n"
	    "Without --clear: one line per host with failures in the window:\n"
	    "the count, the last kind, reason and age, and QUARANTINED with\n"
	    "the time it ends.  JOB.yaml: that job (its name and health.*\n"
	    "settings); NAME: every job of that name (or run id) with the\n"
	    "settings of its last recorded failure; none: every job of yours.\n"
	    "\n"
	    "  --json          one JSON array of objects instead of the table\n"
	    "  --clear HOST    forget HOST (for JOB, or in every job when no\n"
	    "                  JOB is named); repeat for more hosts\n"
	    "  --clear-all     forget every host (of JOB, or of every job)\n"
	    "  -h, --help      show this text\n\n"
	    "Exit status: 0; 1 a record could not be read or changed, or a\n"
	    "host or job to clear has no record; 2 bad usage or a bad job\n"
	    "file.\n");
}

/* The job a command names: its record's name, and the settings to judge
 * the record by (-1: the record's own). */
struct nodes_job {
	char *name;
	char **keys; /* its records' keys (noderec_key()) */
	size_t n_keys;
	int after;
	long window_ms;
};

static void nodes_job_free(struct nodes_job *job)
{
	free(job->name);
	noderec_names_free(job->keys, job->n_keys);
	memset(job, 0, sizeof(*job));
}

/* job->keys: the records of job->name (or key itself when there is
 * none).  Returns 0 or -1 when out of memory. */
static int find_keys(struct nodes_job *job, const char *key)
{
	char **names = NULL;
	size_t n = 0;
	struct herd_err err;

	herd_err_clear(&err);
	if (!key && noderec_jobs(&names, &n, &err) == 0) {
		size_t k = 0;

		for (size_t i = 0; i < n; i++) {
			if (noderec_key_is(names[i], job->name))
				names[k++] = names[i];
			else
				free(names[i]);
		}
		job->keys = names;
		job->n_keys = k;
		if (k)
			return 0;
		free(names);
		job->keys = NULL;
	}
	if (!(job->keys = calloc(1, sizeof(*job->keys))) ||
	    !(job->keys[0] = strdup(key ? key : job->name)))
		return -1;
	job->n_keys = 1;
	return 0;
}

static bool is_job_file(const char *arg)
{
	size_t len = strlen(arg);
	struct stat st;

	if ((len > 5 && !strcmp(arg + len - 5, ".yaml")) ||
	    (len > 4 && !strcmp(arg + len - 4, ".yml")))
		return true;
	/* A bare word is a job name even when a file of that name is here. */
	return strchr(arg, '/') && stat(arg, &st) == 0 && S_ISREG(st.st_mode);
}

/* JOB.yaml or NAME (or a run id, through the registry) -> job.  Returns
 * 0, or the exit status after saying why. */
static int resolve_job(const char *arg, struct nodes_job *job)
{
	struct herd_err err;

	herd_err_clear(&err);
	job->after = -1;
	job->window_ms = -1;
	if (is_job_file(arg)) {
		struct spec *spec = spec_load(arg, &err);

		if (!spec) {
			fprintf(stderr, "%s\n", err.text);
			return EXIT_SPEC;
		}
		job->name = strdup(spec->name);
		job->after = spec->health.quarantine_after;
		job->window_ms = spec->health.quarantine_for_ms;
		{
			/* The record of this job file (its identity). */
			char *key = noderec_key(spec->name, arg);

			if (!key || find_keys(job, key) < 0) {
				free(key);
				spec_free(spec);
				cli_error("nodes: out of memory");
				return 1;
			}
			free(key);
		}
		spec_free(spec);
	} else {
		struct jobreg_entry e;
		char dir[4096], path[4200];
		struct stat st;

		/* A name with a record is the name; else a run id or run dir
		 * of the registry gives its job's name. */
		if (noderec_name_ok(arg) &&
		    noderec_dir(dir, sizeof(dir), false, &err) == 0 &&
		    snprintf(path, sizeof(path), "%s/%s.json", dir, arg) > 0 &&
		    lstat(path, &st) == 0) {
			/* a record's key as herd nodes lists it */
			job->name = strdup(arg);
			if (job->name && find_keys(job, arg) < 0) {
				cli_error("nodes: out of memory");
				return 1;
			}
		} else if (jobreg_find(arg, &e, &err) == 0 && e.name) {
			job->name = strdup(e.name);
			jobreg_entry_clear(&e);
		} else {
			job->name = strdup(arg);
		}
	}
	if (!job->name) {
		cli_error("nodes: out of memory");
		return 1;
	}
	if (!noderec_name_ok(job->name)) {
		cli_error("nodes: job name '%s' cannot name a node record",
			  job->name);
		return EXIT_SPEC;
	}
	if (!job->keys && find_keys(job, NULL) < 0) {
		cli_error("nodes: out of memory");
		return 1;
	}
	return 0;
}

static void age_text(int64_t ms, char *buf, size_t size)
{
	long s = (long)(ms / 1000);

	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(buf, size, "%lds ago", s);
	else if (s < 2 * 3600)
		snprintf(buf, size, "%ldm ago", s / 60);
	else if (s < 2 * 86400)
		snprintf(buf, size, "%ldh ago", s / 3600);
	else
		snprintf(buf, size, "%ldd ago", s / 86400);
}

static void time_text(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm) ||
	    !strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, size, "-");
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Adds job's hosts with failures in the window to rows (a JSON array of
 * row objects).  Returns 0, or 1 after saying why. */
static int job_rows(const struct nodes_job *job, const char *key, json_t *rows,
		    int64_t now)
{
	struct noderec *r = NULL;
	struct herd_err err;
	char *name;
	int after;
	long window;

	herd_err_clear(&err);
	if (noderec_load(key, &r, &err) < 0) {
		cli_error("nodes: %s", err.text);
		return 1;
	}
	/* The job's name: the record's, else the key's before "@". */
	name = r->job ? r->job : job->name;
	after = job->after >= 0
		    ? job->after
		    : (r->quarantine_after >= 0 ? r->quarantine_after : 3);
	window = job->window_ms > 0
		     ? job->window_ms
		     : (r->quarantine_for_ms > 0 ? r->quarantine_for_ms
						 : 24L * 3600 * 1000);
	for (size_t i = 0; i < r->n; i++) {
		const struct noderec_host *h = &r->hosts[i];
		const struct noderec_failure *last = NULL;
		size_t count = noderec_recent(h, now, window, &last);
		int64_t until = noderec_until(h, now, after, window);
		json_t *hist = json_array();

		if (!count || !last) {
			json_decref(hist);
			continue;
		}
		for (size_t k = 0; hist && k < h->n; k++)
			json_array_append_new(
			    hist,
			    json_pack("{s:I, s:s, s:s, s:s?}", "t",
				      (json_int_t)h->f[k].t_ms, "kind",
				      h->f[k].kind, "reason", h->f[k].reason,
				      "run", h->f[k].run));
		json_array_append_new(
		    rows,
		    json_pack("{s:s, s:s, s:I, s:i, s:I, s:I, s:s, s:s, s:s?, "
			      "s:b, s:o, s:o}",
			      "job", name, "host", h->host, "failures",
			      (json_int_t)count, "quarantine_after", after,
			      "quarantine_for_ms", (json_int_t)window, "last_t",
			      (json_int_t)last->t_ms, "last_kind", last->kind,
			      "last_reason", last->reason, "last_run",
			      last->run, "quarantined", until > 0, "until",
			      until > 0 ? json_integer(until) : json_null(),
			      "history", hist ? hist : json_array()));
		json_object_set_new(
		    json_array_get(rows, json_array_size(rows) - 1), "record",
		    json_string(key));
		if (r->job_file)
			json_object_set_new(
			    json_array_get(rows, json_array_size(rows) - 1),
			    "job_file", json_string(r->job_file));
	}
	noderec_free(r);
	return 0;
}

static void print_table(json_t *rows, int64_t now)
{
	size_t i, wj = 3, wh = 4;
	json_t *o;

	json_array_foreach(rows, i, o)
	{
		size_t lj =
		    strlen(json_string_value(json_object_get(o, "job")));
		size_t lh =
		    strlen(json_string_value(json_object_get(o, "host")));

		wj = lj > wj ? lj : wj;
		wh = lh > wh ? lh : wh;
	}
	printf("%-*s  %-*s  %-12s  %-9s  %-9s  %s\n", (int)wj, "JOB", (int)wh,
	       "HOST", "FAILURES", "LAST", "KIND", "REASON / QUARANTINE");
	json_array_foreach(rows, i, o)
	{
		char window[32], count[48], age[32], until[64];
		long w = (long)json_integer_value(
		    json_object_get(o, "quarantine_for_ms"));
		/* Recorded from an agent's words: records written before
		 * herd cleaned them (or edited by hand) are cleaned here. */
		const char *lr =
		    json_string_value(json_object_get(o, "last_reason"));
		char *reason = herd_text_clean(strdup(lr ? lr : "-"));

		if (spec_duration_format(w, window, sizeof(window)) < 0)
			snprintf(window, sizeof(window), "%ldms", w);
		snprintf(count, sizeof(count), "%lld in %s",
			 (long long)json_integer_value(
			     json_object_get(o, "failures")),
			 window);
		age_text(now - json_integer_value(json_object_get(o, "last_t")),
			 age, sizeof(age));
		printf("%-*s  %-*s  %-12s  %-9s  %-9s  %s\n", (int)wj,
		       json_string_value(json_object_get(o, "job")), (int)wh,
		       json_string_value(json_object_get(o, "host")), count,
		       age, json_string_value(json_object_get(o, "last_kind")),
		       reason ? reason : "-");
		free(reason);
		if (json_is_true(json_object_get(o, "quarantined"))) {
			time_text(
			    json_integer_value(json_object_get(o, "until")),
			    until, sizeof(until));
			printf("%-*s  %-*s  QUARANTINED until %s\n", (int)wj,
			       "", (int)wh, "", until);
		}
	}
}

/* --clear HOST... / --clear-all for the named jobs.  job NULL: every
 * job; then a host no job knows is the error. */
static int clear(const struct nodes_job *job, char **hosts, size_t n_hosts,
		 bool all)
{
	char **names = NULL;
	size_t n_names = 0;
	struct herd_err err;
	int status = 0;

	herd_err_clear(&err);
	if (job) {
		if (all) {
			for (size_t k = 0; k < job->n_keys; k++)
				if (noderec_clear(job->keys[k], NULL, &err) <
				    0) {
					cli_error("nodes: %s", err.text);
					return 1;
				}
			printf("herd: cleared every node of job %s\n",
			       job->name);
			return 0;
		}
		for (size_t i = 0; i < n_hosts; i++) {
			int cleared = 0;

			for (size_t k = 0; k < job->n_keys; k++) {
				herd_err_clear(&err);
				if (noderec_clear(job->keys[k], hosts[i],
						  &err) == 0)
					cleared++;
			}
			if (!cleared) {
				cli_error("nodes: %s", err.text);
				status = 1;
				continue;
			}
			printf("herd: cleared %s for job %s\n", hosts[i],
			       job->name);
		}
		return status;
	}
	if (noderec_jobs(&names, &n_names, &err) < 0) {
		cli_error("nodes: %s", err.text);
		return 1;
	}
	if (all) {
		for (size_t k = 0; k < n_names; k++) {
			if (noderec_clear(names[k], NULL, &err) < 0) {
				cli_error("nodes: %s", err.text);
				status = 1;
			}
		}
		if (!status)
			printf("herd: cleared every node of %zu job%s\n",
			       n_names, n_names == 1 ? "" : "s");
		noderec_names_free(names, n_names);
		return status;
	}
	for (size_t i = 0; i < n_hosts; i++) {
		int cleared = 0;

		for (size_t k = 0; k < n_names; k++) {
			struct noderec *r = NULL;

			/* Only jobs that know the host; a record that cannot
			 * be read is said. */
			if (noderec_load(names[k], &r, &err) < 0) {
				cli_error("nodes: %s", err.text);
				status = 1;
				continue;
			}
			if (noderec_find(r, hosts[i])) {
				if (noderec_clear(names[k], hosts[i], &err) <
				    0) {
					cli_error("nodes: %s", err.text);
					status = 1;
				} else {
					printf("herd: cleared %s for job %s\n",
					       hosts[i], names[k]);
					cleared++;
				}
			}
			noderec_free(r);
		}
		if (!cleared) {
			cli_error("nodes: no job has a record of host %s "
				  "(herd nodes lists them)",
				  hosts[i]);
			status = 1;
		}
	}
	noderec_names_free(names, n_names);
	return status;
}

int cmd_nodes(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"clear", required_argument, NULL, 'c'},
	    {"clear-all", no_argument, NULL, 'a'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct nodes_job job = {0};
	char **hosts = NULL;
	size_t n_hosts = 0;
	bool json = false, all = false;
	json_t *rows = NULL;
	int c, status = EXIT_SPEC;

	optind = 1;
	opterr = 0;
	if (!(hosts = calloc(argc > 0 ? (size_t)argc : 1, sizeof(*hosts)))) {
		cli_error("nodes: out of memory");
		return 1;
	}
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'c':
			if (!optarg[0] || n_hosts >= NODES_CLEAR_MAX) {
				cli_error("nodes: --clear needs a host name");
				goto out;
			}
			hosts[n_hosts++] = optarg;
			break;
		case 'a':
			all = true;
			break;
		case 'h':
			nodes_usage(stdout);
			status = 0;
			goto out;
		default:
			if (optopt == 'c')
				cli_usage("nodes", "--clear needs a host name");
			else
				cli_bad_option("nodes",
					       cli_bad_word(argc, argv),
					       nodes_usage);
			goto out;
		}
	}
	/* More names after the job (herd nodes JOB --clear a b) are hosts
	 * to clear when --clear was given. */
	if (optind < argc && (status = resolve_job(argv[optind++], &job)))
		goto out;
	status = EXIT_SPEC;
	while (optind < argc && n_hosts && n_hosts < NODES_CLEAR_MAX)
		hosts[n_hosts++] = argv[optind++];
	if (optind != argc) {
		cli_usage("nodes", "one job, not also '%s'", argv[optind]);
		goto out;
	}
	if (all && n_hosts) {
		cli_error("nodes: --clear and --clear-all do not go together");
		goto out;
	}
	if (json && (all || n_hosts)) {
		cli_error("nodes: --json lists; it does not go with --clear");
		goto out;
	}
	if (all || n_hosts) {
		status = clear(job.name ? &job : NULL, hosts, n_hosts, all);
		goto out;
	}
	status = 1;
	if (!(rows = json_array())) {
		cli_error("nodes: out of memory");
		goto out;
	}
	{
		int64_t now = wall_ms();

		if (job.name) {
			for (size_t k = 0; k < job.n_keys; k++)
				if (job_rows(&job, job.keys[k], rows, now))
					goto out;
		} else {
			char **names = NULL;
			size_t n = 0;
			struct herd_err err;

			herd_err_clear(&err);
			if (noderec_jobs(&names, &n, &err) < 0) {
				cli_error("nodes: %s", err.text);
				goto out;
			}
			for (size_t k = 0; k < n; k++) {
				char *at = strrchr(names[k], '@'), *nm = NULL;
				struct nodes_job each = {.name = names[k],
							 .after = -1,
							 .window_ms = -1};
				int bad;

				/* name@hash: listed as name */
				if (at && at > names[k] &&
				    (nm = strndup(names[k],
						  (size_t)(at - names[k]))) &&
				    noderec_key_is(names[k], nm))
					each.name = nm;
				bad = job_rows(&each, names[k], rows, now);
				free(nm);
				if (bad)
					goto out_names;
			}
			status = 0;
		out_names:
			noderec_names_free(names, n);
			if (status)
				goto out;
			status = 1;
		}
		if (json) {
			char *s = json_dumps(rows, JSON_INDENT(2) |
						       JSON_ENSURE_ASCII);

			if (!s) {
				cli_error("nodes: out of memory");
				goto out;
			}
			printf("%s\n", s);
			free(s);
		} else if (json_array_size(rows)) {
			print_table(rows, now);
		} else {
			printf("herd: no failed nodes recorded%s%s\n",
			       job.name ? " for job " : "",
			       job.name ? job.name : "");
		}
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("nodes: cannot write the output");
		goto out;
	}
	status = 0;
out:
	json_decref(rows);
	nodes_job_free(&job);
	free(hosts);
	return status;
}
