/* view/remote_run.c — `herd run --detach --on HOST`: the job file sent
 * to HOST, the run started there and registered here; see remote.h. */
#include "herd/file.h"
#include "herd/jobreg.h"
#include "launcher/cli.h"
#include "launcher/view/remote_int.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <libssh/libssh.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static int abs_paths(const char *path, char *cwd, size_t cwd_len, char **abs)
{
	if (!getcwd(cwd, cwd_len))
		return -1;
	if (path[0] == '/')
		*abs = strdup(path);
	else if (asprintf(abs, "%s/%s", cwd, path) < 0)
		*abs = NULL;
	return *abs ? 0 : -1;
}

static int64_t unix_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* After the remote herd said {id, run_dir, ...}: the entry here. */
static int register_here(const char *host, const struct spec *spec,
			 const char *abs, const char *cwd,
			 const char *remote_herd, json_t *o, char **id_out,
			 char **dir_out)
{
	struct jobreg_entry e = {0};
	struct herd_err err;
	json_t *id = json_object_get(o, "id"),
	       *dir = json_object_get(o, "run_dir");
	json_t *pid = json_object_get(o, "pid");
	struct jobreg_entry old = {0};

	herd_err_clear(&err);
	if (!json_is_string(id) || !json_is_string(dir))
		return -1;
	*id_out = strdup(json_string_value(id));
	*dir_out = strdup(json_string_value(dir));
	if (!*id_out || !*dir_out)
		return -1;
	e.id = (char *)json_string_value(id);
	e.run_dir = (char *)json_string_value(dir);
	e.name = spec->name;
	e.host = (char *)host;
	e.job_file = (char *)abs;
	e.cwd = (char *)cwd;
	e.remote_herd = (char *)remote_herd;
	e.pid = json_is_integer(pid) ? (long)json_integer_value(pid) : 0;
	e.started_ms = unix_ms();
	e.detached = true;
	/* A home shared with HOST: the remote herd registered the job in
	 * this very registry; its pid and socket stay (herd acts on them
	 * there, remote_entry_is_remote()), the host is added. */
	if (jobreg_find(e.id, &old, &err) == 0 && !old.host && old.run_dir &&
	    !strcmp(old.run_dir, e.run_dir)) {
		e.pid = old.pid;
		e.sock = old.sock;
		e.machine = old.machine;
		e.started_ms = old.started_ms;
	}
	herd_err_clear(&err);
	if (jobreg_write(&e, &err) < 0)
		cli_error("warning: job %s runs on %s but is not registered "
			  "here (%s); reach it with `herd attach %s`",
			  e.id, host, err.text, e.run_dir);
	jobreg_entry_clear(&old);
	return 0;
}

int remote_run(const char *host, const char *job_path, const char *resume,
	       bool json, bool no_wait, bool force)
{
	struct remote_conn c = {0};
	struct remote_pump p = {.in_fd = -1,
				.out_fd = -1,
				.err_fd = STDERR_FILENO,
				.sig_fd = -1,
				.cap_max = REMOTE_RUN_OUT_MAX};
	struct herd_err err;
	struct spec *spec = NULL;
	char cwd[PATH_MAX], *text = NULL, *abs = NULL, *id = NULL, *dir = NULL;
	char *args[] = {"run", "--detach",   "--json", "--job-stdin", "--cwd",
			cwd,   "--job-file", NULL,     NULL};
	char *resume_args[] = {"run", "--detach", "--json", "--resume",
			       NULL,  NULL,	  NULL};
	int n_resume = 5;
	char *rdir = NULL, *rjob = NULL;
	size_t len;
	json_t *o = NULL;
	int status = 1;
	enum pump_end end;

	herd_err_clear(&err);
	/* --resume RUNDIR: the old run's job.yaml has the settings. */
	if (resume && (!(rdir = realpath(resume, NULL)) ||
		       asprintf(&rjob, "%s/job.yaml", rdir) < 0)) {
		cli_error("run --resume: %s: %s", resume, strerror(errno));
		free(rdir);
		return EXIT_SPEC;
	}
	if (resume)
		job_path = rjob;
	if (!(text = file_read(job_path, SPEC_FILE_MAX, &len))) {
		cli_error("run: %s: %s", job_path,
			  errno == EFBIG ? "larger than 1 MiB; not a job file"
					 : strerror(errno));
		return EXIT_SPEC;
	}
	/* Checked here first: a spec error is said before HOST is asked. */
	if (!(spec = spec_parse(text, len, job_path, &err))) {
		fprintf(stderr, "%s\n", err.text);
		status = EXIT_SPEC;
		goto out;
	}
	if (abs_paths(job_path, cwd, sizeof(cwd), &abs) < 0) {
		cli_error("run: %s: %s", job_path, strerror(errno));
		goto out;
	}
	args[7] = abs;
	resume_args[4] = rdir;
	if (no_wait)
		args[8] = resume_args[n_resume++] = "--no-wait";
	if (force)
		resume_args[n_resume++] = "--force";
	if (!(p.cap = malloc(p.cap_max + 1))) {
		cli_error("out of memory");
		goto out;
	}
	if (remote_connect(&c, spec, host, true, &err) < 0 ||
	    !(p.ch = resume ? remote_start(&c, resume_args, n_resume, &err)
			    : remote_start(&c, args, 8 + no_wait, &err))) {
		cli_error("run: %s", err.text);
		goto out;
	}
	p.cap[0] = '\0';
	p.s = c.s;
	p.mem = resume ? NULL : text; /* resume: the run dir has it */
	p.mem_len = len;
	end = remote_pump(&p, &status);
	if (end != PUMP_EXITED) {
		cli_error("%s: %s while starting the job there; `herd list` "
			  "shows whether it started",
			  host,
			  end == PUMP_LOCAL ? "too much output"
					    : "the session broke");
		status = 1;
		goto out;
	}
	if (status != 0) {
		/* The remote herd said why on stderr (relayed). */
		fputs(p.cap, stdout);
		goto out;
	}
	if (!(o = json_loads(p.cap, 0, NULL)) ||
	    register_here(host, spec, abs, cwd, c.remote_herd, o, &id, &dir) <
		0) {
		cli_error("%s: the remote herd answered `%.200s`, not the "
			  "job's id and run dir",
			  host, p.cap);
		status = 1;
		goto out;
	}
	if (json) {
		json_t *r = json_pack("{s:s, s:s, s:s}", "id", id, "run_dir",
				      dir, "host", host);
		char *line = r ? json_dumps(r, JSON_COMPACT) : NULL;

		if (line)
			printf("%s\n", line);
		free(line);
		json_decref(r);
	} else {
		printf("job %s\nrun dir %s\nattach with: herd attach %s\n", id,
		       dir, id);
	}
out:
	remote_channel_close(p.ch);
	remote_conn_close(&c);
	json_decref(o);
	spec_free(spec);
	free(p.cap);
	free(text);
	free(abs);
	free(id);
	free(dir);
	free(rdir);
	free(rjob);
	return status;
}

int remote_job_input(const char *cwd, bool job_stdin, char **text, size_t *len)
{
	*text = NULL;
	*len = 0;
	if (cwd && chdir(cwd) < 0) {
		cli_error("run: --cwd %s: %s", cwd, strerror(errno));
		return 1;
	}
	if (!job_stdin)
		return 0;
	if (!(*text = malloc(SPEC_FILE_MAX + 1))) {
		cli_error("run: out of memory");
		return 1;
	}
	while (*len < SPEC_FILE_MAX + 1) {
		ssize_t n =
		    read(STDIN_FILENO, *text + *len, SPEC_FILE_MAX + 1 - *len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			cli_error("run: --job-stdin: %s", strerror(errno));
			free(*text);
			*text = NULL;
			return 1;
		}
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	return 0;
}
