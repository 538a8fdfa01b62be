/* model/jobrun.c — herd run's job file, its registry entry, job.yaml and
 * run.json, and --resume; see model/jobrun.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "launcher/cli.h"
#include "launcher/ctl/ctl.h"
#include "herd/file.h"
#include "herd/jobreg.h"
#include "herd/logtree.h"
#include "herd/runlog.h"
#include "herd/spec.h"
#include "herd/version.h"
#include "launcher/model/jobrun.h"
#include "launcher/view/jobview.h"
#include "launcher/hosts/resolve.h"

/* run.json is a few hundred bytes; a path is at most PATH_MAX. */
#define RUN_JSON_MAX (64u << 10)

/* RUNDIR/resume.lock, flock()ed by the herd that resumes RUNDIR for the
 * life of its controller; -1: none.  It holds {"pid", "id", "run_dir"} of
 * that herd's run (pid alone until its run directory exists). */
static int resume_lock = -1;

/* Writes the lock's contents: this herd's pid, and its run once known. */
static void lock_say(const char *id, const char *run_dir)
{
	json_t *o = json_pack("{s:I, s:s?, s:s?}", "pid", (json_int_t)getpid(),
			      "id", id, "run_dir", run_dir);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (text && ftruncate(resume_lock, 0) == 0 &&
	    pwrite(resume_lock, text, strlen(text), 0) < 0)
		(void)0; /* only a refused resume's message reads it */
	free(text);
	json_decref(o);
}

/* What the lock file of another resume says, into its fields (empty or 0
 * when not known). */
static void lock_read(int fd, long *pid, char *id, size_t id_len,
		      char *dir, size_t dir_len)
{
	char buf[PATH_MAX + 512];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	json_t *o = n > 0 ? json_loadb(buf, (size_t)n, 0, NULL) : NULL;
	const char *s;

	*pid = 0;
	id[0] = dir[0] = '\0';
	if (!o)
		return;
	*pid = (long)json_integer_value(json_object_get(o, "pid"));
	if ((s = json_string_value(json_object_get(o, "id"))))
		snprintf(id, id_len, "%s", s);
	if ((s = json_string_value(json_object_get(o, "run_dir"))))
		snprintf(dir, dir_len, "%s", s);
	json_decref(o);
}

/* Takes RUNDIR/resume.lock (a regular file of ours, no link followed, no
 * write bits for others) so that one herd at a time resumes old_id.  A
 * run that resumed it before and has ended is refused too unless force:
 * its own run directory is where the job goes on.  Returns 0, or the exit
 * status after saying why. */
static int resume_take(const char *rdir, const char *old_id, bool force)
{
	char path[PATH_MAX + 16], id[256], dir[PATH_MAX];
	struct stat st;
	long pid;
	int fd;

	snprintf(path, sizeof(path), "%s/resume.lock", rdir);
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		cli_error("run --resume: %s: %s", path,
			  errno == ELOOP ? "a symbolic link, refused"
					 : strerror(errno));
		return 1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 022)) {
		cli_error("run --resume: %s: not a regular file of yours that "
			  "only you can write; remove it",
			  path);
		close(fd);
		return 1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int saved = errno;

		/* The holder writes its pid just after it takes the lock:
		 * wait for it a little (2 s at most) to name it. */
		lock_read(fd, &pid, id, sizeof(id), dir, sizeof(dir));
		for (int i = 0; saved == EWOULDBLOCK && pid <= 0 && i < 100;
		     i++) {
			usleep(20 * 1000);
			lock_read(fd, &pid, id, sizeof(id), dir, sizeof(dir));
		}
		close(fd);
		if (saved != EWOULDBLOCK) {
			cli_error("run --resume: %s: %s", path,
				  strerror(saved));
			return 1;
		}
		if (id[0])
			cli_error("run --resume: %s is running already, resumed "
				  "as %s (pid %ld); herd attach %s, herd stop "
				  "%s",
				  old_id, id, pid, id, id);
		else if (pid > 0)
			cli_error("run --resume: %s is being resumed already "
				  "(herd pid %ld)",
				  old_id, pid);
		else
			cli_error("run --resume: %s is being resumed already "
				  "by another herd",
				  old_id);
		return 1;
	}
	lock_read(fd, &pid, id, sizeof(id), dir, sizeof(dir));
	if (id[0] && !force) {
		cli_error("run --resume: %s was resumed already as %s: `herd "
			  "run --resume %s` goes on from there (--force "
			  "resumes %s again)",
			  old_id, id, dir[0] ? dir : id, old_id);
		close(fd);
		return 1;
	}
	resume_lock = fd;
	lock_say(NULL, NULL);
	return 0;
}

/* Whether RUNDIR may be resumed: not while its controller runs, not once
 * it ended (job_end) unless force.  Returns 0, or the exit status after
 * saying why. */
static int resume_check(const char *rdir, bool force)
{
	struct jobreg_entry e = {0};
	struct herd_err err;
	struct runlog *rl = NULL;
	int status = 1, alive;

	herd_err_clear(&err);
	if (jobreg_find(rdir, &e, &err) < 0) {
		cli_error("run --resume: %s", err.text);
		return 1;
	}
	if (!(rl = runlog_open(rdir, &err))) {
		cli_error("run --resume: %s", err.text);
		goto out;
	}
	runlog_metrics_tail(rl, 4096);
	if (runlog_update(rl, &err) < 0) {
		cli_error("run --resume: %s", err.text);
		goto out;
	}
	alive = rl->ended ? 0 : jobview_controller_alive(&e);
	if (alive == 1) {
		cli_error("run --resume: %s is running (its controller, pid "
			  "%ld, answers); herd attach %s, herd stop %s",
			  e.id, e.pid, e.id, e.id);
		goto out;
	}
	/* Lost: the socket its controller left goes (the new run has its
	 * own). */
	if (!rl->ended && alive == 0)
		jobview_sock_forget(&e);
	if (rl->ended && !force) {
		cli_error("run --resume: %s ended (status %d); --force starts "
			  "it again",
			  e.id, rl->end_status);
		goto out;
	}
	status = 0;
out:
	runlog_free(rl);
	jobreg_entry_clear(&e);
	return status;
}

/* The job file's bytes, as spec_load() reads them (a pipe too), at most
 * SPEC_FILE_MAX.  Returns a malloc'd buffer or NULL after saying why. */
static char *read_job(const char *path, size_t *len)
{
	char *buf = malloc(SPEC_FILE_MAX + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*len = 0;
	if (fd < 0 || !buf) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		goto fail;
	}
	while (*len < SPEC_FILE_MAX + 1) {
		ssize_t n = read(fd, buf + *len, SPEC_FILE_MAX + 1 - *len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", path,
				errno == EISDIR ? "is a directory, expected "
						  "a job file"
						: strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	close(fd);
	/* spec_parse() says "larger than" for *len > SPEC_FILE_MAX. */
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

/* path made absolute against the current directory, not resolved (the
 * path as given: a symlinked job file stays the link). */
static char *abs_path(const char *path)
{
	char cwd[PATH_MAX], *abs;

	if (path[0] == '/')
		return strdup(path);
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, path) < 0)
		return NULL;
	return abs;
}

/* Reads RUNDIR/run.json: job_file, cwd, verbose, id. */
static int read_run_json(const char *dir, char **job_file, char **cwd,
			 bool *verbose, char **id)
{
	char path[PATH_MAX + 16], *text;
	json_t *o = NULL;
	size_t len;
	const char *jf = NULL, *wd = NULL, *rid = NULL;
	int v = 0, ret = -1;

	snprintf(path, sizeof(path), "%s/run.json", dir);
	if (!(text = file_read(path, RUN_JSON_MAX, &len))) {
		cli_error("run --resume: %s: %s; only runs of a herd that "
			  "writes run.json can be resumed",
			  path, strerror(errno));
		return -1;
	}
	o = json_loadb(text, len, 0, NULL);
	if (!o || json_unpack(o, "{s:s, s:s, s?b, s?s}", "job_file", &jf, "cwd",
			      &wd, "verbose", &v, "id", &rid) < 0) {
		cli_error("run --resume: %s: not what herd wrote (needs "
			  "job_file and cwd)",
			  path);
		goto out;
	}
	*job_file = strdup(jf);
	*cwd = strdup(wd);
	*verbose = v;
	if (rid)
		*id = strdup(rid);
	if (!*job_file || !*cwd || (rid && !*id)) {
		cli_error("run --resume: out of memory");
		goto out;
	}
	ret = 0;
out:
	json_decref(o);
	free(text);
	return ret;
}

int jobrun_open(const char *job_file, const char *resume, bool force,
		struct ctl_options *opt, char *agent, size_t agent_len,
		struct spec **spec, struct resolved *res)
{
	char *text = NULL, *file = NULL, *cwd = NULL, *old_id = NULL;
	char *rdir = NULL, yaml[PATH_MAX + 16];
	struct herd_err err;
	size_t len = 0;
	bool verbose = false;
	int status = 1;

	*spec = NULL;
	herd_err_clear(&err);
	if (cli_agent_path(agent, agent_len) < 0) {
		cli_error("run: cannot find herd-agent next to herd (%s)",
			  agent);
		return 1;
	}
	opt->agent_path = agent;
	if (resume) {
		const char *base;

		if (!(rdir = realpath(resume, NULL))) {
			cli_error("run --resume: %s: %s", resume,
				  strerror(errno));
			status = EXIT_SPEC;
			goto out;
		}
		if (read_run_json(rdir, &file, &cwd, &verbose, &old_id) < 0) {
			status = EXIT_SPEC;
			goto out;
		}
		if (!old_id) {
			base = strrchr(rdir, '/');
			if (!(old_id = strdup(base ? base + 1 : rdir)))
				goto out;
		}
		/* Never two controllers of one job: not while it runs, not
		 * two resumes side by side, an ended one only with force. */
		if ((status = resume_check(rdir, force)) != 0 ||
		    (status = resume_take(rdir, old_id, force)) != 0 ||
		    (status = resume_check(rdir, force)) != 0) {
			goto out;
		}
		status = 1;
		snprintf(yaml, sizeof(yaml), "%s/job.yaml", rdir);
		if (!(text = read_job(yaml, &len))) {
			status = EXIT_SPEC;
			goto out;
		}
		/* The job runs where it ran: relative log.dir, hostfile and
		 * paths of the command mean what they meant. */
		if (chdir(cwd) < 0) {
			cli_error("run --resume: cannot change to %s (the "
				  "job's directory): %s",
				  cwd, strerror(errno));
			goto out;
		}
		if (verbose)
			opt->verbose = true;
		fprintf(stderr, "herd: resuming %s (%s, in %s)\n", old_id, file,
			cwd);
	} else {
		if (!(file = abs_path(job_file))) {
			cli_error("run: cannot make %s absolute", job_file);
			goto out;
		}
		if (!(text = read_job(job_file, &len))) {
			status = EXIT_SPEC;
			goto out;
		}
	}
	/* Errors name the file the user knows; on resume its bytes are
	 * job.yaml's. */
	*spec = spec_parse(text, len, resume ? yaml : job_file, &err);
	if (!*spec) {
		fprintf(stderr, "%s\n", err.text);
		status = EXIT_SPEC;
		goto out;
	}
	/* Paths next to the job file (launch.workdir, checkpoint.dir, and
	 * nodes.hostfile, which resolve.c finds next to spec->path): the
	 * original one, also on resume. */
	if (resume) {
		char *p = strdup(file);

		if (!p) {
			cli_error("run: out of memory");
			goto out;
		}
		free((*spec)->path);
		(*spec)->path = p;
	}
	if (cli_job_paths(*spec, file) < 0) {
		cli_error("run: cannot resolve paths next to %s", file);
		goto out;
	}
	if ((status = cli_resolve(*spec, res)) != 0)
		goto out;
	opt->job_file = file;
	opt->job_text = text;
	opt->job_len = len;
	opt->resumed_from = old_id;
	file = text = old_id = NULL;
	status = 0;
out:
	free(text);
	free(file);
	free(cwd);
	free(old_id);
	free(rdir);
	return status;
}

void jobrun_close(struct ctl_options *opt)
{
	if (resume_lock >= 0)
		close(resume_lock);
	resume_lock = -1;
	free((char *)opt->job_file);
	free((char *)opt->job_text);
	free((char *)opt->resumed_from);
	opt->job_file = opt->job_text = opt->resumed_from = NULL;
}

/* Writes len bytes to a new file name (0600 whatever log.mode: the job
 * file may hold secrets) in the run directory. */
static int write_new(struct logtree *lt, const char *name, const char *buf,
		     size_t len, struct herd_err *err)
{
	int fd = logtree_create_mode(lt, name, 0600, err), ret = -1;
	size_t off = 0;

	if (fd < 0)
		return -1;
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			herd_errprintf(err, "cannot write %s/%s: %s",
				       logtree_run_dir(lt), name,
				       n < 0 ? strerror(errno) : "short");
			goto out;
		}
		off += (size_t)n;
	}
	ret = 0;
out:
	close(fd);
	return ret;
}

int jobrun_register(struct logtree *lt, const char *name,
		    const struct ctl_options *opt, bool detached,
		    const char *sock, struct herd_err *err)
{
	struct jobreg_entry e = {0};
	char cwd[PATH_MAX], machine[256];
	struct timeval tv;
	json_t *run = NULL;
	char *text = NULL;
	int ret = -1;

	if (!opt->job_file)
		return 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return herd_errprintf(err,
				      "cannot read the current "
				      "directory: %s",
				      strerror(errno));
	gettimeofday(&tv, NULL);
	e.id = (char *)logtree_run_id(lt);
	e.name = (char *)name;
	e.run_dir = (char *)logtree_run_dir(lt);
	e.pid = (long)getpid();
	e.started_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	e.detached = detached;
	e.job_file = (char *)opt->job_file;
	e.cwd = cwd;
	/* A run inside a Slurm job: herd list shows which. */
	{
		const char *sj = getenv("SLURM_JOB_ID");

		if (sj && *sj && strlen(sj) <= 20 &&
		    strspn(sj, "0123456789") == strlen(sj))
			e.slurm_job = (char *)sj;
	}
	if (gethostname(machine, sizeof(machine)) == 0) {
		machine[sizeof(machine) - 1] = '\0';
		e.machine = machine;
	}
	/* Where this run's control socket is (ctl/sock.c listens there):
	 * clients go by it, never by recomputing it (it may be a directory
	 * of this run's own); none when there is no socket: list then goes
	 * by the pid alone. */
	e.sock = (char *)sock;
	if (write_new(lt, "job.yaml", opt->job_text, opt->job_len, err) < 0)
		goto out;
	run = json_pack("{s:s, s:s?, s:s, s:s, s:s, s:b, s:I, s:s*}", "id",
			e.id, "name", name, "job_file", opt->job_file, "cwd",
			cwd, "herd_version", HERD_VERSION, "verbose",
			opt->verbose, "started", (json_int_t)e.started_ms,
			"resumed_from", opt->resumed_from);
	if (!run || !(text = json_dumps(run, JSON_COMPACT))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	{
		size_t n = strlen(text);

		text[n] = '\n';
		if (write_new(lt, "run.json", text, n + 1, err) < 0)
			goto out;
		text[n] = '\0';
	}
	if (jobreg_write(&e, err) < 0)
		goto out;
	if (resume_lock >= 0)
		lock_say(e.id, e.run_dir);
	ret = 0;
out:
	free(text);
	json_decref(run);
	return ret;
}
