/* ctl/metrics.c — what the controller does with the agents' METRICS
 * frames: the table (metrics.h) fed from the frames,
 * metrics.jsonl written every metrics.interval, the status area of
 * `herd run` on a terminal, and the Prometheus endpoint (metrics.listen).
 *
 * All of it runs on the controller's one loop and never changes the job's
 * lifecycle: the METRICS handler only feeds the table, the timers only
 * read it and the controller's node table.
 *
 * The endpoint is libmicrohttpd driven from the loop (no thread of its
 * own: one loop per process): MHD_USE_EPOLL without an internal thread gives one
 * epoll fd that is readable whenever MHD has work; the loop watches it and
 * calls MHD_run(), and a timer from MHD_get_timeout() covers MHD's own
 * timeouts.  A scrape computes the text from the table at that moment.
 *
 * The status area is the terminal's last line, kept out of the scrolling
 * output with a scroll region (DECSTBM, as apt does): rank output, herd's
 * own messages and anything else written to the terminal scroll in the
 * lines above, so no line of theirs is ever erased or torn, whichever fd
 * or process writes it.  The status is redrawn once a second in one write
 * (save the cursor, go to the last line, erase it, write, restore the
 * cursor), through the same non-blocking buffer as rank stdout; while
 * that buffer holds output a slow terminal has not taken, the redraw is
 * skipped (it never adds to a backlog, never blocks, never drops rank
 * output).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <microhttpd.h>

#include "launcher/ctl/ctl_int.h"
#include "herd/events.h"
#include "herd/failcost.h"
#include "launcher/model/metric_table.h"

/* 1 s: the status line is redrawn at most this often. */
#define STATUS_EVERY_MS 1000
/* 32: scrapes served at once (Prometheus makes one at a time). */
#define HTTP_CONNECTIONS_MAX 32
/* 10 s: an idle or stalled scraper's connection is closed after this. */
#define HTTP_TIMEOUT_S 10

struct ctl_metrics {
	struct metrics *m;
	struct logfile *jsonl; /* RUN-ID/metrics.jsonl, or NULL */
	bool jsonl_reported;
	long tick_timer;
	int64_t start_ms; /* monotonic, at ctl_metrics_start */

	struct MHD_Daemon *mhd;
	int listen_fd;
	int mhd_fd;   /* MHD's epoll fd, watched by the loop */
	char url[80]; /* http://HOST:PORT/metrics */
	long mhd_timer;

	/* What each failure cost, from the events as they are emitted
	 * (failcost.h): the status line shows the newest. */
	struct failcosts failures;

	bool status_on;	   /* stdout is a terminal, no --no-status */
	bool status_shown; /* the scroll region is set */
	int rows;	   /* the terminal's rows when it was set */
	long status_timer;
};

/* --- the table ------------------------------------------------------------ */

static enum metrics_state node_mstate(const struct node *n)
{
	switch (n->state) {
	case NODE_SPARE:
		return METRICS_SPARE;
	case NODE_CONNECTING:
		return n->member ? METRICS_CONNECTING : METRICS_SPARE;
	case NODE_UP:
		return n->member ? METRICS_UP : METRICS_SPARE;
	case NODE_EVICTED:
		return METRICS_FAILED;
	case NODE_GONE:
	default:
		return METRICS_GONE;
	}
}

/* The controller's view into the table.  A node that is gone at the end
 * keeps the state it had, so the last line says how the job ended. */
static void sync_states(struct ctl *c)
{
	metrics_set_attempt(c->metrics->m, c->attempt);
	for (int i = 0; i < c->n_nodes; i++)
		if (c->nodes[i].state != NODE_GONE)
			metrics_set_state(c->metrics->m, i,
					  node_mstate(&c->nodes[i]));
}

void ctl_metrics_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	if (c->metrics)
		metrics_feed(c->metrics->m, (int)(n - c->nodes), f->body);
	ctl_straggler_frame(c, n, f->body);
}

/* --- metrics.jsonl -------------------------------------------------------- */

/* One line of metrics.jsonl, written with one write() (logfile: whole
 * lines only).  A failed write is said once; the job goes on. */
static void write_line(struct ctl *c, bool final)
{
	struct ctl_metrics *cm = c->metrics;
	json_t *line;
	char *text = NULL, *nl;
	size_t len;

	if (!cm->jsonl)
		return;
	sync_states(c);
	line = metrics_line(cm->m, loop_wall_ms(), loop_now_ms() - cm->start_ms,
			    final);
	if (line)
		text = json_dumps(line, JSON_COMPACT | JSON_REAL_PRECISION(7));
	json_decref(line);
	if (!text)
		goto out;
	len = strlen(text);
	if (!(nl = realloc(text, len + 2)))
		goto out;
	text = nl;
	memcpy(text + len, "\n", 2);
	if (logfile_write(cm->jsonl, text, len + 1) == LOGFILE_FIRST_FAILURE &&
	    !cm->jsonl_reported) {
		cm->jsonl_reported = true;
		fprintf(stderr, "herd: %s: %s; the job goes on without it\n",
			logfile_path(cm->jsonl),
			strerror(logfile_error(cm->jsonl)));
	}
out:
	free(text);
}

static void on_tick(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	c->metrics->tick_timer = 0;
	write_line(c, false);
	ctl_straggler_tick(c);
	c->metrics->tick_timer = loop_timer_add(
	    loop, spec_metrics_interval_ms(c->spec, c->n_nodes), on_tick, c);
}

/* --- the status area ------------------------------------------------------ */

/* Puts seq on the terminal with rank stdout, unless that buffer holds
 * output the terminal has not taken yet.  Returns 0 when written. */
static int term_put(struct ctl *c, const char *seq, size_t len)
{
	struct iovec iov = {.iov_base = (void *)(uintptr_t)seq, .iov_len = len};

	if (!c->term[1] || outbuf_pending(c->term[1]) > 0)
		return -1;
	return outbuf_put(c->term[1], &iov, 1) == 0 ? 0 : -1;
}

static int term_rows(int *cols)
{
	struct winsize ws;

	if (ioctl(1, TIOCGWINSZ, &ws) < 0 || ws.ws_row < 3 || ws.ws_col < 20)
		return -1;
	*cols = ws.ws_col;
	return ws.ws_row;
}

/* Gives the terminal back: full-screen scrolling, the status line
 * erased, the cursor where the output left it. */
static void status_hide(struct ctl *c, bool wait)
{
	struct ctl_metrics *cm = c->metrics;
	char seq[64];
	int n;

	if (!cm || !cm->status_shown)
		return;
	n = snprintf(seq, sizeof(seq), "\0337\033[r\033[%d;1H\033[2K\0338",
		     cm->rows);
	/* At the end (and before herd stops itself) this waits for a slow
	 * terminal: a region left set would confine the shell.  Else a busy
	 * terminal means: try again at the next draw. */
	if (wait && c->term[1])
		outbuf_flush(c->term[1]);
	if (term_put(c, seq, (size_t)n) == 0)
		cm->status_shown = false;
}

static void status_draw(struct ctl *c)
{
	struct ctl_metrics *cm = c->metrics;
	char line[512], seq[700];
	int rows, cols, n = 0;

	if (c->attempt < 1 || c->paused)
		return;
	rows = term_rows(&cols);
	if (rows < 0 || (cm->status_shown && rows != cm->rows)) {
		/* Resized (or too small): set up again on the next draw. */
		status_hide(c, false);
		if (rows < 0 || cm->status_shown)
			return;
	}
	ctl_status_text(c, line, sizeof(line), cols);
	if (!cm->status_shown)
		/* A blank line below the cursor (scrolling if it is at the
		 * bottom), then the region: every line but the last. */
		n = snprintf(seq, sizeof(seq), "\n\033[A\0337\033[1;%dr\0338",
			     rows - 1);
	n += snprintf(seq + n, sizeof(seq) - (size_t)n,
		      "\0337\033[%d;1H\033[2K%s\0338", rows, line);
	if (term_put(c, seq, (size_t)n) == 0) {
		cm->status_shown = true;
		cm->rows = rows;
	}
}

/* --- what failures cost --------------------------------------------------- */

/* The events tap: failures as they happen; the step a failure hit is the
 * job's (the slowest rank's) when it is seen. */
static void on_event(void *arg, const char *name, const json_t *obj,
		     int64_t t)
{
	struct ctl *c = arg;
	struct ctl_metrics *cm = c->metrics;
	struct failcost *f;
	struct metrics_job j;

	failcost_event(&cm->failures, name, obj, t);
	f = cm->failures.n ? &cm->failures.v[cm->failures.n - 1] : NULL;
	if (f && f->how == FAILCOST_OPEN && f->step_before < 0) {
		metrics_job(cm->m, &j);
		if (j.has_step)
			f->step_before = j.step;
	}
	failcost_steps(&cm->failures, NULL, NULL, 0);
}

/* " | last failure: detect 0.12s restart 2.00s restore - redone 8" */
static void failure_text(const struct ctl_metrics *cm, char *buf,
			 size_t size)
{
	const struct failcost *f;
	char d[16], r[16], s[16], n[24];

	buf[0] = '\0';
	if (!cm->failures.n)
		return;
	f = &cm->failures.v[cm->failures.n - 1];
	if (f->how == FAILCOST_ENDED)
		return;
	snprintf(d, sizeof(d), "%.2fs", (double)f->detect_ms / 1000.0);
	if (f->recover_ms >= 0)
		snprintf(r, sizeof(r), "%.2fs", (double)f->recover_ms / 1000.0);
	else
		snprintf(r, sizeof(r), "...");
	if (f->restore_ms >= 0)
		snprintf(s, sizeof(s), "%.2fs", (double)f->restore_ms / 1000.0);
	else
		snprintf(s, sizeof(s), "-");
	if (f->steps_redone >= 0)
		snprintf(n, sizeof(n), "%lld", (long long)f->steps_redone);
	else
		snprintf(n, sizeof(n), "-");
	snprintf(buf, size,
		 " | last failure: detect %s %s %s restore %s redone %s", d,
		 f->how == FAILCOST_REJOIN ? "rejoin" : "restart", r, s, n);
}

int ctl_status_text(struct ctl *c, char *buf, size_t size, int width)
{
	char tail[128];
	size_t len, max;

	if (!c->metrics || !c->metrics->m || c->attempt < 1)
		return -1;
	sync_states(c);
	metrics_status(c->metrics->m, buf, size, (int)size);
	failure_text(c->metrics, tail, sizeof(tail));
	len = strlen(buf);
	snprintf(buf + len, size - len, "%s", tail);
	max = width > 1 ? (size_t)width - 1 : 0;
	if (strlen(buf) > max)
		buf[max] = '\0';
	return 0;
}

static void on_status(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	c->metrics->status_timer = 0;
	status_draw(c);
	c->metrics->status_timer =
	    loop_timer_add(loop, STATUS_EVERY_MS, on_status, c);
}

void ctl_status_close(struct ctl *c)
{
	if (!c->metrics)
		return;
	status_hide(c, true);
	if (c->loop)
		loop_timer_del(c->loop, c->metrics->status_timer);
	c->metrics->status_timer = 0;
	c->metrics->status_on = false;
}

void ctl_status_pause(struct ctl *c, bool paused)
{
	if (!c->metrics || !c->metrics->status_on)
		return;
	if (paused)
		status_hide(c, true);
	else
		status_draw(c);
}

/* --- the Prometheus endpoint ---------------------------------------------- */

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn,
			       const char *url, const char *method,
			       const char *version, const char *upload_data,
			       size_t *upload_data_size, void **req_cls)
{
	struct ctl *c = cls;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	unsigned int code = MHD_HTTP_OK;
	char *body = NULL;
	size_t len = 0;

	(void)version;
	(void)upload_data;
	(void)req_cls;
	if (*upload_data_size) {
		*upload_data_size = 0; /* a body is not read: refused */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		code = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics")) {
		code = MHD_HTTP_NOT_FOUND;
	} else {
		sync_states(c);
		body = metrics_prometheus(c->metrics->m, &len);
		if (!body)
			code = MHD_HTTP_INTERNAL_SERVER_ERROR;
	}
	if (code != MHD_HTTP_OK) {
		const char *text =
		    code == MHD_HTTP_NOT_FOUND ? "not found: try /metrics\n"
		    : code == MHD_HTTP_METHOD_NOT_ALLOWED ? "only GET\n"
							  : "out of memory\n";

		resp = MHD_create_response_from_buffer(strlen(text),
						       (void *)(uintptr_t)text,
						       MHD_RESPMEM_PERSISTENT);
	} else {
		resp = MHD_create_response_from_buffer(len, body,
						       MHD_RESPMEM_MUST_FREE);
		if (!resp)
			free(body);
	}
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				code == MHD_HTTP_OK
				    ? "text/plain; version=0.0.4; "
				      "charset=utf-8"
				    : "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
					"GET, HEAD");
	ret = MHD_queue_response(conn, code, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void on_mhd_timer(struct loop *loop, void *arg);

static unsigned int mhd_connections(struct ctl_metrics *cm)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(
	    cm->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

	return info ? info->num_connections : 0;
}

/* One MHD_run(), and a second one when the first closed connections.  At
 * MHD_OPTION_CONNECTION_LIMIT (or when accept() ran out of fds) MHD takes
 * its listen socket out of its epoll set, and puts it back only at the
 * start of a later MHD_run(); once the connections are closed nothing
 * makes the epoll fd readable nor arms a timeout, so without the second
 * run the endpoint stays deaf until the job ends (after 40 connections
 * held open and then closed, or more than 32 scrapers at once). */
static void mhd_run(struct ctl_metrics *cm)
{
	unsigned int before = mhd_connections(cm);

	MHD_run(cm->mhd);
	if (mhd_connections(cm) < before)
		MHD_run(cm->mhd);
}

/* After MHD ran: its next timeout, if it has one. */
static void mhd_arm(struct ctl *c)
{
	struct ctl_metrics *cm = c->metrics;
	MHD_UNSIGNED_LONG_LONG ms;

	loop_timer_del(c->loop, cm->mhd_timer);
	cm->mhd_timer = 0;
	if (MHD_get_timeout(cm->mhd, &ms) == MHD_YES)
		cm->mhd_timer = loop_timer_add(
		    c->loop, ms > 60000 ? 60000 : (int64_t)ms, on_mhd_timer, c);
}

static void on_mhd_timer(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	c->metrics->mhd_timer = 0;
	mhd_run(c->metrics);
	mhd_arm(c);
}

static void on_mhd_fd(struct loop *loop, int fd, short revents, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	(void)fd;
	(void)revents;
	mhd_run(c->metrics);
	mhd_arm(c);
}

/* Binds metrics.listen (herd makes the socket: a failure names the
 * address and why).  Returns 0, or -1 said on stderr. */
static int http_bind(struct ctl *c)
{
	struct ctl_metrics *cm = c->metrics;
	const char *listen_at = c->spec->metrics.listen;
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	struct herd_err err;
	char host[46];
	int port, one = 1;

	herd_err_clear(&err);
	if (spec_listen_parse(listen_at, host, &port, &err) < 0) {
		fprintf(stderr, "herd: metrics.listen: %s\n", err.text);
		return -1;
	}
	if (strchr(host, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		inet_pton(AF_INET6, host, &s6->sin6_addr);
		sl = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, host, &s4->sin_addr);
		sl = sizeof(*s4);
	}
	cm->listen_fd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (cm->listen_fd < 0 ||
	    setsockopt(cm->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one,
		       sizeof(one)) < 0 ||
	    bind(cm->listen_fd, (struct sockaddr *)&ss, sl) < 0 ||
	    listen(cm->listen_fd, 16) < 0) {
		fprintf(stderr,
			"herd: metrics.listen %s: cannot listen on %s port "
			"%d: %s (pick another port or remove metrics.listen)\n",
			listen_at, host, port, strerror(errno));
		return -1;
	}
	snprintf(cm->url, sizeof(cm->url), "http://%s%s%s:%d/metrics",
		 strchr(host, ':') ? "[" : "", host,
		 strchr(host, ':') ? "]" : "", port);
	return 0;
}

/* Serves the bound socket with MHD on the loop.  Returns 0, or -1 said
 * on stderr. */
static int http_serve(struct ctl *c)
{
	struct ctl_metrics *cm = c->metrics;
	const union MHD_DaemonInfo *info;

	cm->mhd = MHD_start_daemon(
	    MHD_USE_EPOLL, 0, NULL, NULL, on_http, c, MHD_OPTION_LISTEN_SOCKET,
	    cm->listen_fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned int)HTTP_CONNECTIONS_MAX, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)HTTP_TIMEOUT_S, MHD_OPTION_END);
	if (cm->mhd)
		cm->listen_fd = -1; /* MHD's now: MHD_stop_daemon closes it */
	info = cm->mhd ? MHD_get_daemon_info(cm->mhd, MHD_DAEMON_INFO_EPOLL_FD)
		       : NULL;
	if (!info ||
	    loop_fd_add(c->loop, info->epoll_fd, POLLIN, on_mhd_fd, c) < 0) {
		fprintf(stderr,
			"herd: metrics.listen %s: cannot start the HTTP "
			"server (libmicrohttpd)\n",
			c->spec->metrics.listen);
		return -1;
	}
	cm->mhd_fd = info->epoll_fd;
	fprintf(stderr, "herd: metrics on %s\n", cm->url);
	mhd_arm(c);
	return 0;
}

/* --- start and end -------------------------------------------------------- */

static struct ctl_metrics *cm_get(struct ctl *c)
{
	if (!c->metrics && (c->metrics = calloc(1, sizeof(*c->metrics))))
		c->metrics->listen_fd = c->metrics->mhd_fd = -1;
	return c->metrics;
}

int ctl_metrics_listen(struct ctl *c)
{
	if (c->opt->plan_only || c->opt->check_only ||
	    !c->spec->metrics.listen)
		return 0;
	if (!cm_get(c)) {
		fprintf(stderr, "herd: out of memory\n");
		return -1;
	}
	return http_bind(c);
}

int ctl_metrics_start(struct ctl *c)
{
	struct ctl_metrics *cm;
	const char **names;
	struct herd_err err;
	const char *term;
	int fd;

	herd_err_clear(&err);
	if (c->opt->plan_only || c->opt->check_only)
		return 0; /* herd plan: nothing runs */
	if (!(cm = cm_get(c)))
		goto oom;
	names = calloc(c->n_nodes ? (size_t)c->n_nodes : 1, sizeof(*names));
	if (!names)
		goto oom;
	for (int i = 0; i < c->n_nodes; i++)
		names[i] = c->nodes[i].host;
	cm->m = metrics_new(c->n_nodes, names);
	free(names);
	if (!cm->m)
		goto oom;
	cm->start_ms = loop_now_ms();
	events_set_tap(c->ev, on_event, c);
	if (c->lt) {
		fd = logtree_create(c->lt, "metrics.jsonl", &err);
		if (fd < 0) {
			fprintf(stderr, "herd: %s\n", err.text);
			return -1;
		}
		if (!(cm->jsonl = logfile_new(fd, "metrics.jsonl", 1)))
			goto oom;
	}
	if (cm->listen_fd >= 0 && http_serve(c) < 0)
		return -1;
	/* A terminal that knows scroll regions: not TERM=dumb (Emacs'
	 * shell buffer) nor without TERM. */
	term = getenv("TERM");
	cm->status_on = !c->opt->no_status && !c->opt->untagged &&
			!(c->opt->plan_only || c->opt->check_only) &&
			isatty(1) && term && *term && strcmp(term, "dumb") != 0;
	if (cm->status_on)
		cm->status_timer =
		    loop_timer_add(c->loop, STATUS_EVERY_MS, on_status, c);
	cm->tick_timer = loop_timer_add(
	    c->loop, spec_metrics_interval_ms(c->spec, c->n_nodes), on_tick, c);
	return 0;
oom:
	fprintf(stderr, "herd: out of memory\n");
	return -1;
}

void ctl_metrics_end(struct ctl *c)
{
	if (!c->metrics)
		return;
	metrics_set_final(c->metrics->m);
	write_line(c, true);
}

void ctl_metrics_free(struct ctl *c)
{
	struct ctl_metrics *cm = c->metrics;

	if (!cm)
		return;
	if (c->loop) {
		loop_timer_del(c->loop, cm->tick_timer);
		loop_timer_del(c->loop, cm->status_timer);
		loop_timer_del(c->loop, cm->mhd_timer);
		if (cm->mhd_fd >= 0)
			loop_fd_del(c->loop, cm->mhd_fd);
	}
	if (cm->mhd)
		MHD_stop_daemon(cm->mhd);
	if (cm->listen_fd >= 0)
		close(cm->listen_fd);
	/* c->ev is closed before this (ctl_free): no event reaches the
	 * tap any more. */
	failcost_free(&cm->failures);
	logfile_free(cm->jsonl);
	metrics_free(cm->m);
	free(cm);
	c->metrics = NULL;
}
