/* report.h — sections of `herd report` (cmd/report.c) kept in files of
 * their own. */
#ifndef HERD_LAUNCHER_REPORT_H
#define HERD_LAUNCHER_REPORT_H

#include <stdio.h>

#include "herd/runlog.h"

/* "Failures": what each failure cost (detect, rejoin or restart,
 * restore, steps redone; failcost.h) as an HTML table, with the means;
 * nothing when the run had none.  t0_ms: the report's time zero. */
void report_failures(FILE *out, const struct runlog *rl, double t0_ms);

#endif
