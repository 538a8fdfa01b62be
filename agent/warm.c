/* warm.c — warm Python interpreters, one per slot, ready before LAUNCH.
 *
 * herd tells every agent it starts (members and spares alike) what to
 * preload (--warm MODULES, launch.preload); the agent then keeps a pool
 * of warm slots: each a keeper in warm mode (keeper/warm.c) with its
 * interpreter (warm_boot.py) that has imported those modules and waits,
 * having run nothing of the job's (cwd /, no PYTHONPATH, sys.path[0] the
 * agent's private directory, no CUDA, no process group).
 *
 * A rank whose command runs a Python script (warm_command_parse) is
 * handed to a warm slot instead of a new keeper: the slot's keeper gets
 * the same spec a cold keeper would, its interpreter takes the rank's
 * environment, workdir, binding and argv and runs the script with
 * runpy; anything it cannot make the same makes the keeper run the rank
 * cold from that spec.  The slot's keeper is then the rank's keeper: its
 * group, its PDEATHSIG (a kill -9 of the agent leaves nothing), its
 * output pipes, its exit status.  The pool is refilled in the background
 * for the next use, but for a node whose ranks all speak the elastic
 * protocol in a job that keeps survivors: it holds the refill until one
 * of them ends (warm_rank_hello, warm_rank_ended).
 *
 * A slot that dies before LAUNCH is started again, with a growing delay;
 * after WARM_TRIES deaths in a row, or a failure that will not go away
 * (a module that cannot be imported, no python, no fork), warm slots
 * are off on this node, said once on stderr (herd's log of the node),
 * and ranks start cold.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "herd/fdpass.h"
#include "keeper/keeper.h"

/* Deaths in a row before the node gives up on warm slots. */
#define WARM_TRIES 5
/* A node's slots: the ranks one LAUNCH may place there and then some. */
#define WARM_SLOTS_MAX 256
/* A command the warm path reads: its words, at most this many. */
#define WARM_WORDS_MAX 4096

/* warm_boot.c: the bootstrap (warm_boot.py) as built. */
extern const unsigned char herd_warm_boot[];
extern const unsigned char herd_warm_boot_end[];

struct warm_slot {
	struct agent *a;
	struct warm_slot *next; /* the idle list */
	pid_t pid;		/* its keeper */
	int ctl;		/* our end of the keeper's socket; -1 closed */
	int out[2];		/* the rank's stdout and stderr, read ends */
	bool ready;		/* "R": preloaded */
	bool assigned;		/* a rank's keeper now */
	bool pending;		/* assigned, no "K" or "C" yet */
	int rank;		/* that rank (global) */
	int attempt;
};

struct warm_state {
	char preload[1024];
	char python[PATH_MAX];
	char boot[600];
	int target; /* slots wanted */
	int fixed;  /* --warm-slots, 0: from the node and launches */
	/* --warm-once: no LAUNCH comes after the first (restart.max 0), so
	 * the slots it takes are not refilled; launched: it came. */
	bool once, launched;
	int n_idle;
	int deaths; /* in a row, before a slot was ready */
	/* Slots handed a rank that is still importing or becoming it; the
	 * pool is refilled once none is (refill_due), so that new imports
	 * do not compete with the ranks' own start. */
	int n_pending;
	bool refill_due;
	/* Every rank here speaks herd's elastic protocol in a job that
	 * keeps survivors (warm_rank_hello): a failure elsewhere never
	 * restarts them, so the pool is not refilled until one of them
	 * ends (warm_rank_ended).  A refill's import beside them cost the
	 * job's rejoin and its next seconds of steps (bench/README.md). */
	bool hold;
	bool off;   /* said, and no more slots */
	bool said_cold; /* a rank's reason to start cold, said once */
	long timer; /* refill */
	struct warm_slot *idle;
};

static void warm_give_up(struct agent *a, const char *why)
{
	struct warm_state *w = a->warm;

	if (w->off)
		return;
	w->off = true;
	fprintf(stderr,
		"herd-agent: warm interpreters are off on this node: "
		"%s; its ranks start cold\n",
		why);
}

/* The bootstrap in the agent's private directory (rundir.c: 0700, ours,
 * checked): a new file, never one that was there. */
static int write_boot(struct agent *a, struct warm_state *w)
{
	size_t len = (size_t)(herd_warm_boot_end - herd_warm_boot);
	struct stat st;
	size_t off = 0;
	int fd, n;

	n = snprintf(w->boot, sizeof(w->boot), "%s/warm_boot.py", a->run_dir);
	if (!a->run_dir[0] || n < 0 || (size_t)n >= sizeof(w->boot))
		return -1;
	fd = open(w->boot, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(fd);
		return -1;
	}
	while (off < len) {
		ssize_t k = write(fd, herd_warm_boot + off, len - off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			close(fd);
			unlink(w->boot);
			return -1;
		}
		off += (size_t)k;
	}
	return close(fd);
}

static void slot_close(struct warm_slot *s)
{
	if (s->ctl >= 0) {
		loop_fd_del(s->a->loop, s->ctl);
		close(s->ctl);
		s->ctl = -1;
	}
}

static void slot_unlink(struct warm_state *w, struct warm_slot *s)
{
	for (struct warm_slot **p = &w->idle; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			w->n_idle--;
			return;
		}
	}
}

static void warm_refill(struct agent *a);
static void refill_later(struct agent *a, int64_t ms);

/* s has said "K" or "C", or died before. */
static void slot_settled(struct warm_slot *s)
{
	struct warm_state *w = s->a->warm;

	if (!s->pending)
		return;
	s->pending = false;
	if (--w->n_pending == 0 && w->refill_due) {
		w->refill_due = false;
		refill_later(s->a, 0);
	}
}

static void on_refill(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->warm->timer = 0;
	warm_refill(a);
}

static void refill_later(struct agent *a, int64_t ms)
{
	if (!a->warm->timer)
		a->warm->timer = loop_timer_add(a->loop, ms, on_refill, a);
}

/* What the slot's keeper says (keeper.h). */
static void on_ctl(struct loop *loop, int fd, short revents, void *arg)
{
	struct warm_slot *s = arg;
	struct agent *a = s->a;
	char rec[512];
	ssize_t n;

	(void)loop;
	(void)fd;
	(void)revents;
	n = recv(s->ctl, rec, sizeof(rec) - 1, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		slot_close(s); /* its exit says the rest */
		return;
	}
	rec[n] = '\0';
	if (rec[0] == 'R') {
		s->ready = true;
		a->warm->deaths = 0;
	} else if (rec[0] == 'F') {
		warm_give_up(a, rec + 1 + (rec[1] == ' '));
	} else if (rec[0] == 'D' && !s->assigned) {
		slot_close(s); /* its keeper ends; its exit says the rest */
	} else if (s->assigned && (rec[0] == 'K' || rec[0] == 'C')) {
		/* Why the interpreter would not be the rank: said once a
		 * node, since every rank of the job has the same reason. */
		if (rec[0] == 'C' && rec[1] == ' ' && rec[2] &&
		    !a->warm->said_cold) {
			a->warm->said_cold = true;
			fprintf(stderr,
				"herd-agent: rank %d starts cold, not from its "
				"warm interpreter: %s\n",
				s->rank, rec + 2);
		}
		rank_started(a, s->rank, s->attempt, rec[0] == 'K');
		slot_close(s);
		slot_settled(s);
	}
}

/* A slot's keeper exited: a rank's, or an idle slot's. */
static void slot_on_exit(struct loop *loop, const struct proc_exit *e,
			 void *arg)
{
	struct warm_slot *s = arg;
	struct agent *a = s->a;
	struct warm_state *w = a->warm;

	slot_close(s);
	if (s->assigned) {
		slot_settled(s);
		rank_keeper_exited(loop, e, a);
		free(s);
		return;
	}
	slot_unlink(w, s);
	close(s->out[0]);
	close(s->out[1]);
	free(s);
	if (w->off || a->state == AGENT_EXITING)
		return;
	if (++w->deaths >= WARM_TRIES) {
		warm_give_up(a, "its interpreters keep dying before LAUNCH");
		return;
	}
	refill_later(a, 100LL << w->deaths);
}

/* One more idle slot.  0, or -1 (said). */
static int slot_start(struct agent *a)
{
	struct warm_state *w = a->warm;
	char pid_text[24];
	char *argv[] = {(char *)(a->self_path[0] ? a->self_path : "herd-agent"),
			KEEPER_ARG,
			KEEPER_WARM_ARG,
			pid_text,
			w->python,
			w->boot,
			w->preload,
			NULL};
	struct proc_opts opts = {.path = "/proc/self/exe",
				 .pdeathsig = SIGUSR1,
				 .keep_report = true};
	struct warm_slot *s = calloc(1, sizeof(*s));
	struct herd_err err;
	sigset_t all;
	int sv[2] = {-1, -1};

	herd_err_clear(&err);
	if (!s ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		free(s);
		warm_give_up(a, "out of memory or file descriptors");
		return -1;
	}
	if (!a->keeper_tried) {
		a->keeper_fd = keeper_image_open();
		a->keeper_tried = true;
	}
	opts.exec_fd = a->keeper_fd >= 0 ? a->keeper_fd : 0;
	snprintf(pid_text, sizeof(pid_text), "%ld", (long)getpid());
	sigfillset(&all);
	opts.sigmask = &all;
	opts.io[0] = (struct proc_fd){.kind = PROC_FD_DUP, .fd = sv[1]};
	opts.io[1].kind = opts.io[2].kind = PROC_FD_PIPE;
	s->a = a;
	s->ctl = sv[0];
	s->pid = proc_spawn(a->loop, argv, &opts, slot_on_exit, s, &err);
	close(sv[1]);
	if (s->pid < 0) {
		char why[HERD_ERR_MAX + 32];

		close(sv[0]);
		free(s);
		snprintf(why, sizeof(why), "cannot start one: %s", err.text);
		warm_give_up(a, why);
		return -1;
	}
	s->out[0] = opts.io[1].fd;
	s->out[1] = opts.io[2].fd;
	loop_fd_add(a->loop, s->ctl, POLLIN, on_ctl, s);
	s->next = w->idle;
	w->idle = s;
	w->n_idle++;
	return 0;
}

static void warm_refill(struct agent *a)
{
	struct warm_state *w = a->warm;

	while (w && !w->off && !w->hold && !(w->once && w->launched) &&
	       a->state != AGENT_EXITING && w->n_idle < w->target)
		if (slot_start(a) < 0)
			return;
}

void warm_init(struct agent *a, const char *preload, const char *python,
	       int slots, bool once)
{
	struct warm_state *w;
	struct stat st;

	if (!preload)
		return;
	w = a->warm = calloc(1, sizeof(*w));
	if (!w)
		return;
	w->fixed = slots;
	w->once = once;
	w->target = slots > 0 ? slots : a->n_gpus > 0 ? a->n_gpus : 1;
	if (w->target > WARM_SLOTS_MAX)
		w->target = WARM_SLOTS_MAX;
	for (const char *p = preload; *p; p++) {
		if (!(*p == ',' || *p == '.' || *p == '_' ||
		      (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9'))) {
			warm_give_up(a, "--warm wants module names");
			return;
		}
	}
	snprintf(w->preload, sizeof(w->preload), "%s", preload);
	snprintf(w->python, sizeof(w->python), "%s",
		 python && *python ? python : "/usr/bin/python3");
	if (w->python[0] != '/' || stat(w->python, &st) < 0 ||
	    !S_ISREG(st.st_mode) || access(w->python, X_OK) < 0) {
		char why[PATH_MAX + 32];

		snprintf(why, sizeof(why), "no interpreter %s", w->python);
		warm_give_up(a, why);
		return;
	}
	if (write_boot(a, w) < 0) {
		warm_give_up(a, "cannot write the bootstrap in the agent's "
				"private directory");
		return;
	}
	warm_refill(a);
}

/* An idle slot ended by us: its keeper's group killed, its exit no
 * death of the pool's. */
static void slot_drop(struct agent *a, struct warm_slot *s)
{
	slot_unlink(a->warm, s);
	kill(-s->pid, SIGKILL);
	proc_forget(a->loop, s->pid);
	slot_close(s);
	close(s->out[0]);
	close(s->out[1]);
	free(s);
}

void warm_fini(struct agent *a)
{
	struct warm_state *w = a->warm;

	if (!w)
		return;
	if (w->timer)
		loop_timer_del(a->loop, w->timer);
	while (w->idle)
		slot_drop(a, w->idle);
	if (w->boot[0])
		unlink(w->boot);
	free(w);
	a->warm = NULL;
}

void warm_after_launch(struct agent *a, int n_ranks)
{
	struct warm_state *w = a->warm;

	if (!w || w->off)
		return;
	w->launched = true; /* --warm-once: the pool stays as it is now */
	w->hold = false;    /* until these ranks all say hello */
	if (!w->fixed && n_ranks > w->target)
		w->target = n_ranks > WARM_SLOTS_MAX ? WARM_SLOTS_MAX : n_ranks;
	if (w->n_pending > 0)
		w->refill_due = true;
	else
		refill_later(a, 0);
}

void warm_rank_hello(struct agent *a)
{
	struct warm_state *w = a->warm;
	struct warm_slot *s, *next;

	if (!w || w->off || w->hold || !a->survivors_kept ||
	    !control_all_hello(a))
		return;
	w->hold = true;
	w->refill_due = false;
	if (w->timer) {
		loop_timer_del(a->loop, w->timer);
		w->timer = 0;
	}
	/* A refill still importing goes; one already ready stays (it
	 * costs nothing more). */
	for (s = w->idle; s; s = next) {
		next = s->next;
		if (!s->ready)
			slot_drop(a, s);
	}
}

void warm_rank_ended(struct agent *a)
{
	struct warm_state *w = a->warm;

	if (!w || !w->hold)
		return;
	w->hold = false;
	refill_later(a, 0);
}

/* ---- which commands go warm --------------------------------------------- */

static bool python_name(const char *word)
{
	const char *b = strrchr(word, '/') ? strrchr(word, '/') + 1 : word;

	if (strncmp(b, "python", 6))
		return false;
	b += 6;
	if (!*b)
		return true;
	if (*b++ != '3')
		return false;
	if (!*b)
		return true;
	if (*b++ != '.' || !*b)
		return false;
	for (; *b; b++)
		if (*b < '0' || *b > '9')
			return false;
	return true;
}

int warm_command_parse(const char *command, struct warm_cmd *c)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				   "_./,:=+@%-";
	size_t n = 0;
	const char *r;
	char *o;

	memset(c, 0, sizeof(*c));
	if (!command)
		return -1;
	c->buf = strdup(command);
	c->words = calloc(WARM_WORDS_MAX + 1, sizeof(*c->words));
	if (!c->buf || !c->words)
		goto fail;
	/* Words as sh reads them, where that is plain: safe characters,
	 * '...' (anything but '), "..." (anything but $ ` \ "), joined;
	 * blanks between.  The words are written back into buf, never
	 * longer than what they came from. */
	r = command;
	o = c->buf;
	while (*r) {
		if (*r == ' ' || *r == '\t') {
			r++;
			continue;
		}
		if (n == WARM_WORDS_MAX)
			goto fail;
		c->words[n++] = o;
		while (*r && *r != ' ' && *r != '\t') {
			if (*r == '\'') {
				const char *e = strchr(r + 1, '\'');

				if (!e)
					goto fail;
				memmove(o, r + 1, (size_t)(e - r - 1));
				o += e - r - 1;
				r = e + 1;
			} else if (*r == '"') {
				size_t k = strcspn(r + 1, "$`\\\"");

				if (r[1 + k] != '"')
					goto fail;
				memmove(o, r + 1, k);
				o += k;
				r += k + 2;
			} else if (strchr(safe, *r)) {
				*o++ = *r++;
			} else {
				goto fail;
			}
		}
		*o++ = '\0';
	}
	/* "exec python3 ...": the warm rank is the interpreter itself, as
	 * exec makes it (no shell between herd's signals and the script). */
	if (n > 0 && !strcmp(c->words[0], "exec")) {
		memmove(c->words, c->words + 1, n * sizeof(*c->words));
		n--;
	}
	if (n < 2 || !python_name(c->words[0]))
		goto fail;
	c->python = c->words[0];
	for (c->script_at = 1; c->script_at < n; c->script_at++) {
		const char *w = c->words[c->script_at];

		if (w[0] != '-')
			break;
		/* -u and -B only: what the interpreter makes of any other
		 * option is fixed at its start. */
		if ((strcmp(w, "-u") && strcmp(w, "-B")) ||
		    strchr(c->flags, w[1]))
			goto fail;
		c->flags[strlen(c->flags)] = w[1];
	}
	if (c->script_at >= n)
		goto fail;
	c->n_words = n;
	return 0;
fail:
	warm_command_free(c);
	return -1;
}

void warm_command_free(struct warm_cmd *c)
{
	free(c->buf);
	free(c->words);
	memset(c, 0, sizeof(*c));
}

/* The file sh would run for word (PATH of envp), into out.  0 or -1. */
static int resolve(const char *word, char *const *envp, char *out, size_t len)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin";

	if (strchr(word, '/')) {
		if (word[0] != '/')
			return -1; /* relative to the workdir: not ours */
		snprintf(out, len, "%s", word);
		return access(out, X_OK);
	}
	for (char *const *e = envp; *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			path = *e + 5;
	while (*path) {
		size_t dl = strcspn(path, ":");

		if (dl > 0 && path[0] == '/' &&
		    (size_t)snprintf(out, len, "%.*s/%s", (int)dl, path, word) <
			len &&
		    access(out, X_OK) == 0)
			return 0;
		if (dl > 0 && path[0] != '/')
			return -1; /* a relative PATH entry: the workdir's */
		path += dl;
		if (*path == ':')
			path++;
	}
	return -1;
}

/* Is found the warm interpreter: the same path, or the same file outside
 * a virtual environment (whose pyvenv.cfg changes sys.prefix)? */
static bool same_python(const char *found, const char *warm)
{
	char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX], cfg[PATH_MAX + 16];
	char *slash;

	if (!strcmp(found, warm))
		return true;
	if (!realpath(found, a) || !realpath(warm, b) || strcmp(a, b))
		return false;
	snprintf(dir, sizeof(dir), "%s", found);
	for (int up = 0; up < 2; up++) {
		if (!(slash = strrchr(dir, '/')))
			return false;
		*slash = '\0';
		snprintf(cfg, sizeof(cfg), "%s/pyvenv.cfg", dir);
		if (access(cfg, F_OK) == 0)
			return false;
	}
	return true;
}

/* The warm argv (keeper.h) in a new memfd; -1 none. */
static int argv_fd(const struct warm_cmd *c, const char *python)
{
	char num[24];
	int fd = memfd_create("herd-warm-argv", MFD_CLOEXEC);
	FILE *f;
	bool ok;

	if (fd < 0)
		return -1;
	f = fdopen(dup(fd), "w");
	if (!f) {
		close(fd);
		return -1;
	}
	snprintf(num, sizeof(num), "%zu", c->n_words - c->script_at - 1);
	fputs(KEEPER_WARM_MAGIC, f);
	fputc(0, f);
	fputs(python, f);
	fputc(0, f);
	fputs(c->python, f);
	fputc(0, f);
	fputs(c->flags, f);
	fputc(0, f);
	fputs(c->words[c->script_at], f);
	fputc(0, f);
	fputs(num, f);
	fputc(0, f);
	for (size_t i = c->script_at + 1; i < c->n_words; i++) {
		fputs(c->words[i], f);
		fputc(0, f);
	}
	ok = fclose(f) == 0;
	if (!ok) {
		close(fd);
		return -1;
	}
	return fd;
}

pid_t warm_launch(struct agent *a, const struct keeper_rank *k,
		  const char *command, int attempt, int out[2])
{
	struct warm_state *w = a->warm;
	struct warm_slot *s = NULL;
	struct warm_cmd c;
	char python[PATH_MAX];
	struct herd_err err;
	int spec = -1, wargv = -1;
	pid_t pid = 0;

	if (!w || !w->idle || warm_command_parse(command, &c) < 0)
		return 0;
	if (resolve(c.python, k->envp, python, sizeof(python)) < 0 ||
	    !same_python(python, w->python))
		goto out;
	/* The oldest ready slot, else any. */
	for (struct warm_slot *t = w->idle; t; t = t->next)
		if (t->ctl >= 0 && (!s || (t->ready && !s->ready)))
			s = t;
	if (!s)
		goto out;
	herd_err_clear(&err);
	if ((spec = keeper_spec_fd(k, &err)) < 0 ||
	    (wargv = argv_fd(&c, python)) < 0)
		goto out;
	slot_unlink(w, s);
	if (fdpass_send(s->ctl, 'L', (int[]){spec, wargv}, 2, MSG_DONTWAIT) <
	    0) {
		/* A slot that cannot take it is not kept. */
		kill(-s->pid, SIGKILL);
		s->next = w->idle;
		w->idle = s;
		w->n_idle++;
		goto out;
	}
	s->assigned = true;
	s->pending = true;
	w->n_pending++;
	s->rank = k->rank;
	s->attempt = attempt;
	out[0] = s->out[0];
	out[1] = s->out[1];
	pid = s->pid;
out:
	if (spec >= 0)
		close(spec);
	if (wargv >= 0)
		close(wargv);
	warm_command_free(&c);
	return pid;
}

const char *warm_boot_path(const struct agent *a)
{
	return a->warm && a->warm->boot[0] ? a->warm->boot : NULL;
}

bool warm_enabled(const struct agent *a)
{
	return a->warm && !a->warm->off;
}
