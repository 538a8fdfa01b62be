/* loop.h — the one event loop of each process.
 *
 * Every fd and timer is a callback on one poll() loop.  Threads owned by
 * libraries and signal handlers never do work: they call loop_wake() (or
 * write to their own pipe registered here) and the loop does the rest.
 * Callbacks may add and remove fds and timers, including their own.
 *
 * The loop owns nothing it is given: fds are closed and args freed by the
 * caller.
 */
#ifndef HERD_LOOP_H
#define HERD_LOOP_H

#include <stdint.h>
#include <time.h>

struct loop;

typedef void (*loop_fd_fn)(struct loop *loop, int fd, short revents,
			   void *arg);
typedef void (*loop_timer_fn)(struct loop *loop, void *arg);
typedef void (*loop_wake_fn)(struct loop *loop, void *arg);

/* Returns a new loop or NULL (errno set). */
struct loop *loop_new(void);
void loop_free(struct loop *loop);

/* Watches fd for events (POLLIN | POLLOUT); cb gets poll()'s revents,
 * which may include POLLHUP/POLLERR.  One registration per fd: adding an
 * fd again replaces it.  Returns 0 or -1. */
int loop_fd_add(struct loop *loop, int fd, short events, loop_fd_fn cb,
		void *arg);
/* Changes the events watched for fd; 0 pauses it.  Returns 0 or -1. */
int loop_fd_events(struct loop *loop, int fd, short events);
/* Stops watching fd (no-op when it is not watched). */
void loop_fd_del(struct loop *loop, int fd);

/* Calls cb once, after ms milliseconds.  Returns a timer id (> 0) or -1. */
long loop_timer_add(struct loop *loop, int64_t ms, loop_timer_fn cb,
		    void *arg);
/* Cancels a pending timer (no-op for an unknown or expired id). */
void loop_timer_del(struct loop *loop, long id);

/* cb runs on the loop after any loop_wake(); async-signal-safe and
 * thread-safe to call.  Returns 0 or -1. */
int loop_on_wake(struct loop *loop, loop_wake_fn cb, void *arg);
void loop_wake(struct loop *loop);

/* Delivers signal sig to cb on the loop: a signal only wakes the loop,
 * its handler only writes the signal's number to a pipe the loop watches.  One
 * handler per signal (a later call replaces it) and one loop per process
 * take signals.  SA_RESTART is set; SIGCHLD also gets SA_NOCLDSTOP.
 * Returns 0 or -1 (errno set). */
typedef void (*loop_signal_fn)(struct loop *loop, int sig, void *arg);
int loop_on_signal(struct loop *loop, int sig, loop_signal_fn cb, void *arg);

/* As loop_on_signal(), unless the process inherited sig as ignored
 * (SIG_IGN): then the disposition is left alone and 1 is returned, so
 * that `nohup herd run` (SIGHUP ignored by nohup) is not killed by the
 * hangup it asked to survive.  Returns 0 when the handler is installed,
 * 1 when sig stays ignored, -1 on error (errno set). */
int loop_on_signal_unless_ignored(struct loop *loop, int sig,
				  loop_signal_fn cb, void *arg);

/* Puts every signal given to loop_on_signal back to its default action
 * (before the loop is freed, or in a child). */
void loop_signals_reset(struct loop *loop);

/* The child-process registry of proc.c (proc.h) hangs off the loop that
 * takes SIGCHLD: the loop only holds it and, at loop_free(), calls
 * free_fn on it.  NULL until proc.c sets it. */
void *loop_procs(struct loop *loop);
void loop_set_procs(struct loop *loop, void *procs, void (*free_fn)(void *));

/* Runs until loop_stop(); returns 0, or -1 when poll() fails.  A
 * loop_stop() made before loop_run() is not lost: that run returns at
 * once (without dispatching), and the next one runs normally. */
int loop_run(struct loop *loop);
void loop_stop(struct loop *loop);

/* Monotonic milliseconds, for timeouts. */
int64_t loop_now_ms(void);
/* Wall-clock Unix milliseconds, for event logs. */
int64_t loop_wall_ms(void);
/* *when = ms from now on clock, for the waits that take a deadline:
 * CLOCK_REALTIME for pthread_cond_timedwait() (default attributes) and
 * pthread_timedjoin_np(), CLOCK_MONOTONIC for a thread's own deadlines
 * and a condition variable set to it. */
void loop_time_in(clockid_t clock, struct timespec *when, int64_t ms);

#endif
