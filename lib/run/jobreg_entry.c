/* lib/run/jobreg_entry.c — the job registry: one JSON entry per job in the
 * "jobs" state directory, written atomically, listed newest first, found by
 * id, name or run directory; see jobreg.h for the rules.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "herd/jobreg.h"
#include "jobreg_int.h"

/* Tries at a fresh temporary name (O_EXCL): a clash means another herd
 * writes the same entry in the same instant with the same random bits. */
#define JOBREG_TMP_TRIES 16

/* Entries a registry may hold before jobreg_list() stops reading: a year
 * of a job every ten minutes. */
#define JOBREG_LIST_MAX 100000

static int open_registry(char *path, size_t size, bool create,
			 struct herd_err *err)
{
	return jobreg_state_open("jobs", path, size, create, err);
}

int jobreg_forget(const char *id, struct herd_err *err)
{
	char dir[PATH_MAX], name[JOBREG_ID_MAX + 8];
	struct stat st;
	int dfd, ret = -1;

	if (!jobreg_id_ok(id))
		return herd_errprintf(err, "'%s' is not a job id", id);
	snprintf(name, sizeof(name), "%s.json", id);
	if ((dfd = open_registry(dir, sizeof(dir), false, err)) < 0)
		return -1;
	/* The registry is the user's alone (checked above), so what is
	 * seen here is what unlinkat removes; it removes a link, never
	 * what a link points to. */
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		int e = errno;

		herd_errprintf(err, "%s/%s: %s", dir, name, strerror(e));
		errno = e;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		herd_errprintf(err,
			       "%s/%s: not a regular file of yours; left "
			       "alone",
			       dir, name);
		errno = EPERM;
		goto out;
	}
	if (unlinkat(dfd, name, 0) < 0) {
		int e = errno;

		herd_errprintf(err, "cannot remove %s/%s: %s", dir, name,
			       strerror(e));
		errno = e;
		goto out;
	}
	ret = 0;
out:
	close(dfd);
	return ret;
}

int jobreg_dir(char *buf, size_t size, bool create, struct herd_err *err)
{
	int fd = open_registry(buf, size, create, err);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

void jobreg_entry_clear(struct jobreg_entry *e)
{
	if (!e)
		return;
	free(e->id);
	free(e->name);
	free(e->run_dir);
	free(e->host);
	free(e->job_file);
	free(e->cwd);
	free(e->sock);
	free(e->remote_herd);
	free(e->machine);
	free(e->slurm_job);
	memset(e, 0, sizeof(*e));
}

void jobreg_entries_free(struct jobreg_entry *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		jobreg_entry_clear(&v[i]);
	free(v);
}

char *jobreg_entry_json(const struct jobreg_entry *e)
{
	json_t *o = json_pack(
	    "{s:s, s:s?, s:s, s:s?, s:I, s:I, s:b, s:s?, s:s?, s:s?, s:s?}",
	    "id", e->id, "name", e->name, "run_dir", e->run_dir, "host",
	    e->host, "pid", (json_int_t)e->pid, "started",
	    (json_int_t)e->started_ms, "detached", e->detached, "job_file",
	    e->job_file, "cwd", e->cwd, "sock", e->sock, "remote_herd",
	    e->remote_herd);
	char *s;

	if (!o)
		return NULL;
	if (e->machine)
		json_object_set_new(o, "machine", json_string(e->machine));
	if (e->slurm_job)
		json_object_set_new(o, "slurm_job_id",
				    json_string(e->slurm_job));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

/* A string member or NULL (absent or null); -1 when it is there but not a
 * string, or out of memory. */
static int get_str(json_t *o, const char *key, char **out)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return -1;
	*out = strdup(json_string_value(v));
	return *out ? 0 : -1;
}

int jobreg_entry_parse(const char *text, size_t len, struct jobreg_entry *out,
		       struct herd_err *err)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *v;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (!o || !json_is_object(o)) {
		herd_errprintf(err, "not a JSON object (%s)",
			       o ? "other value" : jerr.text);
		goto out;
	}
	if (get_str(o, "id", &out->id) < 0 || !jobreg_id_ok(out->id) ||
	    get_str(o, "run_dir", &out->run_dir) < 0 || !out->run_dir ||
	    get_str(o, "name", &out->name) < 0 ||
	    get_str(o, "host", &out->host) < 0 ||
	    get_str(o, "job_file", &out->job_file) < 0 ||
	    get_str(o, "cwd", &out->cwd) < 0 ||
	    get_str(o, "sock", &out->sock) < 0 ||
	    get_str(o, "remote_herd", &out->remote_herd) < 0 ||
	    get_str(o, "machine", &out->machine) < 0 ||
	    get_str(o, "slurm_job_id", &out->slurm_job) < 0) {
		herd_errprintf(err, "an entry needs string id and run_dir");
		goto out;
	}
	if ((v = json_object_get(o, "pid")) && json_is_integer(v))
		out->pid = (long)json_integer_value(v);
	if ((v = json_object_get(o, "started")) && json_is_integer(v))
		out->started_ms = (int64_t)json_integer_value(v);
	out->detached = json_is_true(json_object_get(o, "detached"));
	ret = 0;
out:
	if (ret < 0)
		jobreg_entry_clear(out);
	json_decref(o);
	return ret;
}

int jobreg_write_at(int dfd, const char *shown, const char *name,
		    const char *buf, size_t len, struct herd_err *err)
{
	char tmp[JOBREG_ID_MAX + 64];
	int fd = -1, i, ret = -1;
	size_t off = 0;

	for (i = 0; i < JOBREG_TMP_TRIES; i++) {
		unsigned int rnd = 0;

		if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
			rnd = (unsigned int)i;
		snprintf(tmp, sizeof(tmp), ".%s.tmp-%ld-%08x", name,
			 (long)getpid(), rnd);
		fd = openat(
		    dfd, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		herd_errprintf(err, "cannot create %s/%s: %s", shown, tmp,
			       strerror(errno));
		return -1;
	}
	if (fchmod(fd, 0600) < 0) {
		herd_errprintf(err, "cannot chmod %s/%s: %s", shown, tmp,
			       strerror(errno));
		goto out;
	}
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			herd_errprintf(err, "cannot write %s/%s: %s", shown,
				       tmp, n < 0 ? strerror(errno) : "short");
			goto out;
		}
		off += (size_t)n;
	}
	{
		int rc = fsync(fd);

		if (close(fd) < 0)
			rc = -1;
		fd = -1;
		if (rc < 0) {
			herd_errprintf(err, "cannot write %s/%s: %s", shown,
				       tmp, strerror(errno));
			goto out;
		}
	}
	if (renameat(dfd, tmp, dfd, name) < 0) {
		herd_errprintf(err, "cannot rename %s/%s to %s: %s", shown, tmp,
			       name, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (ret < 0)
		unlinkat(dfd, tmp, 0);
	return ret;
}

int jobreg_write(const struct jobreg_entry *e, struct herd_err *err)
{
	char dir[PATH_MAX], name[JOBREG_ID_MAX + 8], *text = NULL;
	int dfd = -1, ret = -1;

	if (!jobreg_id_ok(e->id) || !e->run_dir)
		return herd_errprintf(err, "job registry: bad entry (id %s)",
				      e->id ? e->id : "none");
	if ((dfd = open_registry(dir, sizeof(dir), true, err)) < 0)
		return -1;
	if (!(text = jobreg_entry_json(e))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	snprintf(name, sizeof(name), "%s.json", e->id);
	ret = jobreg_write_at(dfd, dir, name, text, strlen(text), err);
out:
	free(text);
	if (dfd >= 0)
		close(dfd);
	return ret;
}

/* Reads name in dfd: a regular file of ours, at most JOBREG_ENTRY_MAX
 * bytes.  Returns 0 or -1. */
static int read_entry(int dfd, const char *name, struct jobreg_entry *out)
{
	char *buf = NULL;
	struct stat st;
	ssize_t n;
	int fd, ret = -1;

	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || st.st_size > JOBREG_ENTRY_MAX)
		goto out;
	if (!(buf = malloc((size_t)st.st_size + 1)))
		goto out;
	n = read(fd, buf, (size_t)st.st_size);
	if (n < 0)
		goto out;
	ret = jobreg_entry_parse(buf, (size_t)n, out, NULL);
out:
	free(buf);
	close(fd);
	return ret;
}

static int newest_first(const void *a, const void *b)
{
	const struct jobreg_entry *x = a, *y = b;

	if (x->started_ms != y->started_ms)
		return x->started_ms > y->started_ms ? -1 : 1;
	return -strcmp(x->id, y->id);
}

int jobreg_list(struct jobreg_entry **out, size_t *n, struct herd_err *err)
{
	char dir[PATH_MAX];
	struct jobreg_entry *v = NULL;
	size_t count = 0, cap = 0;
	struct dirent *d;
	DIR *dp = NULL;
	int dfd, ret = -1;

	*out = NULL;
	*n = 0;
	dfd = open_registry(dir, sizeof(dir), false, err);
	if (dfd < 0) {
		if (errno == ENOENT) {
			herd_err_clear(err);
			return 0;
		}
		return -1;
	}
	{
		int rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		close(dfd);
		if (rfd < 0 || !(dp = fdopendir(rfd))) {
			if (rfd >= 0)
				close(rfd);
			return herd_errprintf(err, "cannot read %s: %s", dir,
					      strerror(errno));
		}
	}
	while ((d = readdir(dp)) && count < JOBREG_LIST_MAX) {
		size_t len = strlen(d->d_name);
		struct jobreg_entry e;

		if (d->d_name[0] == '.' || len < 6 ||
		    strcmp(d->d_name + len - 5, ".json"))
			continue;
		if (read_entry(dirfd(dp), d->d_name, &e) < 0)
			continue;
		/* The file name is the id: another name is no entry. */
		if (strlen(e.id) != len - 5 ||
		    strncmp(e.id, d->d_name, len - 5)) {
			jobreg_entry_clear(&e);
			continue;
		}
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct jobreg_entry *nv = realloc(v, ncap * sizeof(*v));

			if (!nv) {
				jobreg_entry_clear(&e);
				herd_errprintf(err, "out of memory");
				goto out;
			}
			v = nv;
			cap = ncap;
		}
		v[count++] = e;
	}
	if (count)
		qsort(v, count, sizeof(*v), newest_first);
	*out = v;
	*n = count;
	v = NULL;
	count = 0;
	ret = 0;
out:
	jobreg_entries_free(v, count);
	closedir(dp);
	return ret;
}

static int dup_entry(const struct jobreg_entry *e, struct jobreg_entry *out)
{
#define DUP(f) (e->f && !(out->f = strdup(e->f)))
	memset(out, 0, sizeof(*out));
	if (DUP(id) || DUP(name) || DUP(run_dir) || DUP(host) ||
	    DUP(job_file) || DUP(cwd) || DUP(sock) || DUP(remote_herd) ||
	    DUP(machine) || DUP(slurm_job)) {
		jobreg_entry_clear(out);
		return -1;
	}
#undef DUP
	out->pid = e->pid;
	out->started_ms = e->started_ms;
	out->detached = e->detached;
	return 0;
}

/* An entry made up from a run directory that is not registered (another
 * machine's, or from before the registry): what its run.json says. */
static int entry_from_dir(const char *real, struct jobreg_entry *out,
			  struct herd_err *err)
{
	char path[PATH_MAX + 16], ev[PATH_MAX + 16], met[PATH_MAX + 16];
	const char *base = strrchr(real, '/');
	json_t *o = NULL;
	struct stat st;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "%s/run.json", real);
	snprintf(ev, sizeof(ev), "%s/events.jsonl", real);
	snprintf(met, sizeof(met), "%s/metrics.jsonl", real);
	/* runlog.h's words: the views said them before the registry. */
	if (stat(path, &st) < 0 && stat(ev, &st) < 0 && stat(met, &st) < 0)
		return herd_errprintf(
		    err,
		    "%s: not a run directory (no events.jsonl "
		    "or metrics.jsonl)",
		    real);
	if (!(out->id = strdup(base ? base + 1 : real)) ||
	    !(out->run_dir = strdup(real)))
		goto oom;
	o = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
	if (o && json_is_object(o)) {
		json_t *v;

		if (get_str(o, "name", &out->name) < 0 ||
		    get_str(o, "job_file", &out->job_file) < 0 ||
		    get_str(o, "cwd", &out->cwd) < 0)
			goto oom;
		if ((v = json_object_get(o, "started")) && json_is_integer(v))
			out->started_ms = (int64_t)json_integer_value(v);
	}
	json_decref(o);
	return 0;
oom:
	json_decref(o);
	jobreg_entry_clear(out);
	return herd_errprintf(err, "out of memory");
}

int jobreg_find(const char *job, struct jobreg_entry *out, struct herd_err *err)
{
	struct jobreg_entry *v = NULL;
	struct stat st;
	size_t n = 0, i;
	char *real = NULL;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (!job || !job[0])
		return herd_errprintf(err, "no job named");
	if (strchr(job, '/') || (stat(job, &st) == 0 && S_ISDIR(st.st_mode))) {
		if (!(real = realpath(job, NULL)))
			return herd_errprintf(err, "%s: %s", job,
					      strerror(errno));
	}
	if (jobreg_list(&v, &n, err) < 0) {
		/* A run dir is read without the registry. */
		if (!real)
			goto out;
		n = 0;
	}
	for (i = 0; real && i < n; i++) {
		char *r = realpath(v[i].run_dir, NULL);
		bool same = r && !strcmp(r, real);

		free(r);
		if (same)
			break;
	}
	if (!real) {
		for (i = 0; i < n && strcmp(v[i].id, job); i++)
			;
		/* Newest first: the first with the name is the newest. */
		if (i == n)
			for (i = 0;
			     i < n && !(v[i].name && !strcmp(v[i].name, job));
			     i++)
				;
	}
	if (i < n) {
		if (dup_entry(&v[i], out) < 0) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
		ret = 0;
	} else if (real) {
		ret = entry_from_dir(real, out, err);
	} else {
		herd_errprintf(err, "no job %s here (herd list shows yours)",
			       job);
	}
out:
	free(real);
	jobreg_entries_free(v, n);
	return ret;
}
