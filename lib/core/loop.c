/* loop.c — epoll-based event loop; see loop.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "herd/loop.h"

/* One registration per fd number, in a table indexed by the fd: finding
 * it is O(1).  gen tells a registration from an earlier one of the same
 * number within one batch of events. */
struct loop_fd {
	short events;
	bool used;
	bool in_ep;	/* in the epoll set (events != 0) */
	uint32_t gen;
	loop_fd_fn cb;
	void *arg;
};

struct loop_timer {
	long id;
	int64_t due;
	loop_timer_fn cb;
	void *arg;
};

/* Signals taken by the loop: sig_fd is the write end the handler uses
 * (one loop per process takes signals). */
#define LOOP_NSIG 65
static int sig_fd = -1;

struct loop_sig {
	loop_signal_fn cb;
	void *arg;
};

struct loop {
	struct loop_fd *fds;	/* indexed by fd */
	size_t cap_fds;
	int ep;			/* epoll: the kernel keeps the ready list, so a
				 * wakeup costs O(ready fds), not O(all fds) */
	uint32_t next_gen;
	struct loop_timer *timers;	/* unordered; a job has few timers */
	size_t n_timers, cap_timers;
	long next_timer_id;
	int wake_pipe[2];
	loop_wake_fn wake_cb;
	void *wake_arg;
	bool stop;
	int sig_pipe[2];	/* -1 until loop_on_signal */
	struct loop_sig sigs[LOOP_NSIG];
	void *procs;	/* proc.c's registry of children */
	void (*procs_free)(void *);
};

int64_t loop_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t loop_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void loop_time_in(clockid_t clock, struct timespec *when, int64_t ms)
{
	clock_gettime(clock, when);
	when->tv_sec += (time_t)(ms / 1000);
	when->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (when->tv_nsec >= 1000000000L) {
		when->tv_sec++;
		when->tv_nsec -= 1000000000L;
	}
}

static void wake_drain(struct loop *loop, int fd, short revents, void *arg)
{
	char buf[256];

	(void)revents;
	(void)arg;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	if (loop->wake_cb)
		loop->wake_cb(loop, loop->wake_arg);
}

struct loop *loop_new(void)
{
	struct loop *loop = calloc(1, sizeof(*loop));

	if (!loop)
		return NULL;
	loop->ep = -1;
	if (pipe2(loop->wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(loop);
		return NULL;
	}
	loop->next_timer_id = 1;
	loop->sig_pipe[0] = loop->sig_pipe[1] = -1;
	loop->ep = epoll_create1(EPOLL_CLOEXEC);
	if (loop->ep < 0) {
		loop_free(loop);
		return NULL;
	}
	if (loop_fd_add(loop, loop->wake_pipe[0], POLLIN, wake_drain, NULL) <
	    0) {
		loop_free(loop);
		return NULL;
	}
	return loop;
}

void loop_free(struct loop *loop)
{
	int saved = errno;

	if (!loop)
		return;
	close(loop->wake_pipe[0]);
	close(loop->wake_pipe[1]);
	if (loop->ep >= 0)
		close(loop->ep);
	if (loop->sig_pipe[0] >= 0) {
		loop_signals_reset(loop);
		if (sig_fd == loop->sig_pipe[1])
			sig_fd = -1;
		close(loop->sig_pipe[0]);
		close(loop->sig_pipe[1]);
	}
	if (loop->procs_free)
		loop->procs_free(loop->procs);
	free(loop->fds);
	free(loop->timers);
	free(loop);
	errno = saved;
}

void *loop_procs(struct loop *loop)
{
	return loop->procs;
}

void loop_set_procs(struct loop *loop, void *procs, void (*free_fn)(void *))
{
	loop->procs = procs;
	loop->procs_free = free_fn;
}

static struct loop_fd *find_fd(struct loop *loop, int fd)
{
	if (fd < 0 || (size_t)fd >= loop->cap_fds || !loop->fds[fd].used)
		return NULL;
	return &loop->fds[fd];
}

/* Puts f's events into the epoll set: added when they become non-zero,
 * removed when 0 (epoll would still report HUP/ERR for a paused fd, and
 * a level-triggered HUP nobody reads spins the loop). */
static int ep_sync(struct loop *loop, int fd, struct loop_fd *f)
{
	struct epoll_event ev = {.events = (uint32_t)f->events,
				 .data.u64 = (uint64_t)f->gen << 32 |
					     (uint32_t)fd};

	if (!f->events) {
		if (f->in_ep)
			epoll_ctl(loop->ep, EPOLL_CTL_DEL, fd, NULL);
		f->in_ep = false;
		return 0;
	}
	if (epoll_ctl(loop->ep, f->in_ep ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd,
		      &ev) < 0) {
		/* A number reused after a close without loop_fd_del. */
		if (errno == ENOENT)
			return epoll_ctl(loop->ep, EPOLL_CTL_ADD, fd, &ev) < 0
				   ? -1
				   : (f->in_ep = true, 0);
		if (errno == EEXIST)
			return epoll_ctl(loop->ep, EPOLL_CTL_MOD, fd, &ev) < 0
				   ? -1
				   : (f->in_ep = true, 0);
		return -1;
	}
	f->in_ep = true;
	return 0;
}

int loop_fd_add(struct loop *loop, int fd, short events, loop_fd_fn cb,
		void *arg)
{
	struct loop_fd *f;

	if (fd < 0) {
		errno = EBADF;
		return -1;
	}
	if ((size_t)fd >= loop->cap_fds) {
		size_t cap = loop->cap_fds ? loop->cap_fds : 16;
		struct loop_fd *n;

		while (cap <= (size_t)fd)
			cap *= 2;
		n = realloc(loop->fds, cap * sizeof(*n));
		if (!n)
			return -1;
		memset(n + loop->cap_fds, 0,
		       (cap - loop->cap_fds) * sizeof(*n));
		loop->fds = n;
		loop->cap_fds = cap;
	}
	f = &loop->fds[fd];
	if (!f->used) {
		f->used = true;
		f->gen = ++loop->next_gen;
	}
	f->events = events;
	f->cb = cb;
	f->arg = arg;
	if (ep_sync(loop, fd, f) < 0) {
		f->used = false;
		return -1;
	}
	return 0;
}

int loop_fd_events(struct loop *loop, int fd, short events)
{
	struct loop_fd *f = find_fd(loop, fd);

	if (!f) {
		errno = ENOENT;
		return -1;
	}
	if (f->events == events)
		return 0;
	f->events = events;
	return ep_sync(loop, fd, f);
}

void loop_fd_del(struct loop *loop, int fd)
{
	struct loop_fd *f = find_fd(loop, fd);

	if (!f)
		return;
	if (f->in_ep)
		epoll_ctl(loop->ep, EPOLL_CTL_DEL, fd, NULL);
	f->in_ep = false;
	f->used = false;
}

static void on_any_signal(int sig)
{
	unsigned char b = (unsigned char)sig;
	int saved = errno;
	ssize_t n = write(sig_fd, &b, 1);

	(void)n;	/* a full pipe: the loop has signals to read anyway */
	errno = saved;
}

static void sig_dispatch(struct loop *loop, int fd, short revents, void *arg)
{
	unsigned char b[64];
	ssize_t n;

	(void)revents;
	(void)arg;
	while ((n = read(fd, b, sizeof(b))) > 0)
		for (ssize_t i = 0; i < n; i++)
			if (b[i] < LOOP_NSIG && loop->sigs[b[i]].cb)
				loop->sigs[b[i]].cb(loop, b[i],
						    loop->sigs[b[i]].arg);
}

int loop_on_signal(struct loop *loop, int sig, loop_signal_fn cb, void *arg)
{
	struct sigaction sa;

	if (sig <= 0 || sig >= LOOP_NSIG) {
		errno = EINVAL;
		return -1;
	}
	if (loop->sig_pipe[0] < 0) {
		if (pipe2(loop->sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
			return -1;
		if (loop_fd_add(loop, loop->sig_pipe[0], POLLIN, sig_dispatch,
				NULL) < 0)
			return -1;
		sig_fd = loop->sig_pipe[1];
	}
	loop->sigs[sig].cb = cb;
	loop->sigs[sig].arg = arg;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_any_signal;
	sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
	sigemptyset(&sa.sa_mask);
	return sigaction(sig, &sa, NULL);
}

int loop_on_signal_unless_ignored(struct loop *loop, int sig,
				  loop_signal_fn cb, void *arg)
{
	struct sigaction old;

	if (sigaction(sig, NULL, &old) < 0)
		return -1;
	if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
		return 1;
	return loop_on_signal(loop, sig, cb, arg);
}

void loop_signals_reset(struct loop *loop)
{
	for (int s = 1; s < LOOP_NSIG; s++) {
		if (!loop->sigs[s].cb)
			continue;
		signal(s, SIG_DFL);
		loop->sigs[s].cb = NULL;
	}
}

long loop_timer_add(struct loop *loop, int64_t ms, loop_timer_fn cb,
		    void *arg)
{
	struct loop_timer *t;

	if (loop->n_timers == loop->cap_timers) {
		size_t cap = loop->cap_timers ? loop->cap_timers * 2 : 16;
		struct loop_timer *n = realloc(loop->timers, cap * sizeof(*n));

		if (!n)
			return -1;
		loop->timers = n;
		loop->cap_timers = cap;
	}
	t = &loop->timers[loop->n_timers++];
	t->id = loop->next_timer_id++;
	t->due = loop_now_ms() + (ms > 0 ? ms : 0);
	t->cb = cb;
	t->arg = arg;
	return t->id;
}

void loop_timer_del(struct loop *loop, long id)
{
	for (size_t i = 0; i < loop->n_timers; i++) {
		if (loop->timers[i].id == id) {
			loop->timers[i] = loop->timers[--loop->n_timers];
			return;
		}
	}
}

int loop_on_wake(struct loop *loop, loop_wake_fn cb, void *arg)
{
	loop->wake_cb = cb;
	loop->wake_arg = arg;
	return 0;
}

void loop_wake(struct loop *loop)
{
	int saved = errno;
	ssize_t n = write(loop->wake_pipe[1], "", 1);

	(void)n;	/* a full pipe already means "wake up" */
	errno = saved;
}

void loop_stop(struct loop *loop)
{
	loop->stop = true;
	loop_wake(loop);
}

/* Runs every timer that is due; each is removed before its callback so
 * the callback may add timers (including a re-armed one). */
static void run_timers(struct loop *loop)
{
	int64_t now = loop_now_ms();
	bool again = true;

	while (again && !loop->stop) {
		again = false;
		for (size_t i = 0; i < loop->n_timers; i++) {
			struct loop_timer t = loop->timers[i];

			if (t.due > now)
				continue;
			loop->timers[i] = loop->timers[--loop->n_timers];
			t.cb(loop, t.arg);
			again = true;
			break;
		}
	}
}

static int next_timeout(struct loop *loop)
{
	int64_t now = loop_now_ms(), best = -1;

	for (size_t i = 0; i < loop->n_timers; i++) {
		int64_t d = loop->timers[i].due - now;

		if (d < 0)
			d = 0;
		if (best < 0 || d < best)
			best = d;
	}
	if (best > 60000)
		best = 60000;
	return (int)best;
}

int loop_run(struct loop *loop)
{
	struct epoll_event evs[256];
	int rc = 0;

	/* A loop_stop() that came before this run (a callback of a send
	 * made before loop_run, a signal) is kept: the run returns at once.
	 * The flag is cleared on the way out, so a later run starts fresh. */
	while (!loop->stop) {
		int ready = epoll_wait(loop->ep, evs, 256, next_timeout(loop));

		if (ready < 0 && errno != EINTR) {
			rc = -1;
			break;
		}
		for (int i = 0; i < ready && !loop->stop; i++) {
			int fd = (int)(uint32_t)evs[i].data.u64;
			uint32_t gen = (uint32_t)(evs[i].data.u64 >> 32);
			struct loop_fd *cur = find_fd(loop, fd);

			/* Callbacks may have removed or replaced it. */
			if (!cur || cur->gen != gen || !cur->events)
				continue;
			cur->cb(loop, fd, (short)evs[i].events, cur->arg);
		}
		run_timers(loop);
	}
	loop->stop = false;
	return rc;
}
