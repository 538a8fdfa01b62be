/* cmd/list.c — `herd list [--running|--all] [--json]`, `herd list
 * --forget-ended`: the user's jobs known on this
 * machine (the registry, herd/jobreg.h), newest first, each with its
 * state read from its run directory (runlog.h) or, for a job on another
 * host, its job_end read here or else asked there: each host once, every
 * host at once, with a bound (remote.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "herd/file.h"
#include "herd/jobreg.h"
#include "herd/runlog.h"
#include "launcher/view/jobview.h"

/* What `herd list --json` on a host may answer: a few hundred bytes a
 * job. */
#define LIST_REMOTE_MAX (1u << 20)

/* 3 s: how long herd list waits for the hosts of its jobs on other hosts,
 * all asked at once, each once: a connection, a login and one command
 * take well under a second on a working link; a host that has not
 * answered by then (down, dropping packets: ssh.connect_timeout is 10 s)
 * is shown unknown (HOST unreachable), and list has still not taken
 * longer than this. */
#define LIST_REMOTE_MS 3000

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
	    "ended when its run directory here has its job_end, else asked\n"
	    "there (each host once, all at once, for at most %d s) and is\n"
	    "unknown (HOST unreachable) when HOST does not answer in time.\n"
	    "On a terminal, without --all: the running jobs and the %d\n"
	    "newest others.\n"
	    "\n"
	    "  --running       only the running jobs\n"
	    "  --all           every job (the default when stdout is not a\n"
	    "                  terminal)\n"
	    "  --forget-ended  remove the registry entries of the jobs that\n"
	    "                  ended, are lost or gone (never a running or\n"
	    "                  unknown one) and the control sockets killed\n"
	    "                  controllers left; their run directories stay\n"
	    "  --json          one JSON array of objects instead of the table\n"
	    "  -h, --help      show this text\n"
	    "\n"
	    "Exit status: 0; 1 the job registry could not be read or an\n"
	    "entry could not be removed; 2 bad usage.\n",
	    LIST_REMOTE_MS / 1000, LIST_TERMINAL_OTHERS);
}

struct row {
	const struct jobreg_entry *e;
	char state[160];
	const char *state_word; /* running, ended, lost, gone, unknown */
	int status;		/* ended: the exit status */
	int attempt, nodes;	/* 0: not known */
	char started[32];
	bool ask; /* on another host, not known ended here: ask there */
};

static void started_text(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms <= 0 || !localtime_r(&t, &tm) ||
	    !strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, size, "-");
}

/* The job's run directory as read here; NULL when it cannot be read. */
static struct runlog *row_log(const struct row *r)
{
	struct herd_err err;
	struct runlog *rl;

	herd_err_clear(&err);
	rl = runlog_open(r->e->run_dir, &err);
	if (rl) {
		runlog_metrics_tail(rl, LIST_METRICS_TAIL);
		if (runlog_update(rl, &err) < 0) {
			runlog_free(rl);
			rl = NULL;
		}
	}
	return rl;
}

/* The latest attempt and its nodes, from rl. */
static void row_attempt(struct row *r, const struct runlog *rl)
{
	if (rl->n_attempts) {
		const struct runlog_attempt *a =
		    &rl->attempts[rl->n_attempts - 1];

		r->attempt = a->attempt;
		r->nodes = a->nodes;
	}
	if (!r->nodes)
		r->nodes = rl->want_nodes;
}

static void row_ended(struct row *r, int status)
{
	r->state_word = "ended";
	r->status = status;
	snprintf(r->state, sizeof(r->state), "ended (status %d)", status);
}

/* A job of this machine: from its run directory. */
static void local_row(struct row *r)
{
	struct runlog *rl = row_log(r);
	enum jobview_state s;

	if (!rl) {
		r->state_word = "gone";
		snprintf(r->state, sizeof(r->state), "gone (no run directory)");
		return;
	}
	s = jobview_state(r->e, rl);
	r->state_word = jobview_state_name(s);
	if (s == JOBVIEW_ENDED)
		row_ended(r, rl->end_status);
	else
		snprintf(r->state, sizeof(r->state), "%s", r->state_word);
	row_attempt(r, rl);
	runlog_free(rl);
}

/* A job on another host whose run directory here (a shared file system)
 * has its job_end: ended, without asking the host.  Else what can be
 * read here (attempt, nodes) and r->ask. */
static void remote_local(struct row *r)
{
	struct runlog *rl = row_log(r);

	r->ask = true;
	if (!rl)
		return;
	row_attempt(r, rl);
	if (rl->ended) {
		row_ended(r, rl->end_status);
		r->ask = false;
	}
	runlog_free(rl);
}

/* One host's answer to `herd list --json`, collected by a child of
 * list's own (remote_query() changes directory and blocks in libssh: a
 * process per host runs them side by side and can be killed at the
 * bound). */
struct host_ask {
	const struct jobreg_entry *e; /* the first entry of the host */
	pid_t pid;
	int fd; /* the child's stdout, -1 once at its end */
	char *buf;
	size_t len;
	bool over;  /* more than LIST_REMOTE_MAX */
	int status; /* the child's exit status; -1: killed at the bound */
};

/* The child: the host's answer on fd; exit 0, 3 HOST unreachable, 4 it
 * answered with an error. */
static void ask_child(const struct jobreg_entry *e, int fd)
{
	char *argv[] = {"list", "--json"}, *out = NULL;
	struct herd_err err;
	int rc;

	herd_err_clear(&err);
	rc = remote_query(e, 2, argv, &out, LIST_REMOTE_MAX, &err);
	if (rc == 0 && out && file_write_all(fd, out, strlen(out)) < 0)
		rc = 1;
	_exit(rc == 0 ? 0 : rc < 0 ? 3 : 4);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts one child per host; returns how many run. */
static size_t asks_start(struct host_ask *a, size_t n)
{
	size_t running = 0;

	fflush(stdout);
	fflush(stderr);
	for (size_t i = 0; i < n; i++) {
		int p[2];

		a[i].pid = -1;
		a[i].fd = -1;
		a[i].status = 3;
		if (pipe2(p, O_CLOEXEC) < 0)
			continue;
		a[i].pid = fork();
		if (a[i].pid == 0) {
			close(p[0]);
			ask_child(a[i].e, p[1]);
		}
		close(p[1]);
		if (a[i].pid < 0) {
			close(p[0]);
			continue;
		}
		a[i].fd = p[0];
		running++;
	}
	return running;
}

/* Reads what the children say until each is at its end or the bound has
 * passed; then kills those still at it and reaps them all. */
static void asks_wait(struct host_ask *a, size_t n, size_t running)
{
	int64_t end = mono_ms() + LIST_REMOTE_MS;
	struct pollfd *pfd = calloc(n ? n : 1, sizeof(*pfd));
	size_t *which = calloc(n ? n : 1, sizeof(*which));

	while (pfd && which && running > 0) {
		int64_t left = end - mono_ms();
		nfds_t k = 0;
		int rc;

		if (left <= 0)
			break;
		for (size_t i = 0; i < n; i++)
			if (a[i].fd >= 0) {
				pfd[k] = (struct pollfd){.fd = a[i].fd,
							 .events = POLLIN};
				which[k++] = i;
			}
		rc = poll(pfd, k, (int)left);
		if (rc < 0 && errno != EINTR)
			break;
		for (nfds_t j = 0; rc > 0 && j < k; j++) {
			struct host_ask *h = &a[which[j]];
			char chunk[16384];
			ssize_t got;

			if (!pfd[j].revents)
				continue;
			got = read(h->fd, chunk, sizeof(chunk));
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got > 0 &&
			    h->len + (size_t)got <= LIST_REMOTE_MAX) {
				char *nb =
				    realloc(h->buf, h->len + (size_t)got + 1);

				if (nb) {
					h->buf = nb;
					memcpy(h->buf + h->len, chunk,
					       (size_t)got);
					h->len += (size_t)got;
					h->buf[h->len] = '\0';
					continue;
				}
			}
			if (got > 0)
				h->over = true;
			close(h->fd); /* at its end, or no room for more */
			h->fd = -1;
			running--;
		}
	}
	free(pfd);
	free(which);
	for (size_t i = 0; i < n; i++) {
		int st = 0;
		pid_t got;

		if (a[i].pid <= 0)
			continue;
		if (a[i].fd >= 0) { /* past the bound */
			kill(a[i].pid, SIGKILL);
			close(a[i].fd);
			a[i].fd = -1;
		}
		while ((got = waitpid(a[i].pid, &st, 0)) < 0 && errno == EINTR)
			;
		a[i].status = got > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	}
}

/* The host's answer for r (an element of the host's JSON array) into
 * r, or why there is none. */
static void remote_apply(struct row *r, const struct host_ask *h, json_t *list)
{
	const char *host = r->e->host, *w;
	json_t *o = NULL, *v;
	size_t i;

	if (h->status != 0 || h->over || !json_is_array(list)) {
		r->state_word = "unknown";
		snprintf(r->state, sizeof(r->state), "unknown (%s %s)", host,
			 h->status == 3 || h->status < 0 ? "unreachable"
							 : "did not answer");
		return;
	}
	json_array_foreach(list, i, v)
	{
		const char *id = json_string_value(json_object_get(v, "id"));

		if (id && !strcmp(id, r->e->id)) {
			o = v;
			break;
		}
	}
	if (!o) {
		r->state_word = "unknown";
		snprintf(r->state, sizeof(r->state),
			 "unknown (not registered on %s)", host);
		return;
	}
	w = json_string_value(json_object_get(o, "state"));
	/* state_word must outlive the answer: take a static name. */
	r->state_word = !w			? "unknown"
			: !strcmp(w, "ended")	? "ended"
			: !strcmp(w, "lost")	? "lost"
			: !strcmp(w, "running") ? "running"
			: !strcmp(w, "gone")	? "gone"
						: "unknown";
	if (!strcmp(r->state_word, "ended"))
		row_ended(r, (int)json_integer_value(
				 json_object_get(o, "exit_status")));
	else if (!strcmp(r->state_word, "gone"))
		snprintf(r->state, sizeof(r->state), "gone (no run directory)");
	else
		snprintf(r->state, sizeof(r->state), "%s", r->state_word);
	if ((v = json_object_get(o, "attempt")) && json_is_integer(v))
		r->attempt = (int)json_integer_value(v);
	if ((v = json_object_get(o, "nodes")) && json_is_integer(v))
		r->nodes = (int)json_integer_value(v);
}

/* The jobs on other hosts: job_end read here first; the rest asked
 * there, each host once (`herd list --json` there), every host at once,
 * for at most LIST_REMOTE_MS in all. */
static void remote_rows(struct row *rows, size_t n)
{
	struct host_ask *a = NULL;
	size_t na = 0;

	for (size_t i = 0; i < n; i++)
		if (remote_entry_is_remote(rows[i].e))
			remote_local(&rows[i]);
	for (size_t i = 0; i < n; i++) {
		size_t k;

		if (!rows[i].ask)
			continue;
		for (k = 0; k < na && strcmp(a[k].e->host, rows[i].e->host);
		     k++)
			;
		if (k < na)
			continue;
		{
			struct host_ask *na_v =
			    realloc(a, (na + 1) * sizeof(*a));

			if (!na_v)
				break;
			a = na_v;
		}
		a[na++] = (struct host_ask){.e = rows[i].e};
	}
	if (na)
		asks_wait(a, na, asks_start(a, na));
	for (size_t k = 0; k < na; k++) {
		json_t *list = a[k].buf ? json_loads(a[k].buf, 0, NULL) : NULL;

		for (size_t i = 0; i < n; i++)
			if (rows[i].ask &&
			    !strcmp(rows[i].e->host, a[k].e->host))
				remote_apply(&rows[i], &a[k], list);
		json_decref(list);
		free(a[k].buf);
	}
	/* Hosts never asked (out of memory): as unreachable. */
	for (size_t i = 0; i < n; i++)
		if (rows[i].ask && !rows[i].state_word) {
			rows[i].state_word = "unknown";
			snprintf(rows[i].state, sizeof(rows[i].state),
				 "unknown (%s unreachable)", rows[i].e->host);
		}
	free(a);
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
		jobview_sock_forget(r->e);
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
			return cli_bad_option("list", cli_bad_word(argc, argv),
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
		if (!remote_entry_is_remote(&v[i]))
			local_row(&rows[i]);
	}
	remote_rows(rows, n);
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
		s = a ? json_dumps(a, JSON_INDENT(2) | JSON_ENSURE_ASCII)
		      : NULL;
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
