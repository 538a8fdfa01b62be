/* cmd/validate.c — `herd validate JOB.yaml [--print]`: parse and check a
 * job spec; with --print, write it back with every default filled in. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "launcher/cli.h"
#include "launcher/hosts/resolve.h"
#include "herd/spec.h"

static void validate_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: herd validate JOB.yaml [--print]\n\n"
	    "Checks a job spec.  Prints 'JOB.yaml: ok' and exits 0 when it\n"
	    "is valid; prints 'file:line:col: what was expected' on stderr\n"
	    "and exits 2 when it is not.  The hosts of nodes.hosts or\n"
	    "nodes.hostfile are resolved as herd run would (the file read,\n"
	    "nodes.count and nodes.spares applied; no node is contacted);\n"
	    "nodes.command, nodes.inventory and nodes.slurm are not run.\n\n"
	    "  -p, --print   print the resolved spec (every default filled\n"
	    "                in) as YAML on stdout instead of 'ok'\n"
	    "  -h, --help    show this help\n\n"
	    "Exit status: 0 valid; 1 --print could not write; 2 a bad job\n"
	    "spec or bad usage.\n");
}

int cmd_validate(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"print", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct herd_err err = {{0}};
	struct spec *spec = NULL;
	int print = 0, c, rc = EXIT_SPEC;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "ph", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			print = 1;
			break;
		case 'h':
			validate_usage(stdout);
			return 0;
		default:
			return cli_bad_option("validate", cli_bad_word(argc, argv),
					      validate_usage);
		}
	}
	if (argc - optind != 1)
		return cli_usage("validate", "expected one job file, got %d",
				 argc - optind);
	if (!(spec = spec_load(argv[optind], &err))) {
		fprintf(stderr, "%s\n", err.text);
		goto out;
	}
	/* The sources that only read: a hostfile that is missing or
	 * wrong, or a count above what it lists, fails here and not at
	 * herd run. */
	if (spec->nodes.source == SPEC_SOURCE_HOSTS ||
	    spec->nodes.source == SPEC_SOURCE_HOSTFILE) {
		struct resolved res;
		int r = resolve_nodes(spec, &res, &err);

		resolve_free(&res);
		if (r < 0) {
			fprintf(stderr, "%s\n", err.text);
			goto out;
		}
	}
	if (print) {
		if (spec_print(spec, stdout) < 0 || fflush(stdout) == EOF) {
			cli_error("validate: cannot write the spec: %m");
			rc = 1;
			goto out;
		}
	} else {
		printf("%s: ok\n", argv[optind]);
	}
	rc = 0;
out:
	spec_free(spec);
	return rc;
}
