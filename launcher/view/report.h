/* report.h — the page of `herd report` (view/report_*.c): the model of a
 * job's runs and the HTML written from it.  cmd/report.c parses the
 * command line and writes the file. */
#ifndef HERD_LAUNCHER_REPORT_H
#define HERD_LAUNCHER_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "herd/runlog.h"

/* Small multiples beyond this many nodes say nothing a person can read;
 * the slowest node is always among them. */
#define REPORT_NODES_MAX 64

/* 64: runs followed back through resumed_from. */
#define REPORT_RUNS_MAX 64

/* The runs of dir's job, oldest first (dir last), following each run's
 * resumed_from to its sibling directory; at most REPORT_RUNS_MAX.
 * Returns the count (1: dir alone); dirs[] are the caller's to free. */
size_t report_run_chain(const char *dir, char **dirs);

/* One model of every run of the chain: the first read as it is, the
 * later ones fed into it.  Returns NULL (said on stderr, *status the
 * exit status) on failure; the caller runlog_free()s it. */
struct runlog *report_merge_runs(char **dirs, size_t n, int *status);

/* "ID, ID, ..." of the runs (their directories' names), malloc'd; NULL
 * when out of memory. */
char *report_run_names(char **dirs, size_t n);

/* How the page is drawn. */
struct report_opts {
	bool by_time;	     /* --time: loss against time, not step */
	const char *job_dir; /* the run whose job.yaml is shown */
	const char *runs;    /* "ID, ID" when several runs are merged */
};

/* Writes the whole page for rl to out.  Returns 0, or -1 (out of memory,
 * a write error on out). */
int report_write(FILE *out, const struct runlog *rl,
		 const struct report_opts *o);

/* "Failures": what each failure cost (detect, rejoin or restart,
 * restore, steps redone; failcost.h) as an HTML table, with the means;
 * nothing when the run had none.  t0_ms: the report's time zero. */
void report_failures(FILE *out, const struct runlog *rl, double t0_ms);

#endif
