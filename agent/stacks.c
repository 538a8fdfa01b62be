/* stacks.c — evidence of a hang: the stack of every running rank, when
 * herd asks (STACKS, sent once a rank of the job was reported hung).
 *
 * Which process: the rank is the keeper's child (rank.c); when that is a
 * shell (`sh -c` that did not exec, a wrapper script), the first process
 * below it that is not a shell.  One process per rank: several Python
 * processes dumping tracebacks onto the one stderr of a rank could not be
 * told apart line by line.
 *
 * How:
 *  - a Python interpreter (its /proc/PID/exe is python*) whose
 *    faulthandler is on (every rank gets PYTHONFAULTHANDLER=1, rank.c)
 *    gets SIGABRT: Python prints every thread's traceback to stderr
 *    ("Fatal Python error: Aborted", "Thread 0x... (most recent call
 *    first):", "  File "x.py", line N in FUNC") and dies of it (unless
 *    the attempt's stop comes first).  The lines reach the rank log like
 *    any output; they are parsed here as they come out of the rank's
 *    stderr pipe (stacks_rank_output).  A fatal signal is
 *    fine: herd stops the attempt right after anyway, and a process that
 *    ignores SIGTERM or is stuck in a collective would not have printed
 *    anything for a gentler one.
 *  - anything else (native code, or Python with faulthandler off): gdb
 *    -batch -nx -p PID -ex 'thread apply all bt', bounded by
 *    STACKS_AGENT_MS and killed (by pid) past it; its output goes to herd
 *    as the rank's stderr, after a line "herd: stacks of rank R (pid P,
 *    gdb):", so it lands in the rank log.  gdb prints no argument values
 *    (set print frame-arguments none): a string argument may be a
 *    secret, and the rank log is no place for it.  The keeper made the
 *    agent the rank's ptracer (PR_SET_PTRACER, keeper/run.c), so gdb, the
 *    agent's child, may attach under Yama's ptrace_scope 1.
 *  - a stopped process (SIGSTOP, a debugger) can do neither: it is said
 *    so, at once (method "none").
 *
 * The lines are parsed by stack_parse.c.
 *
 * The answer (proto.h STACKS) goes when every rank's stack is in, or at
 * STACKS_AGENT_MS, whichever comes first; herd waits a little longer
 * (launcher/ctl/hang.c), so it gets this answer rather than nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"

/* 8 s: gdb attaching to a process with many threads and libraries (a
 * PyTorch rank) reads their symbols first; herd waits 10 s
 * (CTL_STACKS_WAIT_MS) for this answer. */
#define STACKS_AGENT_MS 8000

/* Shells are looked through, to the program they run. */
static const char *const shells[] = {"sh",  "dash", "bash",    "zsh",
				     "ksh", "mksh", "busybox", NULL};

/* Bytes of a stream, split into lines for the parser (a line longer than
 * the buffer is cut: only its start matters). */
static void feed(struct stack_parse *p, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n') {
			p->line[p->line_len] = '\0';
			stack_parse_line(p, p->line);
			p->line_len = 0;
		} else if (p->line_len + 1 < sizeof(p->line)) {
			p->line[p->line_len++] = buf[i];
		}
	}
}

/* ---- per rank
 * ---------------------------------------------------------------- */

struct rank_stacks {
	bool asked; /* running when herd asked */
	bool done;
	pid_t pid; /* the process looked at */
	int64_t last_sign_ms;
	const char *method; /* "python", "gdb", "none" */
	char error[160];
	struct stack_parse parse;
	/* gdb */
	pid_t gdb;
	int gdb_fd;
	bool gdb_exited;
};

struct stacks_state {
	int attempt;
	int n;
	struct rank_stacks *r; /* [index in a->ranks] */
	long timer;
};

/* /proc/PID/stat: state, parent and group. */
static int proc_stat(pid_t pid, char *state, pid_t *ppid, pid_t *pgrp)
{
	char path[64], buf[512], *rp;
	ssize_t n;
	int fd, pp, pg;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: its end is the last ')'. */
	rp = strrchr(buf, ')');
	if (!rp || sscanf(rp + 1, " %c %d %d", state, &pp, &pg) != 3)
		return -1;
	*ppid = pp;
	*pgrp = pg;
	return 0;
}

/* The basename of /proc/PID/exe into buf ("" when unknown). */
static void proc_exe(pid_t pid, char *buf, size_t size)
{
	char path[64], exe[4096];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	buf[0] = '\0';
	if (n <= 0)
		return;
	exe[n] = '\0';
	/* " (deleted)" after an upgrade of the binary */
	if (n > 10 && !strcmp(exe + n - 10, " (deleted)"))
		exe[n - 10] = '\0';
	stack_copy_cut(buf, size, stack_base_name(exe), strlen(stack_base_name(exe)));
}

static bool is_shell(const char *exe)
{
	for (const char *const *s = shells; *s; s++)
		if (!strcmp(exe, *s))
			return true;
	return false;
}

static bool is_python(const char *exe)
{
	return !strncmp(exe, "python", 6);
}

/* The lowest pid among the children of parent in group pgrp, or 0. */
static pid_t child_of(pid_t parent, pid_t pgrp)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t best = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char *end, st;
		long pid = strtol(e->d_name, &end, 10);
		pid_t pp, pg;

		if (*end || pid <= 0)
			continue;
		if (proc_stat((pid_t)pid, &st, &pp, &pg) < 0 || pp != parent ||
		    pg != pgrp)
			continue;
		if (!best || pid < best)
			best = (pid_t)pid;
	}
	closedir(d);
	return best;
}

/* The rank's own process below its keeper (see the top). */
static pid_t rank_process(pid_t keeper)
{
	pid_t pid = child_of(keeper, keeper);

	for (int depth = 0; pid > 0 && depth < 8; depth++) {
		char exe[256];
		pid_t below;

		proc_exe(pid, exe, sizeof(exe));
		if (!is_shell(exe))
			break;
		below = child_of(pid, keeper);
		if (below <= 0)
			break; /* a shell doing the work itself */
		pid = below;
	}
	return pid;
}

/* Was Python started with its faulthandler on?  PYTHONFAULTHANDLER
 * not empty in its environment, or -X faulthandler. */
static bool faulthandler_on(pid_t pid)
{
	static const char *const files[] = {"environ", "cmdline"};

	for (int i = 0; i < 2; i++) {
		char path[64], *buf = NULL;
		size_t len = 0, cap = 0;
		FILE *f;
		bool on = false;

		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		/* Entries are NUL-separated. */
		while (getdelim(&buf, &cap, '\0', f) > 0) {
			len = strlen(buf);
			if (i == 0 &&
			    !strncmp(buf, "PYTHONFAULTHANDLER=", 19) &&
			    len > 19)
				on = true;
			if (i == 1 && !strcmp(buf, "faulthandler"))
				on = true;
		}
		free(buf);
		fclose(f);
		if (on)
			return true;
	}
	return false;
}

/* gdb on PATH, into buf; -1 when there is none. */
static int find_gdb(char *buf, size_t size)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL;
	int rc = -1;

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	copy = strdup(path);
	if (!copy)
		return -1;
	for (dir = strtok_r(copy, ":", &save); dir;
	     dir = strtok_r(NULL, ":", &save)) {
		snprintf(buf, size, "%s/gdb", *dir ? dir : ".");
		if (access(buf, X_OK) == 0) {
			rc = 0;
			break;
		}
	}
	free(copy);
	return rc;
}

static void send_rank_text(struct agent *a, struct rank *r, const char *data,
			   size_t len)
{
	while (len > 0) {
		size_t n = len > PROTO_OUTPUT_CHUNK ? PROTO_OUTPUT_CHUNK : len;

		agent_send(a, PROTO_OUTPUT,
			   json_pack("{s:i, s:i, s:i}", "rank", r->rank, "fd",
				     2, "attempt", a->attempt),
			   data, n);
		data += n;
		len -= n;
	}
}

static void send_answer(struct agent *a);

static void maybe_answer(struct agent *a)
{
	struct stacks_state *st = a->stacks;

	for (int i = 0; i < st->n; i++)
		if (st->r[i].asked && !st->r[i].done)
			return;
	send_answer(a);
}

static void gdb_close(struct agent *a, struct rank_stacks *rs)
{
	if (rs->gdb_fd >= 0) {
		loop_fd_del(a->loop, rs->gdb_fd);
		close(rs->gdb_fd);
		rs->gdb_fd = -1;
	}
}

/* A rank's stack is in (or will not come). */
static void rank_done(struct agent *a, struct rank_stacks *rs)
{
	if (rs->done)
		return;
	stack_parse_end(&rs->parse);
	rs->done = true;
	maybe_answer(a);
}

static struct rank_stacks *by_rank(struct agent *a, const struct rank *r)
{
	ptrdiff_t i = r - a->ranks;

	if (!a->stacks || i < 0 || i >= a->stacks->n)
		return NULL;
	return &a->stacks->r[i];
}

static void on_gdb_output(struct loop *loop, int fd, short revents, void *arg)
{
	struct agent *a = arg;
	struct stacks_state *st = a->stacks;
	char buf[4096];
	ssize_t n;

	(void)loop;
	(void)revents;
	for (int i = 0; st && i < st->n; i++) {
		struct rank_stacks *rs = &st->r[i];

		if (rs->gdb_fd != fd)
			continue;
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			gdb_close(a, rs);
			if (rs->gdb_exited)
				rank_done(a, rs);
			return;
		}
		send_rank_text(a, &a->ranks[i], buf, (size_t)n);
		feed(&rs->parse, buf, (size_t)n);
		return;
	}
}

static void on_gdb_exit(struct loop *loop, const struct proc_exit *e, void *arg)
{
	struct agent *a = arg;
	struct stacks_state *st = a->stacks;

	(void)loop;
	for (int i = 0; st && i < st->n; i++) {
		struct rank_stacks *rs = &st->r[i];

		if (rs->gdb != e->pid)
			continue;
		rs->gdb = 0;
		rs->gdb_exited = true;
		if (e->step != PROC_STEP_NONE)
			snprintf(rs->error, sizeof(rs->error), "gdb: %s: %s",
				 proc_step_what(e->step), strerror(e->err));
		if (rs->gdb_fd < 0)
			rank_done(a, rs);
		return;
	}
}

static void start_gdb(struct agent *a, struct rank *r, struct rank_stacks *rs)
{
	char gdb[4096], pid[16], head[128];
	char *argv[] = {"gdb",
			"-batch",
			"-nx",
			"-p",
			pid,
			"-ex",
			"set print frame-arguments none",
			"-ex",
			"thread apply all bt",
			NULL};
	struct proc_opts opts = {.path = gdb};
	struct herd_err err;
	int p[2];
	pid_t child;

	rs->method = "gdb";
	stack_parse_init(&rs->parse, STACK_GDB);
	if (find_gdb(gdb, sizeof(gdb)) < 0) {
		snprintf(rs->error, sizeof(rs->error), "no gdb on this node");
		rs->method = "none";
		rs->done = true;
		return;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(rs->error, sizeof(rs->error), "gdb: pipe: %s",
			 strerror(errno));
		rs->done = true;
		return;
	}
	snprintf(pid, sizeof(pid), "%d", (int)rs->pid);
	opts.io[1] = (struct proc_fd){.kind = PROC_FD_DUP, .fd = p[1]};
	opts.io[2] = (struct proc_fd){.kind = PROC_FD_DUP, .fd = p[1]};
	herd_err_clear(&err);
	child = proc_spawn(a->loop, argv, &opts, on_gdb_exit, a, &err);
	close(p[1]);
	if (child < 0) {
		close(p[0]);
		memcpy(rs->error, "gdb: ", 5);
		stack_copy_cut(rs->error + 5, sizeof(rs->error) - 5, err.text,
			 strlen(err.text));
		rs->done = true;
		return;
	}
	rs->gdb = child;
	rs->gdb_fd = p[0];
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	loop_fd_add(a->loop, p[0], POLLIN, on_gdb_output, a);
	snprintf(head, sizeof(head), "herd: stacks of rank %d (pid %d, gdb):\n",
		 r->rank, (int)rs->pid);
	send_rank_text(a, r, head, strlen(head));
}

/* Starts the look at rank r; done at once when there is nothing to wait
 * for. */
static void start_rank(struct agent *a, struct rank *r, struct rank_stacks *rs)
{
	char state, exe[256], head[160];
	pid_t pp, pg;

	rs->asked = true;
	rs->method = "none";
	rs->gdb_fd = -1;
	rs->last_sign_ms = health_last_sign(r);
	rs->pid = rank_process(r->pid);
	if (rs->pid <= 0 || proc_stat(rs->pid, &state, &pp, &pg) < 0) {
		snprintf(rs->error, sizeof(rs->error),
			 "no process of the rank found");
		rs->done = true;
		return;
	}
	if (state == 'T' || state == 't') {
		snprintf(rs->error, sizeof(rs->error),
			 "pid %d is stopped (SIGSTOP or a debugger)",
			 (int)rs->pid);
		rs->done = true;
		return;
	}
	proc_exe(rs->pid, exe, sizeof(exe));
	/* A rank started warm (warm.c) kept the warm interpreter's
	 * /proc/PID/environ; it turned faulthandler on as its own
	 * environment said. */
	if (is_python(exe) && ((r->warm && r->faulthandler) ||
			       faulthandler_on(rs->pid))) {
		rs->method = "python";
		stack_parse_init(&rs->parse, STACK_PYTHON);
		if (r->warm)
			rs->parse.boot = warm_boot_path(a);
		snprintf(head, sizeof(head),
			 "herd: stacks of rank %d (pid %d, python): SIGABRT, "
			 "faulthandler's traceback follows\n",
			 r->rank, (int)rs->pid);
		send_rank_text(a, r, head, strlen(head));
		if (kill(rs->pid, SIGABRT) < 0) {
			snprintf(rs->error, sizeof(rs->error),
				 "SIGABRT to pid %d: %s", (int)rs->pid,
				 strerror(errno));
			rs->done = true;
		}
		return;
	}
	start_gdb(a, r, rs);
}

static void on_deadline(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	struct stacks_state *st = a->stacks;

	(void)loop;
	st->timer = 0;
	for (int i = 0; i < st->n; i++) {
		struct rank_stacks *rs = &st->r[i];

		if (!rs->asked || rs->done)
			continue;
		if (rs->gdb > 0) {
			kill(rs->gdb, SIGKILL);
			proc_forget(a->loop, rs->gdb);
			rs->gdb = 0;
		}
		gdb_close(a, rs);
		snprintf(rs->error, sizeof(rs->error),
			 "%s gave no stack within %d s",
			 !strcmp(rs->method, "python") ? "Python's faulthandler"
						       : "gdb",
			 STACKS_AGENT_MS / 1000);
		stack_parse_end(&rs->parse);
		rs->done = true;
	}
	send_answer(a);
}

void stacks_fini(struct agent *a)
{
	struct stacks_state *st = a->stacks;

	if (!st)
		return;
	for (int i = 0; i < st->n; i++) {
		struct rank_stacks *rs = &st->r[i];

		if (rs->gdb > 0) {
			kill(rs->gdb, SIGKILL);
			proc_forget(a->loop, rs->gdb);
		}
		gdb_close(a, rs);
	}
	if (st->timer)
		loop_timer_del(a->loop, st->timer);
	free(st->r);
	free(st);
	a->stacks = NULL;
}

static void send_answer(struct agent *a)
{
	struct stacks_state *st = a->stacks;
	json_t *ranks = json_array();

	for (int i = 0; i < st->n; i++) {
		struct rank_stacks *rs = &st->r[i];
		json_t *one;

		if (!rs->asked)
			continue;
		one = json_pack(
		    "{s:i, s:s, s:b, s:I}", "rank", a->ranks[i].rank, "method",
		    rs->method, "in_collective", rs->parse.in_collective,
		    "last_sign_ms",
		    (json_int_t)(rs->last_sign_ms > 0 ? rs->last_sign_ms : 0));
		if (rs->parse.found && rs->parse.frame[0])
			json_object_set_new(one, "frame",
					    json_string(rs->parse.frame));
		else if (rs->parse.outside_line > 0)
			snprintf(rs->error, sizeof(rs->error),
				 "not in its script: in herd's warm_boot.py:%d "
				 "(the script had raised or returned)",
				 rs->parse.outside_line);
		else if (!rs->error[0])
			snprintf(rs->error, sizeof(rs->error),
				 "no frame in %s's output",
				 !strcmp(rs->method, "python") ? "faulthandler"
							       : rs->method);
		if (rs->error[0] && !(rs->parse.found && rs->parse.frame[0]))
			json_object_set_new(one, "error",
					    json_string(rs->error));
		json_array_append_new(ranks, one);
	}
	agent_send(
	    a, PROTO_STACKS,
	    json_pack("{s:i, s:o}", "attempt", st->attempt, "ranks", ranks),
	    NULL, 0);
	stacks_fini(a);
}

void stacks_answer_empty(struct agent *a, json_t *body)
{
	json_int_t att = json_integer_value(json_object_get(body, "attempt"));

	agent_send(a, PROTO_STACKS,
		   json_pack("{s:I, s:[]}", "attempt", att, "ranks"), NULL, 0);
}

void stacks_start(struct agent *a, json_t *body)
{
	json_int_t att = json_integer_value(json_object_get(body, "attempt"));
	struct stacks_state *st;

	/* One look at a time; a second ask is answered by the first. */
	if (a->stacks)
		return;
	if (att != a->attempt || a->n_ranks == 0) {
		stacks_answer_empty(a, body);
		return;
	}
	st = calloc(1, sizeof(*st));
	if (st)
		st->r = calloc((size_t)a->n_ranks, sizeof(*st->r));
	if (!st || !st->r) {
		free(st);
		stacks_answer_empty(a, body);
		return;
	}
	st->attempt = a->attempt;
	st->n = a->n_ranks;
	a->stacks = st;
	for (int i = 0; i < st->n; i++) {
		st->r[i].gdb_fd = -1;
		if (a->ranks[i].running && !a->ranks[i].exit_sent)
			start_rank(a, &a->ranks[i], &st->r[i]);
	}
	st->timer = loop_timer_add(a->loop, STACKS_AGENT_MS, on_deadline, a);
	if (st->timer < 0)
		st->timer = 0;
	maybe_answer(a);
}

void stacks_rank_output(struct agent *a, struct rank *r, const char *buf,
			size_t len)
{
	struct rank_stacks *rs = by_rank(a, r);

	if (!rs || !rs->asked || rs->done || strcmp(rs->method, "python"))
		return;
	feed(&rs->parse, buf, len);
	if (rs->parse.done)
		rank_done(a, rs);
}

void stacks_rank_closed(struct agent *a, struct rank *r)
{
	struct rank_stacks *rs = by_rank(a, r);

	if (!rs || !rs->asked || rs->done || strcmp(rs->method, "python"))
		return;
	/* A last line without its newline. */
	if (rs->parse.line_len)
		feed(&rs->parse, "\n", 1);
	rank_done(a, rs);
}
