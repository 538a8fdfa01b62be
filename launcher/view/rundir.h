/* rundir.h — what `herd status`, `herd top` and `herd report` are given:
 * a run directory (log.dir/RUN-ID), a log.dir (its `latest` is taken), a
 * job file (its log.dir/latest, log.dir rendered and made absolute as
 * `herd run` does: relative to the current directory), or a job id or
 * name of the registry (view/jobview.h). */
#ifndef HERD_LAUNCHER_RUNDIR_H
#define HERD_LAUNCHER_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

struct runlog;

/* What status and top read of metrics.jsonl: its end only.  The latest
 * line with per-node detail is at most a minute back (the contract's
 * downsampling), a few hundred KiB for a thousand nodes. */
#define VIEW_TAIL (8u << 20)

/* Finds the run directory named by arg and opens it (runlog_open) and
 * reads what is there (runlog_update).  On failure says why on stderr in
 * one line ("herd: CMD: ...") and returns NULL; *status is then the exit
 * status (2: bad usage or job file, 1: unreadable).  metrics_tail: as
 * runlog_metrics_tail() (0: read all). */
struct runlog *rundir_open(const char *cmd, const char *arg,
			   uint64_t metrics_tail, int *status);

/* As rundir_open() for the run directory dir itself. */
struct runlog *rundir_read(const char *cmd, const char *dir,
			   uint64_t metrics_tail, int *status);

#endif
