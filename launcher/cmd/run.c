/* cmd/run.c — `herd run JOB.yaml [--dry-run] [-v] [--detach [--json]]`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "launcher/ctl/ctl.h"
#include "launcher/model/jobrun.h"
#include "launcher/view/remote.h"
#include "launcher/hosts/resolve.h"
#include "launcher/transport/ssh/sshsess.h"
#include "herd/spec.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: herd run JOB.yaml [--dry-run] [-v] [--no-status]\n"
		"       herd run JOB.yaml --detach [--no-wait] [--json] [-v] "
		"[--on HOST]\n"
		"       herd run --resume RUNDIR [--force] [--no-status] "
		"[--detach [--no-wait] [--json]]\n\n"
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
		"  -v          prefix output with host and rank; show libssh's\n"
		"              own log (LogLevel in ~/.ssh/config)\n"
		"  --no-status no status line on the terminal (it is off\n"
		"              anyway when stdout is not a terminal)\n"
		"  --detach    run the controller in the background, on its own\n"
		"              (closing this terminal leaves the job running);\n"
		"              shows herd's messages until the first attempt\n"
		"              has started, then prints the job id and returns\n"
		"              0; when the job ends before that (no node could\n"
		"              be reached, authentication failed), returns its\n"
		"              exit status.  herd attach ID shows its output,\n"
		"              herd stop ID ends it; its own messages go to\n"
		"              RUN-DIR/herd.log\n"
		"  --no-wait   with --detach: return as soon as the controller\n"
		"              has its run dir, before any node is contacted\n"
		"  --json      with --detach: print {\"id\", \"run_dir\",\n"
		"              \"host\"} as one JSON line instead\n"
		"  --resume RUNDIR  run an earlier run's job again: its job\n"
		"              file as it was (RUNDIR/job.yaml), from its\n"
		"              directory, with its -v; a new run directory,\n"
		"              from the newest complete checkpoint.  Refused\n"
		"              while that run's controller runs or another\n"
		"              herd resumes it (one at a time), and once it\n"
		"              ended or was resumed already (unless --force)\n"
		"  --force     with --resume: resume an ended run, or one\n"
		"              resumed before, again\n"
		"  --on HOST   with --detach: the controller runs on HOST\n"
		"              (over SSH; the job file and log.dir must be on\n"
		"              a file system HOST shares at the same paths)\n"
		"  -h, --help  show this text\n\n"
		"Exit status: 0 when every rank of the last attempt exited 0;\n"
		"else the first failing rank's status (128+N for signal N);\n"
		"1 herd itself failed (a node could not be reached, no run\n"
		"directory); 2 a bad job spec or bad usage.  With --detach:\n"
		"0 once the first attempt has started (--no-wait: once the\n"
		"controller runs), else the status the job ended with.\n");
}

/* What the controller tells the launching herd, one line at a time:
 * "log\tRUNDIR\n" (its messages now go to RUNDIR/herd.log), then
 * "ok\tID\tRUNDIR\tBYTES\n" (the job is up; BYTES of herd.log are from
 * before) or "exit\tN\n" (it ended first).  A run dir path is at most
 * PATH_MAX. */
#define DETACH_REPLY_MAX (PATH_MAX + 512)

/* How often the launching herd looks at herd.log while it waits. */
#define DETACH_POLL_MS 100

/* Copies what herd.log (fd, or -1) got since the last call to stderr,
 * at most up to byte upto (-1: all there is); *done counts. */
static void detach_show(int fd, long long upto, long long *done)
{
	char buf[8192];

	while (fd >= 0 && (upto < 0 || *done < upto)) {
		size_t want = sizeof(buf);
		ssize_t n;

		if (upto >= 0 && (long long)want > upto - *done)
			want = (size_t)(upto - *done);
		n = read(fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || fwrite(buf, 1, (size_t)n, stderr) != (size_t)n)
			break;
		*done += n;
	}
	fflush(stderr);
}

/* Prints the job: "job ID", "run dir DIR", how to attach, or with json
 * one object. */
static int detach_print(const char *id, const char *dir, bool json)
{
	if (json) {
		json_t *o = json_pack("{s:s, s:s, s:n}", "id", id, "run_dir",
				      dir, "host");
		char *text =
		    o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;

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

/* The launching herd's side of --detach: shows herd.log as it grows
 * (the controller's messages: nodes failing to connect, say) until the
 * controller says the job is up, then prints the job; or, when the
 * controller ended first, exits with its status.  Returns the exit
 * status. */
static int detach_wait(int rfd, bool json)
{
	char buf[DETACH_REPLY_MAX + 1], *nl;
	size_t len = 0;
	int logfd = -1, status = -1;
	long long shown = 0;
	bool eof = false;

	while (status < 0) {
		struct pollfd pfd = {.fd = rfd, .events = POLLIN};

		while (status < 0 && (nl = memchr(buf, '\n', len))) {
			char *id, *dir, *bytes;

			*nl = '\0';
			if (!strncmp(buf, "log\t", 4) && logfd < 0) {
				char path[DETACH_REPLY_MAX + 16];

				if (snprintf(path, sizeof(path), "%s/herd.log",
					     buf + 4) < (int)sizeof(path))
					logfd = open(path, O_RDONLY | O_CLOEXEC |
								   O_NOFOLLOW);
			} else if (!strncmp(buf, "exit\t", 5)) {
				detach_show(logfd, -1, &shown);
				status = (int)strtol(buf + 5, NULL, 10);
			} else if (!strncmp(buf, "ok\t", 3) &&
				   (dir = strchr(buf + 3, '\t')) &&
				   (bytes = strrchr(dir + 1, '\t'))) {
				*dir++ = '\0';
				*bytes++ = '\0';
				id = buf + 3;
				detach_show(logfd, strtoll(bytes, NULL, 10),
					    &shown);
				status = detach_print(id, dir, json);
			}
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
		}
		if (status >= 0 || eof || len >= DETACH_REPLY_MAX)
			break;
		if (poll(&pfd, 1, DETACH_POLL_MS) > 0) {
			ssize_t n = read(rfd, buf + len, DETACH_REPLY_MAX - len);

			if (n > 0)
				len += (size_t)n;
			else if (n == 0 || errno != EINTR)
				eof = true;
		}
		detach_show(logfd, -1, &shown);
	}
	close(rfd);
	if (status < 0) {
		detach_show(logfd, -1, &shown);
		cli_error("run --detach: the controller ended before the job "
			  "started (see the messages above)");
		status = 1;
	}
	if (logfd >= 0)
		close(logfd);
	return status;
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
		{"no-wait", no_argument, NULL, 'W'},
		{"resume", required_argument, NULL, 'R'},
		/* --on HOST, and what the herd it starts there is given */
		{"on", required_argument, NULL, 'O'},
		{"force", no_argument, NULL, 'f'},
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
	bool job_stdin = false, force = false;
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
		case 'W':
			opt.detach_no_wait = true;
			break;
		case 'R':
			resume = optarg;
			break;
		case 'O':
			on = optarg;
			break;
		case 'f':
			force = true;
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
			return cli_bad_option("run", cli_bad_word(argc, argv), usage);
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
	if (opt.detach_no_wait && !opt.detach)
		return cli_usage("run", "--no-wait goes with --detach");
	if (force && !resume)
		return cli_usage("run", "--force goes with --resume");
	if (on)
		return remote_run(on, job, resume, json, opt.detach_no_wait,
				  force);
	if ((status = remote_job_input(cwd, job_stdin, &job_text, &job_len)))
		return status;
	/* --job-stdin's bytes are the job (remote.c sent them); until
	 * jobrun_open() takes them, the same file is read at --job-file. */
	(void)job_len;
	status = jobrun_open(job, resume, force, &opt, agent, sizeof(agent), &spec,
			     &res);
	/* libssh's own log (a LogLevel in ~/.ssh/config) only with -v. */
	sshsess_set_verbose(opt.verbose);
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
