/* view/jobview.h — what the views (herd list, status, logs, top, report) share
 * about a job of the registry (herd/jobreg.h): which run directory JOB
 * names, and whether its controller still runs. */
#ifndef HERD_LAUNCHER_JOBVIEW_H
#define HERD_LAUNCHER_JOBVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/err.h"
#include "herd/jobreg.h"
#include "launcher/view/remote.h"

struct runlog;

/* JOB as the views take it: a run directory, a log.dir (its latest run),
 * a job file (its log.dir/latest, log.dir rendered and made absolute as
 * herd run does), a job id or a job name (jobreg_find()).  Fills e
 * (jobreg_entry_clear()): the registry's entry for the run when there is
 * one, else one made up from the directory (pid 0).  For an entry with a
 * host the run directory is not looked at (the caller proxies).  On
 * failure says why in one line ("herd: CMD: ...") and returns -1 with
 * *status the exit status (2: no such job or bad job file, 1: unreadable);
 * else 0. */
int jobview_resolve(const char *cmd, const char *job, struct jobreg_entry *e,
		    int *status);

enum jobview_state {
	JOBVIEW_RUNNING, /* no job_end, controller alive (or not known) */
	JOBVIEW_ENDED,	 /* job_end written */
	JOBVIEW_LOST,	 /* no job_end, and its controller is gone */
};

/* Whether the controller of e runs: its socket answers, or (no socket
 * there) its pid is a herd.  1 alive, 0 gone, -1 not known (no pid: an
 * unregistered run directory; an entry with a host; a controller on
 * another machine that shares this home). */
int jobview_controller_alive(const struct jobreg_entry *e);

/* Removes the socket a dead controller of e left (kill -9, the OOM
 * killer): only a socket of this user's, in a directory of this user's
 * that nobody else can write, that refuses connections.  Returns 1 when
 * it removed one, else 0. */
int jobview_sock_forget(const struct jobreg_entry *e);

/* The state of a run read into rl, with e's controller. */
enum jobview_state jobview_state(const struct jobreg_entry *e,
				 const struct runlog *rl);

/* "running", "ended", "lost". */
const char *jobview_state_name(enum jobview_state s);

#endif
