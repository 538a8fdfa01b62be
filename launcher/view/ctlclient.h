/* view/ctlclient.h — the client side of a job's control socket (ctl/sock.c),
 * shared by herd attach and herd stop: find the job, connect, ask.
 */
#ifndef HERD_LAUNCHER_CTLCLIENT_H
#define HERD_LAUNCHER_CTLCLIENT_H

#include <limits.h>

#include "herd/err.h"

struct ctlclient_job {
	char id[256];
	char run_dir[PATH_MAX];
	char sock[108];
	long pid; /* the controller's pid when known, else 0 */
};

/* JOB (an id, a name or a run dir) -> the job.  Returns 0, or -1 with err
 * (one line for the user). */
int ctlclient_find(const char *job, struct ctlclient_job *out,
		   struct herd_err *err);

/* How long a controller may take to accept a client (attach, stop). */
#define CTLCLIENT_CONNECT_S 5

/* Connects to the job's socket and sends CTL_REQ {op}.  Returns the
 * connected fd (blocking, close-on-exec), or -1 with err: "JOB:
 * controller not running (pid N); `herd run --resume RUNDIR` starts it
 * again" when nobody listens, "has not answered in 5 s: stopped ... or
 * hung" when it does not accept within CTLCLIENT_CONNECT_S. */
int ctlclient_request(const struct ctlclient_job *j, const char *op,
		      struct herd_err *err);

struct proto_frame;
struct proto_reader;
/* The next frame from herd on the blocking fd, checked against the wire
 * table (CTL_MSG to a client).  Returns 1 with *f (the caller frees it),
 * 0 at the end of the stream, -1 with err. */
int ctlclient_next(int fd, struct proto_reader *r, struct proto_frame **f,
		   struct herd_err *err);

#endif
