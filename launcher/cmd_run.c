/* cmd_run.c — `herd run JOB.yaml [--dry-run] [-v] [--detach [--json]]`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "ctl.h"
#include "jobrun.h"
#include "remote.h"
#include "resolve.h"
#include "herd/spec.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: herd run JOB.yaml [--dry-run] [-v] [--no-status]\n"
		"       herd run JOB.yaml --detach [--json] [-v] [--on HOST]\n"
		"       herd run --resume RUNDIR [--no-status] [--detach "
		"[--json]]\n\n"
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
		"  --detach    run the controller in the background, on its own\n"
		"              (closing this terminal leaves the job running);\n"
		"              prints the job id and returns once it is up.\n"
		"              herd attach ID shows its output, herd stop ID\n"
		"              ends it; its own messages go to RUN-DIR/herd.log\n"
		"  --json      with --detach: print {\"id\", \"run_dir\",\n"
		"              \"host\"} as one JSON line instead\n"
		"  --resume RUNDIR  run an earlier run's job again: its job\n"
		"              file as it was (RUNDIR/job.yaml), from its\n"
		"              directory, with its -v; a new run directory,\n"
		"              from the newest complete checkpoint\n"
		"  --on HOST   with --detach: the controller runs on HOST\n"
		"              (over SSH; the job file and log.dir must be on\n"
		"              a file system HOST shares at the same paths)\n"
		"  -h, --help  show this text\n\n"
		"Exit status: 0 when every rank of the last attempt exited 0;\n"
		"else the first failing rank's status (128+N for signal N);\n"
		"1 herd itself failed (a node could not be reached, no run\n"
		"directory); 2 a bad job spec or bad usage.  With --detach:\n"
		"0 once the job is up.\n");
}

/* 8 KiB: what the controller tells the launching herd ("ok\tID\tDIR\n"
 * or "exit\tN\n"); a run dir path is at most PATH_MAX. */
#define DETACH_REPLY_MAX (PATH_MAX + 512)

/* The launching herd's side of --detach: waits until the controller has
 * its run dir, registry entry and socket (or has failed, saying why on
 * the stderr it still shares with us), then prints the job.  Returns the
 * exit status. */
static int detach_wait(int rfd, bool json)
{
	char buf[DETACH_REPLY_MAX + 1], *id, *dir, *nl;
	size_t len = 0;
	ssize_t n;

	while (len < DETACH_REPLY_MAX &&
	       ((n = read(rfd, buf + len, DETACH_REPLY_MAX - len)) > 0 ||
		(n < 0 && errno == EINTR)))
		if (n > 0)
			len += (size_t)n;
	close(rfd);
	buf[len] = '\0';
	if (!strncmp(buf, "exit\t", 5))
		return (int)strtol(buf + 5, NULL, 10);
	if (strncmp(buf, "ok\t", 3) || !(nl = strchr(buf, '\n')) ||
	    !(dir = strchr(buf + 3, '\t'))) {
		cli_error("run --detach: the controller ended before the job "
			  "started (see the messages above)");
		return 1;
	}
	*nl = '\0';
	*dir++ = '\0';
	id = buf + 3;
	if (json) {
		json_t *o = json_pack("{s:s, s:s, s:n}", "id", id, "run_dir",
				      dir, "host");
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

		json_decref(o);
		if (!text) {
			cli_error("out of memory");
			return 1;
		}
		printf("%s\n", text);
		free(text);
	} else {
		printf("job %s\nrun dir %s\nattach with: herd attach %s\n", id,
		       dir, id);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

/* Double fork and setsid: the controller has no terminal and is nobody's
 * child in the user's session, so closing that session (SIGHUP to its
 * processes) leaves it alone.  Returns -1 in the controller (*rfd: its
 * end of the pipe to the launching herd, which it closes when the job
 * is up), or the launching herd's exit status. */
static int detach(bool json, int *wfd)
{
	int p[2], devnull;
	pid_t pid;
	int st;

	fflush(stdout);
	fflush(stderr);
	if (pipe2(p, O_CLOEXEC) < 0) {
		cli_error("run --detach: pipe: %s", strerror(errno));
		return 1;
	}
	pid = fork();
	if (pid < 0) {
		cli_error("run --detach: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return 1;
	}
	if (pid > 0) {
		close(p[1]);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		return detach_wait(p[0], json);
	}
	close(p[0]);
	if (setsid() < 0)
		_exit(1);
	pid = fork();
	if (pid != 0)
		_exit(pid < 0 ? 1 : 0);
	/* The controller.  stdin: nothing; stdout: nothing of ours may reach
	 * the launching herd's stdout (one JSON line with --json), so it
	 * shares stderr until herd.log takes both (ctl_detach_ready). */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(2, 1) < 0)
		_exit(1);
	close(devnull);
	*wfd = p[1];
	return -1;
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"dry-run", no_argument, NULL, 'n'},
		{"verbose", no_argument, NULL, 'v'},
		{"no-status", no_argument, NULL, 'S'},
		{"detach", no_argument, NULL, 'D'},
		{"json", no_argument, NULL, 'J'},
		{"resume", required_argument, NULL, 'R'},
		/* --on HOST, and what the herd it starts there is given */
		{"on", required_argument, NULL, 'O'},
		{"job-stdin", no_argument, NULL, 'I'},
		{"cwd", required_argument, NULL, 'C'},
		{"job-file", required_argument, NULL, 'F'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct ctl_options opt = {0};
	struct spec *spec;
	struct resolved res = {0};
	const char *resume = NULL;
	const char *on = NULL, *cwd = NULL, *job = NULL;
	bool job_stdin = false;
	char *job_text = NULL;
	size_t job_len = 0;
	char agent[PATH_MAX + 16];
	int ch, status, detach_fd = -1;
	bool json = false;

	opterr = 0;
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
		case 'D':
			opt.detach = true;
			break;
		case 'J':
			json = true;
			break;
		case 'R':
			resume = optarg;
			break;
		case 'O':
			on = optarg;
			break;
		case 'I':
			job_stdin = true;
			break;
		case 'C':
			cwd = optarg;
			break;
		case 'F':
			job = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			return cli_bad_option("run", argv[optind - 1], usage);
		}
	}
	if (!job && !resume && optind == argc - 1)
		job = argv[optind++];
	if (!job && !resume)
		return cli_usage("run", "expected a job file (JOB.yaml) or "
					"--resume RUNDIR");
	if (optind != argc)
		return cli_usage("run", "one job file, not also '%s'",
				 argv[optind]);
	if (json && !opt.detach)
		return cli_usage("run", "--json goes with --detach");
	if (opt.detach && opt.dry_run)
		return cli_usage("run", "--dry-run starts nothing to detach "
					"from");
	if (on && !opt.detach)
		return cli_usage("run", "--on goes with --detach");
	if (on)
		return remote_run(on, job, resume, json);
	if ((status = remote_job_input(cwd, job_stdin, &job_text, &job_len)))
		return status;
	/* --job-stdin's bytes are the job (remote.c sent them); until
	 * jobrun_open() takes them, the same file is read at --job-file. */
	(void)job_len;
	status = jobrun_open(job, resume, &opt, agent, sizeof(agent), &spec,
			     &res);
	if (status == 0 && opt.detach) {
		opt.no_status = true;
		opt.detach_fd = &detach_fd;
		if ((status = detach(json, &detach_fd)) >= 0)
			goto out; /* the launching herd */
		status = 0;
	}
	if (status == 0)
		status = ctl_run(spec, &res, &opt);
	if (detach_fd >= 0) {
		/* The job never came up: the launching herd exits as a
		 * foreground run would have. */
		char line[32];
		int n = snprintf(line, sizeof(line), "exit\t%d\n", status);

		if (write(detach_fd, line, (size_t)n) != n)
			status = 1;
		close(detach_fd);
	}
out:
	resolve_free(&res);
	spec_free(spec);
	jobrun_close(&opt);
	free(job_text);
	return status;
}
