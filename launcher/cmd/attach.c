/* cmd/attach.c — `herd attach JOB`: the live tagged output of a running
 * job and its status line, from now on, through the job's control socket
 * (ctl/sock.c).  Ctrl-C detaches: the job goes on.
 *
 * One event loop for every fd and timer: the socket is a conn, herd.log is read
 * from a timer, signals only stop the loop.  Output is written to stdout and
 * stderr as it comes (blocking: a slow terminal slows only this client;
 * the controller drops what it cannot queue for us and says so).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/view/ctlclient.h"
#include "herd/conn.h"
#include "herd/loop.h"
#include "herd/proto.h"

/* 256 KiB: one CTL_MSG with a cut line (PROTO_CTL_DATA_MAX) and its
 * header, with room to spare. */
#define ATTACH_FRAME_MAX (PROTO_CTL_DATA_MAX + 64 * 1024)
/* 500 ms: how often herd.log is looked at for new messages. */
#define ATTACH_LOG_MS 500

struct attach {
	struct loop *loop;
	struct conn *conn;
	struct ctlclient_job job;
	int status;
	bool ended, detached;
	int log_fd; /* RUN-DIR/herd.log from its end, or -1 */
	long log_timer;
	bool tty;
	int rows; /* the scroll region is rows - 1 lines; 0: not set */
	char status_line[512];
};

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* our terminal is gone: nothing to tell */
		p += n;
		len -= (size_t)n;
	}
}

/* The status line on the terminal's last row, outside the scrolling
 * region (as herd run draws it). */
static void status_draw(struct attach *a)
{
	struct winsize ws;
	char seq[700];
	int n = 0, cols;

	if (!a->tty || !a->status_line[0])
		return;
	if (ioctl(1, TIOCGWINSZ, &ws) < 0 || ws.ws_row < 3 || ws.ws_col < 20)
		return;
	cols = ws.ws_col < 600 ? ws.ws_col : 600;
	if (a->rows != ws.ws_row) {
		n = snprintf(seq, sizeof(seq), "\n\033[A\0337\033[1;%dr\0338",
			     ws.ws_row - 1);
		a->rows = ws.ws_row;
	}
	n += snprintf(seq + n, sizeof(seq) - (size_t)n,
		      "\0337\033[%d;1H\033[2K%.*s\0338", a->rows, cols,
		      a->status_line);
	write_all(1, seq, (size_t)n);
}

static void status_hide(struct attach *a)
{
	char seq[64];
	int n;

	if (!a->rows)
		return;
	n = snprintf(seq, sizeof(seq), "\0337\033[r\033[%d;1H\033[2K\0338",
		     a->rows);
	write_all(1, seq, (size_t)n);
	a->rows = 0;
}

static void on_frame(struct conn *c, struct proto_frame *f, void *arg)
{
	struct attach *a = arg;
	struct herd_err err;
	const char *kind;

	(void)c;
	herd_err_clear(&err);
	if (proto_frame_check(f, PROTO_TO_CLIENT, &err) < 0) {
		cli_error("attach: %s: %s", a->job.id, err.text);
		a->status = 1;
		a->ended = true;
		loop_stop(a->loop);
		proto_frame_free(f);
		return;
	}
	kind = json_string_value(json_object_get(f->body, "kind"));
	if (!strcmp(kind, "out") || !strcmp(kind, "err")) {
		write_all(kind[0] == 'o' ? 1 : 2, f->data, f->data_len);
	} else if (!strcmp(kind, "status")) {
		snprintf(a->status_line, sizeof(a->status_line), "%.*s",
			 (int)f->data_len, (const char *)f->data);
		status_draw(a);
	} else if (!strcmp(kind, "info")) {
		fprintf(stderr,
			"herd: attached to %s (%s, %s, attempt %d); Ctrl-C "
			"detaches, the job goes on\n",
			a->job.id,
			json_string_value(json_object_get(f->body, "name")),
			json_string_value(json_object_get(f->body, "state")),
			(int)json_integer_value(
			    json_object_get(f->body, "attempt")));
	} else if (!strcmp(kind, "end")) {
		a->status =
		    (int)json_integer_value(json_object_get(f->body, "status"));
		a->ended = true;
		loop_stop(a->loop);
	}
	proto_frame_free(f);
}

static void on_close(struct conn *c, const char *reason, int clean, void *arg)
{
	struct attach *a = arg;

	(void)c;
	(void)clean;
	if (!a->ended && !a->detached) {
		cli_error("attach: %s: the controller went away before the "
			  "job ended (%s)",
			  a->job.id, reason);
		a->status = 1;
	}
	loop_stop(a->loop);
}

/* herd's own messages (RUN-DIR/herd.log) that came since we attached. */
static void on_log(struct loop *loop, void *arg)
{
	struct attach *a = arg;
	char buf[8192];
	ssize_t n;

	a->log_timer = 0;
	while ((n = read(a->log_fd, buf, sizeof(buf))) > 0)
		write_all(2, buf, (size_t)n);
	a->log_timer = loop_timer_add(loop, ATTACH_LOG_MS, on_log, a);
}

static void on_signal(struct loop *loop, int sig, void *arg)
{
	struct attach *a = arg;

	(void)sig;
	a->detached = true;
	loop_stop(loop);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: herd attach JOB\n\n"
		"Shows a running job's output as herd run does (each line\n"
		"prefixed [rank]), from now on, and its status line on a\n"
		"terminal; herd's own messages (RUN-DIR/herd.log) go to\n"
		"stderr.  Ctrl-C detaches: the job goes on.  When the job\n"
		"ends, exits with its status.  JOB is the job's id, name or\n"
		"run directory.\n\n"
		"  -h, --help  show this text\n\n"
		"Exit status: the job's when it ends while attached; 0 after\n"
		"Ctrl-C (the job goes on); 1 no such running job or its\n"
		"controller is gone; 2 bad usage.\n");
}

int cmd_attach(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct attach a = {.log_fd = -1, .status = 1};
	struct herd_err err;
	char path[PATH_MAX + 16];
	const char *term = getenv("TERM");
	int ch, fd;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (ch == 'h') {
			usage(stdout);
			return 0;
		}
		return cli_bad_option("attach", cli_bad_word(argc, argv), usage);
	}
	if (optind != argc - 1)
		return cli_usage("attach",
				 "expected one JOB (id, name or run "
				 "directory), got %d arguments",
				 argc - optind);
	herd_err_clear(&err);
	if (ctlclient_find(argv[optind], &a.job, &err) < 0 ||
	    (fd = ctlclient_request(&a.job, "attach", &err)) < 0) {
		cli_error("attach: %s", err.text);
		return 1;
	}
	a.tty = isatty(1) && term && *term && strcmp(term, "dumb") != 0;
	if (!(a.loop = loop_new()) ||
	    !(a.conn = conn_new(a.loop, fd, fd, ATTACH_FRAME_MAX, on_frame,
				on_close, &a)) ||
	    loop_on_signal(a.loop, SIGINT, on_signal, &a) < 0 ||
	    loop_on_signal(a.loop, SIGTERM, on_signal, &a) < 0 ||
	    loop_on_signal(a.loop, SIGHUP, on_signal, &a) < 0) {
		cli_error("attach: %s", strerror(errno));
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(path, sizeof(path), "%s/herd.log", a.job.run_dir);
	a.log_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (a.log_fd >= 0 && lseek(a.log_fd, 0, SEEK_END) >= 0)
		a.log_timer = loop_timer_add(a.loop, ATTACH_LOG_MS, on_log, &a);
	loop_run(a.loop);
	if (a.log_fd >= 0) /* herd's last words (the summary) */
		on_log(a.loop, &a);
	if (a.detached) {
		status_hide(&a);
		fprintf(stderr,
			"\nherd: detached from %s; the job goes on "
			"(herd attach %s)\n",
			a.job.id, a.job.id);
		a.status = 0;
	}
out:
	status_hide(&a);
	if (a.log_fd >= 0)
		close(a.log_fd);
	if (a.loop) {
		loop_timer_del(a.loop, a.log_timer);
		loop_signals_reset(a.loop);
	}
	conn_free(a.conn);
	loop_free(a.loop);
	return a.status;
}
