/* cmd/report.c — `herd report RUNDIR|JOB.yaml -o report.html`: one
 * self-contained HTML file (no script, no network: inline CSS and SVG
 * drawn by svgplot.h) with the run's summary, loss and tokens/s over
 * time, GPU utilisation and network per node as small multiples, and the
 * timeline of attempts, failures, evictions, spares and checkpoints.
 *
 * Size is bounded for runs of any length: each line is at most
 * SVGPLOT_POINTS_MAX points, at most REPORT_NODES_MAX nodes get small
 * multiples, the event table lists at most RUNLOG_MARKS_MAX rows.  The
 * file is written beside its destination and renamed over it, so a
 * reader never sees half a report.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/runlog.h"
#include "herd/svgplot.h"
#include "launcher/cli.h"
#include "launcher/view/report.h"
#include "launcher/view/rundir.h"

static void report_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd report JOB|RUNDIR|LOGDIR|JOB.yaml -o report.html\n"
	    "                   [--time] [--one-run]\n"
	    "\n"
	    "JOB is a job's id or name (herd list shows them).\n"
	    "Writes one self-contained HTML file (no script, no network) "
	    "about\n"
	    "a run, from its events.jsonl and metrics.jsonl: a summary (each\n"
	    "attempt's world size and how it ended), loss against step and\n"
	    "tokens/s over time (each sample faint, a moving average bold;\n"
	    "attempts, node failures and evictions marked as dashed lines),\n"
	    "GPU utilisation and network rx/tx per node as small multiples\n"
	    "(CPU %% and RSS for a node without GPUs; at most %d nodes, the\n"
	    "slowest among them), the job's command and settings from its\n"
	    "job.yaml with the checkpoints written, and the timeline:\n"
	    "attempts (a stop by the user in grey, not as a failure), node\n"
	    "failures, evictions, spares used and checkpoints resumed\n"
	    "from.  Plots are SVG drawn by herd, at most %d points a\n"
	    "line.  Works while the job runs (a snapshot) and after it\n"
	    "ended.\n"
	    "\n"
	    "  -o, --output FILE  where to write the report (required; '-'\n"
	    "                     for stdout)\n"
	    "  --time             plot loss against time, not step\n"
	    "  --one-run          only this run (by default a run resumed\n"
	    "                     with herd run --resume is shown with the\n"
	    "                     runs before it, followed through their\n"
	    "                     run.json)\n"
	    "  -h, --help         show this text\n"
	    "\n"
	    "Exit status: 0 written; 1 a file could not be read or written;\n"
	    "2 bad usage, a missing or non-run directory, or a bad job file.\n",
	    REPORT_NODES_MAX, SVGPLOT_POINTS_MAX);
}

/* Writes the report to a temporary file beside path and renames it over
 * path.  Returns 0, or -1 after saying why. */
static int write_file(const char *path, const struct runlog *rl,
		      const struct report_opts *o)
{
	char *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, rc = -1;
	mode_t um;

	if (!strcmp(path, "-"))
		return report_write(stdout, rl, o) < 0 || fflush(stdout) ? -1
									 : 0;
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		cli_error("report: out of memory");
		goto out;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	/* A report is for reading: 0666 less the umask, like any file. */
	um = umask(0);
	umask(um);
	(void)fchmod(fd, 0666 & ~um);
	f = fdopen(fd, "w");
	if (!f) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (report_write(f, rl, o) < 0 || fflush(f) != 0 ||
	    fsync(fileno(f)) < 0) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	if (fclose(f) != 0) {
		f = NULL;
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	f = NULL;
	if (rename(tmp, path) < 0) {
		cli_error("report: cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	rc = 0;
out:
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	return rc;
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"time", no_argument, NULL, 't'},
	    {"one-run", no_argument, NULL, '1'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *output = NULL;
	struct runlog *rl;
	struct report_opts ro = {0};
	bool one_run = false;
	char *dirs[REPORT_RUNS_MAX], *names = NULL, *real = NULL;
	size_t n_runs = 0;
	int c, status;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case 't':
			ro.by_time = true;
			break;
		case '1':
			one_run = true;
			break;
		case 'h':
			report_usage(stdout);
			return 0;
		default:
			return cli_bad_option("report", cli_bad_word(argc, argv),
					      report_usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("report",
				 "expected one JOB (%s), got %d "
				 "arguments",
				 "id, name, run directory or JOB.yaml",
				 argc - optind);
	if (!output)
		return cli_usage("report",
				 "say where to write it: -o report.html");
	rl = rundir_open("report", argv[optind], 0, &status);
	if (!rl)
		return status;
	/* A run directory's real path: its resumed_from names a sibling of
	 * the directory itself, not of a `latest` link. */
	real = realpath(rl->dir, NULL);
	ro.job_dir = rl->dir;
	if (!one_run && real && (n_runs = report_run_chain(real, dirs)) > 1) {
		struct runlog *all = report_merge_runs(dirs, n_runs, &status);

		if (!all)
			goto out;
		names = report_run_names(dirs, n_runs);
		ro.runs = names;
		status = write_file(output, all, &ro) < 0 ? 1 : 0;
		runlog_free(all);
	} else {
		status = write_file(output, rl, &ro) < 0 ? 1 : 0;
	}
out:
	for (size_t i = 0; i < n_runs; i++)
		free(dirs[i]);
	free(names);
	free(real);
	if (rl)
		runlog_free(rl);
	return status;
}
