/* view/jobview.c — JOB to a run directory and its registry entry, and whether
 * its controller runs; see view/jobview.h. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "launcher/cli.h"
#include "herd/render.h"
#include "herd/runlog.h"
#include "herd/spec.h"
#include "launcher/view/jobview.h"

/* log.dir of the job file at path, rendered ({{name}}) and made absolute
 * against the current directory, as herd run makes it.  NULL after saying
 * why. */
static char *job_log_dir(const char *cmd, const char *path, int *status)
{
	struct herd_err err;
	struct spec *spec;
	char *dir = NULL, *abs = NULL, cwd[PATH_MAX];

	herd_err_clear(&err);
	spec = spec_load(path, &err);
	if (!spec) {
		fprintf(stderr, "%s\n", err.text);
		*status = EXIT_SPEC;
		return NULL;
	}
	{
		const struct render_var vars[] = {{"name", spec->name}};

		dir = render_text(spec->log.dir, vars, 1, 0, &err);
	}
	spec_free(spec);
	if (!dir) {
		cli_error("%s: %s: log.dir: %s", cmd, path, err.text);
		*status = EXIT_SPEC;
		return NULL;
	}
	if (dir[0] == '/')
		return dir;
	if (!getcwd(cwd, sizeof(cwd)) ||
	    asprintf(&abs, "%s/%s", cwd, dir) < 0) {
		cli_error("%s: cannot make %s absolute", cmd, dir);
		*status = 1;
		abs = NULL;
	}
	free(dir);
	return abs;
}

static int has_file(const char *dir, const char *name)
{
	char p[PATH_MAX];

	return snprintf(p, sizeof(p), "%s/%s", dir, name) < (int)sizeof(p) &&
	       access(p, F_OK) == 0;
}

int jobview_resolve(const char *cmd, const char *job, struct jobreg_entry *e,
		    int *status)
{
	struct herd_err err;
	char *dir = NULL, *latest = NULL;
	struct stat st;
	int ret = -1;

	memset(e, 0, sizeof(*e));
	herd_err_clear(&err);
	*status = 1;
	if (stat(job, &st) < 0) {
		int saved = errno;

		/* Not a path: an id or a name of the registry. */
		if (saved == ENOENT && !strchr(job, '/')) {
			if (jobreg_find(job, e, &err) == 0)
				return 0;
			cli_error("%s: %s", cmd, err.text);
			*status = EXIT_SPEC;
			return -1;
		}
		cli_error("%s: %s: %s", cmd, job, strerror(saved));
		*status = saved == ENOENT ? EXIT_SPEC : 1;
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		dir = strdup(job);
	} else if (S_ISREG(st.st_mode)) {
		char *ld = job_log_dir(cmd, job, status);

		if (!ld)
			return -1;
		if (asprintf(&dir, "%s/latest", ld) < 0)
			dir = NULL;
		free(ld);
		if (dir && access(dir, F_OK) < 0) {
			cli_error("%s: %s: no run yet (%s: %s)", cmd, job, dir,
				  strerror(errno));
			goto out;
		}
	} else {
		cli_error("%s: %s: not a run directory or a job file", cmd,
			  job);
		*status = EXIT_SPEC;
		return -1;
	}
	if (!dir) {
		cli_error("%s: out of memory", cmd);
		return -1;
	}
	/* A log.dir: take its newest run. */
	if (!has_file(dir, "events.jsonl") && !has_file(dir, "metrics.jsonl") &&
	    !has_file(dir, "run.json") && has_file(dir, "latest") &&
	    asprintf(&latest, "%s/latest", dir) >= 0) {
		free(dir);
		dir = latest;
	}
	/* A path always: jobreg_find() takes it as a run directory (and
	 * names the run itself, not latest, which moves at the next run). */
	if (!strchr(dir, '/')) {
		char *p;

		if (asprintf(&p, "./%s", dir) < 0) {
			cli_error("%s: out of memory", cmd);
			goto out;
		}
		free(dir);
		dir = p;
	}
	if (jobreg_find(dir, e, &err) < 0) {
		cli_error("%s: %s", cmd, err.text);
		*status = EXIT_SPEC;
		goto out;
	}
	ret = 0;
out:
	free(dir);
	return ret;
}

/* The socket's answer: 1 it accepts, 0 nobody listens (a socket left by
 * a controller that died), -1 no socket there. */
static int socket_answers(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, ret;

	if (!path || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    strlen(path) >= sizeof(sun.sun_path))
		return -1;
	memcpy(sun.sun_path, path, strlen(path) + 1);
	/* Non-blocking: a controller that never accepts (stopped, hung)
	 * fills its backlog, and a blocking connect would then wait for
	 * ever.  A full backlog (EAGAIN) is a listener all the same. */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	ret = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0 ? 1
	      : errno == EAGAIN					     ? 1
	      : errno == ECONNREFUSED				     ? 0
								     : -1;
	close(fd);
	return ret;
}

/* Whether pid is a herd of ours: alive, and /proc says its program is
 * herd (a pid reused by another program is no controller). */
static bool pid_is_herd(long pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno != EPERM))
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	if (!(f = fopen(path, "re")))
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	return !strcmp(comm, "herd");
}

int jobview_controller_alive(const struct jobreg_entry *e)
{
	int s;

	if (remote_entry_is_remote(e))
		return -1;
	/* A controller on another machine sharing this home: neither its
	 * socket nor its pid is to be seen from here. */
	if (e->machine) {
		char me[256];

		if (gethostname(me, sizeof(me)) < 0)
			return -1;
		me[sizeof(me) - 1] = '\0';
		if (strcmp(me, e->machine))
			return -1;
	}
	s = socket_answers(e->sock);
	if (s >= 0)
		return s;
	if (e->pid <= 0)
		return -1;
	return pid_is_herd(e->pid) ? 1 : 0;
}

int jobview_sock_forget(const struct jobreg_entry *e)
{
	char dir[PATH_MAX];
	struct stat st;
	char *slash;

	if (!e->sock || strlen(e->sock) >= sizeof(dir) ||
	    jobview_controller_alive(e) != 0)
		return 0;
	snprintf(dir, sizeof(dir), "%s", e->sock);
	if (!(slash = strrchr(dir, '/')) || slash == dir)
		return 0;
	*slash = '\0';
	/* The directory is this user's alone: what lstat saw is what
	 * unlink removes. */
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 022))
		return 0;
	if (lstat(e->sock, &st) < 0 || !S_ISSOCK(st.st_mode) ||
	    st.st_uid != geteuid() || socket_answers(e->sock) != 0)
		return 0;
	return unlink(e->sock) == 0;
}

enum jobview_state jobview_state(const struct jobreg_entry *e,
				 const struct runlog *rl)
{
	if (rl->ended)
		return JOBVIEW_ENDED;
	return jobview_controller_alive(e) == 0 ? JOBVIEW_LOST
						: JOBVIEW_RUNNING;
}

const char *jobview_state_name(enum jobview_state s)
{
	switch (s) {
	case JOBVIEW_ENDED:
		return "ended";
	case JOBVIEW_LOST:
		return "lost";
	case JOBVIEW_RUNNING:
	default:
		return "running";
	}
}
