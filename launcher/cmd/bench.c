/* cmd/bench.c — `herd bench JOB.yaml [--sizes LIST] [--iters N]`: a
 * network probe between the job's nodes.  It runs the job as `herd run`
 * would (same nodes, transport, binding and environment) but with one
 * rank per node, no restarts and no checkpoints, and with
 * `herd-agent probe` (agent/probe.c, a timed TCP ring all-reduce) as the
 * command; rank 0 prints the table. */
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/ctl/ctl.h"
#include "launcher/hosts/resolve.h"
#include "herd/render.h"
#include "herd/spec.h"

static void bench_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd bench JOB.yaml [--sizes LIST] [--iters N] [-v]\n"
	    "\n"
	    "Measures the network between the job's nodes: one rank per\n"
	    "node runs a ring all-reduce over TCP (reduce-scatter then\n"
	    "all-gather, as NCCL's ring) on the addresses the job itself\n"
	    "uses, and rank 0 prints, per size, the time of one all-reduce\n"
	    "(the median round), the algorithm bandwidth and the bus\n"
	    "bandwidth (what each link carried, as nccl-tests report it),\n"
	    "and whether the sums were right.  Nodes, transport, ssh,\n"
	    "binding and launch.env come from the job; launch.command,\n"
	    "slots, restarts and checkpoints do not.\n"
	    "Events and logs go to a tree of their own, LOG.DIR/bench (with\n"
	    "its own latest): the job's log.dir/latest, and so herd status\n"
	    "JOB.yaml, still show the job's last run.  A busy MASTER_PORT\n"
	    "is named: set launch.master_port to a free one.\n"
	    "\n"
	    "  --sizes LIST  bytes per all-reduce, comma-separated, with K, M\n"
	    "                or G (default 8,64K,1M,16M; 4 bytes to 1G each)\n"
	    "  --iters N     timed rounds per size after one warm-up (5)\n"
	    "  -v            tag output [host:rank] as herd run -v does\n"
	    "  -h, --help    show this text\n"
	    "\n"
	    "Exit status: 0 success; 1 a node failed or a sum was wrong;\n"
	    "2 a bad job spec or usage.\n");
}

/* Sizes reach a shell command line: only digits, K/M/G and commas. */
static bool sizes_ok(const char *s)
{
	if (!*s || strlen(s) > 256)
		return false;
	for (; *s; s++)
		if (!strchr("0123456789KMGkmg,", *s))
			return false;
	return true;
}

/* The bench's own log tree: the job's log.dir ({{name}} the job's own
 * name, made absolute as herd run does) + "/bench", so that a bench never
 * moves the job's `latest`.  Returns a malloc'd path or NULL after saying
 * why. */
static char *bench_log_dir(const struct spec *spec)
{
	const struct render_var vars[] = {{"name", spec->name}};
	struct herd_err err;
	char cwd[4096], *dir, *out = NULL;

	herd_err_clear(&err);
	if (!(dir = render_text(spec->log.dir, vars, 1, 0, &err))) {
		cli_error("bench: log.dir: %s", err.text);
		return NULL;
	}
	if (dir[0] == '/' ? asprintf(&out, "%s/bench", dir) < 0
			  : !getcwd(cwd, sizeof(cwd)) ||
				asprintf(&out, "%s/%s/bench", cwd, dir) < 0) {
		cli_error("bench: log.dir: cannot make %s absolute", dir);
		out = NULL;
	}
	free(dir);
	return out;
}

/* Turns the job into the probe. */
static int make_probe(struct spec *spec, const char *sizes, int iters)
{
	char *cmd = NULL, *name = NULL, *log_dir = NULL;

	if (!(log_dir = bench_log_dir(spec)))
		return 1;
	if (asprintf(&cmd, "exec \"$HERD_AGENT\" probe --sizes %s --iters %d",
		     sizes, iters) < 0 ||
	    asprintf(&name, "%s-bench", spec->name) < 0) {
		free(cmd);
		free(log_dir);
		cli_error("out of memory");
		return 1;
	}
	free(spec->log.dir);
	spec->log.dir = log_dir;
	free(spec->launch.command);
	spec->launch.command = cmd;
	free(spec->name);
	spec->name = name;
	spec->launch.mode = SPEC_MODE_PLAIN;
	spec->nodes.slots = 1;
	spec->restart.max = 0;
	spec->health.progress_timeout_ms = -1;
	free(spec->checkpoint.dir);
	spec->checkpoint.dir = NULL;
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"sizes", required_argument, NULL, 's'},
	    {"iters", required_argument, NULL, 'i'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *sizes = "8,64K,1M,16M";
	struct ctl_options opt = {0};
	char agent[PATH_MAX + 16], *end;
	struct spec *spec;
	struct resolved res = {0};
	int ch, iters = 5, status;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			sizes = optarg;
			if (!sizes_ok(sizes)) {
				cli_error("bench: --sizes takes byte counts "
					  "with K, M or G, comma-separated "
					  "(8,64K,1M), not '%s'",
					  sizes);
				return EXIT_SPEC;
			}
			break;
		case 'i':
			iters = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || iters < 1 ||
			    iters > 1000) {
				cli_error("bench: --iters takes 1 to 1000, "
					  "not '%s'",
					  optarg);
				return EXIT_SPEC;
			}
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			bench_usage(stdout);
			return 0;
		default:
			return cli_bad_option("bench", cli_bad_word(argc, argv),
					      bench_usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("bench",
				 "expected one job file (JOB.yaml), "
				 "got %d arguments",
				 argc - optind);
	status = cli_job_open("bench", argv[optind], agent, sizeof(agent),
			      &spec, &res);
	opt.agent_path = agent;
	opt.untagged = !opt.verbose;
	if (status == 0)
		status = make_probe(spec, sizes, iters);
	if (status == 0)
		status = ctl_run(spec, &res, &opt);
	resolve_free(&res);
	spec_free(spec);
	return status;
}
