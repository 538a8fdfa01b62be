/* main.c — bin/herd: a thin dispatcher over the commands in cli.h. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "launcher/view/remote.h"
#include "launcher/transport/transport.h"
#include "herd/suggest.h"
#include "herd/version.h"

struct command {
	const char *name;
	const char *args;
	const char *summary;
	int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
	{"validate", "JOB.yaml [--print]",
	 "check a job spec; --print shows it with every default", cmd_validate},
	{"hosts", "JOB.yaml [--format FMT] [--spares]",
	 "resolve the nodes into a hostfile", cmd_hosts},
	{"keys", "JOB.yaml [--accept-new] [--mesh]",
	 "make a key pair, install it on every node, pin host keys",
	 cmd_keys},
	{"plan", "JOB.yaml [--topology FILE.xml] [--json]",
	 "print each rank's node, GPU, NIC and CPUs", cmd_plan},
	{"run", "JOB.yaml [--dry-run] [-v] [--detach]",
	 "start the job on every node and watch it", cmd_run},
	{"attach", "JOB",
	 "show a running job's live output (Ctrl-C detaches)", cmd_attach},
	{"stop", "JOB [--wait]",
	 "stop a running job as Ctrl-C would", cmd_stop},
	{"run", "--resume RUNDIR",
	 "start a run's job again (same file, directory, checkpoint)",
	 cmd_run},
	{"sbatch", "JOB.yaml [--dry-run] [--wait]",
	 "submit the job to Slurm (libslurm); --wait follows it",
	 cmd_sbatch},
	{"render", "TEMPLATE [--set K=V ...] [-o DIR]",
	 "fill a job template (DeepSpeed ZeRO-3 config, fine-tuning job)",
	 cmd_render},
	{"init", "TEMPLATE DIR [--set K=V ...]",
	 "write a training project (job, scripts, configs, README)",
	 cmd_init},
	{"check", "JOB.yaml [--json] [--no-net] [-v]",
	 "check every node before a run (dirs, GPUs, RDMA, network)",
	 cmd_check},
	{"bench", "JOB.yaml [--sizes LIST] [--iters N]",
	 "time a ring all-reduce between the job's nodes (TCP)", cmd_bench},
	{"list", "[--running|--all] [--json]",
	 "your jobs: id, name, state, attempt, nodes, Slurm job, run dir",
	 cmd_list_jobs},
	{"list", "--forget-ended",
	 "forget the jobs that ended (their run directories stay)",
	 cmd_list_jobs},
	{"status", "JOB|RUNDIR|JOB.yaml [--json]",
	 "summarise a run (state, attempts, nodes, latest metrics)",
	 cmd_status},
	{"top", "JOB|RUNDIR|JOB.yaml [--once] [--sort K]",
	 "live per-node table (GPU, net, CPU, RSS, step rate)", cmd_top},
	{"logs", "JOB [--rank R|--node H] [-f]",
	 "a job's rank output (--attempt N; -f follows)",
	 cmd_logs},
	{"nodes", "[JOB.yaml|NAME] [--json] [--clear HOST]",
	 "failed and quarantined nodes of your jobs; --clear forgets",
	 cmd_nodes},
	{"report", "JOB|RUNDIR|JOB.yaml -o report.html",
	 "one HTML file with SVG plots and the timeline of a run",
	 cmd_report},
	{"hostlist", "[--expand|--compress] EXPR...",
	 "expand or compress Slurm hostlist expressions", cmd_hostlist},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: herd COMMAND [ARGS]\n\n"
		     "herd launches one training job over many nodes from "
		     "one YAML file.\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  herd %-8s %-39s %s\n", commands[i].name,
			commands[i].args, commands[i].summary);
	fprintf(out, "\n  herd --version\n  herd COMMAND --help\n");
}

/* One line and a hint, with the nearest command when one is near. */
static int unknown_command(const char *typed)
{
	const char *names[sizeof(commands) / sizeof(commands[0])], *near;

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		names[i] = commands[i].name;
	near = suggest_nearest(typed, names,
			       sizeof(commands) / sizeof(commands[0]));
	if (typed[0] == '-') {
		static const char *const opts[] = {"--version", "--help"};

		if ((near = suggest_nearest(typed, opts, 2)))
			cli_error("unknown option '%s' (did you mean '%s'?)",
				  typed, near);
		else
			cli_error("unknown option '%s'", typed);
	} else if (near)
		cli_error("unknown command '%s' (did you mean '%s'?)", typed,
			  near);
	else
		cli_error("unknown command '%s'", typed);
	fprintf(stderr, "try 'herd --help'\n");
	return EXIT_SPEC;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_SPEC;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("herd %s\n", HERD_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		int rc;

		if (strcmp(argv[1], commands[i].name))
			continue;
		/* A job on another host: the command runs there. */
		if ((rc = remote_forward(argc - 1, argv + 1)) < 0)
			rc = commands[i].run(argc - 1, argv + 1);
		if (transport_threads_left()) {
			/* A node thread is still inside libssh (see
			 * transport.h): leave without exit()'s clean-up. */
			fflush(stdout);
			fflush(stderr);
			_exit(rc);
		}
		return rc;
	}
	return unknown_command(argv[1]);
}
