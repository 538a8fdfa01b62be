/* cmd/check.c — `herd check JOB.yaml [--json] [--no-net] [-v]`: the health
 * gate that herd run applies before a start, on demand.  herd starts an agent
 * on every node and spare of the job as `herd run` would (same transport, ssh,
 * hostfile), asks each for its checks (CHECK, agent/check.c), runs the pairwise
 * network probe (NETPROBE) unless --no-net, prints a table and stops the
 * agents.  No rank is started and nothing is written: no log tree, no
 * job registration, no metrics. */
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "launcher/cli.h"
#include "launcher/ctl/ctl.h"
#include "herd/spec.h"
#include "launcher/hosts/resolve.h"

static void check_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd check JOB.yaml [--json] [--no-net] [-v]\n"
	    "\n"
	    "Checks every node and spare of the job before it runs: herd\n"
	    "starts the agents as herd run does and each node checks\n"
	    "  agent       the agent started and answered\n"
	    "  workdir     launch.workdir (or the agent's directory) exists,\n"
	    "              is writable and has health.min_free bytes free\n"
	    "  checkpoint  checkpoint.dir (or its closest existing parent)\n"
	    "              the same\n"
	    "  clock       the node's clock is within 1 s of herd's\n"
	    "  gpus        NVML sees the GPUs the topology shows, none with\n"
	    "              uncorrectable ECC errors or retired pages pending\n"
	    "  rdma        every RDMA port ACTIVE, at the highest rate the\n"
	    "              same port has on the other nodes\n"
	    "  net         the interface on MASTER_ADDR's network is up\n"
	    "  script      health.check_command (sh -c, 60 s at most) exits 0\n"
	    "  network     pairwise transfers around a ring of the nodes: a\n"
	    "              node or link under a fifth of the typical rate\n"
	    "The table shows ok, FAIL or skipped per check, the reason of "
	    "each\n"
	    "failure, and how many nodes are healthy.\n"
	    "\n"
	    "  --json      one JSON document instead of the table\n"
	    "  --no-net    skip the network probe\n"
	    "  -v          show the values and why checks were skipped\n"
	    "  -h, --help  show this text\n"
	    "\n"
	    "Exit status: 0 every node healthy; 1 a node is unhealthy or\n"
	    "could not be checked; 2 a bad job spec or usage.\n");
}

int cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"no-net", no_argument, NULL, 'n'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct ctl_options opt = {.check_only = true};
	char agent[PATH_MAX + 16];
	struct spec *spec;
	struct resolved res = {0};
	int ch, status;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			opt.check_json = true;
			break;
		case 'n':
			opt.check_no_net = true;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			check_usage(stdout);
			return 0;
		default:
			return cli_bad_option("check", cli_bad_word(argc, argv),
					      check_usage);
		}
	}
	if (optind != argc - 1)
		return cli_usage("check",
				 "expected one job file (JOB.yaml), "
				 "got %d arguments",
				 argc - optind);
	status = cli_job_open("check", argv[optind], agent, sizeof(agent),
			      &spec, &res);
	opt.agent_path = agent;
	if (status == 0) {
		/* A node that fails is a row of the table, not a retry. */
		spec->nodes.readmit_after_ms = -1;
		status = ctl_run(spec, &res, &opt);
	}
	resolve_free(&res);
	spec_free(spec);
	return status;
}
