/* remote.h — jobs whose controller runs on another machine:
 * `herd run --detach --on HOST JOB.yaml` starts it there, and every
 * command on such a job (attach, stop, status, logs, list) runs there
 * through the proxy.
 *
 * Both open one libssh session to HOST with the job's ssh.* settings and
 * the nodes' host-key policy (transport/ssh/sshsess.c), make sure HOST's
 * ssh.agent_dir holds this very herd and herd-agent (transport/ssh/nodecache.c:
 * the same checked cache and upload as the agent's; here in a directory of
 * their own, herd-VERSION-HASH/, so the remote herd finds its agent next to
 * itself), and run the cached herd with every value one literal argument.
 * Nothing secret is ever put on a command line: the job file's bytes travel on
 * stdin, and the session authenticates with keys only.
 *
 * HOST must see the job file and log.dir at the same paths as this
 * machine (a shared file system), and reach the nodes with the same keys.
 */
#ifndef HERD_LAUNCHER_REMOTE_H
#define HERD_LAUNCHER_REMOTE_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/err.h"

struct jobreg_entry;

/* Set (to "1") in the environment of every herd the proxy runs on HOST:
 * that herd acts on HOST itself, even when the registry it reads (a
 * shared home) says the job is on HOST; see remote_entry_is_remote(). */
#define REMOTE_PROXIED_ENV "HERD_PROXIED"

/* The exit status of a proxied command when HOST could not be reached or
 * the session broke (ssh(1)'s). */
#define REMOTE_UNREACHABLE 255

/* Whether commands on e must go through remote_proxy(): its host is set
 * and this herd is not itself the one the proxy runs on that host. */
bool remote_entry_is_remote(const struct jobreg_entry *e);

/* `herd run --detach --on HOST JOB.yaml`: starts the job's controller on
 * host (`herd run --detach --json --job-stdin --cwd CWD --job-file ABS`,
 * the job file's bytes on stdin), registers it here with host and
 * remote_herd set, and prints what the remote herd printed (the job id,
 * its run dir, how to attach; json: one object {id, run_dir, host}).
 * The remote herd's messages go to stderr as they come.  Returns the exit
 * status to leave with: the remote herd's, or 1 / 2 after one line on
 * stderr naming HOST and what to do.  With resume (a run directory, job_path
 * NULL) it runs `herd run --detach --json --resume RUNDIR` there instead,
 * with the settings of RUNDIR/job.yaml (and --force when force). */
int remote_run(const char *host, const char *job_path, const char *resume,
	       bool json, bool no_wait, bool force);

/* Runs `REMOTE_HERD argv[0] ... argv[argc-1]` on e->host for the job of
 * e (argv[0] is the command: attach, stop, status, logs...), relaying
 * this process's stdin, stdout and stderr, and returns the remote exit
 * status; REMOTE_UNREACHABLE after one line on stderr when HOST cannot be
 * reached or stops answering.  Ctrl-C (SIGINT) here is sent to the remote
 * herd as SIGINT (attach: detaches, the job goes on); the session is
 * dropped when it does not end within a few seconds, or at a second
 * Ctrl-C (exit 130).  The job's settings for the session (ssh.*) come
 * from RUNDIR/job.yaml, else e->job_file, read from e->cwd. */
int remote_proxy(const struct jobreg_entry *e, int argc, char **argv);

/* For commands that reach a job through its control socket (attach,
 * stop): argv (argv[0] the command) names a job by its first argument
 * that is not an option; when the registry says that job runs on another
 * host (remote_entry_is_remote()), runs the command there through
 * remote_proxy() with the job's id in that place.  Returns the exit status
 * then, or -1 when the command is to run here (not one of those, no
 * such job, a job on this machine). */
int remote_forward(int argc, char **argv);

/* As remote_proxy(), without a terminal: stdin empty, stdout captured
 * into *out (malloc'd, NUL-terminated, at most max bytes: more is an
 * error), stderr's last line into err when the status is not 0.  For
 * views that need the remote answer as data (herd list's state).
 * Returns the remote exit status, or -1 with err (HOST unreachable, too
 * much output). */
int remote_query(const struct jobreg_entry *e, int argc, char **argv,
		 char **out, size_t max, struct herd_err *err);

/* `herd run --job-stdin`: the job file's bytes from stdin (at most
 * SPEC_FILE_MAX) into *text / *len (malloc'd); with cwd, changes to it
 * first.  Returns 0, or the exit status after one line on stderr. */
int remote_job_input(const char *cwd, bool job_stdin, char **text, size_t *len);

#endif
