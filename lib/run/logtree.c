/* lib/run/logtree.c — the log tree and log files; see logtree.h for the rule. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "herd/logtree.h"

/* As the kernel's MAXSYMLINKS: more links than this on one path is a loop. */
#define LOGTREE_LINKS_MAX 40

/* Tries at a fresh RUN-ID before giving up: 16 random bits a second make
 * a clash rare, a hundred in a row means something else is wrong. */
#define LOGTREE_ID_TRIES 100

/* "20261130-173500.123-4f2a" and its NUL. */
#define LOGTREE_ID_MAX 32

struct logtree {
	int dir_fd; /* log.dir, O_PATH */
	int run_fd; /* log.dir/RUN-ID, O_PATH */
	unsigned int file_mode, dir_mode;
	char id[LOGTREE_ID_MAX];
	char *run_dir;
};

struct logfile {
	int fd;
	int lines;
	int error;     /* first failed write's errno; 0: none */
	uint64_t size; /* bytes written (lines: to cut back to) */
	uint64_t lost;
	char *path;
};

unsigned int logtree_dir_mode(unsigned int file_mode)
{
	unsigned int m = file_mode & 0666;

	return m | ((m & 0444) >> 2);
}

static bool trusted_uid(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* "alice (uid 1001)" for messages. */
static void owner_name(uid_t uid, char *buf, size_t size)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, size, "%s (uid %u)", res->pw_name, (unsigned)uid);
	else
		snprintf(buf, size, "uid %u", (unsigned)uid);
}

/* How log.dir's walk names what it refuses. */
static const struct logtree_words log_words = {
    .prefix = "log.dir: ",
    .harm = "redirect herd's logs",
    .place = "log.dir",
    .real = "set log.dir to the real directory",
};

/* A directory on the way: owned by root or us, and writable by nobody
 * else unless sticky. */
static int check_step(int fd, const char *shown, const struct logtree_words *w,
		      struct herd_err *err)
{
	struct stat st;
	char who[128];

	if (fstat(fd, &st) < 0)
		return herd_errprintf(err, "cannot stat %s: %s", shown,
				      strerror(errno));
	if (!trusted_uid(st.st_uid)) {
		owner_name(st.st_uid, who, sizeof(who));
		return herd_errprintf(err,
				      "%s%s is owned by %s, who could %s; put "
				      "%s on a path owned by root or by you",
				      w->prefix, shown, who, w->harm, w->place);
	}
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
		return herd_errprintf(
		    err,
		    "%s%s is writable by %s (mode %04o), who could %s; run "
		    "chmod go-w '%s' or put %s elsewhere",
		    w->prefix, shown,
		    (st.st_mode & 002) ? "everyone" : "its group",
		    (unsigned)(st.st_mode & 07777), w->harm, shown, w->place);
	return 0;
}

/* log.dir itself: ours, and writable by nobody else (sticky or not: herd
 * replaces `latest` in it). */
static int check_final(int fd, const char *shown, struct herd_err *err)
{
	struct stat st;
	char who[128];

	if (fstat(fd, &st) < 0)
		return herd_errprintf(err, "cannot stat %s: %s", shown,
				      strerror(errno));
	if (st.st_uid != geteuid()) {
		owner_name(st.st_uid, who, sizeof(who));
		return herd_errprintf(err,
				      "log.dir: %s is owned by %s, not by you; "
				      "set log.dir to a directory of your own",
				      shown, who);
	}
	if (st.st_mode & 022)
		return herd_errprintf(
		    err,
		    "log.dir: %s is writable by %s (mode "
		    "%04o), who could plant links in it; "
		    "run chmod go-w '%s'",
		    shown, (st.st_mode & 002) ? "everyone" : "its group",
		    (unsigned)(st.st_mode & 07777), shown);
	return 0;
}

/* Appends "/name" to *shown (grown as needed). */
static int shown_push(char **shown, const char *name)
{
	size_t len = strlen(*shown), n = strlen(name);
	char *s = realloc(*shown, len + n + 2);

	if (!s)
		return -1;
	s[len] = '/';
	memcpy(s + len + 1, name, n + 1);
	*shown = s;
	return 0;
}

/* Follows the symlink name in directory fd when its owner is trusted:
 * returns the rest of the walk, the link's target then rest, malloc'd. */
static char *follow_link(int fd, const char *name, const char *shown,
			 const char *rest, const struct stat *ls,
			 const struct logtree_words *w, struct herd_err *err)
{
	char target[PATH_MAX], who[128], *next;
	ssize_t n;

	if (!trusted_uid(ls->st_uid)) {
		owner_name(ls->st_uid, who, sizeof(who));
		herd_errprintf(err,
			       "%s%s/%s is a symlink owned by %s; herd "
			       "follows only links of root or yours: remove "
			       "it or %s",
			       w->prefix, shown, name, who, w->real);
		return NULL;
	}
	n = readlinkat(fd, name, target, sizeof(target) - 1);
	if (n < 0 || n == 0) {
		herd_errprintf(err, "cannot read the link %s/%s: %s", shown,
			       name, n < 0 ? strerror(errno) : "empty");
		return NULL;
	}
	target[n] = '\0';
	if (asprintf(&next, "%s/%s", target, rest) < 0) {
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	return next;
}

/* Walks log_dir from / as logtree.h says, making what is missing with
 * dir_mode (0: nothing made) and checking the last directory with
 * check_final (NULL: as one on the way).  Returns an O_PATH fd of
 * log_dir, or -1 with err. */
static int walk(const char *log_dir, unsigned int dir_mode,
		const struct logtree_words *w,
		int (*final)(int, const char *, struct herd_err *),
		struct herd_err *err)
{
	char *remaining = NULL, *shown = NULL, *p;
	int fd = -1, nfd = -1, links = 0, ret = -1;
	bool checked = false;

	if (log_dir[0] != '/')
		return herd_errprintf(err, "%s %s is not absolute", w->place,
				      log_dir);
	if (!(remaining = strdup(log_dir)) || !(shown = strdup(""))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		herd_errprintf(err, "cannot open /: %s", strerror(errno));
		goto out;
	}
	p = remaining;
	for (;;) {
		char *name, *rest;
		struct stat ls;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		name = p;
		rest = strchr(p, '/');
		if (rest)
			*rest++ = '\0';
		else
			rest = p + strlen(p);
		p = rest;
		if (!strcmp(name, "."))
			continue;
		/* A directory is checked where a name is looked up in it:
		 * what it holds is only as safe as who can change it. */
		if (!checked &&
		    check_step(fd, shown[0] ? shown : "/", w, err) < 0)
			goto out;
		checked = true;
		nfd = openat(fd, name,
			     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && dir_mode) {
			if (mkdirat(fd, name, dir_mode) == 0) {
				/* Exact, whatever the umask. */
				if (fchmodat(fd, name, dir_mode,
					     AT_SYMLINK_NOFOLLOW) < 0) {
					herd_errprintf(
					    err, "cannot chmod %s/%s: %s",
					    shown, name, strerror(errno));
					goto out;
				}
			} else if (errno != EEXIST) {
				herd_errprintf(err, "cannot create %s/%s: %s",
					       shown, name, strerror(errno));
				goto out;
			}
			nfd = openat(fd, name,
				     O_PATH | O_DIRECTORY | O_NOFOLLOW |
					 O_CLOEXEC);
		}
		if (nfd < 0 && (errno == ELOOP || errno == ENOTDIR) &&
		    fstatat(fd, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(ls.st_mode)) {
			char *next;

			if (++links > LOGTREE_LINKS_MAX) {
				herd_errprintf(err, "%s %s: too many symlinks",
					       w->place, log_dir);
				goto out;
			}
			next = follow_link(fd, name, shown, rest, &ls, w, err);
			if (!next)
				goto out;
			free(remaining);
			remaining = p = next;
			if (*p == '/') {
				close(fd);
				fd =
				    open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				shown[0] = '\0';
				checked = false;
				if (fd < 0) {
					herd_errprintf(err, "cannot open /: %s",
						       strerror(errno));
					goto out;
				}
			}
			continue;
		}
		if (nfd < 0) {
			herd_errprintf(err, "cannot open %s/%s: %s", shown,
				       name,
				       errno == ENOTDIR ? "not a directory"
							: strerror(errno));
			goto out;
		}
		if (shown_push(&shown, name) < 0) {
			herd_errprintf(err, "out of memory");
			goto out;
		}
		close(fd);
		fd = nfd;
		nfd = -1;
		checked = false;
	}
	if (final ? final(fd, shown[0] ? shown : "/", err) < 0
		  : check_step(fd, shown[0] ? shown : "/", w, err) < 0)
		goto out;
	ret = fd;
	fd = -1;
out:
	if (nfd >= 0)
		close(nfd);
	if (fd >= 0)
		close(fd);
	free(remaining);
	free(shown);
	return ret;
}

int logtree_walk(const char *path, const struct logtree_words *w,
		 struct herd_err *err)
{
	return walk(path, 0, w, NULL, err);
}

static int make_id(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	unsigned short rnd = 0;
	char when[20]; /* 20261130-173500 */

	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (unsigned short)(getpid() ^ (int)time(NULL));
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!gmtime_r(&ts.tv_sec, &tm) ||
	    !strftime(when, sizeof(when), "%Y%m%d-%H%M%S", &tm))
		return -1;
	snprintf(buf, size, "%.15s.%03d-%04x", when,
		 (int)(ts.tv_nsec / 1000000) % 1000, (unsigned)rnd);
	return 0;
}

struct logtree *logtree_open(const char *log_dir, unsigned int file_mode,
			     struct herd_err *err)
{
	struct logtree *lt = calloc(1, sizeof(*lt)), *ret = NULL;
	char tmp[LOGTREE_ID_MAX + 16];
	struct stat st;
	int i;

	if (!lt) {
		herd_errprintf(err, "out of memory");
		return NULL;
	}
	lt->dir_fd = lt->run_fd = -1;
	lt->file_mode = file_mode & 0666;
	lt->dir_mode = logtree_dir_mode(file_mode);
	if ((lt->dir_fd =
		 walk(log_dir, lt->dir_mode, &log_words, check_final, err)) < 0)
		goto out;
	/* A `latest` herd did not make: say so before making anything. */
	if (fstatat(lt->dir_fd, "latest", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    !S_ISLNK(st.st_mode)) {
		herd_errprintf(err,
			       "log.dir: %s/latest is not a symlink; herd "
			       "points it at each new run: move it away",
			       log_dir);
		goto out;
	}
	for (i = 0; i < LOGTREE_ID_TRIES; i++) {
		if (make_id(lt->id, sizeof(lt->id)) < 0) {
			herd_errprintf(err, "cannot format the run id");
			goto out;
		}
		if (mkdirat(lt->dir_fd, lt->id, lt->dir_mode) == 0)
			break;
		if (errno != EEXIST) {
			herd_errprintf(err, "cannot create %s/%s: %s", log_dir,
				       lt->id, strerror(errno));
			goto out;
		}
	}
	if (i == LOGTREE_ID_TRIES) {
		herd_errprintf(err, "cannot find a new run directory in %s",
			       log_dir);
		goto out;
	}
	if (fchmodat(lt->dir_fd, lt->id, lt->dir_mode, AT_SYMLINK_NOFOLLOW) <
	    0) {
		herd_errprintf(err, "cannot chmod %s/%s: %s", log_dir, lt->id,
			       strerror(errno));
		goto out;
	}
	lt->run_fd = openat(lt->dir_fd, lt->id,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (lt->run_fd < 0 ||
	    asprintf(&lt->run_dir, "%s/%s", strcmp(log_dir, "/") ? log_dir : "",
		     lt->id) < 0) {
		lt->run_dir = NULL;
		herd_errprintf(err, "cannot open %s/%s: %s", log_dir, lt->id,
			       strerror(errno));
		goto out;
	}
	/* latest: a new link under a name of its own, renamed over the old
	 * one, so that a reader sees the old run or the new, never none. */
	snprintf(tmp, sizeof(tmp), ".latest-%s", lt->id);
	if (symlinkat(lt->id, lt->dir_fd, tmp) < 0) {
		herd_errprintf(err, "cannot create %s/%s: %s", log_dir, tmp,
			       strerror(errno));
		goto out;
	}
	if (renameat(lt->dir_fd, tmp, lt->dir_fd, "latest") < 0) {
		herd_errprintf(err, "cannot point %s/latest at %s: %s", log_dir,
			       lt->id, strerror(errno));
		unlinkat(lt->dir_fd, tmp, 0);
		goto out;
	}
	ret = lt;
	lt = NULL;
out:
	logtree_free(lt);
	return ret;
}

const char *logtree_run_id(const struct logtree *lt)
{
	return lt->id;
}

const char *logtree_run_dir(const struct logtree *lt)
{
	return lt->run_dir;
}

int logtree_mkdir(struct logtree *lt, const char *name, struct herd_err *err)
{
	if (mkdirat(lt->run_fd, name, lt->dir_mode) < 0)
		return herd_errprintf(err, "cannot create %s/%s: %s",
				      lt->run_dir, name, strerror(errno));
	if (fchmodat(lt->run_fd, name, lt->dir_mode, AT_SYMLINK_NOFOLLOW) < 0)
		return herd_errprintf(err, "cannot chmod %s/%s: %s",
				      lt->run_dir, name, strerror(errno));
	return 0;
}

int logtree_create(struct logtree *lt, const char *path, struct herd_err *err)
{
	return logtree_create_mode(lt, path, lt->file_mode, err);
}

int logtree_create_mode(struct logtree *lt, const char *path, unsigned int mode,
			struct herd_err *err)
{
	const char *slash = strchr(path, '/'), *name = path;
	int dfd = lt->run_fd, sub = -1, fd = -1;

	if (slash) {
		char dir[256];

		if ((size_t)(slash - path) >= sizeof(dir) ||
		    strchr(slash + 1, '/'))
			return herd_errprintf(err, "%s: bad log path", path);
		memcpy(dir, path, (size_t)(slash - path));
		dir[slash - path] = '\0';
		sub = openat(lt->run_fd, dir,
			     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			return herd_errprintf(err, "cannot open %s/%s: %s",
					      lt->run_dir, dir,
					      strerror(errno));
		dfd = sub;
		name = slash + 1;
	}
	fd = openat(dfd, name,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND |
			O_CLOEXEC,
		    mode & 0666);
	if (fd >= 0 && fchmod(fd, mode & 0666) < 0) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		herd_errprintf(err, "cannot create %s/%s: %s", lt->run_dir,
			       path, strerror(errno));
	if (sub >= 0)
		close(sub);
	return fd;
}

void logtree_free(struct logtree *lt)
{
	if (!lt)
		return;
	if (lt->run_fd >= 0)
		close(lt->run_fd);
	if (lt->dir_fd >= 0)
		close(lt->dir_fd);
	free(lt->run_dir);
	free(lt);
}

/* --- log files ---------------------------------------------------------- */

struct logfile *logfile_new(int fd, const char *path, int lines)
{
	struct logfile *lf = calloc(1, sizeof(*lf));

	if (!lf || !(lf->path = strdup(path))) {
		free(lf);
		close(fd);
		return NULL;
	}
	lf->fd = fd;
	lf->lines = lines;
	return lf;
}

enum logfile_result logfile_write(struct logfile *lf, const void *buf,
				  size_t len)
{
	const char *p = buf;
	size_t left = len;
	int saved = 0;

	while (left > 0) {
		ssize_t n = write(lf->fd, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			saved = n < 0 ? errno : ENOSPC;
			break;
		}
		p += n;
		left -= (size_t)n;
	}
	if (left == 0) {
		lf->size += len;
		return LOGFILE_OK;
	}
	if (lf->lines) {
		/* Half a line would glue itself to the next: cut it. */
		if (left < len && ftruncate(lf->fd, (off_t)lf->size) < 0)
			lf->size += len - left;
		else
			left = len;
	} else {
		lf->size += len - left;
	}
	lf->lost += left;
	if (lf->error)
		return LOGFILE_LOST;
	lf->error = saved ? saved : EIO;
	return LOGFILE_FIRST_FAILURE;
}

int logfile_error(const struct logfile *lf)
{
	return lf ? lf->error : 0;
}

uint64_t logfile_lost(const struct logfile *lf)
{
	return lf ? lf->lost : 0;
}

const char *logfile_path(const struct logfile *lf)
{
	return lf->path;
}

void logfile_free(struct logfile *lf)
{
	if (!lf)
		return;
	close(lf->fd);
	free(lf->path);
	free(lf);
}
