/* cmd_run.c — `herd run JOB.yaml [--dry-run] [-v]`. */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "jobrun.h"
#include "resolve.h"
#include "herd/spec.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: herd run JOB.yaml [--dry-run] [-v] [--no-status]\n"
		"       herd run --resume RUNDIR [--no-status]\n\n"
		"Starts the job on every node and runs it like one program:\n"
		"output prefixed [rank] (-v: [host:rank]), Ctrl-C forwarded\n"
		"to every rank (twice: kill at once), exit status of the\n"
		"first failing rank.  Each run's logs and events.jsonl go to\n"
		"a new directory in log.dir (printed at the start);\n"
		"log.dir/latest points at the newest; metrics.jsonl there\n"
		"holds the job's training, GPU and network metrics.  On a\n"
		"terminal the last line shows the job's status, redrawn\n"
		"each second.\n\n"
		"  --dry-run   print the nodes, command and ranks; start nothing\n"
		"  -v          prefix output with host and rank\n"
		"  --no-status no status line on the terminal (it is off\n"
		"              anyway when stdout is not a terminal)\n"
		"  --resume RUNDIR  run an earlier run's job again: its job\n"
		"              file as it was (RUNDIR/job.yaml), from its\n"
		"              directory, with its -v; a new run directory,\n"
		"              from the newest complete checkpoint\n");
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"dry-run", no_argument, NULL, 'n'},
		{"verbose", no_argument, NULL, 'v'},
		{"no-status", no_argument, NULL, 'S'},
		{"resume", required_argument, NULL, 'R'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct ctl_options opt = {0};
	struct spec *spec;
	struct resolved res = {0};
	const char *resume = NULL;
	char agent[PATH_MAX + 16];
	int ch, status;

	while ((ch = getopt_long(argc, argv, "nvh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			opt.dry_run = true;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'S':
			opt.no_status = true;
			break;
		case 'R':
			resume = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_SPEC;
		}
	}
	if (optind != argc - (resume ? 0 : 1)) {
		usage(stderr);
		return EXIT_SPEC;
	}
	status = jobrun_open(resume ? NULL : argv[optind], resume, &opt, agent,
			     sizeof(agent), &spec, &res);
	if (status == 0)
		status = ctl_run(spec, &res, &opt);
	resolve_free(&res);
	spec_free(spec);
	jobrun_close(&opt);
	return status;
}
