/* cmd/hosts.c — `herd hosts JOB.yaml`: resolve the nodes and print them as
 * a hostfile. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "launcher/cli.h"
#include "herd/hostfile.h"
#include "herd/spec.h"
#include "launcher/hosts/resolve.h"

/* A discovery command failed or timed out, or output could not be
 * written: not the user's input. */
#define EXIT_RUNTIME 1

static void hosts_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd hosts JOB.yaml [--format FMT] [--spares]\n"
	    "\n"
	    "Resolves the job's nodes (nodes.hosts, nodes.hostfile,\n"
	    "nodes.command, nodes.slurm or nodes.inventory; localhost\n"
	    "when none is given), applies nodes.count and nodes.spares,\n"
	    "and prints the nodes as a hostfile.\n"
	    "\n"
	    "  --format FMT  plain (default): one host a line\n"
	    "                slurm:     one compressed hostlist expression\n"
	    "                deepspeed: HOST slots=N\n"
	    "                openmpi:   HOST slots=N max_slots=N\n"
	    "                mpich:     HOST:N\n"
	    "  --spares      also print the spares after the nodes: after\n"
	    "                a '# spares' line (plain, deepspeed, openmpi,\n"
	    "                mpich), or as a second line (slurm); nothing\n"
	    "                is added when there are no spares\n"
	    "  -h, --help    show this text\n"
	    "\n"
	    "Slots are nodes.slots, else what the hostfile says; when\n"
	    "neither says (decided per node at launch), formats that carry\n"
	    "a count write 1.\n"
	    "\n"
	    "Exit status: 0 success; 1 a discovery command failed or timed\n"
	    "out, or the inventory could not be reached or answered an\n"
	    "HTTP error; 2 a bad job spec, hostfile, inventory answer or\n"
	    "usage.\n");
}

/* Writes the nodes, then (with spares) the spares, to stdout. */
static int print_hosts(const struct resolved *res, enum hostfile_format fmt,
		       bool spares, struct herd_err *err)
{
	if (hostfile_write(res->nodes, fmt, 1, stdout, err) < 0)
		return -1;
	if (spares && res->spares->count > 0) {
		if (fmt != HOSTFILE_SLURM && fputs("# spares\n", stdout) < 0)
			return herd_errprintf(err, "%s", strerror(errno));
		if (hostfile_write(res->spares, fmt, 1, stdout, err) < 0)
			return -1;
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		return herd_errprintf(err, "%s", strerror(errno));
	return 0;
}

int cmd_hosts(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"format", required_argument, NULL, 'f'},
	    {"spares", no_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	enum hostfile_format fmt = HOSTFILE_PLAIN;
	const char *job = NULL;
	bool spares = false;
	struct resolved res = {0};
	struct spec *spec = NULL;
	struct herd_err err;
	int status = EXIT_SPEC, c, f;

	herd_err_clear(&err);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			hosts_usage(stdout);
			status = 0;
			goto out;
		case 's':
			spares = true;
			break;
		case 'f':
			f = hostfile_format_parse(optarg);
			if (f <= HOSTFILE_AUTO) {
				cli_error("hosts: unknown format '%s' "
					  "(expected plain, slurm, deepspeed, "
					  "openmpi or mpich)",
					  optarg);
				goto out;
			}
			fmt = (enum hostfile_format)f;
			break;
		case ':':
			cli_error("hosts: --format needs a value (plain, "
				  "slurm, deepspeed, openmpi, mpich)");
			goto out;
		default:
			cli_bad_option("hosts", cli_bad_word(argc, argv), hosts_usage);
			goto out;
		}
	}
	if (argc - optind > 1) {
		cli_error("hosts: one job file, not '%s' and '%s'",
			  argv[optind], argv[optind + 1]);
		goto out;
	}
	if (argc - optind < 1) {
		cli_usage("hosts", "expected a job file (JOB.yaml)");
		goto out;
	}
	job = argv[optind];

	spec = spec_load(job, &err);
	if (!spec) {
		cli_error("%s", err.text);
		goto out;
	}
	if ((status = cli_resolve(spec, &res)) != 0)
		goto out;
	if (print_hosts(&res, fmt, spares, &err) < 0) {
		cli_error("hosts: cannot write the hostfile: %s", err.text);
		status = EXIT_RUNTIME;
		goto out;
	}
	status = 0;
out:
	resolve_free(&res);
	spec_free(spec);
	return status;
}
