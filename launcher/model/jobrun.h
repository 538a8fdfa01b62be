/* model/jobrun.h — what `herd run` leaves behind so that `herd list`,
 * `herd status`, `herd logs` and `herd run --resume` find the job again:
 * its registry entry (herd/jobreg.h), and in the run
 * directory job.yaml (the exact bytes of the job file) and run.json
 * ({"id", "name", "job_file", "cwd", "herd_version", "verbose",
 * "started", "resumed_from"}).
 */
#ifndef HERD_LAUNCHER_JOBRUN_H
#define HERD_LAUNCHER_JOBRUN_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/err.h"

struct ctl_options;
struct logtree;
struct resolved;
struct spec;

/* herd run's job: the file, or with resume (a run directory) the old
 * run's job.yaml and settings.  Reads the job file's bytes once (kept in
 * opt->job_text: what runs is what job.yaml holds), parses them, makes
 * relative paths absolute against the job file's directory (as
 * cli_job_open()), resolves the nodes; on resume first changes to the
 * old run's cwd and takes its -v.  Fills opt->job_file, job_text,
 * job_len, resumed_from, agent_path (agent, agent_len).  A resume is
 * refused while the old run's controller answers (or its pid is a herd),
 * while another herd resumes it (RUNDIR/resume.lock, flock()ed until
 * jobrun_close(): held for the life of the controller, a daemon's too),
 * and, unless force, once it ended (job_end) or after a run that resumed
 * it already (the lock names that run).  On failure says
 * why in one line and returns the exit status (2 input, 1 other); 0 on
 * success.  jobrun_close() frees what it kept. */
int jobrun_open(const char *job_file, const char *resume, bool force,
		struct ctl_options *opt, char *agent, size_t agent_len,
		struct spec **spec, struct resolved *res);
void jobrun_close(struct ctl_options *opt);

/* Once the run directory exists (ctl_start): writes job.yaml and
 * run.json into it (logtree_create(): new files, log.mode, no links
 * followed) and the registry entry (pid = this process, host NULL,
 * sock: the control socket the run listens on, NULL for none).
 * Does nothing when opt->job_file is NULL (plan, bench).  Returns 0 or
 * -1 with err; the caller decides (a foreground run warns and goes on). */
int jobrun_register(struct logtree *lt, const char *name,
		    const struct ctl_options *opt, bool detached,
		    const char *sock, struct herd_err *err);

#endif
