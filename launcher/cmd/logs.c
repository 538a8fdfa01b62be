/* cmd/logs.c — `herd logs JOB [--rank R | --node H] [-f] [--attempt N]`:
 * a job's rank output from its run directory (logtree.h):
 *
 *   RUNDIR/events.jsonl          rank_start {attempt, rank, host}, job_end
 *   RUNDIR/attempt-N/rank-R.log  what rank R wrote in attempt N
 *
 * Every rank's lines are prefixed "[R] " as the live output is; --rank R
 * prints that rank's log as it is.  -f follows: new lines as they are
 * written, a rank log that does not exist yet once it appears, the next
 * attempt when one starts (unless --attempt), until job_end is in
 * events.jsonl (or the controller is gone, or Ctrl-C).  Following polls
 * the files every LOGS_POLL_MS: a viewer that may run on another machine
 * than the writer (a shared file system) cannot count on inotify.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "herd/jobreg.h"
#include "launcher/view/jobview.h"

/* How often -f looks for new output: a person reading notices 200 ms
 * little, and a stat and read per rank five times a second costs little
 * even for a few thousand ranks. */
#define LOGS_POLL_MS 200

/* How often -f asks whether the controller still runs. */
#define LOGS_ALIVE_MS 1000

/* A rank's unfinished line is held up to this much; longer is printed as
 * it is (a rank that writes no newline must not grow us without bound). */
#define LOGS_LINE_MAX (64u << 10)

/* An events.jsonl line longer than this is skipped (runlog.h's limit). */
#define LOGS_EVENT_MAX (16u << 20)

/* Ranks in one attempt (the controller's world size bound, 1 << 20). */
#define LOGS_RANKS_MAX (1 << 20)

static void logs_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd logs JOB [--rank R | --node HOST] [-f] [--attempt N]\n"
	    "\n"
	    "Prints a job's rank output from its run directory (the rank\n"
	    "logs herd writes, attempt-N/rank-R.log): every rank, each line\n"
	    "prefixed [R] as the live output, or one rank (as written) or the\n"
	    "ranks of one node.  The latest attempt unless --attempt.  JOB is\n"
	    "a job id or name (herd list), a run directory, a log.dir (its\n"
	    "latest run) or a job file (its log.dir/latest).\n"
	    "\n"
	    "  --rank R       only rank R, without a prefix\n"
	    "  --node HOST    only the ranks HOST ran in that attempt\n"
	    "  --attempt N    attempt N instead of the latest\n"
	    "  -f, --follow   keep printing what is written, into the next\n"
	    "                 attempt, until the job ends (job_end) or\n"
	    "                 Ctrl-C; a rank log not there yet is waited for\n"
	    "  -h, --help     show this text\n"
	    "\n"
	    "Exit status: 0 printed; 1 a file could not be read, or the\n"
	    "controller is gone (-f); 2 bad usage or no such job, rank, node\n"
	    "or attempt.\n");
}

struct rank_log {
	int rank;
	int fd;	    /* -1 until opened */
	char *part; /* the unfinished last line */
	size_t len;
};

struct logs {
	const char *dir;
	int want_rank;	    /* --rank, or -1 */
	const char *node;   /* --node, or NULL */
	int attempt;	    /* the attempt shown */
	bool fixed_attempt; /* --attempt */
	bool prefix;	    /* "[R] " */
	struct rank_log *r;
	size_t n;

	/* events.jsonl, read as it grows */
	int ev_fd;
	char *ev_part;
	size_t ev_len;
	bool ev_skip;	 /* inside an over-long line */
	int max_attempt; /* newest attempt_start seen */
	bool ended;
	int end_status;
	json_t *ranks_of; /* "attempt" -> {"host": [ranks]} */
};

/* --- events.jsonl ---------------------------------------------------- */

static void note_rank(struct logs *l, json_t *ev)
{
	json_int_t attempt, rank;
	const char *host;
	char key[24];
	json_t *hosts, *list;

	if (json_unpack(ev, "{s:I, s:I, s:s}", "attempt", &attempt, "rank",
			&rank, "host", &host) < 0)
		return;
	snprintf(key, sizeof(key), "%lld", (long long)attempt);
	if (!(hosts = json_object_get(l->ranks_of, key))) {
		hosts = json_object();
		json_object_set_new(l->ranks_of, key, hosts);
	}
	if (!(list = json_object_get(hosts, host))) {
		list = json_array();
		json_object_set_new(hosts, host, list);
	}
	json_array_append_new(list, json_integer(rank));
}

static void event_line(struct logs *l, const char *line, size_t len)
{
	json_t *ev = json_loadb(line, len, 0, NULL);
	const char *kind;

	if (!ev)
		return;
	kind = json_string_value(json_object_get(ev, "event"));
	if (kind && !strcmp(kind, "rank_start")) {
		note_rank(l, ev);
	} else if (kind && !strcmp(kind, "attempt_start")) {
		int a = (int)json_integer_value(json_object_get(ev, "attempt"));

		if (a > l->max_attempt)
			l->max_attempt = a;
	} else if (kind && !strcmp(kind, "job_end")) {
		l->ended = true;
		l->end_status =
		    (int)json_integer_value(json_object_get(ev, "status"));
	}
	json_decref(ev);
}

/* What fd gained, as whole lines: fn(arg, line, n, cut) for each, with
 * the unfinished last one held in *part (*len bytes) for the next call.
 * A line over max: skipped whole when skip is given (*skip: inside one),
 * else handed over as it is (cut) and the rest of it follows as a line of
 * its own.  Returns 0 at the end of what is there, -1 with errno. */
static int tail_lines(int fd, char **part, size_t *len, bool *skip,
		      size_t max,
		      void (*fn)(void *arg, const char *line, size_t n,
				 bool cut),
		      void *arg)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		char *p = buf, *end, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : 0;
		end = buf + n;
		while (p < end) {
			size_t k;
			char *np;
			bool whole;

			nl = memchr(p, '\n', (size_t)(end - p));
			k = (size_t)((nl ? nl : end) - p);
			whole = nl != NULL;
			if (skip && *skip) {
				*skip = !whole;
			} else if (*len + k > max) {
				if (skip) {
					*skip = !whole;
				} else {
					if (*len)
						fn(arg, *part, *len, true);
					fn(arg, p, k, !whole);
				}
				*len = 0;
			} else {
				if (!(np = realloc(*part, *len + k + 1)))
					return -1;
				*part = np;
				memcpy(*part + *len, p, k);
				*len += k;
				if (whole) {
					fn(arg, *part, *len, false);
					*len = 0;
				}
			}
			p = nl ? nl + 1 : end;
		}
	}
}

static void event_fn(void *arg, const char *line, size_t n, bool cut)
{
	(void)cut;
	if (n)
		event_line(arg, line, n);
}

/* Reads what events.jsonl gained; whole lines only.  Returns 0 or -1. */
static int events_update(struct logs *l)
{
	if (l->ev_fd < 0) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/events.jsonl", l->dir);
		l->ev_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (l->ev_fd < 0)
			return errno == ENOENT ? 0 : -1;
	}
	return tail_lines(l->ev_fd, &l->ev_part, &l->ev_len, &l->ev_skip,
			  LOGS_EVENT_MAX, event_fn, l);
}

/* --- rank logs -------------------------------------------------------- */

static int attempt_dir(const struct logs *l, int attempt, char *buf,
		       size_t size)
{
	return snprintf(buf, size, "%s/attempt-%d", l->dir, attempt) < (int)size
		   ? 0
		   : -1;
}

/* The newest attempt-N directory, or 0. */
static int newest_attempt(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int max = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char *end;
		long a;

		if (strncmp(de->d_name, "attempt-", 8))
			continue;
		a = strtol(de->d_name + 8, &end, 10);
		if (*end || a <= 0 || a > INT_MAX)
			continue;
		if (a > max)
			max = (int)a;
	}
	closedir(d);
	return max;
}

static int cmp_rank(const void *a, const void *b)
{
	const struct rank_log *x = a, *y = b;

	return (x->rank > y->rank) - (x->rank < y->rank);
}

static bool have_rank(const struct logs *l, int rank)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->r[i].rank == rank)
			return true;
	return false;
}

static int add_rank(struct logs *l, int rank)
{
	struct rank_log *nr;

	if (have_rank(l, rank))
		return 0;
	if (l->n >= LOGS_RANKS_MAX ||
	    !(nr = realloc(l->r, (l->n + 1) * sizeof(*nr))))
		return -1;
	l->r = nr;
	l->r[l->n++] = (struct rank_log){.rank = rank, .fd = -1};
	qsort(l->r, l->n, sizeof(*l->r), cmp_rank);
	return 0;
}

/* The ranks to show in the current attempt: --rank, --node's from
 * rank_start, or every rank-R.log there is.  Called again while
 * following: ranks only ever join. */
static int find_ranks(struct logs *l)
{
	char dir[PATH_MAX], key[24];
	DIR *d;
	struct dirent *de;

	if (l->want_rank >= 0)
		return add_rank(l, l->want_rank);
	if (l->node) {
		json_t *list, *v;
		size_t i;

		snprintf(key, sizeof(key), "%d", l->attempt);
		list =
		    json_object_get(json_object_get(l->ranks_of, key), l->node);
		json_array_foreach(list, i, v)
		{
			if (add_rank(l, (int)json_integer_value(v)) < 0)
				return -1;
		}
		return 0;
	}
	if (attempt_dir(l, l->attempt, dir, sizeof(dir)) < 0 ||
	    !(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		char *end;
		long r;

		if (strncmp(de->d_name, "rank-", 5))
			continue;
		r = strtol(de->d_name + 5, &end, 10);
		if (strcmp(end, ".log") || r < 0 || r >= LOGS_RANKS_MAX)
			continue;
		if (add_rank(l, (int)r) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	return 0;
}

static void put_line(const struct logs *l, const struct rank_log *r,
		     const char *p, size_t n, bool newline)
{
	if (l->prefix)
		printf("[%d] ", r->rank);
	fwrite(p, 1, n, stdout);
	if (newline)
		putchar('\n');
}

struct rank_out {
	const struct logs *l;
	const struct rank_log *r;
};

static void rank_fn(void *arg, const char *line, size_t n, bool cut)
{
	const struct rank_out *o = arg;

	(void)cut; /* a line over LOGS_LINE_MAX goes out in pieces */
	put_line(o->l, o->r, line, n, true);
}

/* Prints what rank r's log gained: whole lines; at the end (last) its
 * unfinished line too.  Returns 0, or -1 with errno (not ENOENT). */
static int rank_update(struct logs *l, struct rank_log *r, bool last)
{
	struct rank_out o = {l, r};

	if (r->fd < 0) {
		char path[PATH_MAX];

		if (snprintf(path, sizeof(path), "%s/attempt-%d/rank-%d.log",
			     l->dir, l->attempt, r->rank) >= (int)sizeof(path))
			return -1;
		r->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (r->fd < 0)
			return errno == ENOENT ? 0 : -1;
	}
	if (tail_lines(r->fd, &r->part, &r->len, NULL, LOGS_LINE_MAX, rank_fn,
		       &o) < 0)
		return -1;
	if (last && r->len) {
		put_line(l, r, r->part, r->len, true);
		r->len = 0;
	}
	return 0;
}

/* Prints what every shown rank gained.  Returns 0 or -1 after saying
 * why. */
static int ranks_update(struct logs *l, bool last)
{
	for (size_t i = 0; i < l->n; i++) {
		if (rank_update(l, &l->r[i], last) < 0) {
			cli_error("logs: %s/attempt-%d/rank-%d.log: %s", l->dir,
				  l->attempt, l->r[i].rank, strerror(errno));
			return -1;
		}
	}
	fflush(stdout);
	return 0;
}

static void ranks_close(struct logs *l)
{
	for (size_t i = 0; i < l->n; i++) {
		if (l->r[i].fd >= 0)
			close(l->r[i].fd);
		free(l->r[i].part);
	}
	free(l->r);
	l->r = NULL;
	l->n = 0;
}

/* The nodes that ran ranks in the attempt, for a message. */
static void nodes_of(const struct logs *l, char *buf, size_t size)
{
	char key[24];
	const char *host;
	json_t *v;
	size_t off = 0;

	buf[0] = '\0';
	snprintf(key, sizeof(key), "%d", l->attempt);
	json_object_foreach(json_object_get(l->ranks_of, key), host, v)
	{
		int k = snprintf(buf + off, size - off, "%s%s", off ? ", " : "",
				 host);

		(void)v;
		if (k < 0 || (size_t)k >= size - off)
			break;
		off += (size_t)k;
	}
	if (!off)
		snprintf(buf, size, "none recorded");
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* -f: until job_end (0), the controller is gone (1), or an error. */
static int follow(struct logs *l, const struct jobreg_entry *e)
{
	int64_t alive_at = now_ms();

	for (;;) {
		if (events_update(l) < 0) {
			cli_error("logs: %s/events.jsonl: %s", l->dir,
				  strerror(errno));
			return 1;
		}
		if (find_ranks(l) < 0 || ranks_update(l, false) < 0)
			return 1;
		if (!l->fixed_attempt) {
			char dir[PATH_MAX];

			/* The next attempt's logs exist once its directory
			 * does, and the current ones are then complete: one
			 * attempt after the other, none skipped. */
			if (attempt_dir(l, l->attempt + 1, dir, sizeof(dir)) ==
				0 &&
			    access(dir, F_OK) == 0) {
				if (ranks_update(l, true) < 0)
					return 1;
				ranks_close(l);
				l->attempt++;
				fprintf(stderr, "herd: logs: attempt %d\n",
					l->attempt);
				continue;
			}
		}
		/* After any newer attempt: a job may end in the next
		 * attempt between two looks. */
		if (l->ended) {
			/* Everything was written before job_end. */
			if (find_ranks(l) < 0 || ranks_update(l, true) < 0)
				return 1;
			return 0;
		}
		if (now_ms() - alive_at >= LOGS_ALIVE_MS) {
			alive_at = now_ms();
			if (jobview_controller_alive(e) == 0) {
				/* Its last words may have come meanwhile. */
				if (events_update(l) == 0 && l->ended)
					continue;
				ranks_update(l, true);
				cli_error("logs: %s: no job_end and its "
					  "controller (pid %ld) is gone; `herd "
					  "run --resume %s` starts it again",
					  e->id, e->pid, l->dir);
				return 1;
			}
		}
		poll(NULL, 0, LOGS_POLL_MS);
	}
}

static int parse_int(const char *s, int min, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

/* The job's own herd on its host does it: same options, JOB its id. */
static int logs_remote(const struct jobreg_entry *e, const struct logs *l,
		       bool follow_opt, const char *rank, const char *attempt)
{
	char *argv[10];
	int argc = 0;

	argv[argc++] = "logs";
	if (rank) {
		argv[argc++] = "--rank";
		argv[argc++] = (char *)rank;
	}
	if (l->node) {
		argv[argc++] = "--node";
		argv[argc++] = (char *)l->node;
	}
	if (attempt) {
		argv[argc++] = "--attempt";
		argv[argc++] = (char *)attempt;
	}
	if (follow_opt)
		argv[argc++] = "-f";
	argv[argc++] = e->id;
	argv[argc] = NULL;
	return remote_proxy(e, argc, argv);
}

int cmd_logs(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"rank", required_argument, NULL, 'r'},
	    {"node", required_argument, NULL, 'n'},
	    {"attempt", required_argument, NULL, 'a'},
	    {"follow", no_argument, NULL, 'f'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct logs l = {.want_rank = -1, .ev_fd = -1};
	struct jobreg_entry e = {0};
	const char *rank_arg = NULL, *attempt_arg = NULL;
	bool follow_opt = false;
	int c, status = EXIT_SPEC;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "fh", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			rank_arg = optarg;
			if (parse_int(optarg, 0, &l.want_rank) < 0) {
				cli_error("logs: --rank %s: expected a rank "
					  "number (0, 1, ...)",
					  optarg);
				return EXIT_SPEC;
			}
			break;
		case 'n':
			l.node = optarg;
			break;
		case 'a':
			attempt_arg = optarg;
			if (parse_int(optarg, 1, &l.attempt) < 0) {
				cli_error("logs: --attempt %s: expected an "
					  "attempt number (1, 2, ...)",
					  optarg);
				return EXIT_SPEC;
			}
			l.fixed_attempt = true;
			break;
		case 'f':
			follow_opt = true;
			break;
		case 'h':
			logs_usage(stdout);
			return 0;
		default:
			return cli_bad_option("logs", cli_bad_word(argc, argv),
					      logs_usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("logs",
				 "expected one JOB (id, name or run "
				 "directory), got %d arguments",
				 argc - optind);
	if (rank_arg && l.node) {
		cli_error("logs: --rank or --node, not both");
		return EXIT_SPEC;
	}
	if (jobview_resolve("logs", argv[optind], &e, &status) < 0)
		return status;
	if (remote_entry_is_remote(&e)) {
		status = logs_remote(&e, &l, follow_opt, rank_arg, attempt_arg);
		goto out;
	}
	status = 1;
	l.dir = e.run_dir;
	l.prefix = l.want_rank < 0;
	if (!(l.ranks_of = json_object())) {
		cli_error("logs: out of memory");
		goto out;
	}
	if (access(l.dir, R_OK | X_OK) < 0) {
		cli_error("logs: %s: %s", l.dir, strerror(errno));
		goto out;
	}
	if (events_update(&l) < 0) {
		cli_error("logs: %s/events.jsonl: %s", l.dir, strerror(errno));
		goto out;
	}
	if (!l.fixed_attempt) {
		l.attempt = newest_attempt(l.dir);
		if (l.max_attempt > l.attempt)
			l.attempt = l.max_attempt;
	}
	if (!follow_opt) {
		char dir[PATH_MAX];

		if (!l.attempt) {
			cli_error("logs: %s: no rank logs yet (no attempt "
				  "started)",
				  e.id);
			status = EXIT_SPEC;
			goto out;
		}
		if (attempt_dir(&l, l.attempt, dir, sizeof(dir)) < 0 ||
		    access(dir, F_OK) < 0) {
			cli_error("logs: %s: no attempt %d (the latest is %d)",
				  e.id, l.attempt, newest_attempt(l.dir));
			status = EXIT_SPEC;
			goto out;
		}
		if (find_ranks(&l) < 0) {
			cli_error("logs: out of memory");
			goto out;
		}
		if (l.node && !l.n) {
			char nodes[1024];

			nodes_of(&l, nodes, sizeof(nodes));
			cli_error("logs: %s: no ranks on %s in attempt %d "
				  "(nodes: %s)",
				  e.id, l.node, l.attempt, nodes);
			status = EXIT_SPEC;
			goto out;
		}
		if (l.want_rank >= 0) {
			char path[PATH_MAX + 32];

			snprintf(path, sizeof(path), "%s/rank-%d.log", dir,
				 l.want_rank);
			if (access(path, F_OK) < 0) {
				cli_error("logs: %s: no rank %d in attempt %d",
					  e.id, l.want_rank, l.attempt);
				status = EXIT_SPEC;
				goto out;
			}
		}
		status = ranks_update(&l, true) < 0 ? 1 : 0;
	} else {
		if (!l.attempt)
			l.attempt = 1; /* waited for */
		status = follow(&l, &e);
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("logs: cannot write the output");
		status = 1;
	}
out:
	ranks_close(&l);
	if (l.ev_fd >= 0)
		close(l.ev_fd);
	free(l.ev_part);
	json_decref(l.ranks_of);
	jobreg_entry_clear(&e);
	return status;
}
