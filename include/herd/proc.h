/* proc.h — every child process herd and herd-agent start, and the one
 * place that reaps them.
 *
 * proc_spawn() forks; the child does only async-signal-safe set-up (its
 * process group or session, PR_SET_PDEATHSIG, every signal back to its
 * default action, the signal mask, stdin/stdout/stderr, every other fd
 * closed, the working directory, the cpu set) and then execs.  A step
 * that fails is reported to the parent over a close-on-exec pipe (the
 * self-pipe of posix_spawn implementations): EOF means the exec worked,
 * a struct proc_report says which step failed and its errno.
 *
 * The registry hangs off the loop that takes SIGCHLD (one per process,
 * loop.h): on SIGCHLD the loop reaps every child that has exited, with
 * waitpid(-1, WNOHANG), and calls the on_exit of those spawned here,
 * from the loop, never from the signal handler.  A child nobody
 * registered (a helper forked by a library, a child whose owner gave
 * up on it) is reaped too, so nothing stays a zombie; its status goes
 * nowhere.  Model: flux-core libsubprocess/sigchld.c, OpenSSH
 * serverloop.c collect_children().
 *
 * Threads: call proc_spawn() and proc_reap() from the loop's thread
 * only (the registry has no lock).
 */
#ifndef HERD_PROC_H
#define HERD_PROC_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "herd/err.h"
#include "herd/loop.h"

/* What one of the child's fds 0, 1, 2 is.  Zero (PROC_FD_NULL) is
 * /dev/null, so a zeroed proc_opts gives a child that reads and writes
 * nothing. */
enum proc_fd_kind {
	PROC_FD_NULL = 0, /* /dev/null */
	PROC_FD_DUP,	  /* a copy of .fd, which stays the caller's */
	PROC_FD_PIPE,	  /* a new pipe; proc_spawn puts the parent's end,
			   * close-on-exec, in .fd: the caller owns it */
};

struct proc_fd {
	enum proc_fd_kind kind;
	int fd;
};

enum proc_group {
	PROC_GROUP_NEW = 0, /* leads a new process group (setpgid) */
	PROC_SESSION,	    /* leads a new session (setsid) */
	PROC_GROUP_KEEP,    /* stays in the parent's group */
};

/* Why a child could not become its program (the report pipe). */
enum proc_step {
	PROC_STEP_NONE = 0, /* nothing failed: the program ran */
	PROC_STEP_SETUP,    /* process group, fds, signals, fork */
	PROC_STEP_WORKDIR,  /* chdir into the working directory */
	PROC_STEP_CPUS,	    /* sched_setaffinity to the planned cpus */
	PROC_STEP_EXEC,	    /* execve itself */
	PROC_STEP_KEEPER,   /* execve of a keeper (opts.keep_report) */
};

struct proc_opts {
	const char *path;	  /* what to exec; NULL: argv[0] */
	/* Set (above 3: fds 0-3 are the child's own): exec the program in
	 * this open file instead (fexecve; it may be close-on-exec; path
	 * is not used).  0: none. */
	int exec_fd;
	struct proc_fd io[3];	  /* stdin, stdout, stderr */
	enum proc_group group;
	/* Sent to the child when the thread that forked it dies, so that
	 * no child outlives its parent: 0 means SIGKILL, -1 none. */
	int pdeathsig;
	/* The child's signal mask until exec (kept across it); NULL:
	 * nothing blocked.  Every handler is back to SIG_DFL either way. */
	const sigset_t *sigmask;
	const char *workdir;	  /* NULL: the parent's */
	const cpu_set_t *cpus;	  /* NULL: the parent's affinity */
	char *const *envp;	  /* NULL: the parent's environ */
	/* proc_spawn returns only once the exec happened or failed, and
	 * a failure is its own error (the child is reaped then): for a
	 * caller that has nobody to tell later (posix_spawn's way). */
	bool wait_exec;
	/* The program is a keeper that stays between its caller and the
	 * program it starts itself (the rank keeper, agent/keeper.c): the
	 * report pipe stays open across its exec as fd 3, so that it
	 * reports its own later steps (proc_report_write) and the pipe
	 * reaches EOF only with the last exec.  A failed exec of the
	 * keeper itself is PROC_STEP_KEEPER. */
	bool keep_report;
};

/* How a child ended, for on_exit. */
struct proc_exit {
	pid_t pid;
	int status;	/* as from waitpid() */
	int step;	/* enum proc_step that failed, PROC_STEP_NONE if none */
	int err;	/* its errno, when step != PROC_STEP_NONE */
};

typedef void (*proc_exit_fn)(struct loop *loop, const struct proc_exit *e,
			     void *arg);

/* Starts opts->path, or argv[0], (a path: no PATH search) with argv.  The loop takes
 * SIGCHLD from the first call on (loop_on_signal; nobody else may take
 * it).  on_exit (may be NULL) runs once, from the loop, when the child
 * has exited and been reaped, with what the report pipe said.  Returns
 * the child's pid, or -1 with err (nothing started, pipes closed).  With
 * opts->wait_exec, a failed exec is that error ("cannot exec PATH: ..."),
 * the child reaped. */
pid_t proc_spawn(struct loop *loop, char *const argv[], struct proc_opts *opts,
		 proc_exit_fn on_exit, void *arg, struct herd_err *err);

/* Makes the loop take SIGCHLD and reap every child, registered or not
 * (what proc_spawn does on its first call).  Returns 0 or -1 (errno). */
int proc_watch(struct loop *loop);

/* Reaps now whatever has exited and calls its on_exit: for a caller that
 * waits for children while the loop does not run (a transport's free).
 * Returns how many registered children are still running. */
int proc_reap(struct loop *loop);

/* Forgets pid's on_exit (its owner is going away); the child is still
 * reaped when it exits. */
void proc_forget(struct loop *loop, pid_t pid);

/* "cannot exec", "cannot enter the workdir", ... for a message. */
const char *proc_step_what(int step);

/* For a keeper (opts.keep_report), in the child it forks itself after
 * its own exec: the last steps, with the same reports on report_fd:
 * chdir(opts->workdir), the cpu set, execve(opts->path or argv[0], argv,
 * opts->envp or environ).  Async-signal-safe; never returns.  proc_spawn
 * itself runs no code of its caller's between fork and exec. */
void proc_child_exec(const struct proc_opts *opts, char *const argv[],
		     int report_fd) __attribute__((noreturn));

/* In a child: writes a report to fd (async-signal-safe; errors are
 * ignored, the exit status still tells). */
void proc_report_write(int fd, enum proc_step step, int err);

#endif
