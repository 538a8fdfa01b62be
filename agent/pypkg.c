/* pypkg.c — the herd Python package on every node, on every rank's
 * PYTHONPATH, with no set-up.
 *
 * The agent carries python/herd/NAME.py in its own image (pypkg.h).  At
 * start it makes them a package directory, herd/, on the node:
 *
 *   $TMPDIR/herd-agent-UID/python-HASH/herd/NAME.py
 *
 * HASH is a 128-bit checksum of the names and bytes of the files, so an
 * agent of another build never uses (or removes) this build's copy and
 * every agent of the same build on the node shares one.  The copy is
 * used only when python-HASH and herd/ are directories of this user
 * with no access for group or other, and every file is a regular file
 * of this user that nobody else may write, holding exactly the bytes the
 * image carries; everything is opened with O_NOFOLLOW and checked on
 * the descriptor.  A missing copy is written in the agent's private
 * directory (rundir.c) and renamed into place, so a python-HASH either
 * is whole or does not exist, and two agents starting at once both end
 * with the same whole copy.
 *
 * Where the user's directory is not safe (another user's, a symlink,
 * open to others: rundir.c does not use it) or the shared copy does not
 * verify, the package stays in the agent's own directory (private,
 * removed with it) and the agent says so in one line.  With no private
 * directory at all, ranks get no package and the agent says that.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/pypkg.h"

/* A package file larger than this is not read back to verify (ours are
 * a few KB; a bigger one there is not ours). */
#define PYPKG_FILE_MAX (4 * 1024 * 1024)

static size_t file_len(const struct pypkg_file *f)
{
	return (size_t)(f->end - f->data);
}

/* "python-HASH" of this image's files into name. */
static void pypkg_dir_name(char *name, size_t len)
{
	uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;

	for (const struct pypkg_file *f = pypkg_files; f->name; f++) {
		const unsigned char *parts[2] = {(const unsigned char *)f->name,
						 f->data};
		size_t lens[2] = {strlen(f->name) + 1, file_len(f)};

		for (int k = 0; k < 2; k++)
			for (size_t i = 0; i < lens[k]; i++) {
				a = (a ^ parts[k][i]) * 0x100000001b3ull;
				b = (b ^ parts[k][i]) * 0x100000001b3ull;
			}
	}
	snprintf(name, len, "python-%016" PRIx64 "%016" PRIx64, a, b);
}

/* Opens name in dfd as a directory of ours with no group/other access;
 * the descriptor, or -1. */
static int private_dir_at(int dfd, const char *name)
{
	struct stat st;
	int fd =
	    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != getuid() || (st.st_mode & 077)) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

/* Whether file f in dfd is a regular file of ours that nobody else may
 * write, holding exactly f's bytes. */
static bool file_matches(int dfd, const struct pypkg_file *f)
{
	size_t len = file_len(f), got = 0;
	struct stat st;
	char *buf = NULL;
	bool ok = false;
	int fd = openat(dfd, f->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != getuid() || (st.st_mode & 022) ||
	    (size_t)st.st_size != len || len > PYPKG_FILE_MAX ||
	    !(buf = malloc(len ? len : 1)))
		goto out;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n <= 0)
			goto out;
		got += (size_t)n;
	}
	ok = !memcmp(buf, f->data, len);
out:
	free(buf);
	close(fd);
	return ok;
}

/* Whether the copy python-HASH in dfd is whole and ours. */
static bool copy_verifies(int dfd, const char *name)
{
	int top = private_dir_at(dfd, name), pkg;
	bool ok = true;

	if (top < 0)
		return false;
	pkg = private_dir_at(top, "herd");
	close(top);
	if (pkg < 0)
		return false;
	for (const struct pypkg_file *f = pypkg_files; ok && f->name; f++)
		ok = file_matches(pkg, f);
	close(pkg);
	return ok;
}

static int write_file_at(int dfd, const struct pypkg_file *f)
{
	size_t len = file_len(f), done = 0;
	int fd =
	    openat(dfd, f->name,
		   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t n = write(fd, f->data + done, len - done);

		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	return close(fd);
}

/* Writes python/herd/ into the agent's own directory (rundfd).  Returns
 * 0 or -1 (errno). */
static int write_copy(int rundfd)
{
	int top = -1, pkg = -1, rc = -1;

	if ((mkdirat(rundfd, "python", 0700) < 0 && errno != EEXIST) ||
	    (top = private_dir_at(rundfd, "python")) < 0 ||
	    (mkdirat(top, "herd", 0700) < 0 && errno != EEXIST) ||
	    (pkg = private_dir_at(top, "herd")) < 0)
		goto out;
	for (const struct pypkg_file *f = pypkg_files; f->name; f++) {
		if (file_matches(pkg, f))
			continue;
		unlinkat(pkg, f->name, 0); /* a link, never its target */
		if (write_file_at(pkg, f) < 0)
			goto out;
	}
	rc = 0;
out : {
	int e = errno;

	if (pkg >= 0)
		close(pkg);
	if (top >= 0)
		close(top);
	errno = e;
}
	return rc;
}

void pypkg_install(struct agent *a)
{
	char name[64];
	int rundfd;

	a->py_dir[0] = '\0';
	pypkg_dir_name(name, sizeof(name));
	/* The common case: a verified copy is there already. */
	if (a->user_ok && copy_verifies(a->user_fd, name)) {
		snprintf(a->py_dir, sizeof(a->py_dir), "%s/%s", a->user_dir,
			 name);
		return;
	}
	if (!a->run_dir[0] ||
	    (rundfd = open(a->run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					   O_CLOEXEC)) < 0) {
		fprintf(stderr, "herd-agent: no private directory in $TMPDIR "
				"for the herd Python package: ranks do not "
				"get it on PYTHONPATH\n");
		return;
	}
	if (write_copy(rundfd) < 0) {
		fprintf(stderr,
			"herd-agent: cannot write the herd Python "
			"package in %s: %s; ranks do not get it on "
			"PYTHONPATH\n",
			a->run_dir, strerror(errno));
		close(rundfd);
		return;
	}
	if (a->user_ok) {
		/* Whole or absent; another agent may have put its (equal)
		 * copy there first. */
		if (renameat(rundfd, "python", a->user_fd, name) == 0 ||
		    copy_verifies(a->user_fd, name)) {
			snprintf(a->py_dir, sizeof(a->py_dir), "%s/%s",
				 a->user_dir, name);
			close(rundfd);
			return;
		}
		fprintf(stderr,
			"herd-agent: %s/%s is not this build's herd "
			"Python package (changed, or not a private "
			"directory of this user): not used; ranks get "
			"a private copy\n",
			a->user_dir, name);
	} else {
		fprintf(stderr,
			"herd-agent: $TMPDIR/herd-agent-%ld is not a "
			"private directory of this user: not used; "
			"ranks get a private copy of the herd Python "
			"package\n",
			(long)getuid());
	}
	close(rundfd);
	snprintf(a->py_dir, sizeof(a->py_dir), "%s/python", a->run_dir);
}

int pypkg_env(const struct agent *a, struct envv *env)
{
	const char *old = NULL;
	char *val;
	int rc;

	if (!a->py_dir[0])
		return 0;
	for (size_t i = 0; i < env->n; i++)
		if (!strncmp(env->v[i], "PYTHONPATH=", 11))
			old = env->v[i] + 11;
	if (old && old[0])
		rc = asprintf(&val, "%s:%s", a->py_dir, old);
	else
		rc = asprintf(&val, "%s", a->py_dir);
	if (rc < 0)
		return -1;
	rc = envv_set(env, "PYTHONPATH", val);
	free(val);
	return rc;
}
