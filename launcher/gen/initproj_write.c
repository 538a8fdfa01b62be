/* gen/initproj_write.c — a rendered project written into a directory
 * only its owner controls (file.h: no link followed, atomic replace), and
 * the sums that tell herd init --force which files are still as written;
 * see gen/initproj.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "herd/file.h"
#include "herd/logtree.h"
#include "launcher/gen/initproj.h"

/* Writes text to dfd/name through a temporary file and renameat()
 * (file_write_at: never through a link). */
static int write_at(int dfd, const char *dir, const char *name,
		    const char *text, mode_t mode, struct herd_err *err)
{
	if (file_write_at(dfd, name, text, strlen(text), mode) < 0)
		return herd_errprintf(err, "cannot write %s/%s: %s", dir, name,
				      strerror(errno));
	return 0;
}

/* How herd init's walk of DIR's parent names what it refuses. */
static const struct logtree_words dir_words = {
    .prefix = "",
    .harm = "replace the project's files",
    .place = "the project",
    .real = "give the real directory",
};

/* Opens dir (made 0755 when missing) after checking it is a directory of
 * the caller's that nobody else can write to, reached from / as log.dir
 * is (logtree_walk: no parent another user controls, no link of
 * theirs).  Everything after is relative to the fd.  Returns the fd, -1
 * when refused, -2 when it could not be made or opened. */
int initproj_open_dir(const char *given, struct herd_err *err)
{
	char dir[PATH_MAX], abs[PATH_MAX * 2], cwd[PATH_MAX];
	const char *base = ".";
	struct stat st;
	enum file_dir_status status;
	size_t n;
	int pfd, dfd;

	/* "link/" would follow the link: the name without its slashes. */
	if ((n = strlen(given)) >= sizeof(dir))
		return herd_errprintf(err, "%s: path too long", given);
	memcpy(dir, given, n + 1);
	while (n > 1 && dir[n - 1] == '/')
		dir[--n] = '\0';
	/* The parent is walked from /: a relative DIR from the current
	 * directory's real path. */
	if (dir[0] != '/' && !getcwd(cwd, sizeof(cwd))) {
		herd_errprintf(err, "cannot find the current directory: %s",
			       strerror(errno));
		return -2;
	}
	snprintf(abs, sizeof(abs), "%s%s%s", dir[0] == '/' ? "" : cwd,
		 dir[0] == '/' ? "" : "/", dir);
	{
		char *slash = strrchr(abs, '/');

		if (strcmp(slash + 1, ".") && strcmp(slash + 1, "..") &&
		    slash[1]) {
			base = slash + 1;
			if (slash == abs)
				slash++; /* "/p": the parent is / */
			*slash = '\0';
			if (!abs[0])
				strcpy(abs, "/");
		}
	}
	if ((pfd = logtree_walk(abs, &dir_words, err)) < 0)
		return -1;
	dfd = file_dir_open(pfd, base, 0755, &st, &status);
	close(pfd);
	switch (status) {
	case FILE_DIR_OK:
		return dfd;
	case FILE_DIR_MAKE_FAILED:
		herd_errprintf(err, "cannot make %s: %s", dir, strerror(errno));
		return -2;
	case FILE_DIR_OPEN_FAILED:
		herd_errprintf(err, "cannot open %s: %s", dir, strerror(errno));
		return -2;
	case FILE_DIR_LINK:
		return herd_errprintf(err,
				      "%s is a symbolic link: give the "
				      "directory it names, or another one",
				      dir);
	case FILE_DIR_NOT_DIR:
		return herd_errprintf(err, "%s is not a directory", dir);
	case FILE_DIR_NOT_OWNED:
		return herd_errprintf(err,
				      "%s belongs to uid %ld, not to you: herd "
				      "init writes only into your own "
				      "directories",
				      dir, (long)st.st_uid);
	case FILE_DIR_WRITABLE:
		return herd_errprintf(
		    err,
		    "%s is writable by %s (mode %04o), who "
		    "could replace the project's files; run "
		    "chmod go-w '%s' or choose another "
		    "directory",
		    dir, (st.st_mode & 002) ? "others" : "its group",
		    (unsigned)(st.st_mode & 07777), dir);
	case FILE_DIR_CHANGED:
		break;
	}
	return herd_errprintf(err, "%s changed while herd opened it", dir);
}

/* text's SHA-256 as 64 hex digits into hex (65 bytes).  Returns 0 or -1. */
static int sha256_hex(const void *text, size_t len, char *hex)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!EVP_Digest(text, len, md, &mdlen, EVP_sha256(), NULL) ||
	    mdlen != 32)
		return -1;
	for (unsigned int i = 0; i < mdlen; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

/* The SHA-256 of the regular file dfd/name (not followed when a link)
 * into hex.  Returns 0, or -1 when it is not a regular file of at most
 * INITPROJ_FILE_MAX bytes or cannot be read. */
static int file_sha256(int dfd, const char *name, char *hex)
{
	size_t len = 0;
	char *buf = file_read_at(dfd, name, INITPROJ_FILE_MAX, &len);
	int rc;

	if (!buf)
		return -1;
	rc = sha256_hex(buf, len, hex);
	free(buf);
	return rc;
}

/* The sums file of the project in dfd ({"sha256": {FILE: HEX}}), or a
 * new empty one when there is none or it is not one. */
static json_t *sums_read(int dfd)
{
	int fd = openat(dfd, INITPROJ_SUMS, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	json_t *doc = NULL;
	json_error_t jerr;

	if (fd >= 0) {
		doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
		close(fd);
	}
	if (!json_is_object(json_object_get(doc, "sha256"))) {
		json_decref(doc);
		doc = json_pack("{s:s, s:{}}", "about",
				"the files herd init wrote and their SHA-256: "
				"herd init --force replaces only these "
				"unchanged",
				"sha256");
	}
	return doc;
}

static int sums_write(int dfd, const char *dir, json_t *doc,
		      struct herd_err *err)
{
	char *text = json_dumps(doc, JSON_INDENT(1) | JSON_SORT_KEYS);
	int rc;

	if (!text)
		return herd_errprintf(err, "out of memory");
	rc = write_at(dfd, dir, INITPROJ_SUMS, text, 0644, err);
	free(text);
	return rc;
}

/* Whether dfd/name is as herd init wrote it (its sum recorded in sums)
 * or holds text already. */
static bool unchanged(int dfd, const char *name, json_t *sums, const char *text)
{
	const char *was = json_string_value(
	    json_object_get(json_object_get(sums, "sha256"), name));
	char hex[65], want[65];

	if (file_sha256(dfd, name, hex) < 0)
		return false;
	if (was && !strcmp(was, hex))
		return true;
	return sha256_hex(text, strlen(text), want) == 0 && !strcmp(hex, want);
}

int initproj_write(struct initproj *p, const char *dir, int force,
		   struct herd_err *err)
{
	char exist[HERD_ERR_MAX / 2] = "", changed[HERD_ERR_MAX / 2] = "";
	json_t *sums = NULL, *tab;
	int dfd, rc = -1;

	if ((dfd = initproj_open_dir(dir, err)) < 0)
		return dfd;
	if (!(sums = sums_read(dfd))) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	tab = json_object_get(sums, "sha256");
	for (size_t i = 0; i < p->n_files; i++) {
		struct initproj_file *f = &p->files[i];
		struct stat st;

		f->replaced = f->kept = false;
		if (fstatat(dfd, f->to, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			herd_errprintf(err, "%s/%s: %s", dir, f->to,
				       strerror(errno));
			rc = -2;
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			herd_errprintf(err,
				       "%s/%s is a directory: herd init "
				       "would write a file there",
				       dir, f->to);
			goto out;
		}
		f->replaced = true;
		snprintf(exist + strlen(exist), sizeof(exist) - strlen(exist),
			 "%s%s", exist[0] ? ", " : "", f->to);
		if (!unchanged(dfd, f->to, sums, f->text)) {
			f->kept = true;
			snprintf(changed + strlen(changed),
				 sizeof(changed) - strlen(changed), "%s%s",
				 changed[0] ? ", " : "", f->to);
		}
	}
	if (exist[0] && !force) {
		herd_errprintf(err,
			       "%s holds %s already: nothing written; give "
			       "--force to replace %s",
			       dir, exist, strchr(exist, ',') ? "them" : "it");
		goto out;
	}
	if (changed[0] && force < 2) {
		bool many = strchr(changed, ',') != NULL;

		const char *them = many ? "them" : "it";

		herd_errprintf(err,
			       "%s: %s changed since herd init wrote %s (or "
			       "herd init did not write %s): nothing written; "
			       "give --force twice to replace %s, keeping "
			       "yours as %s%s",
			       dir, changed, them, them, them,
			       many ? "FILE" : changed,
			       many ? ".orig each" : ".orig");
		goto out;
	}
	for (size_t i = 0; i < p->n_files; i++) {
		struct initproj_file *f = &p->files[i];
		char orig[NAME_MAX + 1];

		if (!f->kept)
			continue;
		snprintf(orig, sizeof(orig), "%s.orig", f->to);
		if (renameat(dfd, f->to, dfd, orig) < 0) {
			herd_errprintf(err, "cannot keep %s/%s as %s: %s", dir,
				       f->to, orig, strerror(errno));
			rc = -2;
			goto out;
		}
	}
	for (size_t i = 0; i < p->n_files; i++) {
		char hex[65];

		if (write_at(dfd, dir, p->files[i].to, p->files[i].text,
			     p->files[i].mode, err) < 0) {
			rc = -2;
			goto out;
		}
		if (sha256_hex(p->files[i].text, strlen(p->files[i].text),
			       hex) < 0 ||
		    json_object_set_new(tab, p->files[i].to, json_string(hex)) <
			0) {
			herd_errprintf(err, "cannot hash %s/%s", dir,
				       p->files[i].to);
			rc = -2;
			goto out;
		}
	}
	if (sums_write(dfd, dir, sums, err) < 0) {
		rc = -2;
		goto out;
	}
	if (fsync(dfd) < 0) {
		herd_errprintf(err, "cannot sync %s: %s", dir, strerror(errno));
		rc = -2;
		goto out;
	}
	rc = 0;
out:
	json_decref(sums);
	close(dfd);
	return rc;
}

int initproj_sums_update(const char *dir, const char *name,
			 struct herd_err *err)
{
	json_t *sums = NULL;
	char hex[65];
	int dfd, rc = -2;

	if ((dfd = initproj_open_dir(dir, err)) < 0)
		return dfd;
	if (file_sha256(dfd, name, hex) < 0) {
		herd_errprintf(err, "cannot read %s/%s", dir, name);
		goto out;
	}
	if (!(sums = sums_read(dfd)) ||
	    json_object_set_new(json_object_get(sums, "sha256"), name,
				json_string(hex)) < 0) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	if (sums_write(dfd, dir, sums, err) < 0)
		goto out;
	rc = 0;
out:
	json_decref(sums);
	close(dfd);
	return rc;
}
