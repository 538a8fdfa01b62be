/* ckpt_mem.c — the memory tier of the node: checkpoints in memory that
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

#include "agent.h"

/* Messages are cut at their buffer's size, never overrun; paths in the
 * tier are short (memory_dir, two names, a step). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

/* How often the tier is looked at: a step is noticed within this. */
#define CKPT_SCAN_MS 200
/* A copy that sends nothing for this long is dropped (its source died). */
#define CKPT_XFER_IDLE_MS 30000
/* Copies arriving at once; sends are one at a time, in order. */
#define CKPT_XFERS_MAX 64
/* What may wait in herd's connection before the next chunk is read. */
#define CKPT_SEND_WINDOW (4 * PROTO_CKPT_CHUNK)
/* Files of one step directory, and nesting when removing one. */
#define CKPT_FILES_MAX 4096
/* Files of a step a copy holds open (opened when the copy is asked for;
 * copies of a rank to a node are at most two at once, see
 * ckpt_mem_on_push). */
#define CKPT_OPEN_MAX 64
#define CKPT_RM_DEPTH  8

struct ckpt_in {
	long id;
	int rank;
	long step;
	int64_t total, got;
	int fd;			/* the file being written, -1 none */
	char file[PROTO_CKPT_NAME_MAX + 1];
	char tmp[64];		/* in peer/rank-R */
	int64_t last_ms;
	bool refused;		/* said no: later chunks are dropped */
};

struct ckpt_out {
	long id;
	int rank, node;
	long step;
	bool peer;
	char **files;		/* COMPLETE last */
	int64_t *sizes;
	size_t n, cur;
	int dfd, fd;		/* the step directory, the file being read */
	int *fds;		/* every file, opened when the copy was asked
				 * for: a step pruned meanwhile (a newer one
				 * came) is still sent whole */
	int64_t total, sent, foff;
	struct ckpt_out *next;
};

struct ckpt_mem {
	bool conf;
	char base[1024];	/* memory_dir */
	char job[PROTO_CKPT_NAME_MAX + 1];
	char jobdir[1400];	/* "" when the tier cannot be used */
	int64_t max;
	bool keep;
	bool said_error, said_full, said_refused;
	char error[512];
	bool full;
	int64_t used;		/* bytes in the job's directory, last scan */
	json_t *last;		/* the steps last sent */
	long timer;
	struct ckpt_in in[CKPT_XFERS_MAX];
	struct ckpt_out *out, *out_tail;
	long pump_timer;
};

/* ---- checked directories ------------------------------------------------- */

/* Opens (making it 0700 when missing) the directory name in dfd, and
 * checks it on the descriptor: a directory, this user's, nobody else's.
 * Returns the fd, or -1 with why. */
static int open_private(int dfd, const char *name, bool make, char *why,
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
static void rm_tree_at(int dfd, const char *name, int depth)
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
			rm_tree_at(dirfd(d), e->d_name, depth + 1);
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
static int open_job(struct agent *a)
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
	ufd = open_private(base, user, true, why, sizeof(why));
	close(base);
	if (ufd < 0) {
		char full[1200];

		snprintf(full, sizeof(full), "%s/%s", m->base, why);
		say_error(a, "%s", full);
		return -1;
	}
	jfd = open_private(ufd, m->job, true, why, sizeof(why));
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
		rm_tree_at(rfd, name, 0);
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
		rfd = open_private(dirfd(d), e->d_name, false, why,
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
static void scan(struct agent *a, bool force)
{
	struct ckpt_mem *m = a->ckpt;
	json_t *steps = json_array();
	int64_t used = 0;
	bool full = false;
	int jfd = open_job(a), pfd;

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

static void drop_in(struct ckpt_mem *m, struct ckpt_in *x, bool remove_tmp);

static void on_scan(struct loop *loop, void *arg)
{
	struct agent *a = arg;
	struct ckpt_mem *m = a->ckpt;
	int64_t now = loop_now_ms();

	(void)loop;
	m->timer = 0;
	for (int i = 0; i < CKPT_XFERS_MAX; i++)
		if (m->in[i].id && now - m->in[i].last_ms > CKPT_XFER_IDLE_MS)
			drop_in(m, &m->in[i], true);
	scan(a, false);
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
	ufd = base >= 0 ? open_private(base, user, false, why, sizeof(why))
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
		j = open_private(dirfd(d), e->d_name, false, why, sizeof(why));
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
		rm_tree_at(dirfd(d), e->d_name, 0);
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
		int jfd = open_job(a);

		if (jfd >= 0) {
			mark_and_sweep(a, jfd);
			close(jfd);
		}
	}
	scan(a, true);
	m->timer = loop_timer_add(a->loop, CKPT_SCAN_MS, on_scan, a);
}

int ckpt_mem_rank_env(struct agent *a, int rank, struct envv *env)
{
	struct ckpt_mem *m = a->ckpt;
	char name[32], why[600], path[1500], max[32];
	int jfd, rfd, dfd;
	DIR *d;
	struct dirent *e;

	if ((jfd = open_job(a)) < 0)
		return 0;
	snprintf(name, sizeof(name), "rank-%d", rank);
	rfd = open_private(jfd, name, true, why, sizeof(why));
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
				rm_tree_at(dirfd(d), e->d_name, 0);
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

static void ack(struct agent *a, long id, const char *error, int64_t bytes,
		const char *path)
{
	json_t *b = json_pack("{s:I, s:b}", "id", (json_int_t)id, "ok",
			      error == NULL);

	if (b && error)
		json_object_set_new(b, "error", json_string(error));
	if (b && !error)
		json_object_set_new(b, "bytes", json_integer(bytes));
	if (b && path)
		json_object_set_new(b, "path", json_string(path));
	agent_send(a, PROTO_CKPT_ACK, b, NULL, 0);
}

/* The step directory of rank (own or peer copy), opened and checked. */
static int open_step(struct agent *a, int rank, long step, bool peer,
		     char *why, size_t size)
{
	char name[32];
	int jfd = open_job(a), pfd = -1, rfd, sfd;

	if (jfd < 0) {
		snprintf(why, size, "no memory tier on this node");
		return -1;
	}
	if (peer) {
		pfd = open_private(jfd, "peer", false, why, size);
		close(jfd);
		if (pfd < 0)
			return -1;
		jfd = pfd;
	}
	snprintf(name, sizeof(name), "rank-%d", rank);
	rfd = open_private(jfd, name, false, why, size);
	close(jfd);
	if (rfd < 0)
		return -1;
	snprintf(name, sizeof(name), "step_%08ld", step);
	sfd = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(rfd);
	if (sfd < 0)
		snprintf(why, size, "rank %d step %ld: %s", rank, step,
			 strerror(errno));
	return sfd;
}

/* The regular files of step directory sfd, COMPLETE last; 0, or -1 when
 * it is not complete. */
static int list_step(int sfd, char ***files, int64_t **sizes, size_t *n,
		     int64_t *total)
{
	int fd = dup(sfd);
	DIR *d;
	struct dirent *e;
	bool complete = false;

	*files = NULL;
	*sizes = NULL;
	*n = 0;
	*total = 0;
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	*files = calloc(CKPT_FILES_MAX, sizeof(**files));
	*sizes = calloc(CKPT_FILES_MAX, sizeof(**sizes));
	while (*files && *sizes && (e = readdir(d)) && *n < CKPT_FILES_MAX) {
		struct stat st;

		if (e->d_name[0] == '.' ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_uid != getuid())
			continue;
		if (!strcmp(e->d_name, "COMPLETE")) {
			complete = true;
			continue;
		}
		(*files)[*n] = strdup(e->d_name);
		(*sizes)[(*n)++] = st.st_size;
		*total += st.st_size;
	}
	closedir(d);
	if (!complete || !*files || !*sizes || *n >= CKPT_FILES_MAX)
		return -1;
	(*files)[*n] = strdup("COMPLETE");
	if (fstatat(sfd, "COMPLETE", &(struct stat){0}, AT_SYMLINK_NOFOLLOW) <
	    0)
		return -1;
	{
		struct stat st;

		fstatat(sfd, "COMPLETE", &st, AT_SYMLINK_NOFOLLOW);
		(*sizes)[*n] = st.st_size;
		*total += st.st_size;
	}
	(*n)++;
	return 0;
}

static void free_list(char **files, int64_t *sizes, size_t n)
{
	for (size_t i = 0; files && i < n; i++)
		free(files[i]);
	free(files);
	free(sizes);
}

/* ---- sending a copy ------------------------------------------------------- */

static void out_free(struct ckpt_out *o)
{
	if (!o)
		return;
	if (o->fd >= 0)
		close(o->fd);
	if (o->dfd >= 0)
		close(o->dfd);
	for (size_t i = 0; o->fds && i < o->n; i++)
		if (o->fds[i] >= 0)
			close(o->fds[i]);
	free(o->fds);
	free_list(o->files, o->sizes, o->n);
	free(o);
}

static void pump(struct agent *a);

static void on_pump(struct loop *loop, void *arg)
{
	struct agent *a = arg;

	(void)loop;
	a->ckpt->pump_timer = 0;
	pump(a);
}

/* Sends chunks of the first copy queued while herd's connection takes
 * them (at most CKPT_SEND_WINDOW waiting), then comes back. */
static void pump(struct agent *a)
{
	struct ckpt_mem *m = a->ckpt;
	static char buf[PROTO_CKPT_CHUNK];

	while (m->out && a->conn && !conn_is_dead(a->conn)) {
		struct ckpt_out *o = m->out;
		ssize_t got = 0;
		bool file_end, last;
		json_t *b;

		if (conn_pending(a->conn) > CKPT_SEND_WINDOW) {
			if (!m->pump_timer)
				m->pump_timer =
				    loop_timer_add(a->loop, 5, on_pump, a);
			return;
		}
		if (o->fd < 0) {
			o->fd = o->fds[o->cur];
			o->fds[o->cur] = -1;
			o->foff = 0;
		}
		if (o->foff < o->sizes[o->cur]) {
			size_t want = (size_t)(o->sizes[o->cur] - o->foff);

			if (want > sizeof(buf))
				want = sizeof(buf);
			got = read(o->fd, buf, want);
			if (got <= 0)
				goto fail;
		}
		file_end = o->foff + got >= o->sizes[o->cur];
		last = file_end && o->cur + 1 == o->n;
		b = json_pack("{s:I, s:i, s:i, s:I, s:s, s:I, s:I, s:b}", "id",
			      (json_int_t)o->id, "to", o->node, "rank",
			      o->rank, "step", (json_int_t)o->step, "file",
			      o->files[o->cur], "offset", (json_int_t)o->sent,
			      "total", (json_int_t)o->total, "last", last);
		agent_send(a, PROTO_CKPT_DATA, b, buf, (size_t)got);
		o->sent += got;
		o->foff += got;
		if (file_end) {
			close(o->fd);
			o->fd = -1;
			o->cur++;
		}
		if (last) {
			m->out = o->next;
			out_free(o);
		}
		continue;
	fail:
		ack(a, o->id, "the step changed or vanished while it was "
			      "sent", 0, NULL);
		m->out = o->next;
		out_free(o);
	}
	if (!m->out)
		m->out_tail = NULL;
}

void ckpt_mem_on_push(struct agent *a, struct proto_frame *f)
{
	struct ckpt_mem *m = a->ckpt;
	json_t *b = f->body;
	struct ckpt_out *o;
	char why[600];
	long id = (long)json_integer_value(json_object_get(b, "id"));

	if (!m || !(o = calloc(1, sizeof(*o)))) {
		ack(a, id, "no memory tier on this node", 0, NULL);
		return;
	}
	o->id = id;
	o->rank = (int)json_integer_value(json_object_get(b, "rank"));
	o->step = (long)json_integer_value(json_object_get(b, "step"));
	o->peer = json_is_true(json_object_get(b, "peer"));
	o->node = (int)json_integer_value(json_object_get(b, "node"));
	o->fd = -1;
	o->dfd = open_step(a, o->rank, o->step, o->peer, why, sizeof(why));
	if (o->dfd < 0 ||
	    list_step(o->dfd, &o->files, &o->sizes, &o->n, &o->total) < 0) {
		ack(a, id, o->dfd < 0 ? why : "the step is not complete", 0,
		    NULL);
		out_free(o);
		return;
	}
	if (o->n > CKPT_OPEN_MAX) {
		ack(a, id, "more files in the step than a copy takes", 0,
		    NULL);
		out_free(o);
		return;
	}
	o->fds = malloc(o->n * sizeof(*o->fds));
	for (size_t i = 0; o->fds && i < o->n; i++)
		o->fds[i] = -1;
	for (size_t i = 0; o->fds && i < o->n; i++) {
		struct stat st;

		o->fds[i] = openat(o->dfd, o->files[i],
				   O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (o->fds[i] < 0 || fstat(o->fds[i], &st) < 0 ||
		    !S_ISREG(st.st_mode) || st.st_size != o->sizes[i]) {
			ack(a, id, "the step changed while it was opened", 0,
			    NULL);
			out_free(o);
			return;
		}
	}
	if (!o->fds) {
		ack(a, id, "out of memory", 0, NULL);
		out_free(o);
		return;
	}
	/* A copy of an older step of the same rank to the same node that
	 * has not started is superseded: a slow link sends the newest. */
	for (struct ckpt_out **pp = m->out ? &m->out->next : NULL; pp && *pp;) {
		struct ckpt_out *q = *pp;

		if (q->rank == o->rank && q->peer == o->peer &&
		    q->node == o->node && q->step < o->step) {
			char msg[96];

			snprintf(msg, sizeof(msg), "superseded by step %ld",
				 o->step);
			ack(a, q->id, msg, 0, NULL);
			*pp = q->next;
			out_free(q);
			continue;
		}
		pp = &q->next;
	}
	m->out_tail = NULL;
	for (struct ckpt_out *q = m->out; q; q = q->next)
		m->out_tail = q;
	if (m->out_tail)
		m->out_tail->next = o;
	else
		m->out = o;
	m->out_tail = o;
	pump(a);
}

/* ---- receiving a copy ------------------------------------------------------ */

static void drop_in(struct ckpt_mem *m, struct ckpt_in *x, bool remove_tmp)
{
	if (x->fd >= 0)
		close(x->fd);
	x->fd = -1;
	if (remove_tmp && x->tmp[0] && m->jobdir[0]) {
		char dir[1600];
		int dfd;

		snprintf(dir, sizeof(dir), "%s/peer/rank-%d", m->jobdir,
			 x->rank);
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd >= 0) {
			rm_tree_at(dfd, x->tmp, 0);
			close(dfd);
		}
	}
	memset(x, 0, sizeof(*x));
	x->fd = -1;
}

static struct ckpt_in *find_in(struct ckpt_mem *m, long id, bool make)
{
	struct ckpt_in *free_slot = NULL;

	for (int i = 0; i < CKPT_XFERS_MAX; i++) {
		if (m->in[i].id == id)
			return &m->in[i];
		if (!m->in[i].id && !free_slot)
			free_slot = &m->in[i];
	}
	return make ? free_slot : NULL;
}

/* peer/rank-R in the job's directory, made and checked. */
static int open_peer_rank(struct agent *a, int rank, char *why, size_t size)
{
	char name[32];
	int jfd = open_job(a), pfd, rfd;

	if (jfd < 0) {
		snprintf(why, size, "no memory tier on this node");
		return -1;
	}
	pfd = open_private(jfd, "peer", true, why, size);
	close(jfd);
	if (pfd < 0)
		return -1;
	snprintf(name, sizeof(name), "rank-%d", rank);
	rfd = open_private(pfd, name, true, why, size);
	close(pfd);
	return rfd;
}

/* Room for total more bytes: what the tier holds and what copies that
 * are arriving announced. */
static bool room_for(struct ckpt_mem *m, const struct ckpt_in *self,
		     int64_t total)
{
	int64_t pending = 0;

	for (int i = 0; i < CKPT_XFERS_MAX; i++)
		if (m->in[i].id && !m->in[i].refused && &m->in[i] != self)
			pending += m->in[i].total - m->in[i].got;
	return m->used + pending + total <= m->max;
}

void ckpt_mem_on_data(struct agent *a, struct proto_frame *f)
{
	struct ckpt_mem *m = a->ckpt;
	json_t *b = f->body;
	long id = (long)json_integer_value(json_object_get(b, "id"));
	const char *file = json_string_value(json_object_get(b, "file"));
	int64_t offset = json_integer_value(json_object_get(b, "offset"));
	int64_t total = json_integer_value(json_object_get(b, "total"));
	bool last = json_is_true(json_object_get(b, "last"));
	struct ckpt_in *x;
	char why[600], final[32];
	int rfd;

	if (!m || !m->conf)
		return;
	if (!(x = find_in(m, id, true))) {
		ack(a, id, "too many copies arriving at once", 0, NULL);
		return;
	}
	if (!x->id) { /* the first chunk announces the whole size */
		x->id = id;
		x->rank = (int)json_integer_value(json_object_get(b, "rank"));
		x->step = (long)json_integer_value(json_object_get(b, "step"));
		x->total = total;
		x->fd = -1;
		x->last_ms = loop_now_ms();
		if (offset != 0) {
			x->refused = true;
			ack(a, id, "a copy must start at offset 0", 0, NULL);
			return;
		}
		scan(a, false); /* what the tier holds now */
		if (!room_for(m, x, total)) {
			snprintf(why, sizeof(why),
				 "refused: a copy of %" PRId64
				 " bytes does not fit in checkpoint.memory_max "
				 "(%" PRId64 " bytes, %" PRId64 " in use)",
				 total, m->max, m->used);
			if (!m->said_refused)
				fprintf(stderr,
					"herd-agent: memory tier: peer copy of "
					"rank %d step %ld %s\n",
					x->rank, x->step, why);
			m->said_refused = true;
			x->refused = true;
			ack(a, id, why, 0, NULL);
			return;
		}
		snprintf(x->tmp, sizeof(x->tmp), ".tmp-step_%08ld-%ld", x->step,
			 id);
		if ((rfd = open_peer_rank(a, x->rank, why, sizeof(why))) < 0 ||
		    mkdirat(rfd, x->tmp, 0700) < 0) {
			if (rfd >= 0) {
				snprintf(why, sizeof(why), "%s: %s", x->tmp,
					 strerror(errno));
				close(rfd);
			}
			x->tmp[0] = '\0';
			x->refused = true;
			ack(a, id, why, 0, NULL);
			return;
		}
		close(rfd);
	}
	if (x->refused)
		return;
	x->last_ms = loop_now_ms();
	if (offset != x->got || total != x->total ||
	    x->got + (int64_t)f->data_len > x->total) {
		ack(a, id, "chunks out of order or past the announced size", 0,
		    NULL);
		drop_in(m, x, true);
		return;
	}
	if (x->fd < 0 || strcmp(x->file, file)) {
		char path[1700];

		if (x->fd >= 0)
			close(x->fd);
		snprintf(x->file, sizeof(x->file), "%s", file);
		snprintf(path, sizeof(path), "%s/peer/rank-%d/%s/%s", m->jobdir,
			 x->rank, x->tmp, file);
		x->fd = open(path,
			     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0600);
		if (x->fd < 0) {
			snprintf(why, sizeof(why), "%s: %s", file,
				 strerror(errno));
			ack(a, id, why, 0, NULL);
			drop_in(m, x, true);
			return;
		}
	}
	for (size_t done = 0; done < f->data_len;) {
		ssize_t w = write(x->fd, f->data + done, f->data_len - done);

		if (w <= 0) {
			snprintf(why, sizeof(why), "writing %s: %s", file,
				 w < 0 ? strerror(errno) : "short write");
			ack(a, id, why, 0, NULL);
			drop_in(m, x, true);
			return;
		}
		done += (size_t)w;
	}
	x->got += (int64_t)f->data_len;
	if (!last)
		return;
	if (x->got != x->total) {
		ack(a, id, "the copy ended short of its announced size", 0,
		    NULL);
		drop_in(m, x, true);
		return;
	}
	close(x->fd);
	x->fd = -1;
	snprintf(final, sizeof(final), "step_%08ld", x->step);
	if ((rfd = open_peer_rank(a, x->rank, why, sizeof(why))) < 0) {
		ack(a, id, why, 0, NULL);
		drop_in(m, x, true);
		return;
	}
	if (renameat(rfd, x->tmp, rfd, final) < 0)
		rm_tree_at(rfd, x->tmp, 0); /* it is there already */
	close(rfd);
	{
		char path[1600];

		snprintf(path, sizeof(path), "%s/peer/rank-%d/%s", m->jobdir,
			 x->rank, final);
		ack(a, id, NULL, x->total, path);
	}
	x->tmp[0] = '\0';
	drop_in(m, x, false);
	scan(a, false);
}

/* ---- persisting to checkpoint.dir ------------------------------------------ */

static int copy_file(int sfd, int dfd, const char *name, int64_t size)
{
	static char buf[1 << 20];
	int in = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int out = in < 0 ? -1
			 : openat(dfd, name,
				  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				      O_CLOEXEC,
				  0600);
	int64_t done = 0;
	int rc = -1;

	while (out >= 0 && done < size) {
		ssize_t r = read(in, buf, sizeof(buf)), w = 0;

		if (r <= 0)
			break;
		while (w < r) {
			ssize_t k = write(out, buf + w, (size_t)(r - w));

			if (k <= 0)
				goto out;
			w += k;
		}
		done += r;
	}
	if (done == size && fsync(out) == 0)
		rc = 0;
out:
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) < 0)
		rc = -1;
	return rc;
}

/* Writes the step to dir/step_N: under a temporary name, each file
 * synced, COMPLETE last, then one rename: whole or not at all.  In the
 * agent's loop: its time is the step's size over the disk's speed. */
void ckpt_mem_on_persist(struct agent *a, struct proto_frame *f)
{
	json_t *b = f->body;
	long id = (long)json_integer_value(json_object_get(b, "id"));
	int rank = (int)json_integer_value(json_object_get(b, "rank"));
	long step = (long)json_integer_value(json_object_get(b, "step"));
	bool peer = json_is_true(json_object_get(b, "peer"));
	const char *dir = json_string_value(json_object_get(b, "dir"));
	char why[600], tmp[96], final[32], path[4200];
	char **files = NULL;
	int64_t *sizes = NULL, total = 0;
	size_t n = 0;
	int sfd, dfd = -1, tfd = -1;

	sfd = open_step(a, rank, step, peer, why, sizeof(why));
	if (sfd < 0) {
		ack(a, id, why, 0, NULL);
		return;
	}
	if (list_step(sfd, &files, &sizes, &n, &total) < 0) {
		ack(a, id, "the step is not complete", 0, NULL);
		goto out;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(tmp, sizeof(tmp), ".tmp-herd-step_%08ld-%d-%ld", step,
		 (int)getpid(), id);
	snprintf(final, sizeof(final), "step_%08ld", step);
	if (dfd < 0 || mkdirat(dfd, tmp, 0700) < 0 ||
	    (tfd = openat(dfd, tmp,
			  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
		    0) {
		snprintf(why, sizeof(why), "%s/%s: %s", dir, tmp,
			 strerror(errno));
		ack(a, id, why, 0, NULL);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (copy_file(sfd, tfd, files[i], sizes[i]) < 0) {
			snprintf(why, sizeof(why), "%s/%s/%s: %s", dir, tmp,
				 files[i], strerror(errno));
			rm_tree_at(dfd, tmp, 0);
			ack(a, id, why, 0, NULL);
			goto out;
		}
	fsync(tfd);
	/* Another writer (the rank's own disk checkpoint) may have made
	 * it first: then that one stands. */
	if (renameat(dfd, tmp, dfd, final) < 0)
		rm_tree_at(dfd, tmp, 0);
	fsync(dfd);
	snprintf(path, sizeof(path), "%s/%s", dir, final);
	ack(a, id, NULL, total, path);
out:
	free_list(files, sizes, n);
	if (tfd >= 0)
		close(tfd);
	if (dfd >= 0)
		close(dfd);
	close(sfd);
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
	for (int i = 0; i < CKPT_XFERS_MAX; i++)
		if (m->in[i].id)
			drop_in(m, &m->in[i], true);
	while (m->out) {
		struct ckpt_out *o = m->out;

		m->out = o->next;
		out_free(o);
	}
	if (!m->keep && m->conf && !m->said_error) {
		char user[64], why[600];
		int base = open(m->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int ufd = -1;

		snprintf(user, sizeof(user), "herd-mem-%u", (unsigned)getuid());
		if (base >= 0)
			ufd = open_private(base, user, false, why, sizeof(why));
		if (ufd >= 0) {
			rm_tree_at(ufd, m->job, 0);
			close(ufd);
		}
		if (base >= 0)
			close(base);
	}
	json_decref(m->last);
	free(m);
	a->ckpt = NULL;
}
