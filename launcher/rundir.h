/* rundir.h — what `herd status`, `herd top` and `herd report` are given:
 * a run directory (log.dir/RUN-ID), a log.dir (its `latest` is taken) or
 * a job file (its log.dir/latest, log.dir rendered and made absolute as
 * `herd run` does: relative to the current directory). */
#ifndef HERD_LAUNCHER_RUNDIR_H
#define HERD_LAUNCHER_RUNDIR_H

#include <stddef.h>

struct runlog;

/* Finds the run directory named by arg and opens it (runlog_open) and
 * reads what is there (runlog_update).  On failure says why on stderr in
 * one line ("herd: CMD: ...") and returns NULL; *status is then the exit
 * status (2: bad usage or job file, 1: unreadable). */
struct runlog *rundir_open(const char *cmd, const char *arg, int *status);

#endif
