/* cmd/top.c — `herd top RUNDIR|JOB.yaml`: a live table of the job's nodes
 * (GPU util and memory, network rates, drops, CPU, RSS, step rate, last
 * loss), refreshed from metrics.jsonl as the controller appends to it.
 *
 * On a terminal the table is redrawn in place with plain ANSI sequences
 * (no curses) in the alternate screen, keys read in non-canonical mode;
 * the terminal is restored on q, on SIGINT/SIGTERM/SIGHUP and around
 * Ctrl-Z.  Without a terminal (or with --once) frames are plain text.
 * One loop: poll() on stdin with the refresh period as timeout; signal
 * handlers only set flags.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "herd/runlog.h"
#include "herd/svgplot.h"
#include "herd/text.h"
#include "launcher/view/jobview.h"
#include "launcher/view/rundir.h"

enum col {
	COL_NODE,
	COL_STATE,
	COL_GPU,
	COL_MEM,
	COL_RX,
	COL_TX,
	COL_DROPS,
	COL_CPU,
	COL_RSS,
	COL_RATE,
	COL_STEP,
	COL_LOSS,
	COL_N_
};

/* The job's registry entry (its controller's socket and pid), and its
 * state as herd list, status and logs -f see it, taken at each refresh. */
static struct jobreg_entry top_job;
static enum jobview_state top_state;

/* Sort keys (--sort and the s key cycle through them in this order). */
static const char *const sort_keys[COL_N_] = {
    "node", "state", "gpu", "mem",  "rx",   "tx",
    "drops", "cpu",  "rss", "rate", "step", "loss"};
static const char *const headers[COL_N_] = {
    "NODE", "STATE", "GPU%", "GPUMEM", "RX/s", "TX/s",
    "DROPS", "CPU%",  "RSS",  "STEP/s", "STEP", "LOSS"};
static const int widths[COL_N_] = {-16, -9, 5, 13, 10, 10, 7, 7, 8, 7, 8, 9};

struct row {
	const struct runlog_node *n;
	double v[COL_N_];
	bool has[COL_N_];
	double mem_total;
	bool slowest;
};

static volatile sig_atomic_t got_quit, got_winch, got_tstp;

static void on_quit(int sig)
{
	(void)sig;
	got_quit = 1;
}

static void on_winch(int sig)
{
	(void)sig;
	got_winch = 1;
}

static void on_tstp(int sig)
{
	(void)sig;
	got_tstp = 1;
}

static void top_usage(FILE *out)
{
	fprintf(out,
		"usage: herd top JOB|RUNDIR|LOGDIR|JOB.yaml [--once] "
		"[--sort KEY] [--interval SECONDS]\n"
		"\n"
		"JOB is a job's id or name (herd list shows them).\n"
		"A per-node table of the run, refreshed from its metrics.jsonl:\n"
		"GPU utilisation (mean over the node's GPUs) and memory, network\n"
		"receive and transmit rates, drops, CPU %% (100 = one core), RSS,\n"
		"step rate, step and last loss.  The slowest node (lowest step\n"
		"rate, as the controller names it) is marked with '*'.  A\n"
		"failed or evicted node shows '-' (no stale values); DROPS\n"
		"count since the job started.\n"
		"\n"
		"  --once            print one frame and exit (also for scripts)\n"
		"  --sort KEY        node (default), state, gpu, mem, rx, tx,\n"
		"                    drops, cpu, rss, rate, step, loss; numbers\n"
		"                    sort largest first, rate slowest first\n"
		"  --interval SECS   refresh period, default 1\n"
		"  -h, --help        show this text\n"
		"\n"
		"Keys on a terminal: s next sort column, r reverse, q quit.\n"
		"Without a terminal, a plain frame is printed at each refresh\n"
		"that brought new lines, until the job ends, or is lost (no\n"
		"job_end, and its controller is gone: as herd list says).\n"
		"\n"
		"Exit status: 0; 1 a file could not be read, or the job is\n"
		"lost (without --once or a terminal); 2 bad usage, a\n"
		"missing or non-run directory, or a bad job file.\n");
}

/* Whether node n is out of the job: failed in the latest sample, or
 * failed or evicted by the events and not up since. */
static bool gone(const struct runlog_node *n)
{
	const char *ms =
	    json_string_value(json_object_get(n->last, "state"));

	if (ms && !strcmp(ms, "failed"))
		return true;
	if (ms && !strcmp(ms, "up"))
		return false;
	return n->state && (!strcmp(n->state, "failed") ||
			    !strcmp(n->state, "evicted") ||
			    !strcmp(n->state, "quarantined"));
}

static void fill_row(struct row *r, const struct runlog_node *n,
		     const char *slowest, int64_t latest_t)
{
	const json_t *j = n->last;
	double v, used, total;

	memset(r, 0, sizeof(*r));
	r->n = n;
	r->slowest = slowest && !strcmp(slowest, n->name);
	/* A node missing from the latest sample with nodes, or failed or
	 * evicted (older runs have its last values on every line):
	 * its old values would read as current. */
	if (!j || n->last_t < latest_t || gone(n))
		return;
	if ((r->has[COL_GPU] = runlog_node_gpu_util(j, &v)))
		r->v[COL_GPU] = v;
	if ((r->has[COL_MEM] = runlog_node_gpu_mem(j, &used, &total))) {
		r->v[COL_MEM] = used;
		r->mem_total = total;
	}
	r->has[COL_RX] = runlog_number(j, "rx_bytes_per_s", &r->v[COL_RX]);
	r->has[COL_TX] = runlog_number(j, "tx_bytes_per_s", &r->v[COL_TX]);
	r->has[COL_DROPS] = runlog_number(j, "drops", &r->v[COL_DROPS]);
	r->has[COL_CPU] = runlog_number(j, "cpu_pct", &r->v[COL_CPU]);
	if ((r->has[COL_RSS] = runlog_number(j, "rss_kib", &v)))
		r->v[COL_RSS] = v * 1024;
	r->has[COL_RATE] = runlog_number(j, "steps_per_s", &r->v[COL_RATE]);
	r->has[COL_STEP] = runlog_number(j, "step", &r->v[COL_STEP]);
	r->has[COL_LOSS] = runlog_number(j, "loss", &r->v[COL_LOSS]);
}

static int sort_col;
static int sort_reverse;

static int row_cmp(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	int c;

	if (sort_col == COL_NODE) {
		c = strverscmp(a->n->name, b->n->name);
	} else if (sort_col == COL_STATE) {
		c = strcmp(a->n->state ? a->n->state : "",
			   b->n->state ? b->n->state : "");
	} else if (a->has[sort_col] != b->has[sort_col]) {
		/* Rows without the value go last either way. */
		return a->has[sort_col] ? -1 : 1;
	} else {
		double x = a->v[sort_col], y = b->v[sort_col];

		c = x < y ? 1 : x > y ? -1 : 0;
		if (sort_col == COL_RATE)
			c = -c;
	}
	if (!c)
		c = strverscmp(a->n->name, b->n->name);
	return sort_reverse ? -c : c;
}

static void cell(FILE *f, int col, const struct row *r)
{
	char b[64];
	int w = abs(widths[col]);

	if (col == COL_NODE) {
		fprintf(f, "%s%-*.*s", r->slowest ? "*" : " ", w - 1, w - 1,
			r->n->name);
		return;
	}
	if (col == COL_STATE) {
		fprintf(f, " %-*.*s", w - 1, w - 1,
			r->n->state ? r->n->state : "-");
		return;
	}
	if (!r->has[col]) {
		fprintf(f, " %*s", w - 1, "-");
		return;
	}
	switch (col) {
	case COL_GPU:
	case COL_CPU:
		snprintf(b, sizeof(b), "%.0f", r->v[col]);
		break;
	case COL_MEM: {
		char u[24], t[24];

		svgplot_format(u, sizeof(u), r->v[col], SVGPLOT_PLAIN);
		svgplot_format(t, sizeof(t), r->mem_total, SVGPLOT_PLAIN);
		snprintf(b, sizeof(b), "%s/%s", u, t);
		break;
	}
	case COL_RX:
	case COL_TX:
	case COL_RSS:
		svgplot_format(b, sizeof(b), r->v[col], SVGPLOT_PLAIN);
		strncat(b, "B", sizeof(b) - strlen(b) - 1);
		break;
	case COL_RATE:
		snprintf(b, sizeof(b), "%.2f", r->v[col]);
		break;
	case COL_LOSS:
		/* Fewer digits rather than a cut number: 8.589e-05 cut to
		 * the column read 8.589e-0. */
		for (int prec = 4; prec >= 1; prec--)
			if (snprintf(b, sizeof(b), "%.*g", prec, r->v[col]) <
			    w)
				break;
		break;
	default:
		svgplot_format(b, sizeof(b), r->v[col], SVGPLOT_PLAIN);
	}
	fprintf(f, " %*.*s", w - 1, w - 1, b);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes one frame into a memory buffer: header lines, then the table. */
static char *frame(const struct runlog *rl, size_t *len)
{
	const char *slow = json_string_value(json_object_get(
	    json_object_get(rl->last, "job"), "slowest"));
	char slow_buf[256];
	const char *slowest = NULL;
	struct row *rows = calloc(rl->n_nodes + 1, sizeof(*rows));
	char *buf = NULL, b[48];
	FILE *f = open_memstream(&buf, len);
	int64_t start = rl->start_t ? rl->start_t : rl->first_metrics_t;
	double v;

	/* metrics.jsonl's text: no control character printed (the node
	 * names are cleaned the same way, lib/run/runlog.c). */
	if (slow) {
		snprintf(slow_buf, sizeof(slow_buf), "%s", slow);
		slowest = herd_text_clean(slow_buf);
	}
	if (!f || !rows) {
		if (f)
			fclose(f);
		free(buf);
		free(rows);
		return NULL;
	}
	fprintf(f, "herd top: job %s, run %s, ", rl->job ? rl->job : "?",
		rl->run_id ? rl->run_id : "?");
	if (rl->ended)
		fprintf(f, "ended, exit status %d", rl->end_status);
	else if (top_state == JOBVIEW_LOST)
		fprintf(f, "lost (no job_end, and its controller, pid %ld, is "
			   "gone)",
			top_job.pid);
	else
		fprintf(f, "running");
	if (rl->n_attempts)
		fprintf(f, ", attempt %d",
			rl->attempts[rl->n_attempts - 1].attempt);
	if (start) {
		svgplot_format_elapsed(
		    b, sizeof(b),
		    (double)((rl->ended ? rl->end_t : now_ms()) - start) /
			1000.0);
		fprintf(f, ", %s", b);
	}
	fprintf(f, "\n");
	if (rl->last) {
		fprintf(f, "job:");
		if (runlog_job_value(rl, "step", &v))
			fprintf(f, " step %.0f", v);
		if (runlog_job_value(rl, "loss", &v))
			fprintf(f, ", loss %.4g", v);
		if (runlog_job_value(rl, "tokens_per_s", &v)) {
			svgplot_format(b, sizeof(b), v, SVGPLOT_PLAIN);
			fprintf(f, ", %s tokens/s", b);
		}
		if (runlog_job_value(rl, "gpu_util_avg", &v))
			fprintf(f, ", GPU avg %.0f %%", v);
		if (runlog_job_value(rl, "rx_bytes_per_s", &v)) {
			svgplot_format(b, sizeof(b), v, SVGPLOT_BYTES_PER_S);
			fprintf(f, ", rx %s", b);
		}
		if (runlog_job_value(rl, "tx_bytes_per_s", &v)) {
			svgplot_format(b, sizeof(b), v, SVGPLOT_BYTES_PER_S);
			fprintf(f, ", tx %s", b);
		}
		if (runlog_job_value(rl, "drops", &v))
			fprintf(f, ", drops %.0f", v);
		fprintf(f, "\n");
	} else {
		fprintf(f, "job: no metrics yet (%s/metrics.jsonl)\n", rl->dir);
	}
	fprintf(f, "slowest: %s   sorted by %s%s   * slowest node\n",
		slowest ? slowest : "none named", sort_keys[sort_col],
		sort_reverse ? " (reversed)" : "");
	for (int c = 0; c < COL_N_; c++) {
		int w = abs(widths[c]);

		if (widths[c] < 0)
			fprintf(f, " %-*s", w - 1, headers[c]);
		else
			fprintf(f, " %*s", w - 1, headers[c]);
	}
	fprintf(f, "\n");
	for (size_t i = 0; i < rl->n_nodes; i++)
		fill_row(&rows[i], &rl->nodes[i], slowest,
			 (int64_t)json_integer_value(
			     json_object_get(rl->last_full, "t")));
	qsort(rows, rl->n_nodes, sizeof(*rows), row_cmp);
	for (size_t i = 0; i < rl->n_nodes; i++) {
		for (int c = 0; c < COL_N_; c++)
			cell(f, c, &rows[i]);
		fprintf(f, "\n");
	}
	if (rl->ev.bad || rl->met.bad)
		fprintf(f, "skipped %llu bad line(s) in events.jsonl, %llu in "
			   "metrics.jsonl\n",
			(unsigned long long)rl->ev.bad,
			(unsigned long long)rl->met.bad);
	free(rows);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Draws a frame in place: home, each line cut to the width and cleared
 * to its end, at most rows lines, the rest of the screen cleared; one
 * write, so the terminal never shows half a frame. */
static int draw_tty(const char *text)
{
	struct winsize ws = {0};
	int cols = 80, rows = 24, line = 0, rc;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return -1;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col &&
	    ws.ws_row) {
		cols = ws.ws_col;
		rows = ws.ws_row;
	}
	fputs("\033[H", f);
	for (const char *p = text; *p && line < rows; line++) {
		const char *nl = strchr(p, '\n');
		int n = nl ? (int)(nl - p) : (int)strlen(p);

		if (line)
			fputs("\r\n", f);
		fprintf(f, "%.*s\033[K", n < cols ? n : cols, p);
		p = nl ? nl + 1 : p + n;
	}
	fputs("\033[J", f);
	if (fclose(f) != 0) {
		free(out);
		return -1;
	}
	rc = write_all(STDOUT_FILENO, out, len);
	free(out);
	return rc;
}

struct tty {
	struct termios saved;
	bool raw;
};

static void tty_enter(struct tty *t)
{
	struct termios raw;

	if (tcgetattr(STDIN_FILENO, &t->saved) == 0) {
		raw = t->saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		t->raw = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
	}
	/* Alternate screen, cursor hidden. */
	(void)write_all(STDOUT_FILENO, "\033[?1049h\033[?25l", 14);
}

static void tty_leave(struct tty *t)
{
	(void)write_all(STDOUT_FILENO, "\033[?25h\033[?1049l", 14);
	if (t->raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
	t->raw = false;
}

static void handle(int sig, void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: poll() returns EINTR and the loop sees the flag. */
	sigaction(sig, &sa, NULL);
}

static int parse_sort(const char *s)
{
	for (int c = 0; c < COL_N_; c++)
		if (!strcmp(s, sort_keys[c]))
			return c;
	return -1;
}

/* The interactive loop on a terminal. */
static int top_tty(struct runlog *rl, int interval_ms)
{
	struct herd_err err = {{0}};
	struct tty t = {0};
	int rc = 0, redraw = 1;
	int64_t next = 0;

	handle(SIGINT, on_quit);
	handle(SIGTERM, on_quit);
	handle(SIGHUP, on_quit);
	handle(SIGWINCH, on_winch);
	handle(SIGTSTP, on_tstp);
	tty_enter(&t);
	while (!got_quit) {
		struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
		int64_t now = now_ms();
		int r;

		if (now >= next) {
			herd_err_clear(&err);
			r = runlog_update(rl, &err);
			if (r < 0) {
				rc = 1;
				break;
			}
			redraw |= r;
			next = now + interval_ms;
			if (top_state != JOBVIEW_LOST &&
			    (top_state = jobview_state(&top_job, rl)) ==
				JOBVIEW_LOST)
				redraw = 1;
			/* The elapsed time moves on while it runs. */
			redraw |= top_state == JOBVIEW_RUNNING;
		}
		if (got_winch) {
			got_winch = 0;
			redraw = 1;
		}
		if (got_tstp) {
			/* Ctrl-Z: give the terminal back, stop, take it again. */
			got_tstp = 0;
			tty_leave(&t);
			signal(SIGTSTP, SIG_DFL);
			raise(SIGTSTP);
			handle(SIGTSTP, on_tstp);
			tty_enter(&t);
			redraw = 1;
		}
		if (redraw) {
			char *text;
			size_t len;

			redraw = 0;
			text = frame(rl, &len);
			if (!text || draw_tty(text) < 0) {
				free(text);
				rc = 1;
				break;
			}
			free(text);
		}
		r = poll(&p, 1, (int)(next - now > 0 ? next - now : 0));
		if (r < 0 && errno != EINTR) {
			rc = 1;
			break;
		}
		if (r > 0) {
			char keys[16];
			ssize_t n = read(STDIN_FILENO, keys, sizeof(keys));

			if (n == 0)
				break;
			for (ssize_t i = 0; i < n; i++) {
				switch (keys[i]) {
				case 'q':
				case 'Q':
					got_quit = 1;
					break;
				case 's':
					sort_col = (sort_col + 1) % COL_N_;
					redraw = 1;
					break;
				case 'r':
					sort_reverse = !sort_reverse;
					redraw = 1;
					break;
				default:
					break;
				}
			}
		}
	}
	tty_leave(&t);
	if (rc)
		cli_error("top: %s", err.text[0] ? err.text
						  : "cannot write the terminal");
	return rc;
}

/* Without a terminal: a frame now, then one at each refresh that read
 * something, until the job ends or is lost (or at once with once). */
static int top_plain(struct runlog *rl, int interval_ms, int once)
{
	struct herd_err err;

	handle(SIGINT, on_quit);
	handle(SIGTERM, on_quit);
	handle(SIGHUP, on_quit);
	for (int first = 1; !got_quit; first = 0) {
		int r = 1;

		herd_err_clear(&err);
		if (!first)
			r = runlog_update(rl, &err);

		if (r < 0) {
			cli_error("top: %s", err.text);
			return 1;
		}
		/* A controller gone without job_end: a frame that says lost
		 * (after its last words, which may have come meanwhile),
		 * and top ends, as logs -f does. */
		if (!first && top_state != JOBVIEW_LOST &&
		    jobview_state(&top_job, rl) == JOBVIEW_LOST) {
			if (runlog_update(rl, &err) < 0) {
				cli_error("top: %s", err.text);
				return 1;
			}
			top_state = jobview_state(&top_job, rl);
			r = 1;
		}
		if (r) {
			size_t len;
			char *text = frame(rl, &len);

			if (!text || (!first && write_all(STDOUT_FILENO, "\n", 1) < 0) ||
			    write_all(STDOUT_FILENO, text, len) < 0) {
				free(text);
				cli_error("top: cannot write the output");
				return 1;
			}
			free(text);
		}
		if (top_state == JOBVIEW_LOST && !once) {
			cli_error("top: %s: no job_end and its controller (pid "
				  "%ld) is gone; `herd run --resume %s` starts "
				  "it again",
				  top_job.id, top_job.pid, top_job.run_dir);
			return 1;
		}
		if (once || rl->ended)
			break;
		poll(NULL, 0, interval_ms);
	}
	return 0;
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"once", no_argument, NULL, '1'},
	    {"sort", required_argument, NULL, 's'},
	    {"interval", required_argument, NULL, 'i'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct runlog *rl;
	int once = 0, c, status, interval_ms = 1000;

	optind = 1;
	opterr = 0;
	sort_col = COL_NODE;
	sort_reverse = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case '1':
			once = 1;
			break;
		case 's':
			sort_col = parse_sort(optarg);
			if (sort_col < 0) {
				cli_error("top: --sort %s: unknown key (one of "
					  "node, state, gpu, mem, rx, tx, drops, "
					  "cpu, rss, rate, step, loss)",
					  optarg);
				return EXIT_SPEC;
			}
			break;
		case 'i': {
			char *end;
			double s = strtod(optarg, &end);

			if (end == optarg || *end || !(s >= 0.1 && s <= 3600)) {
				cli_error("top: --interval %s: expected seconds "
					  "from 0.1 to 3600",
					  optarg);
				return EXIT_SPEC;
			}
			interval_ms = (int)lround(s * 1000);
			break;
		}
		case 'h':
			top_usage(stdout);
			return 0;
		default:
			return cli_bad_option("top", cli_bad_word(argc, argv),
					      top_usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("top", "expected one JOB (%s), got %d arguments",
				 "id, name, run directory or JOB.yaml",
				 argc - optind);
	if (jobview_resolve("top", argv[optind], &top_job, &status) < 0)
		return status;
	rl = rundir_read("top", top_job.run_dir, VIEW_TAIL, &status);
	if (!rl) {
		jobreg_entry_clear(&top_job);
		return status;
	}
	top_state = jobview_state(&top_job, rl);
	if (!once && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))
		status = top_tty(rl, interval_ms);
	else
		status = top_plain(rl, interval_ms, once);
	runlog_free(rl);
	jobreg_entry_clear(&top_job);
	return status;
}
