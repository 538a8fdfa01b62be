/* rundir.c — finds and opens the run directory the views read; see
 * rundir.h. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "herd/render.h"
#include "herd/runlog.h"
#include "herd/spec.h"
#include "rundir.h"

/* log.dir of the job file at path, rendered ({{name}}) and made absolute
 * against the current directory, as herd run makes it.  NULL after saying
 * why. */
static char *job_log_dir(const char *cmd, const char *path, int *status)
{
	struct herd_err err;
	struct spec *spec;
	char *dir = NULL, *abs = NULL, cwd[PATH_MAX];

	herd_err_clear(&err);
	spec = spec_load(path, &err);
	if (!spec) {
		fprintf(stderr, "%s\n", err.text);
		*status = EXIT_SPEC;
		return NULL;
	}
	{
		const struct render_var vars[] = {{"name", spec->name}};

		dir = render_text(spec->log.dir, vars, 1, 0, &err);
	}
	spec_free(spec);
	if (!dir) {
		cli_error("%s: %s: log.dir: %s", cmd, path, err.text);
		*status = EXIT_SPEC;
		return NULL;
	}
	if (dir[0] == '/')
		return dir;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, dir) < 0) {
		cli_error("%s: cannot make %s absolute", cmd, dir);
		*status = 1;
		abs = NULL;
	}
	free(dir);
	return abs;
}

static int has_file(const char *dir, const char *name)
{
	char p[PATH_MAX];

	return snprintf(p, sizeof(p), "%s/%s", dir, name) < (int)sizeof(p) &&
	       access(p, F_OK) == 0;
}

struct runlog *rundir_open(const char *cmd, const char *arg,
			   uint64_t metrics_tail, int *status)
{
	struct runlog *rl = NULL;
	struct herd_err err;
	char *dir = NULL, *latest = NULL;
	struct stat st;

	*status = 1;
	if (stat(arg, &st) < 0) {
		cli_error("%s: %s: %s", cmd, arg, strerror(errno));
		*status = errno == ENOENT ? EXIT_SPEC : 1;
		return NULL;
	}
	if (S_ISDIR(st.st_mode)) {
		dir = strdup(arg);
	} else if (S_ISREG(st.st_mode)) {
		char *ld = job_log_dir(cmd, arg, status);

		if (!ld)
			return NULL;
		if (asprintf(&dir, "%s/latest", ld) < 0)
			dir = NULL;
		free(ld);
		if (dir && access(dir, F_OK) < 0) {
			cli_error("%s: %s: no run yet (%s: %s)", cmd, arg, dir,
				  strerror(errno));
			free(dir);
			return NULL;
		}
	} else {
		cli_error("%s: %s: not a run directory or a job file", cmd,
			  arg);
		*status = EXIT_SPEC;
		return NULL;
	}
	if (!dir) {
		cli_error("%s: out of memory", cmd);
		return NULL;
	}
	/* A log.dir: take its newest run. */
	if (!has_file(dir, "events.jsonl") && !has_file(dir, "metrics.jsonl") &&
	    has_file(dir, "latest") &&
	    asprintf(&latest, "%s/latest", dir) >= 0) {
		free(dir);
		dir = latest;
	}
	/* Name the run itself, not latest (which moves at the next run). */
	{
		char *real = realpath(dir, NULL);

		if (real) {
			free(dir);
			dir = real;
		}
	}
	herd_err_clear(&err);
	rl = runlog_open(dir, &err);
	if (!rl) {
		cli_error("%s: %s", cmd, err.text);
		*status = EXIT_SPEC;
		goto out;
	}
	if (metrics_tail)
		runlog_metrics_tail(rl, metrics_tail);
	if (runlog_update(rl, &err) < 0) {
		cli_error("%s: %s", cmd, err.text);
		runlog_free(rl);
		rl = NULL;
		goto out;
	}
	*status = 0;
out:
	free(dir);
	return rl;
}
