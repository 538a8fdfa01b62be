/* rundir.c — finds and opens the run directory the views read; see
 * rundir.h. */
#include <stdio.h>
#include <stdlib.h>

#include "launcher/cli.h"
#include "herd/runlog.h"
#include "launcher/view/jobview.h"
#include "launcher/view/rundir.h"

struct runlog *rundir_read(const char *cmd, const char *dir,
			   uint64_t metrics_tail, int *status)
{
	struct runlog *rl;
	struct herd_err err;

	*status = 1;
	herd_err_clear(&err);
	rl = runlog_open(dir, &err);
	if (!rl) {
		cli_error("%s: %s", cmd, err.text);
		*status = EXIT_SPEC;
		return NULL;
	}
	if (metrics_tail)
		runlog_metrics_tail(rl, metrics_tail);
	if (runlog_update(rl, &err) < 0) {
		cli_error("%s: %s", cmd, err.text);
		runlog_free(rl);
		return NULL;
	}
	*status = 0;
	return rl;
}

struct runlog *rundir_open(const char *cmd, const char *arg,
			   uint64_t metrics_tail, int *status)
{
	struct jobreg_entry e;
	struct runlog *rl;

	if (jobview_resolve(cmd, arg, &e, status) < 0)
		return NULL;
	rl = rundir_read(cmd, e.run_dir, metrics_tail, status);
	jobreg_entry_clear(&e);
	return rl;
}
