/* main.c — bin/herd-agent: the per-node agent started by herd.  For now it
 * answers --version and --help; the event loop arrives with the launch
 * work (issue 3). */
#include <stdio.h>
#include <string.h>

#include "herd/version.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: herd-agent [--version] [--help]\n\n"
		     "herd-agent runs on every node of a job, started by herd;\n"
		     "it is not meant to be run by hand.\n");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) {
		printf("herd-agent %s\n", HERD_VERSION);
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
