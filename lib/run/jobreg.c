/* lib/run/jobreg.c — the state directories of herd and the control socket
 * directory; see jobreg.h for the rules.  The job registry's entries are
 * jobreg_entry.c. */
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

int jobreg_id_ok(const char *id)
{
	return id && id[0] && id[0] != '.' && !strchr(id, '/') &&
	       strlen(id) <= JOBREG_ID_MAX;
}

/* A directory of herd's own: ours, a directory, and writable by nobody
 * else (strict: no group or other bits at all). */
static int check_own(int fd, const char *shown, bool strict,
		     struct herd_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return herd_errprintf(err, "cannot stat %s: %s", shown,
				      strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return herd_errprintf(err,
				      "%s is not a directory; move it "
				      "away",
				      shown);
	if (st.st_uid != geteuid())
		return herd_errprintf(err,
				      "%s is owned by uid %u, not by you; "
				      "herd keeps its jobs only in a "
				      "directory of yours: remove it",
				      shown, (unsigned)st.st_uid);
	if (st.st_mode & (strict ? 077 : 022))
		return herd_errprintf(err,
				      "%s has mode %04o, open to other users; "
				      "run chmod 700 '%s'",
				      shown, (unsigned)(st.st_mode & 07777),
				      shown);
	return 0;
}

/* The directory herd's own lives in ($XDG_STATE_HOME, ~/.local/state,
 * /tmp, $XDG_RUNTIME_DIR): made (0700) when missing and create, then
 * checked: owned by root or us, writable by others only when sticky. */
static int open_base(const char *base, bool create, struct herd_err *err)
{
	struct stat st;
	int fd;

	if (base[0] != '/')
		return herd_errprintf(err, "%s is not an absolute path", base);
	if (create) {
		char path[PATH_MAX];
		size_t len = strlen(base);

		if (len >= sizeof(path))
			return herd_errprintf(err, "%s: path too long", base);
		memcpy(path, base, len + 1);
		for (char *p = path + 1;; p++) {
			if (*p != '/' && *p)
				continue;
			{
				char c = *p;

				*p = '\0';
				if (mkdir(path, 0700) < 0 && errno != EEXIST)
					return herd_errprintf(
					    err, "cannot create %s: %s", path,
					    strerror(errno));
				*p = c;
			}
			if (!*p)
				break;
		}
	}
	fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return herd_errprintf(err, "cannot open %s: %s", base,
				      strerror(errno));
	if (fstat(fd, &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))) {
		close(fd);
		return herd_errprintf(err,
				      "%s is owned by uid %u with mode %04o: "
				      "another user could replace herd's "
				      "directory in it; fix its owner/mode",
				      base, (unsigned)st.st_uid,
				      (unsigned)(st.st_mode & 07777));
	}
	return fd;
}

/* Opens (makes when create) name in the directory fd, never through a
 * symlink, and checks it.  Takes fd (closed).  Returns the new O_PATH fd
 * or -1 with err. */
static int open_own(int fd, const char *shown_parent, const char *name,
		    bool create, bool strict, struct herd_err *err)
{
	char shown[PATH_MAX];
	struct stat st;
	int nfd;

	snprintf(shown, sizeof(shown), "%s/%s",
		 strcmp(shown_parent, "/") ? shown_parent : "", name);
	nfd = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0 && errno == ENOENT && create) {
		if (mkdirat(fd, name, 0700) == 0) {
			/* Exactly 0700, whatever the umask. */
			if (fchmodat(fd, name, 0700, AT_SYMLINK_NOFOLLOW) < 0) {
				herd_errprintf(err, "cannot chmod %s: %s",
					       shown, strerror(errno));
				goto out;
			}
		} else if (errno != EEXIST) {
			herd_errprintf(err, "cannot create %s: %s", shown,
				       strerror(errno));
			goto out;
		}
		nfd = openat(fd, name,
			     O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (nfd < 0) {
		int saved = errno;

		if ((saved == ELOOP || saved == ENOTDIR) &&
		    fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(st.st_mode))
			herd_errprintf(err,
				       "%s is a symlink; herd keeps its jobs "
				       "only in a real directory of yours: "
				       "remove it",
				       shown);
		else
			herd_errprintf(err, "cannot open %s: %s", shown,
				       saved == ENOTDIR ? "not a directory"
							: strerror(saved));
		errno = saved;
		goto out;
	}
	if (check_own(nfd, shown, strict, err) < 0) {
		close(nfd);
		nfd = -1;
		errno = EPERM;
	}
out:
	close(fd);
	return nfd;
}

/* The state home: $XDG_STATE_HOME (when absolute) or $HOME/.local/state
 * (HOME from the password file when unset). */
static int state_home(char *buf, size_t size, struct herd_err *err)
{
	const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");

	if (x && x[0] == '/') {
		if ((size_t)snprintf(buf, size, "%s", x) >= size)
			return herd_errprintf(err, "XDG_STATE_HOME too long");
		return 0;
	}
	if (!home || home[0] != '/') {
		struct passwd pw, *res = NULL;
		char tmp[1024];

		if (getpwuid_r(geteuid(), &pw, tmp, sizeof(tmp), &res) != 0 ||
		    !res || !pw.pw_dir || pw.pw_dir[0] != '/')
			return herd_errprintf(err,
					      "no home directory (HOME unset): "
					      "set XDG_STATE_HOME");
		if ((size_t)snprintf(buf, size, "%s/.local/state", pw.pw_dir) >=
		    size)
			return herd_errprintf(err, "home path too long");
		return 0;
	}
	if ((size_t)snprintf(buf, size, "%s/.local/state", home) >= size)
		return herd_errprintf(err, "HOME too long");
	return 0;
}

int jobreg_state_open(const char *sub, char *path, size_t size, bool create,
		      struct herd_err *err)
{
	char base[PATH_MAX], herd[PATH_MAX + 8];
	int fd;

	if (state_home(base, sizeof(base), err) < 0)
		return -1;
	if ((size_t)snprintf(path, size, "%s/herd/%s",
			     strcmp(base, "/") ? base : "", sub) >= size)
		return herd_errprintf(err, "%s/herd/%s: path too long", base,
				      sub);
	if (!create) {
		struct stat st;

		/* Nothing there yet is no error to a reader. */
		if (stat(path, &st) < 0 && errno == ENOENT) {
			herd_errprintf(err, "%s: nothing there yet", path);
			errno = ENOENT;
			return -1;
		}
	}
	if ((fd = open_base(base, create, err)) < 0)
		return -1;
	snprintf(herd, sizeof(herd), "%s/herd", strcmp(base, "/") ? base : "");
	if ((fd = open_own(fd, base, "herd", create, false, err)) < 0)
		return -1;
	return open_own(fd, herd, sub, create, false, err);
}

/* Opens the registry directory; its path into path.  Returns an O_PATH
 * fd or -1 with err (errno ENOENT: not there and !create). */
int jobreg_sock_dir(char *buf, size_t size, bool create, struct herd_err *err)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	char name[32];
	struct stat st;
	int fd;

	/* XDG_RUNTIME_DIR is used only when it is what the spec says: the
	 * user's own, 0700.  Else /tmp/herd-EUID. */
	if (x && x[0] == '/' && lstat(x, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid == geteuid() && !(st.st_mode & 077)) {
		if ((size_t)snprintf(buf, size, "%s/herd", x) >= size)
			return herd_errprintf(err, "XDG_RUNTIME_DIR too long");
		if ((fd = open_base(x, false, err)) < 0)
			return -1;
		fd = open_own(fd, x, "herd", create, true, err);
	} else {
		snprintf(name, sizeof(name), "herd-%u", (unsigned)geteuid());
		if ((size_t)snprintf(buf, size, "/tmp/%s", name) >= size)
			return herd_errprintf(err, "buffer too small");
		if ((fd = open_base("/tmp", false, err)) < 0)
			return -1;
		fd = open_own(fd, "/tmp", name, create, true, err);
	}
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* A directory of this run's own for its socket: mkdtemp(3) under /tmp
 * (a fresh name nobody else holds: mkdir fails on one that exists),
 * exactly 0700, opened without following a link and checked as every
 * socket directory.  Its path into dir (size >= 64).  Returns 0 or -1
 * with err. */
static int sock_dir_private(char *dir, size_t size, struct herd_err *err)
{
	int fd;

	if ((size_t)snprintf(dir, size, "/tmp/herd-%u.XXXXXX",
			     (unsigned)geteuid()) >= size)
		return herd_errprintf(err, "buffer too small");
	if (!mkdtemp(dir))
		return herd_errprintf(err,
				      "cannot create a directory in "
				      "/tmp: %s",
				      strerror(errno));
	/* Exactly 0700, whatever the umask (the sticky /tmp keeps the
	 * name ours meanwhile). */
	if (fchmodat(AT_FDCWD, dir, 0700, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
		0) {
		herd_errprintf(err, "cannot open %s: %s", dir, strerror(errno));
		rmdir(dir);
		return -1;
	}
	if (check_own(fd, dir, true, err) < 0) {
		close(fd);
		rmdir(dir);
		return -1;
	}
	close(fd);
	return 0;
}

int jobreg_sock_new(const char *id, char *buf, size_t size, bool *priv,
		    struct herd_err *note, struct herd_err *err)
{
	char dir[PATH_MAX];
	struct sockaddr_un sun;
	struct herd_err why;

	*priv = false;
	herd_err_clear(note);
	herd_err_clear(&why);
	if (!jobreg_id_ok(id))
		return herd_errprintf(err, "bad job id %s", id ? id : "");
	if (jobreg_sock_dir(dir, sizeof(dir), true, &why) == 0) {
		if ((size_t)snprintf(buf, size, "%s/%s.sock", dir, id) < size &&
		    strlen(buf) < sizeof(sun.sun_path))
			return 0;
		herd_errprintf(&why, "%s/%s.sock is too long for a socket path",
			       dir, id);
	}
	/* The shared directory is another's (a name in /tmp anyone may
	 * take first), a link, open to others, or too deep: this run
	 * gets a directory of its own; the registry entry says where. */
	if (sock_dir_private(dir, sizeof(dir), err) < 0)
		return -1;
	if ((size_t)snprintf(buf, size, "%s/%s.sock", dir, id) >= size ||
	    strlen(buf) >= sizeof(sun.sun_path)) {
		rmdir(dir);
		return herd_errprintf(err,
				      "%s/%s.sock: too long for a socket "
				      "path",
				      dir, id);
	}
	*priv = true;
	herd_errprintf(note,
		       "%s; this job's control socket is in %s instead "
		       "(herd finds it through the job registry)",
		       why.text, dir);
	return 0;
}

int jobreg_sock_path(const char *id, char *buf, size_t size, bool create,
		     struct herd_err *err)
{
	char dir[PATH_MAX];
	struct sockaddr_un sun;

	if (!jobreg_id_ok(id))
		return herd_errprintf(err, "bad job id %s", id ? id : "");
	if (jobreg_sock_dir(dir, sizeof(dir), create, err) < 0)
		return -1;
	if ((size_t)snprintf(buf, size, "%s/%s.sock", dir, id) >= size ||
	    strlen(buf) >= sizeof(sun.sun_path))
		return herd_errprintf(err,
				      "%s/%s.sock: too long for a socket "
				      "path; set XDG_RUNTIME_DIR shorter",
				      dir, id);
	return 0;
}
