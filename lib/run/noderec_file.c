/* lib/run/noderec_file.c — the node records on disk: one JSON file per job
 * in the "nodes" state directory (jobreg.h's directory rules), read and
 * rewritten under a lock so that two herds of one job never lose a note.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "herd/jobreg.h"
#include "noderec_int.h"

/* How long noderec_note waits for another herd's lock: writers hold it
 * for one read and one small write. */
#define NODEREC_LOCK_WAIT_MS 5000
/* Job names noderec_jobs() reads at most. */
#define NODEREC_JOBS_MAX 100000

/* --- files -------------------------------------------------------------- */

static int open_dir(char *path, size_t size, bool create, struct herd_err *err)
{
	return jobreg_state_open("nodes", path, size, create, err);
}

int noderec_dir(char *buf, size_t size, bool create, struct herd_err *err)
{
	int fd = open_dir(buf, size, create, err);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int check_name(const char *job, struct herd_err *err)
{
	if (!noderec_name_ok(job))
		return herd_errprintf(err,
				      "job name '%.60s' cannot name a node "
				      "record (no '/', no leading '.', at most "
				      "%d bytes)",
				      job ? job : "", NODEREC_KEY_MAX);
	return 0;
}

/* Reads DIR/NAME.json into *out (no file: an empty record).  Returns 0,
 * or -1 with err. */
static int read_record(int dfd, const char *dir, const char *job,
		       struct noderec **out, struct herd_err *err)
{
	char name[NODEREC_KEY_MAX + 8], *buf = NULL;
	struct stat st;
	size_t got = 0;
	int fd, ret = -1;

	*out = NULL;
	snprintf(name, sizeof(name), "%s.json", job);
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT) {
			if (!(*out = noderec_new()))
				return herd_errprintf(err, "out of memory");
			return 0;
		}
		return herd_errprintf(err, "cannot open %s/%s: %s", dir, name,
				      errno == ELOOP ? "a symlink"
						     : strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		herd_errprintf(err, "%s/%s is not a regular file; remove it",
			       dir, name);
		goto out;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		herd_errprintf(err,
			       "%s/%s is owned by uid %u with mode %04o; herd "
			       "reads only its own files: remove it",
			       dir, name, (unsigned)st.st_uid,
			       (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if ((uint64_t)st.st_size > NODEREC_FILE_MAX) {
		herd_errprintf(err, "%s/%s: too large (%lld bytes)", dir, name,
			       (long long)st.st_size);
		goto out;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			herd_errprintf(err, "cannot read %s/%s: %s", dir, name,
				       strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (noderec_parse(buf, got, out, err) < 0) {
		char was[HERD_ERR_MAX];

		memcpy(was, err ? err->text : "", err ? sizeof(was) : 1);
		herd_errprintf(err,
			       "%s/%s is not a node record: %s (herd nodes %s "
			       "--clear-all removes it)",
			       dir, name, was, job);
		goto out;
	}
	ret = 0;
out:
	free(buf);
	close(fd);
	return ret;
}

int noderec_load(const char *job, struct noderec **out, struct herd_err *err)
{
	char dir[PATH_MAX];
	int dfd, ret;

	*out = NULL;
	if (check_name(job, err) < 0)
		return -1;
	if ((dfd = open_dir(dir, sizeof(dir), false, err)) < 0) {
		if (errno != ENOENT)
			return -1;
		herd_err_clear(err);
		if (!(*out = noderec_new()))
			return herd_errprintf(err, "out of memory");
		return 0;
	}
	ret = read_record(dfd, dir, job, out, err);
	close(dfd);
	return ret;
}

/* Takes DIR/NAME.lock (a 0600 regular file of ours), waiting at most
 * NODEREC_LOCK_WAIT_MS for another herd.  Returns the fd (closing it
 * unlocks) or -1 with err. */
static int lock_record(int dfd, const char *dir, const char *job,
		       struct herd_err *err)
{
	char name[NODEREC_KEY_MAX + 8];
	struct stat st;
	int fd;

	snprintf(name, sizeof(name), "%s.lock", job);
	fd = openat(dfd, name,
		    O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		    0600);
	if (fd < 0)
		return herd_errprintf(err, "cannot open %s/%s: %s", dir, name,
				      errno == ELOOP ? "a symlink"
						     : strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid()) {
		close(fd);
		return herd_errprintf(err,
				      "%s/%s is not a regular file of yours; "
				      "remove it",
				      dir, name);
	}
	for (int waited = 0;; waited += 10) {
		struct timespec ts = {0, 10 * 1000 * 1000};

		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR)
			break;
		if (waited >= NODEREC_LOCK_WAIT_MS) {
			errno = ETIMEDOUT;
			break;
		}
		nanosleep(&ts, NULL);
	}
	herd_errprintf(err, "cannot lock %s/%s: %s", dir, name,
		       strerror(errno));
	close(fd);
	return -1;
}

int noderec_note_all(const char *job, const struct noderec_note *v, size_t n,
		     int quarantine_after, long window_ms, struct herd_err *err)
{
	return noderec_note_job(job, NULL, NULL, v, n, quarantine_after,
				window_ms, err);
}

int noderec_note_job(const char *job, const char *job_name,
		     const char *job_file, const struct noderec_note *v,
		     size_t n, int quarantine_after, long window_ms,
		     struct herd_err *err)
{
	char dir[PATH_MAX], name[NODEREC_KEY_MAX + 8], *text = NULL;
	struct noderec *r = NULL;
	int64_t newest = 0;
	int dfd = -1, lfd = -1, ret = -1;

	if (check_name(job, err) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].host ||
		    !noderec_text_ok(v[i].host, NODEREC_HOST_MAX) ||
		    !v[i].kind || !noderec_kind_ok(v[i].kind) ||
		    (v[i].run &&
		     !noderec_text_ok(v[i].run, NODEREC_WORD_MAX)) ||
		    v[i].t_ms < 0 || v[i].t_ms > NODEREC_T_MAX)
			return herd_errprintf(err, "node record: bad host, "
						   "kind, time or run id");
		if (v[i].t_ms > newest)
			newest = v[i].t_ms;
	}
	if (window_ms < 1 || window_ms > NODEREC_WINDOW_MAX ||
	    quarantine_after < 0)
		return herd_errprintf(err, "node record: bad quarantine "
					   "settings");
	if ((dfd = open_dir(dir, sizeof(dir), true, err)) < 0)
		return -1;
	if ((lfd = lock_record(dfd, dir, job, err)) < 0)
		goto out;
	if (read_record(dfd, dir, job, &r, err) < 0)
		goto out;
	r->quarantine_after = quarantine_after;
	r->quarantine_for_ms = window_ms;
	if ((job_name && noderec_text_ok(job_name, NODEREC_KEY_MAX) &&
	     (free(r->job), !(r->job = strdup(job_name)))) ||
	    (job_file && noderec_text_ok(job_file, PATH_MAX) &&
	     (free(r->job_file), !(r->job_file = strdup(job_file))))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	noderec_prune(r, newest, window_ms);
	for (size_t i = 0; i < n; i++)
		if (noderec_add(r, v[i].host, v[i].t_ms, v[i].kind,
				v[i].reason ? v[i].reason : "-",
				v[i].run) < 0) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
	if (!(text = noderec_json(r))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	snprintf(name, sizeof(name), "%s.json", job);
	ret = jobreg_write_at(dfd, dir, name, text, strlen(text), err);
out:
	free(text);
	noderec_free(r);
	if (lfd >= 0)
		close(lfd);
	if (dfd >= 0)
		close(dfd);
	return ret;
}

int noderec_note(const char *job, const char *host, int64_t t_ms,
		 const char *kind, const char *reason, const char *run,
		 int quarantine_after, long window_ms, struct herd_err *err)
{
	struct noderec_note one = {host, t_ms, kind, reason, run};

	return noderec_note_all(job, &one, 1, quarantine_after, window_ms, err);
}

int noderec_clear(const char *job, const char *host, struct herd_err *err)
{
	char dir[PATH_MAX], name[NODEREC_KEY_MAX + 8], *text = NULL;
	struct noderec *r = NULL;
	struct stat st;
	int dfd = -1, lfd = -1, ret = -1;

	if (check_name(job, err) < 0)
		return -1;
	if ((dfd = open_dir(dir, sizeof(dir), false, err)) < 0) {
		if (errno == ENOENT)
			herd_errprintf(err, "job %s has no node record", job);
		return -1;
	}
	snprintf(name, sizeof(name), "%s.json", job);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno == ENOENT) {
		herd_errprintf(err, "job %s has no node record", job);
		errno = ENOENT;
		goto out;
	}
	if ((lfd = lock_record(dfd, dir, job, err)) < 0)
		goto out;
	if (!host) {
		/* The whole file, whatever it holds (a corrupt one too). */
		if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT) {
			herd_errprintf(err, "cannot remove %s/%s: %s", dir,
				       name, strerror(errno));
			goto out;
		}
		ret = 0;
		goto out;
	}
	if (read_record(dfd, dir, job, &r, err) < 0)
		goto out;
	if (noderec_remove(r, host) < 0) {
		herd_errprintf(err, "job %s has no record of host %s", job,
			       host);
		errno = ENOENT;
		goto out;
	}
	if (!(text = noderec_json(r))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	ret = jobreg_write_at(dfd, dir, name, text, strlen(text), err);
out:
	free(text);
	noderec_free(r);
	if (lfd >= 0)
		close(lfd);
	if (dfd >= 0) {
		int saved = errno;

		close(dfd);
		errno = saved;
	}
	return ret;
}

void noderec_names_free(char **names, size_t n)
{
	if (!names)
		return;
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int noderec_jobs(char ***names, size_t *n, struct herd_err *err)
{
	char dir[PATH_MAX], **v = NULL;
	size_t count = 0, cap = 0;
	struct dirent *d;
	DIR *dp = NULL;
	int dfd, rfd, ret = -1;

	*names = NULL;
	*n = 0;
	if ((dfd = open_dir(dir, sizeof(dir), false, err)) < 0) {
		if (errno == ENOENT) {
			herd_err_clear(err);
			return 0;
		}
		return -1;
	}
	rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(dfd);
	if (rfd < 0 || !(dp = fdopendir(rfd))) {
		if (rfd >= 0)
			close(rfd);
		return herd_errprintf(err, "cannot read %s: %s", dir,
				      strerror(errno));
	}
	while ((d = readdir(dp)) && count < NODEREC_JOBS_MAX) {
		size_t len = strlen(d->d_name);
		char *job;

		if (d->d_name[0] == '.' || len < 6 ||
		    strcmp(d->d_name + len - 5, ".json"))
			continue;
		if (!(job = strndup(d->d_name, len - 5)))
			goto oom;
		if (!noderec_name_ok(job)) {
			free(job);
			continue;
		}
		if (count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **nv = realloc(v, ncap * sizeof(*v));

			if (!nv) {
				free(job);
				goto oom;
			}
			v = nv;
			cap = ncap;
		}
		v[count++] = job;
	}
	if (count)
		qsort(v, count, sizeof(*v), by_name);
	*names = v;
	*n = count;
	v = NULL;
	count = 0;
	ret = 0;
	goto out;
oom:
	herd_errprintf(err, "out of memory");
out:
	noderec_names_free(v, count);
	closedir(dp);
	return ret;
}
