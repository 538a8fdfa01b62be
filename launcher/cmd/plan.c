/* cmd/plan.c — `herd plan JOB.yaml [--topology FILE.xml] [--json]`: the
 * binding of every rank (GPU, NIC, CPUs) without starting anything.
 *
 * With --topology every node is planned with that hwloc XML and no node
 * is contacted.  Without it this machine is planned from its live
 * topology, and remote nodes from what their agents report (herd connects
 * as `herd run` does, plans, prints, and starts no rank).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "herd/bind.h"
#include "herd/spec.h"
#include "herd/topo.h"
#include "launcher/hosts/resolve.h"

/* Output could not be written, a discovery command failed, or memory ran
 * out: not the user's input. */
#define EXIT_RUNTIME 1

#include "launcher/ctl/ctl.h"
#include "launcher/model/plan.h"

static void plan_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd plan JOB.yaml [--topology FILE.xml] [--json]\n"
	    "\n"
	    "Prints, for every rank of the job, the node it runs on and\n"
	    "its binding: GPU (index in PCI bus order and bus id), RDMA\n"
	    "NIC (name:port, as NCCL_IB_HCA takes it), its netdev, and\n"
	    "the CPUs (a Linux cpu list).  Nothing is started.\n"
	    "\n"
	    "  --topology FILE  plan every node with this hwloc XML\n"
	    "                   (lstopo --of xml); no node is contacted\n"
	    "  --json           an array of objects with keys rank, node,\n"
	    "                   host, local_rank, gpu, gpu_bus_id, nic,\n"
	    "                   netdev, cpus (null where none)\n"
	    "  -h, --help       show this text\n"
	    "\n"
	    "Without --topology, this machine is planned from its own\n"
	    "topology and remote nodes from what their agents report\n"
	    "(herd connects as `herd run` does; no rank is started).\n"
	    "\n"
	    "Exit status: 0 success; 1 output or a discovery command\n"
	    "failed; 2 a bad job spec, topology, topology_file or usage.\n");
}

/* True when host names this machine. */
static bool is_local(const char *host)
{
	char me[HOST_NAME_MAX + 1];

	if (!strcmp(host, "localhost") || !strcmp(host, "127.0.0.1"))
		return true;
	if (gethostname(me, sizeof(me)) < 0)
		return false;
	me[sizeof(me) - 1] = '\0';
	return !strcmp(host, me);
}

/* Without --topology, remote nodes are planned from what their agents
 * report: herd connects, plans as `herd run` would, prints, and stops
 * the agents without starting a rank. */
static int plan_from_agents(struct spec *spec, struct resolved *res,
			    bool json)
{
	struct ctl_options opt = {.plan_only = true, .plan_json = json};
	char agent[PATH_MAX + 16];

	if (cli_agent_path(agent, sizeof(agent)) < 0) {
		cli_error("plan: cannot find herd-agent next to herd (%s)",
			  agent);
		return EXIT_RUNTIME;
	}
	opt.agent_path = agent;
	return ctl_run(spec, res, &opt);
}

/* Parses the arguments; returns -1 (status set) to stop. */
static int plan_args(int argc, char **argv, const char **job,
		     const char **topology, bool *json, int *status)
{
	static const struct option opts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"topology", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			plan_usage(stdout);
			*status = 0;
			return -1;
		case 'j':
			*json = true;
			break;
		case 't':
			*topology = optarg;
			break;
		case ':':
			cli_error("plan: --topology needs a file");
			return -1;
		default:
			cli_bad_option("plan", cli_bad_word(argc, argv), plan_usage);
			return -1;
		}
	}
	if (argc - optind > 1) {
		cli_error("plan: one job file, not '%s' and '%s'", argv[optind],
			  argv[optind + 1]);
		return -1;
	}
	if (argc - optind < 1) {
		cli_usage("plan", "expected a job file (JOB.yaml)");
		return -1;
	}
	*job = argv[optind];
	return 0;
}

int cmd_plan(int argc, char **argv)
{
	const char *job = NULL, *topology = NULL;
	bool json = false;
	struct spec *spec = NULL;
	struct resolved res = {0};
	struct bind_platform *platform = NULL;
	struct topo *topo = NULL;
	struct node_plan *np = NULL;
	struct bind_opts opts;
	struct herd_err err;
	size_t n_nodes = 0;
	int status = EXIT_SPEC;

	herd_err_clear(&err);
	if (plan_args(argc, argv, &job, &topology, &json, &status) < 0)
		goto out;
	spec = spec_load(job, &err);
	if (!spec) {
		cli_error("%s", err.text);
		goto out;
	}
	/* bind.topology_file (and the rest) next to the job file, for the
	 * agents' plan too: the controller loads it as it stands. */
	if (cli_job_paths(spec, job) < 0) {
		cli_error("plan: cannot resolve paths next to %s", job);
		status = EXIT_RUNTIME;
		goto out;
	}
	if ((status = cli_resolve(spec, &res)) != 0)
		goto out;
	status = EXIT_SPEC;
	if (!topology)
		for (size_t i = 0; i < res.nodes->count; i++)
			if (!is_local(res.nodes->entries[i].host)) {
				status = plan_from_agents(spec, &res, json);
				goto out;
			}
	if (spec->bind.topology_file &&
	    !(platform = bind_platform_load(spec->bind.topology_file, &err))) {
		cli_error("plan: %s", err.text);
		goto out;
	}
	bind_opts_from_spec(&opts, spec, platform);
	topo = topo_load(topology, 0, &err);
	if (!topo) {
		cli_error("plan: %s", err.text);
		goto out;
	}
	np = calloc(res.nodes->count, sizeof(*np));
	if (!np) {
		cli_error("plan: out of memory");
		status = EXIT_RUNTIME;
		goto out;
	}
	for (size_t i = 0; i < res.nodes->count; i++) {
		const struct hostfile_entry *e = &res.nodes->entries[i];

		np[i].host = e->host;
		n_nodes = i + 1;
		if (plan_ranks(topo, e->slots, &opts, &np[i].ranks,
			       &np[i].n_ranks, &err) < 0) {
			cli_error("plan: node %s: %s", e->host, err.text);
			goto out;
		}
	}
	if (plan_print(np, n_nodes, json) < 0) {
		cli_error("plan: cannot write the plan: %s", strerror(errno));
		status = EXIT_RUNTIME;
		goto out;
	}
	status = 0;
out:
	for (size_t i = 0; np && i < n_nodes; i++) {
		bind_ranks_release(np[i].ranks, (size_t)np[i].n_ranks);
		free(np[i].ranks);
	}
	free(np);
	topo_free(topo);
	bind_platform_free(platform);
	resolve_free(&res);
	spec_free(spec);
	return status;
}
