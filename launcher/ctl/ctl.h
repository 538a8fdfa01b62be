/* ctl/ctl.h — the job controller: connect, launch, run, end (the
 * resolved nodes to the job's end).  Its states and transitions are one
 * table, ctl_table[] in ctl/table.c.
 */
#ifndef HERD_LAUNCHER_CTL_H
#define HERD_LAUNCHER_CTL_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/spec.h"

struct ctl_options {
	bool verbose;		/* -v: prefix output with [host:rank] */
	bool untagged;		/* herd bench: output as the ranks wrote it */
	bool dry_run;		/* print the plan of every rank, start nothing */
	const char *agent_path;	/* herd-agent next to bin/herd */
	bool plan_only;		/* herd plan: connect, plan, print, stop */
	bool plan_json;		/* herd plan --json */
	/* herd check: connect every node and spare, run the
	 * health gate and the network probe, print, stop. */
	bool check_only;
	bool check_json;	/* herd check --json */
	bool check_no_net;	/* herd check --no-net */
	bool no_status;		/* herd run --no-status: no status area */
	/* herd run --detach: herd's messages go to RUN-ID/herd.log once the
	 * run dir exists, no rank output on stdout, a control socket that
	 * cannot be made is fatal.  *detach_fd: the pipe to the launching
	 * herd, told "log\tRUNDIR\n" once herd.log takes the messages,
	 * then "ok\tID\tRUNDIR\tBYTES\n" and closed (set to -1) when the
	 * job is up (ctl/sock.c). */
	bool detach;
	int *detach_fd;
	/* --no-wait: the job counts as up once the run dir, registry
	 * entry and socket exist; else once its first attempt started
	 * (until then the launching herd shows herd.log as it grows). */
	bool detach_no_wait;
	/* herd run only (model/jobrun.h): the job is registered with these;
	 * NULL job_file (plan, bench): not registered. */
	const char *job_file;	  /* absolute, as given */
	const char *job_text;	  /* its exact bytes (RUNDIR/job.yaml) */
	size_t job_len;
	const char *resumed_from; /* --resume: the old run's id */
};

/* Runs the job to its end.  Returns herd run's exit status:
 * 0 when every rank of the last attempt exited 0, else the first failing
 * rank's status (128+signal), 1 for failures outside ranks, 2 for input
 * errors.  Prints progress and errors to stderr, rank output to
 * stdout/stderr. */
struct resolved;
/* nodes: the job's nodes, resolved once by the caller (resolve.h), who
 * frees them after. */
int ctl_run(struct spec *spec, struct resolved *nodes,
	    const struct ctl_options *opt);

#endif
