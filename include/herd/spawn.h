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

#endif
