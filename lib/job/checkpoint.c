/* checkpoint.c — newest complete checkpoint; see checkpoint.h. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/checkpoint.h"

int checkpoint_name_cmp(const char *a, const char *b)
{
	while (*a && *b) {
		if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
			const char *sa = a, *sb = b;
			size_t la, lb;

			while (*sa == '0' && isdigit((unsigned char)sa[1]))
				sa++;
			while (*sb == '0' && isdigit((unsigned char)sb[1]))
				sb++;
			a = sa;
			b = sb;
			while (isdigit((unsigned char)*a))
				a++;
			while (isdigit((unsigned char)*b))
				b++;
			la = (size_t)(a - sa);
			lb = (size_t)(b - sb);
			if (la != lb)
				return la < lb ? -1 : 1;
			int c = memcmp(sa, sb, la);

			if (c)
				return c < 0 ? -1 : 1;
			continue;
		}
		if (*a != *b)
			return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
		a++;
		b++;
	}
	return *a ? 1 : *b ? -1 : 0;
}

static int add_skip(struct checkpoint_result *res, const char *path,
		    const char *reason)
{
	struct checkpoint_skip *n =
		realloc(res->skipped, (res->n_skipped + 1) * sizeof(*n));

	if (!n)
		return -1;
	res->skipped = n;
	n[res->n_skipped].path = strdup(path);
	n[res->n_skipped].reason = strdup(reason);
	if (!n[res->n_skipped].path || !n[res->n_skipped].reason) {
		free(n[res->n_skipped].path);
		free(n[res->n_skipped].reason);
		return -1;
	}
	res->n_skipped++;
	return 0;
}

/* 1: complete, 0: skipped (reason recorded), -1: out of memory. */
static int check_candidate(const char *path, const char *marker,
			   struct checkpoint_result *res)
{
	struct stat st;
	char reason[512];

	if (stat(path, &st) < 0) {
		snprintf(reason, sizeof(reason), "unreadable: %s",
			 strerror(errno));
		return add_skip(res, path, reason) < 0 ? -1 : 0;
	}
	if (marker) {
		char m[8192];

		if (!S_ISDIR(st.st_mode)) {
			snprintf(reason, sizeof(reason),
				 "not a directory, cannot hold %s", marker);
			return add_skip(res, path, reason) < 0 ? -1 : 0;
		}
		snprintf(m, sizeof(m), "%s/%s", path, marker);
		if (access(m, F_OK) < 0) {
			snprintf(reason, sizeof(reason), "no %s marker%s%s",
				 marker, errno == ENOENT ? "" : ": ",
				 errno == ENOENT ? "" : strerror(errno));
			return add_skip(res, path, reason) < 0 ? -1 : 0;
		}
	} else if (S_ISDIR(st.st_mode) && access(path, R_OK | X_OK) < 0) {
		snprintf(reason, sizeof(reason), "unreadable: %s",
			 strerror(errno));
		return add_skip(res, path, reason) < 0 ? -1 : 0;
	}
	return 1;
}

static int found(struct checkpoint_result *res, const char *path,
		 const char *source)
{
	res->path = strdup(path);
	res->source = strdup(source);
	return res->path && res->source ? 0 : -1;
}

/* Whether s is valid UTF-8 (no overlong forms, surrogates or code points
 * above U+10FFFF): herd's events and its messages to the agents are JSON,
 * which carries nothing else. */
static int utf8_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned cp;
		int n;

		if (*p < 0x80) {
			p++;
			continue;
		} else if ((*p & 0xe0) == 0xc0) {
			cp = *p & 0x1f;
			n = 1;
		} else if ((*p & 0xf0) == 0xe0) {
			cp = *p & 0x0f;
			n = 2;
		} else if ((*p & 0xf8) == 0xf0) {
			cp = *p & 0x07;
			n = 3;
		} else {
			return 0;
		}
		for (int i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		p += n + 1;
	}
	return 1;
}

/* Why a name found in checkpoint.dir cannot be passed on, or NULL: a
 * control character would end a line of herd's messages or logs (and a
 * comment in a shell command); bytes that are not UTF-8 cannot go into
 * the LAUNCH message (the node would refuse it and be evicted). */
static const char *name_unfit(const char *name)
{
	for (const char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return "its name holds a control character (a newline, "
			       "a tab, ...)";
	if (!utf8_ok(name))
		return "its name is not valid UTF-8 (herd's events and "
		       "messages to the nodes are JSON)";
	return NULL;
}

/* Whether tag can name an entry of checkpoint.dir: one path component
 * ("global_step100"), never a way out of the directory ("..", "a/b",
 * "/etc") nor text that would end a line in a command or a log.  Other
 * bytes (blanks, ';', quotes) are allowed: herd passes the path to ranks
 * as one quoted argument (render_shell), never as shell text. */
static int tag_ok(const char *tag)
{
	if (!*tag || !strcmp(tag, ".") || !strcmp(tag, ".."))
		return 0;
	return !strchr(tag, '/') && !name_unfit(tag);
}

/* The tag named by dir/latest_file, without surrounding blanks; NULL when
 * the file is absent or empty, or (recorded as skipped, *oom on out of
 * memory) when it is no regular file or names something else than one
 * entry of dir.  Whoever can write dir can make `latest` a FIFO, or a
 * link to one or to a terminal: opened non-blocking and checked, so that
 * herd never waits on it. */
static char *read_tag(const char *dir, const char *latest_file,
		      struct checkpoint_result *res, int *oom)
{
	char path[8192], *tag, *start;
	struct stat st;
	size_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, latest_file);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		if (add_skip(res, path,
			     "not a regular file: herd reads no FIFO, "
			     "device or directory as the latest tag") < 0)
			*oom = 1;
		return NULL;
	}
	tag = calloc(1, CHECKPOINT_TAG_MAX + 1);
	if (!tag) {
		close(fd);
		*oom = 1;
		return NULL;
	}
	while (n < CHECKPOINT_TAG_MAX) {
		ssize_t r = read(fd, tag + n, CHECKPOINT_TAG_MAX - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	tag[n] = '\0';
	while (n > 0 && isspace((unsigned char)tag[n - 1]))
		tag[--n] = '\0';
	for (start = tag; isspace((unsigned char)*start); start++)
		;
	if (!*start) {
		free(tag);
		return NULL;
	}
	memmove(tag, start, strlen(start) + 1);
	if (!tag_ok(tag)) {
		char reason[256];

		snprintf(reason, sizeof(reason),
			 "%s names no entry of checkpoint.dir (one name "
			 "expected: valid UTF-8, no '/', control character, "
			 "'.' or '..')",
			 latest_file);
		if (add_skip(res, path, reason) < 0)
			*oom = 1;
		free(tag);
		return NULL;
	}
	return tag;
}

struct cand {
	char *path;
	const char *name;
	time_t mtime;
};

static int cand_cmp_newest_first(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	int c = checkpoint_name_cmp(b->name, a->name);

	if (c)
		return c;
	return a->mtime < b->mtime ? 1 : a->mtime > b->mtime ? -1 : 0;
}

int checkpoint_find(const char *dir, const char *latest_file,
		    const char *pattern, const char *marker,
		    struct checkpoint_result *res, struct herd_err *err)
{
	glob_t g = {0};
	struct cand *c = NULL;
	char *tag = NULL, *latest_path = NULL;
	char pat[8192];
	const char *why;
	size_t n = 0;
	int rc = -1, r, oom = 0;

	memset(res, 0, sizeof(*res));
	if (!dir)
		return 0;
	if (latest_file && (tag = read_tag(dir, latest_file, res, &oom))) {
		if (asprintf(&latest_path, "%s/%s", dir, tag) < 0) {
			latest_path = NULL;
			goto oom;
		}
		r = check_candidate(latest_path, marker, res);
		if (r < 0)
			goto oom;
		if (r == 1) {
			if (found(res, latest_path, "latest_file") < 0)
				goto oom;
			rc = 0;
			goto out;
		}
	}
	if (oom)
		goto oom;
	if (!pattern) {
		rc = 0;
		goto out;
	}
	if (strchr(pattern, '/')) {
		herd_errprintf(err, "checkpoint.pattern '%s' must name entries "
				    "of checkpoint.dir, without '/'", pattern);
		goto out;
	}
	snprintf(pat, sizeof(pat), "%s/%s", dir, pattern);
	r = glob(pat, GLOB_NOSORT, NULL, &g);
	if (r == GLOB_NOMATCH || (r == GLOB_ABORTED)) {
		rc = 0;
		goto out;
	}
	if (r != 0)
		goto oom;
	n = g.gl_pathc < CHECKPOINT_CANDIDATES_MAX ? g.gl_pathc
						   : CHECKPOINT_CANDIDATES_MAX;
	c = calloc(n ? n : 1, sizeof(*c));
	if (!c)
		goto oom;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		const char *slash = strrchr(g.gl_pathv[i], '/');

		c[i].path = g.gl_pathv[i];
		c[i].name = slash ? slash + 1 : g.gl_pathv[i];
		c[i].mtime = stat(c[i].path, &st) == 0 ? st.st_mtime : 0;
	}
	qsort(c, n, sizeof(*c), cand_cmp_newest_first);
	for (size_t i = 0; i < n; i++) {
		/* Hidden temporaries of an atomic save are never candidates. */
		if (c[i].name[0] == '.')
			continue;
		if (latest_path && !strcmp(c[i].path, latest_path))
			continue;	/* already judged */
		if ((why = name_unfit(c[i].name))) {
			/* As for latest's tag.  The path is recorded with
			 * '?' for what JSON and a terminal cannot take. */
			char *shown = strdup(c[i].path);

			for (char *s = shown; s && *s; s++)
				if ((unsigned char)*s < 0x20 || *s == 0x7f ||
				    (unsigned char)*s >= 0x80)
					*s = '?';
			r = shown ? add_skip(res, shown, why) : -1;
			free(shown);
			if (r < 0)
				goto oom;
			continue;
		}
		r = check_candidate(c[i].path, marker, res);
		if (r < 0)
			goto oom;
		if (r == 1) {
			if (found(res, c[i].path, "pattern") < 0)
				goto oom;
			break;
		}
	}
	rc = 0;
	goto out;
oom:
	herd_errprintf(err, "out of memory while looking for checkpoints");
out:
	if (rc < 0)
		checkpoint_result_free(res);
	free(c);
	globfree(&g);
	free(tag);
	free(latest_path);
	return rc;
}

void checkpoint_result_free(struct checkpoint_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n_skipped; i++) {
		free(res->skipped[i].path);
		free(res->skipped[i].reason);
	}
	free(res->skipped);
	free(res->path);
	free(res->source);
	memset(res, 0, sizeof(*res));
}
