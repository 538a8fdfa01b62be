/* resolve.c — host sources behind one table of functions and the
 * count/spares/slots rules of resolve.h.
 *
 * The discovery command is the one source that runs a process: it is
 * spawned cleanly in its own process group (proc.h), its stdout gathered
 * up to RESOLVE_COMMAND_OUTPUT_MAX, its stderr passed through, all under
 * nodes.command_timeout_ms on a loop of its own that learns the exit
 * from proc.h.  On timeout the whole group is killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "herd/hostlist.h"
#include "herd/inventory.h"
#include "herd/proc.h"
#include "herd/version.h"
#include "launcher/hosts/resolve.h"

/* Quoted commands and names are cut to this many bytes in messages. */
#define QUOTE_MAX 80

/* One read() from the command's pipes. */
#define READ_CHUNK (64 * 1024)

/* A source gives the hosts in order.  dir is the job file's directory.
 * On failure returns NULL with err filled and *fail set. */
typedef struct hostfile *(*source_fn)(const struct spec *spec, const char *dir,
				      enum resolve_fail *fail,
				      struct herd_err *err);

struct source {
	enum spec_source source;
	const char *key;	 /* the spec key, for messages */
	source_fn nodes;	 /* NULL: not resolvable here */
	const char *unsupported; /* why, when nodes is NULL */
};

/* Turns a hostlist expression into a hostfile without slots. */
static struct hostfile *from_expr(const char *expr, const char *what,
				  struct herd_err *err)
{
	struct hostlist *hl = NULL;
	struct hostfile *hf = NULL, *ret = NULL;
	struct herd_err e;

	herd_err_clear(&e);
	hl = hostlist_expand(expr, &e);
	if (!hl) {
		herd_errprintf(err, "%s: %s", what,
			       e.text[0] ? e.text : "bad hostlist expression");
		goto out;
	}
	hf = hostfile_new();
	if (!hf) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < hostlist_count(hl); i++) {
		if (hostfile_host_check(hostlist_nth(hl, i), what, err) < 0)
			goto out;
		if (hostfile_push(hf, hostlist_nth(hl, i), 0, 0, &e) < 0) {
			herd_errprintf(err, "%s: %s", what, e.text);
			goto out;
		}
	}
	ret = hf;
	hf = NULL;
out:
	hostfile_free(hf);
	hostlist_free(hl);
	return ret;
}

static struct hostfile *source_none(const struct spec *spec, const char *dir,
				    enum resolve_fail *fail,
				    struct herd_err *err)
{
	struct hostfile *hf = hostfile_new();

	(void)spec;
	(void)dir;
	if (!hf || hostfile_push(hf, "localhost", 0, 0, err) < 0) {
		hostfile_free(hf);
		*fail = RESOLVE_FAIL_RUNTIME;
		return NULL;
	}
	return hf;
}

static struct hostfile *source_hosts(const struct spec *spec, const char *dir,
				     enum resolve_fail *fail,
				     struct herd_err *err)
{
	char what[PATH_MAX + 32];
	struct hostfile *hf;

	(void)dir;
	snprintf(what, sizeof(what), "%s: nodes.hosts", spec->path);
	hf = from_expr(spec->nodes.hosts, what, err);
	if (!hf)
		*fail = RESOLVE_FAIL_INPUT;
	return hf;
}

static struct hostfile *source_hostfile(const struct spec *spec,
					const char *dir,
					enum resolve_fail *fail,
					struct herd_err *err)
{
	char path[PATH_MAX];
	const char *file = spec->nodes.hostfile;
	struct hostfile *hf;
	int n;

	if (file[0] == '/' || !strcmp(dir, "."))
		n = snprintf(path, sizeof(path), "%s", file);
	else
		n = snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		*fail = RESOLVE_FAIL_INPUT;
		herd_errprintf(err, "%s: nodes.hostfile: path too long",
			       spec->path);
		return NULL;
	}
	hf = hostfile_load(path, HOSTFILE_AUTO, err);
	if (!hf)
		*fail = RESOLVE_FAIL_INPUT;
	return hf;
}

/* nodes.slurm (or no source inside an allocation): the allocation herd
 * runs in, from the variable every job step of an allocation carries. */
static struct hostfile *source_slurm(const struct spec *spec, const char *dir,
				     enum resolve_fail *fail,
				     struct herd_err *err)
{
	const char *list = getenv("SLURM_JOB_NODELIST");
	const char *tasks = getenv("SLURM_NTASKS_PER_NODE");
	struct hostfile *hf;

	(void)dir;
	if (!list || !*list) {
		*fail = RESOLVE_FAIL_RUNTIME;
		herd_errprintf(err,
			       "%s: nodes.slurm is resolved inside a Slurm "
			       "allocation (SLURM_JOB_NODELIST is not set): "
			       "use 'herd sbatch', or 'herd run' inside "
			       "salloc",
			       spec->path);
		return NULL;
	}
	hf = from_expr(list, "SLURM_JOB_NODELIST", err);
	if (!hf) {
		*fail = RESOLVE_FAIL_RUNTIME;
		return NULL;
	}
	/* salloc/sbatch --ntasks-per-node: that many ranks per node unless
	 * nodes.slots says otherwise (applied later, over every entry). */
	if (spec->nodes.slots <= 0 && tasks && *tasks) {
		char *end;
		long n;

		errno = 0;
		n = strtol(tasks, &end, 10);
		if (errno || *end || n <= 0 || n > INT_MAX) {
			*fail = RESOLVE_FAIL_RUNTIME;
			hostfile_free(hf);
			herd_errprintf(err,
				       "SLURM_NTASKS_PER_NODE is '%.*s', not a "
				       "positive number",
				       QUOTE_MAX, tasks);
			return NULL;
		}
		for (size_t i = 0; i < hf->count; i++)
			hf->entries[i].slots = (int)n;
	}
	return hf;
}

/* ---- nodes.command ---------------------------------------------------- */

/* Remembers the last non-empty line of the command's stderr. */
struct last_line {
	char cur[RESOLVE_STDERR_LINE_MAX];
	size_t cur_len;
	char last[RESOLVE_STDERR_LINE_MAX];
};

static void last_line_feed(struct last_line *l, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			if (l->cur_len > 0) {
				memcpy(l->last, l->cur, l->cur_len);
				l->last[l->cur_len] = '\0';
			}
			l->cur_len = 0;
		} else if (buf[i] != '\r' && l->cur_len + 1 < sizeof(l->cur)) {
			l->cur[l->cur_len++] = buf[i];
		}
	}
}

static void write_all(int fd, const char *buf, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		n -= (size_t)w;
	}
}

/* One run of the discovery command, on a loop of its own (resolving
 * comes before the controller's loop exists). */
struct cmd_run {
	int out_fd, err_fd;	/* -1 once at EOF */
	char *out, *chunk;
	size_t len, alloc;
	struct last_line ll;
	bool exited, timed_out, too_big, no_mem;
	struct proc_exit exit;
};

static void cmd_check_done(struct loop *loop, struct cmd_run *r)
{
	if ((r->out_fd < 0 && r->err_fd < 0 && r->exited) || r->timed_out ||
	    r->too_big || r->no_mem)
		loop_stop(loop);
}

static void cmd_eof(struct loop *loop, int *fd)
{
	loop_fd_del(loop, *fd);
	*fd = -1;
}

static void cmd_on_output(struct loop *loop, int fd, short revents,
			  void *arg)
{
	struct cmd_run *r = arg;
	ssize_t n = read(fd, r->chunk, READ_CHUNK);

	(void)revents;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		cmd_eof(loop, fd == r->out_fd ? &r->out_fd : &r->err_fd);
	} else if (fd == r->err_fd) {
		write_all(STDERR_FILENO, r->chunk, (size_t)n);
		last_line_feed(&r->ll, r->chunk, (size_t)n);
	} else if (r->len + (size_t)n > RESOLVE_COMMAND_OUTPUT_MAX) {
		r->too_big = true;
	} else {
		if (r->len + (size_t)n > r->alloc) {
			size_t na = r->alloc ? r->alloc : READ_CHUNK;
			char *t;

			while (na < r->len + (size_t)n)
				na *= 2;
			t = realloc(r->out, na);
			if (!t) {
				r->no_mem = true;
				cmd_check_done(loop, r);
				return;
			}
			r->out = t;
			r->alloc = na;
		}
		memcpy(r->out + r->len, r->chunk, (size_t)n);
		r->len += (size_t)n;
	}
	cmd_check_done(loop, r);
}

static void cmd_on_exit(struct loop *loop, const struct proc_exit *e,
			void *arg)
{
	struct cmd_run *r = arg;

	r->exited = true;
	r->exit = *e;
	cmd_check_done(loop, r);
}

static void cmd_on_deadline(struct loop *loop, void *arg)
{
	struct cmd_run *r = arg;

	r->timed_out = true;
	cmd_check_done(loop, r);
}

static struct hostfile *source_command(const struct spec *spec, const char *dir,
				       enum resolve_fail *fail,
				       struct herd_err *err)
{
	const char *cmd = spec->nodes.command;
	long timeout = spec->nodes.command_timeout_ms;
	char took[SPEC_DURATION_TEXT];
	char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
	struct proc_opts opts = {.workdir = dir};
	struct cmd_run *r = NULL;
	struct hostfile *hf = NULL;
	struct loop *loop = NULL;
	struct herd_err why;
	pid_t pid = -1;
	int status;

	*fail = RESOLVE_FAIL_RUNTIME;
	r = calloc(1, sizeof(*r));
	loop = loop_new();
	if (!r || !loop || !(r->chunk = malloc(READ_CHUNK))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	r->out_fd = r->err_fd = -1;
	/* Its own process group (killed whole on timeout), stdin from
	 * /dev/null, dies with herd. */
	opts.io[1].kind = opts.io[2].kind = PROC_FD_PIPE;
	herd_err_clear(&why);
	pid = proc_spawn(loop, argv, &opts, cmd_on_exit, r, &why);
	if (pid < 0) {
		herd_errprintf(err, "nodes.command: %s", why.text);
		goto out;
	}
	r->out_fd = opts.io[1].fd;
	r->err_fd = opts.io[2].fd;
	if (loop_fd_add(loop, r->out_fd, POLLIN, cmd_on_output, r) < 0 ||
	    loop_fd_add(loop, r->err_fd, POLLIN, cmd_on_output, r) < 0 ||
	    (timeout > 0 &&
	     loop_timer_add(loop, timeout, cmd_on_deadline, r) < 0)) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	while (!((r->out_fd < 0 && r->err_fd < 0 && r->exited) ||
		 r->timed_out || r->too_big || r->no_mem))
		if (loop_run(loop) < 0) {
			herd_errprintf(err, "nodes.command: poll: %s",
				       strerror(errno));
			goto out;
		}
	if (r->ll.cur_len > 0) {
		memcpy(r->ll.last, r->ll.cur, r->ll.cur_len);
		r->ll.last[r->ll.cur_len] = '\0';
	}
	if (r->no_mem) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (r->timed_out) {
		herd_errprintf(err,
			       "%s: nodes.command '%.*s' timed out after %s "
			       "(nodes.command_timeout); killed it",
			       spec->path, QUOTE_MAX, cmd,
			       spec_duration_text(timeout, took, sizeof(took)));
		goto out;
	}
	if (r->too_big) {
		herd_errprintf(err,
			       "%s: nodes.command '%.*s' printed more than "
			       "%d bytes; killed it",
			       spec->path, QUOTE_MAX, cmd,
			       RESOLVE_COMMAND_OUTPUT_MAX);
		goto out;
	}
	/* Whatever the command left in its group goes with it. */
	kill(-pid, SIGKILL);
	pid = -1;
	status = r->exit.status;
	if (r->exit.step != PROC_STEP_NONE) {
		herd_errprintf(err, "%s: nodes.command '%.*s': %s: %s",
			       spec->path, QUOTE_MAX, cmd,
			       r->exit.step == PROC_STEP_WORKDIR
				       ? "cannot enter the job file's "
					 "directory"
				       : proc_step_what(r->exit.step),
			       strerror(r->exit.err));
		goto out;
	}
	if (WIFSIGNALED(status)) {
		herd_errprintf(err,
			       "%s: nodes.command '%.*s' was killed by signal "
			       "%d%s%s",
			       spec->path, QUOTE_MAX, cmd, WTERMSIG(status),
			       r->ll.last[0] ? ": " : "", r->ll.last);
		goto out;
	}
	if (WEXITSTATUS(status) != 0) {
		herd_errprintf(err,
			       "%s: nodes.command '%.*s' exited with status "
			       "%d%s%s",
			       spec->path, QUOTE_MAX, cmd, WEXITSTATUS(status),
			       r->ll.last[0] ? ": " : "", r->ll.last);
		goto out;
	}
	hf = hostfile_parse(r->out ? r->out : "", r->len,
			    "nodes.command output", HOSTFILE_AUTO, err);
out:
	if (pid > 0) {
		/* Still running (timeout, too much output, an error): the
		 * whole group goes, and the leader is reaped before the
		 * loop does. */
		kill(-pid, SIGKILL);
		if (!r->exited)
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
	}
	if (r) {
		if (r->out_fd >= 0)
			close(r->out_fd);
		if (r->err_fd >= 0)
			close(r->err_fd);
		free(r->out);
		free(r->chunk);
		free(r);
	}
	loop_free(loop);
	return hf;
}

/* ---- nodes.inventory: an HTTP JSON API --------------------------------- */

struct body {
	char *buf;
	size_t len, cap;
	bool too_big;
};

static size_t body_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct body *b = arg;
	size_t n = size * nmemb;

	if (b->len + n > RESOLVE_INVENTORY_MAX) {
		b->too_big = true;
		return 0;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64 * 1024;
		char *p;

		while (cap < b->len + n)
			cap *= 2;
		if (!(p = realloc(b->buf, cap)))
			return 0;
		b->buf = p;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, ptr, n);
	b->len += n;
	return n;
}

/* The URL for messages: scheme://host[:port]/path, without user, password
 * or query, which may carry secrets.  Into out (size bytes). */
static void url_shown(const char *url, char *out, size_t size)
{
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	CURLU *u = curl_url();

	snprintf(out, size, "(unreadable URL)");
	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
		curl_url_get(u, CURLUPART_PORT, &port, 0);
		curl_url_get(u, CURLUPART_PATH, &path, 0);
		snprintf(out, size, "%s://%s%s%s%s", scheme, host,
			 port ? ":" : "", port ? port : "", path ? path : "");
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(u);
}

/* GET nodes.inventory.url (a bearer token from $token_env, never shown),
 * at most nodes.command_timeout, redirects only to http(s); the answer is
 * parsed by inventory_parse(). */
static struct hostfile *source_inventory(const struct spec *spec,
					 const char *dir,
					 enum resolve_fail *fail,
					 struct herd_err *err)
{
	const char *env = spec->nodes.inventory.token_env;
	const char *token = env ? getenv(env) : NULL;
	char shown[512], what[PATH_MAX + 600], cerr[CURL_ERROR_SIZE] = "";
	char took[SPEC_DURATION_TEXT];
	struct curl_slist *headers = NULL;
	struct hostfile *hf = NULL;
	struct body b = {0};
	CURL *h = NULL;
	long code = 0;
	CURLcode rc;

	(void)dir;
	*fail = RESOLVE_FAIL_RUNTIME;
	url_shown(spec->nodes.inventory.url, shown, sizeof(shown));
	snprintf(what, sizeof(what), "%s: nodes.inventory %s", spec->path,
		 shown);
	if (env && (!token || !*token)) {
		*fail = RESOLVE_FAIL_INPUT;
		herd_errprintf(err,
			       "%s: nodes.inventory.token_env names %s, which "
			       "is not set (export it with the inventory's "
			       "token)",
			       spec->path, env);
		return NULL;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    !(h = curl_easy_init()) ||
	    !(headers = curl_slist_append(NULL, "Accept: application/json"))) {
		herd_errprintf(err, "%s: cannot set up libcurl", what);
		goto out;
	}
	curl_easy_setopt(h, CURLOPT_URL, spec->nodes.inventory.url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
			 (long)spec->nodes.command_timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "herd/" HERD_VERSION);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	if (token) {
		/* Sent to the URL's own host only, not after a redirect to
		 * another one (libcurl's rule without UNRESTRICTED_AUTH). */
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
		curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, token);
	}
	rc = curl_easy_perform(h);
	if (b.too_big) {
		herd_errprintf(err, "%s: the answer is larger than %d MiB",
			       what, RESOLVE_INVENTORY_MAX >> 20);
		goto out;
	}
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		herd_errprintf(
		    err,
		    "%s: no answer within %s "
		    "(nodes.command_timeout)",
		    what,
		    spec_duration_text(spec->nodes.command_timeout_ms, took,
				       sizeof(took)));
		goto out;
	}
	if (rc != CURLE_OK) {
		herd_errprintf(err, "%s: %s", what,
			       cerr[0] ? cerr : curl_easy_strerror(rc));
		goto out;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		herd_errprintf(err, "%s: HTTP status %ld%s", what, code,
			       code == 401 || code == 403
				   ? (env ? " (is the token in "
					    "nodes.inventory.token_env "
					    "right?)"
					  : " (does it need a token? set "
					    "nodes.inventory.token_env)")
				   : "");
		goto out;
	}
	*fail = RESOLVE_FAIL_INPUT;
	hf = inventory_parse(b.buf ? b.buf : "", b.len,
			     spec->nodes.inventory.filter, what, err);
out:
	curl_slist_free_all(headers);
	if (h)
		curl_easy_cleanup(h);
	free(b.buf);
	return hf;
}

/* ---- the table -------------------------------------------------------- */

static const struct source sources[] = {
    {SPEC_SOURCE_NONE, "(none)", source_none, NULL},
    {SPEC_SOURCE_HOSTS, "nodes.hosts", source_hosts, NULL},
    {SPEC_SOURCE_HOSTFILE, "nodes.hostfile", source_hostfile, NULL},
    {SPEC_SOURCE_SLURM, "nodes.slurm", source_slurm, NULL},
    {SPEC_SOURCE_INVENTORY, "nodes.inventory", source_inventory, NULL},
    {SPEC_SOURCE_COMMAND, "nodes.command", source_command, NULL},
};

static const struct source *source_find(enum spec_source s)
{
	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
		if (sources[i].source == s)
			return &sources[i];
	return NULL;
}

/* The directory of the job file, into dir (PATH_MAX bytes). */
static int job_dir(const char *path, char *dir, size_t size)
{
	const char *slash = strrchr(path, '/');
	int n;

	if (!slash)
		n = snprintf(dir, size, ".");
	else if (slash == path)
		n = snprintf(dir, size, "/");
	else
		n = snprintf(dir, size, "%.*s", (int)(slash - path), path);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

void resolve_free(struct resolved *res)
{
	if (!res)
		return;
	hostfile_free(res->nodes);
	hostfile_free(res->spares);
	res->nodes = res->spares = NULL;
}

/* Both lists together, for one duplicate check over nodes and spares. */
static int check_unique(const struct spec *spec, const struct source *src,
			const struct hostfile *nodes,
			const struct hostfile *spares, struct herd_err *err)
{
	struct hostfile *all = hostfile_new();
	size_t a, b;
	int rc = -1, dup;

	if (!all) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nodes->count; i++)
		if (hostfile_push(all, nodes->entries[i].host, 0, 0, err) < 0)
			goto out;
	for (size_t i = 0; i < spares->count; i++)
		if (hostfile_push(all, spares->entries[i].host, 0, 0, err) < 0)
			goto out;
	dup = hostfile_find_duplicate(all, &a, &b);
	if (dup < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (dup && b < nodes->count)
		herd_errprintf(err, "%s: %s: host '%s' listed twice",
			       spec->path, src->key, all->entries[b].host);
	else if (dup && a < nodes->count)
		herd_errprintf(err,
			       "%s: host '%s' is both a node and a spare "
			       "(nodes.spares)",
			       spec->path, all->entries[b].host);
	else if (dup)
		herd_errprintf(err, "%s: spare host '%s' listed twice",
			       spec->path, all->entries[b].host);
	else
		rc = 0;
out:
	hostfile_free(all);
	return rc;
}

/* The source to resolve: the spec's, except that a spec naming none,
 * read inside a Slurm allocation (SLURM_JOB_ID set), means the
 * allocation (transport_pick() applies the same rule). */
static enum spec_source source_of(const struct spec *spec)
{
	const char *job = getenv("SLURM_JOB_ID");

	if (spec->nodes.source == SPEC_SOURCE_NONE && job && *job)
		return SPEC_SOURCE_SLURM;
	return spec->nodes.source;
}

int resolve_nodes(const struct spec *spec, struct resolved *res,
		  struct herd_err *err)
{
	const struct source *src = source_find(source_of(spec));
	struct hostfile *given = NULL, *extra = NULL;
	enum resolve_fail fail = RESOLVE_FAIL_INPUT;
	char dir[PATH_MAX];
	size_t count;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (!src) {
		herd_errprintf(err, "%s: unknown host source %d", spec->path,
			       (int)spec->nodes.source);
		goto out;
	}
	if (!src->nodes) {
		herd_errprintf(err, "%s: %s", spec->path, src->unsupported);
		goto out;
	}
	if (job_dir(spec->path, dir, sizeof(dir)) < 0) {
		herd_errprintf(err, "%s: path too long", spec->path);
		goto out;
	}
	given = src->nodes(spec, dir, &fail, err);
	if (!given)
		goto out;
	fail = RESOLVE_FAIL_INPUT;

	count = given->count;
	if (spec->nodes.count > 0) {
		if ((size_t)spec->nodes.count > given->count) {
			herd_errprintf(err,
				       "%s: nodes.count is %ld but %s gives "
				       "%zu host%s",
				       spec->path, spec->nodes.count, src->key,
				       given->count,
				       given->count == 1 ? "" : "s");
			goto out;
		}
		count = (size_t)spec->nodes.count;
	}
	res->nodes = hostfile_new();
	res->spares = hostfile_new();
	if (!res->nodes || !res->spares) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < given->count; i++) {
		const struct hostfile_entry *e = &given->entries[i];

		if (hostfile_push(i < count ? res->nodes : res->spares, e->host,
				  e->slots, e->line, err) < 0)
			goto out;
	}
	if (spec->nodes.spares) {
		char what[PATH_MAX + 32];

		snprintf(what, sizeof(what), "%s: nodes.spares", spec->path);
		extra = from_expr(spec->nodes.spares, what, err);
		if (!extra)
			goto out;
		for (size_t i = 0; i < extra->count; i++)
			if (hostfile_push(res->spares, extra->entries[i].host,
					  0, 0, err) < 0)
				goto out;
	}
	if (check_unique(spec, src, res->nodes, res->spares, err) < 0)
		goto out;
	if (spec->nodes.slots > 0) {
		for (size_t i = 0; i < res->nodes->count; i++)
			res->nodes->entries[i].slots = (int)spec->nodes.slots;
		for (size_t i = 0; i < res->spares->count; i++)
			res->spares->entries[i].slots = (int)spec->nodes.slots;
	}
	rc = 0;
out:
	hostfile_free(given);
	hostfile_free(extra);
	if (rc < 0) {
		resolve_free(res);
		res->fail = fail;
	}
	return rc;
}
