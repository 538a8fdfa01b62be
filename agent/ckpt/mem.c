/* ckpt/mem.c — the memory tier of the node: checkpoints in memory that
 * outlive the ranks, peer copies of other nodes' ranks, and persisting a
 * step to checkpoint.dir.
 *
 * Layout (every level 0700, owned by the agent's user, which is the
 * job's):
 *
 *   MEMDIR/herd-mem-UID/            the user's (MEMDIR: memory_dir)
 *     JOB/                          the job's (herd's key for the run)
 *       rank-R/step_NNNNNNNN/       rank R's own steps ($HERD_CKPT_MEM)
 *       peer/rank-R/step_NNNNNNNN/  copies of ranks of other nodes
 *
 * A step directory counts only when it is named step_N and holds
 * COMPLETE: writers (herd.ckpt, the copies below) write under a ".tmp-"
 * name and rename when whole, so a torn step is never offered.  Every
 * level is opened again on every use with O_NOFOLLOW and checked on the
 * descriptor (a directory, ours, no access for group or others): a path
 * another user made or a symlink is refused in one line and the ranks get
 * no HERD_CKPT_MEM (their checkpoints go to disk).
 *
 * The agent scans the tier every CKPT_SCAN_MS: each change goes to herd
 * as the whole inventory (CKPT_INV), older steps than the newest two of
 * each rank directory are removed, and memory_max is watched (a rank that
 * finds no room leaves ".full" in its directory; herd.ckpt does).  Copies
 * between nodes travel as CKPT_DATA chunks through herd, the only
 * connection the agent has: a peer copy is accepted from herd alone, its
 * announced size is checked against memory_max before anything is
 * written, and it is renamed into place only when every byte came.  The
 * tier is removed when the agent ends unless keep_memory is set; the
 * job's directory names its agent (".agent": pid and boot id), so that
 * the next agent of this user on the node removes what a killed one left
 * (not a directory kept with keep_memory: ".keep").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/ckpt/ckpt_mem.h"
/* Messages are cut at their buffer's size, never overrun; paths in the
 * tier are short (memory_dir, two names, a step). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* ---- checked directories ------------------------------------------------- */

/* Opens (making it 0700 when missing) the directory name in dfd, and
 * checks it on the descriptor: a directory, this user's, nobody else's.
 * Returns the fd, or -1 with why. */
int ckpt_open_private(int dfd, const char *name, bool make, char *why,
			size_t size)
{
	int fd;
	struct stat st;

	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && make) {
		if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST) {
			snprintf(why, size, "cannot make %s: %s", name,
				 strerror(errno));
			return -1;
		}
		fd = openat(dfd, name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		snprintf(why, size, "%s: %s", name,
			 errno == ELOOP || errno == ENOTDIR
				 ? "a symlink or not a directory"
				 : strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != getuid() || (st.st_mode & 077)) {
		snprintf(why, size,
			 "%s is owned by uid %u with mode %04o, not this "
			 "user's (uid %u, 0700)",
			 name, (unsigned)st.st_uid,
			 (unsigned)(st.st_mode & 07777), (unsigned)getuid());
		close(fd);
		return -1;
	}
	return fd;
}

/* Removes name in dfd and everything under it, through descriptors
 * opened with O_NOFOLLOW (a symlink is removed, never followed). */
void ckpt_rm_tree_at(int dfd, const char *name, int depth)
{
	int fd;
	DIR *d;
	struct dirent *e;

	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    depth < CKPT_RM_DEPTH)
			ckpt_rm_tree_at(dirfd(d), e->d_name, depth + 1);
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

static void say_error(struct agent *a, const char *fmt, const char *what)
{
	struct ckpt_mem *m = a->ckpt;

	snprintf(m->error, sizeof(m->error), fmt, what);
	if (!m->said_error)
		fprintf(stderr,
			"herd-agent: memory tier: %s; checkpoints go to disk\n",
			m->error);
	m->said_error = true;
	m->jobdir[0] = '\0';
}

/* The job's directory, opened and checked level by level; -1 when the
 * tier cannot be used (said once). */
int ckpt_open_job(struct agent *a)
{
	struct ckpt_mem *m = a->ckpt;
	char why[600], user[64];
	int base, ufd, jfd;

	if (!m || !m->conf || m->said_error)
		return -1;
	/* memory_dir itself is the system's (/dev/shm: root's, sticky). */
	base = open(m->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (base < 0) {
		snprintf(why, sizeof(why), "%s: %s", m->base, strerror(errno));
		say_error(a, "%s", why);
		return -1;
	}
	snprintf(user, sizeof(user), "herd-mem-%u", (unsigned)getuid());
	ufd = ckpt_open_private(base, user, true, why, sizeof(why));
	close(base);
	if (ufd < 0) {
		char full[1200];

		snprintf(full, sizeof(full), "%s/%s", m->base, why);
		say_error(a, "%s", full);
		return -1;
	}
	jfd = ckpt_open_private(ufd, m->job, true, why, sizeof(why));
	close(ufd);
	if (jfd < 0) {
		say_error(a, "%s", why);
		return -1;
	}
	snprintf(m->jobdir, sizeof(m->jobdir), "%s/%s/%s", m->base, user,
		 m->job);
	return jfd;
}

/* ---- the inventory ----------------------------------------------------------- */

/* N in "step_N" (digits only), or -1. */
static long step_of(const char *name)
{
	char *end;
	long v;

	if (strncmp(name, "step_", 5) || name[5] < '0' || name[5] > '9')
		return -1;
	errno = 0;
	v = strtol(name + 5, &end, 10);
	return errno || *end || v < 0 ? -1 : v;
}

static long rank_of(const char *name)
{
	char *end;
	long v;

	if (strncmp(name, "rank-", 5) || name[5] < '0' || name[5] > '9')
		return -1;
	errno = 0;
	v = strtol(name + 5, &end, 10);
	return errno || *end || v < 0 || v > 0x3fffffff ? -1 : v;
}

/* Bytes of the regular files in directory fd (closed). */
static int64_t dir_bytes(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	int64_t bytes = 0;

	if (!d) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ==
			0 &&
		    S_ISREG(st.st_mode))
			bytes += st.st_size;
	}
	closedir(d);
	return bytes;
}

/* Bytes of the regular files in step directory fd (ours), -1 when it is
 * not complete (no regular COMPLETE) or not ours. */
static int64_t step_bytes(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	int64_t bytes = 0;
	bool complete = false;

	if (!d) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != getuid())
			continue;
		bytes += st.st_size;
		if (!strcmp(e->d_name, "COMPLETE"))
			complete = true;
	}
	closedir(d);
	return complete ? bytes : -1;
}

static int cmp_long_desc(const void *x, const void *y)
{
	long a = *(const long *)x, b = *(const long *)y;

	return a < b ? 1 : a > b ? -1 : 0;
}

/* One rank directory: its complete steps into steps (the newest two;
 * older ones removed), its bytes into *used.  A ".full" left by the
 * rank sets *full. */
static void scan_rank(int rfd, int rank, bool peer, json_t *steps,
		      int64_t *used, bool *full)
{
	DIR *d;
	struct dirent *e;
	long found[64];
	size_t n = 0;
	int dup_fd = dup(rfd);

	if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
		if (dup_fd >= 0)
			close(dup_fd);
		return;
	}
	while ((e = readdir(d))) {
		long s = step_of(e->d_name);
		int sfd;
		int64_t b;

		if (!strcmp(e->d_name, ".full"))
			*full = true;
		/* A step being written counts against memory_max too. */
		if (!strncmp(e->d_name, ".tmp-", 5)) {
			sfd = openat(dirfd(d), e->d_name,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					 O_CLOEXEC);
			if (sfd >= 0)
				*used += dir_bytes(sfd);
			continue;
		}
		if (s < 0)
			continue;
		sfd = openat(dirfd(d), e->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sfd < 0)
			continue;
		b = step_bytes(sfd);
		if (b < 0)
			continue;
		*used += b;
		if (n < sizeof(found) / sizeof(found[0]))
			found[n++] = s;
		json_array_append_new(steps,
				      json_pack("{s:i, s:I, s:I, s:b}", "rank",
						rank, "step", (json_int_t)s,
						"bytes", (json_int_t)b, "peer",
						peer));
	}
	closedir(d);
	/* The newest two complete steps stay; older ones go (herd.ckpt
	 * prunes its own too: whoever comes first). */
	qsort(found, n, sizeof(found[0]), cmp_long_desc);
	for (size_t i = 2; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "step_%08ld", found[i]);
		ckpt_rm_tree_at(rfd, name, 0);
	}
}

/* Every rank directory in dfd (the job's, or its peer/). */
static void scan_ranks(int dfd, bool peer, json_t *steps, int64_t *used,
		       bool *full)
{
	int fd = dup(dfd);
	DIR *d;
	struct dirent *e;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		long r = rank_of(e->d_name);
		char why[600];
		int rfd;

		if (r < 0)
			continue;
		rfd = ckpt_open_private(dirfd(d), e->d_name, false, why,
				   sizeof(why));
		if (rfd < 0)
			continue;
		scan_rank(rfd, (int)r, peer, steps, used, full);
		close(rfd);
	}
	closedir(d);
}

static int cmp_step(const void *x, const void *y)
{
	json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
	json_int_t ka[3] = {json_integer_value(json_object_get(a, "rank")),
			    json_is_true(json_object_get(a, "peer")),
			    json_integer_value(json_object_get(a, "step"))};
	json_int_t kb[3] = {json_integer_value(json_object_get(b, "rank")),
			    json_is_true(json_object_get(b, "peer")),
			    json_integer_value(json_object_get(b, "step"))};

	for (int i = 0; i < 3; i++)
		if (ka[i] != kb[i])
			return ka[i] < kb[i] ? -1 : 1;
	return 0;
}

static json_t *sorted(json_t *arr)
{
	size_t n = json_array_size(arr);
	json_t **v = calloc(n ? n : 1, sizeof(*v)), *out = json_array();

	for (size_t i = 0; v && i < n; i++)
		v[i] = json_array_get(arr, i);
	if (v)
		qsort(v, n, sizeof(*v), cmp_step);
	for (size_t i = 0; v && out && i < n &&
			   i < (size_t)PROTO_CKPT_STEPS_MAX;
	     i++)
		json_array_append(out, v[i]);
	free(v);
	json_decref(arr);
	return out;
}

/* Looks at the tier; sends CKPT_INV when it changed (or force). */
void ckpt_scan(struct agent *a, bool force)
{
	struct ckpt_mem *m = a->ckpt;
	json_t *steps = json_array();
	int64_t used = 0;
	bool full = false;
	int jfd = ckpt_open_job(a), pfd;

	if (jfd >= 0) {
		scan_ranks(jfd, false, steps, &used, &full);
		pfd = openat(jfd, "peer",
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (pfd >= 0) {
			struct stat st;

			if (fstat(pfd, &st) == 0 && st.st_uid == getuid() &&
			    !(st.st_mode & 077))
				scan_ranks(pfd, true, steps, &used, &full);
			close(pfd);
		}
		close(jfd);
	}
	steps = sorted(steps);
	m->used = used;
	if (used >= m->max)
		full = true;
	if (full && !m->said_full && m->max > 0) {
		fprintf(stderr,
			"herd-agent: memory tier %s is full (%" PRId64
			" bytes in use, checkpoint.memory_max %" PRId64
			"): checkpoints that do not fit go to disk\n",
			m->jobdir, used, m->max);
		m->said_full = true;
	}
	if (force || full != m->full || !m->last || !json_equal(steps, m->last)) {
		json_t *body = json_pack("{s:s, s:O}", "dir", m->jobdir,
					 "steps", steps);

		if (body && m->error[0])
			json_object_set_new(body, "error",
					    json_string(m->error));
		if (body && full)
			json_object_set_new(body, "full", json_true());
		agent_send(a, PROTO_CKPT_INV, body, NULL, 0);
		json_decref(m->last);
		m->last = json_incref(steps);
		m->full = full;
	}
	json_decref(steps);
}

static void on_scan(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	struct ckpt_mem *m = a->ckpt;
	int64_t now = loop_now_ms();

	(void)loop;
	m->timer = 0;
	ckpt_copy_idle(a, now);
	ckpt_scan(a, false);
	m->timer = loop_timer_add(a->loop, CKPT_SCAN_MS, on_scan, a);
}

/* ---- herd's frames ----------------------------------------------------------- */

/* ---- what killed agents left ------------------------------------------------ */

/* The boot's id (a pid means nothing across boots), or "". */
static void boot_id(char *buf, size_t size)
{
	FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "re");

	buf[0] = '\0';
	if (fp) {
		if (!fgets(buf, (int)size, fp))
			buf[0] = '\0';
		fclose(fp);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

/* Marks the job's directory as this agent's (".agent": PID and boot id;
 * ".keep" with keep_memory), then removes the directories of jobs whose
 * agent is gone (killed: it could not remove its own), unless kept. */
static void mark_and_sweep(struct agent *a, int jfd)
{
	struct ckpt_mem *m = a->ckpt;
	char boot[64], line[128], user[64], why[600];
	int fd, base, ufd;
	DIR *d;
	struct dirent *e;

	boot_id(boot, sizeof(boot));
	fd = openat(jfd, ".agent",
		    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dprintf(fd, "%d %s\n", (int)getpid(), boot);
		close(fd);
	}
	if (m->keep && (fd = openat(jfd, ".keep",
				    O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
				    0600)) >= 0)
		close(fd);
	base = open(m->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(user, sizeof(user), "herd-mem-%u", (unsigned)getuid());
	ufd = base >= 0 ? ckpt_open_private(base, user, false, why, sizeof(why))
			: -1;
	if (base >= 0)
		close(base);
	if (ufd < 0 || !(d = fdopendir(ufd))) {
		if (ufd >= 0)
			close(ufd);
		return;
	}
	while ((e = readdir(d))) {
		int j, af;
		ssize_t n;
		long pid;
		char *sp;
		struct stat st;

		if (e->d_name[0] == '.' || !strcmp(e->d_name, m->job))
			continue;
		j = ckpt_open_private(dirfd(d), e->d_name, false, why, sizeof(why));
		if (j < 0)
			continue;
		af = openat(j, ".agent", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		n = af >= 0 ? read(af, line, sizeof(line) - 1) : -1;
		if (af >= 0)
			close(af);
		if (n <= 0 || fstatat(j, ".keep", &st, AT_SYMLINK_NOFOLLOW) == 0) {
			close(j);
			continue;
		}
		close(j);
		line[n] = '\0';
		line[strcspn(line, "\n")] = '\0';
		pid = strtol(line, &sp, 10);
		if (pid <= 0 || *sp != ' ')
			continue;
		if (!strcmp(sp + 1, boot) && (kill((pid_t)pid, 0) == 0 ||
					      errno != ESRCH))
			continue;
		ckpt_rm_tree_at(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

void ckpt_mem_on_conf(struct agent *a, struct proto_frame *f)
{
	struct ckpt_mem *m = a->ckpt;
	json_t *b = f->body;
	struct statvfs sv;

	if (!m && !(m = a->ckpt = calloc(1, sizeof(*m))))
		return;
	if (m->conf) /* one job per agent: the first word stands */
		return;
	for (int i = 0; i < CKPT_XFERS_MAX; i++)
		m->in[i].fd = -1;
	snprintf(m->base, sizeof(m->base), "%s",
		 json_string_value(json_object_get(b, "dir")));
	snprintf(m->job, sizeof(m->job), "%s",
		 json_string_value(json_object_get(b, "job")));
	m->max = json_integer_value(json_object_get(b, "max"));
	m->keep = json_is_true(json_object_get(b, "keep"));
	if (m->max == 0 && statvfs(m->base, &sv) == 0)
		m->max = (int64_t)(sv.f_blocks * sv.f_frsize / 2);
	m->conf = true;
	{
		int jfd = ckpt_open_job(a);

		if (jfd >= 0) {
			mark_and_sweep(a, jfd);
			close(jfd);
		}
	}
	ckpt_scan(a, true);
	m->timer = loop_timer_add(a->loop, CKPT_SCAN_MS, on_scan, a);
}

int ckpt_mem_rank_env(struct agent *a, int rank, struct envv *env)
{
	struct ckpt_mem *m = a->ckpt;
	char name[32], why[600], path[1500], max[32];
	int jfd, rfd, dfd;
	DIR *d;
	struct dirent *e;

	if ((jfd = ckpt_open_job(a)) < 0)
		return 0;
	snprintf(name, sizeof(name), "rank-%d", rank);
	rfd = ckpt_open_private(jfd, name, true, why, sizeof(why));
	close(jfd);
	if (rfd < 0) {
		say_error(a, "%s", why);
		return 0;
	}
	/* What a rank killed while saving left: never a step, removed
	 * before the next one starts; and its "no room" note. */
	if ((dfd = dup(rfd)) >= 0 && (d = fdopendir(dfd))) {
		while ((e = readdir(d)))
			if (!strncmp(e->d_name, ".tmp-", 5) ||
			    !strcmp(e->d_name, ".full"))
				ckpt_rm_tree_at(dirfd(d), e->d_name, 0);
		closedir(d);
	} else if (dfd >= 0) {
		close(dfd);
	}
	close(rfd);
	snprintf(path, sizeof(path), "%s/%s", m->jobdir, name);
	snprintf(max, sizeof(max), "%" PRId64, m->max);
	if (envv_set(env, "HERD_CKPT_MEM", path) < 0 ||
	    envv_set(env, "HERD_CKPT_MEM_MAX", max) < 0)
		return -1;
	return 0;
}

/* ---- the end -------------------------------------------------------------- */

void ckpt_mem_fini(struct agent *a)
{
	struct ckpt_mem *m = a->ckpt;

	if (!m)
		return;
	if (m->timer)
		loop_timer_del(a->loop, m->timer);
	if (m->pump_timer)
		loop_timer_del(a->loop, m->pump_timer);
	ckpt_copy_fini(a);
	if (!m->keep && m->conf && !m->said_error) {
		char user[64], why[600];
		int base = open(m->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int ufd = -1;

		snprintf(user, sizeof(user), "herd-mem-%u", (unsigned)getuid());
		if (base >= 0)
			ufd = ckpt_open_private(base, user, false, why, sizeof(why));
		if (ufd >= 0) {
			ckpt_rm_tree_at(ufd, m->job, 0);
			close(ufd);
		}
		if (base >= 0)
			close(base);
	}
	json_decref(m->last);
	free(m);
	a->ckpt = NULL;
}
