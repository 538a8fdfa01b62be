/* spawn.h — the first steps of every child herd starts (STYLE.md rule
 * 8), for code running between fork() and exec(): only async-signal-safe
 * calls, nothing allocated. */
#ifndef HERD_SPAWN_H
#define HERD_SPAWN_H

#include <sys/types.h>

/* In the child: leads its own process group, dies (SIGKILL) with parent
 * (returns -1 when parent is already gone), every signal back to its
 * default action and unblocked, stdin from /dev/null, stdout to out_fd
 * and stderr to err_fd.  Returns 0, or -1: the caller _exit()s. */
int spawn_child_setup(pid_t parent, int out_fd, int err_fd);

/* Why a child could not become its program, for whoever started it.
 * The parent makes a pipe with O_CLOEXEC and keeps the read end; the
 * child writes one report and _exit()s when a step fails.  A successful
 * exec closes the write end: EOF without a report means the program runs
 * (the self-pipe of posix_spawn implementations).  Nobody else learns
 * the errno of a failed exec: the child can only exit 127. */
enum spawn_step {
	SPAWN_STEP_SETUP = 1, /* process group, fds, signals */
	SPAWN_STEP_WORKDIR,   /* chdir into the working directory */
	SPAWN_STEP_CPUS,      /* sched_setaffinity to the planned cpus */
	SPAWN_STEP_EXEC,      /* execve itself */
};

struct spawn_report {
	int step; /* enum spawn_step */
	int err;  /* its errno */
};

/* In the child: writes the report to fd (async-signal-safe; errors are
 * ignored, the exit status still tells). */
void spawn_report_write(int fd, enum spawn_step step, int err);

/* In the parent, on the read end (non-blocking or not): returns 1 with r
 * filled, 0 at EOF without a report (the exec succeeded), -1 when nothing
 * can be read yet (EAGAIN/EINTR). */
int spawn_report_read(int fd, struct spawn_report *r);

/* "cannot exec", "cannot enter the workdir", ... for a message. */
const char *spawn_step_what(int step);

#endif
