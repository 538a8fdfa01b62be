/* cmd/hostlist.c — `herd hostlist [--expand|--compress] EXPR...`: the
 * hostlist module on the command line, printing what `scontrol show
 * hostnames` (one host a line) or `scontrol show hostlist` prints. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/hostlist.h"
#include "launcher/cli.h"

/* Expressions longer than this are quoted shortened in error messages. */
#define QUOTE_MAX 64

static void usage(FILE *out)
{
	fprintf(out,
		"usage: herd hostlist [--expand|--compress] EXPR...\n\n"
		"Expands Slurm hostlist expressions such as node[01-04] into "
		"one host a line\n(--expand, the default), or compresses "
		"host names into one expression\n(--compress).  Several "
		"EXPRs are joined with ','.  Expansion and compression "
		"are libslurm's,\nafter a strict check that names the "
		"column of a mistake; one range\nholds at most 65536 hosts "
		"(as in Slurm), a list at most 1000000.\n\n"
		"  --expand     one host a line (the default)\n"
		"  --compress   one expression for all the hosts\n"
		"  -h, --help   show this text\n\n"
		"Exit status: 0; 2 a bad expression or bad usage.\n");
}

int cmd_hostlist(int argc, char **argv)
{
	/* '+': the options come first; the first EXPR ends them. */
	static const struct option opts[] = {
	    {"expand", no_argument, NULL, 'e'},
	    {"compress", no_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct hostlist *hl = NULL;
	struct herd_err err;
	bool compress = false;
	int first, c, rc = EXIT_SPEC;
	char *s = NULL;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			compress = false;
			break;
		case 'c':
			compress = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cli_bad_option("hostlist",
					      cli_bad_word(argc, argv), usage);
		}
	}
	first = optind;
	if (first >= argc) {
		cli_error("hostlist: expected at least one EXPR (try 'herd "
			  "hostlist --help')");
		return EXIT_SPEC;
	}
	hl = hostlist_new();
	if (!hl) {
		cli_error("hostlist: out of memory");
		goto out;
	}
	herd_err_clear(&err);
	for (int i = first; i < argc; i++) {
		if (hostlist_push(hl, argv[i], &err)) {
			int n = (int)strlen(argv[i]);

			cli_error("hostlist: '%.*s%s': %s",
				  n > QUOTE_MAX ? QUOTE_MAX : n, argv[i],
				  n > QUOTE_MAX ? "..." : "", err.text);
			goto out;
		}
	}
	if (compress) {
		s = hostlist_compress(hl);
		if (!s) {
			cli_error("hostlist: out of memory");
			goto out;
		}
		puts(s);
	} else {
		for (size_t i = 0; i < hostlist_count(hl); i++) {
			fputs(hostlist_nth(hl, i), stdout);
			putchar('\n');
		}
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("hostlist: writing output failed");
		rc = 1;
		goto out;
	}
	rc = 0;
out:
	free(s);
	hostlist_free(hl);
	return rc;
}
