/* ckpt/copy.c — copies of memory checkpoints between nodes and to disk.
 *
 * A copy travels as CKPT_DATA chunks through herd, the only connection
 * an agent has: the source (CKPT_PUSH) opens every file of the step at
 * once (a step pruned while the copy waits is still sent whole) and
 * sends while herd's connection takes them; the destination checks the
 * size the first chunk announces against memory_max before it writes
 * anything, writes under peer/rank-R/.tmp-step_N-ID, and renames only
 * when every byte came (CKPT_ACK either way).  CKPT_PERSIST writes a step
 * to checkpoint.dir the same way: whole or not at all.
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
	int jfd = ckpt_open_job(a), pfd = -1, rfd, sfd;

	if (jfd < 0) {
		snprintf(why, size, "no memory tier on this node");
		return -1;
	}
	if (peer) {
		pfd = ckpt_open_private(jfd, "peer", false, why, size);
		close(jfd);
		if (pfd < 0)
			return -1;
		jfd = pfd;
	}
	snprintf(name, sizeof(name), "rank-%d", rank);
	rfd = ckpt_open_private(jfd, name, false, why, size);
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
	static char buf[CKPT_SEND_CHUNK];

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
			ckpt_rm_tree_at(dfd, x->tmp, 0);
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
	int jfd = ckpt_open_job(a), pfd, rfd;

	if (jfd < 0) {
		snprintf(why, size, "no memory tier on this node");
		return -1;
	}
	pfd = ckpt_open_private(jfd, "peer", true, why, size);
	close(jfd);
	if (pfd < 0)
		return -1;
	snprintf(name, sizeof(name), "rank-%d", rank);
	rfd = ckpt_open_private(pfd, name, true, why, size);
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
		ckpt_scan(a, false); /* what the tier holds now */
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
		ckpt_rm_tree_at(rfd, x->tmp, 0); /* it is there already */
	close(rfd);
	{
		char path[1600];

		snprintf(path, sizeof(path), "%s/peer/rank-%d/%s", m->jobdir,
			 x->rank, final);
		ack(a, id, NULL, x->total, path);
	}
	x->tmp[0] = '\0';
	drop_in(m, x, false);
	ckpt_scan(a, false);
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
			ckpt_rm_tree_at(dfd, tmp, 0);
			ack(a, id, why, 0, NULL);
			goto out;
		}
	fsync(tfd);
	/* Another writer (the rank's own disk checkpoint) may have made
	 * it first: then that one stands. */
	if (renameat(dfd, tmp, dfd, final) < 0)
		ckpt_rm_tree_at(dfd, tmp, 0);
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

void ckpt_copy_idle(struct agent *a, int64_t now)
{
	struct ckpt_mem *m = a->ckpt;

	for (int i = 0; i < CKPT_XFERS_MAX; i++)
		if (m->in[i].id && now - m->in[i].last_ms > CKPT_XFER_IDLE_MS)
			drop_in(m, &m->in[i], true);
}

void ckpt_copy_fini(struct agent *a)
{
	struct ckpt_mem *m = a->ckpt;

	for (int i = 0; i < CKPT_XFERS_MAX; i++)
		if (m->in[i].id)
			drop_in(m, &m->in[i], true);
	while (m->out) {
		struct ckpt_out *o = m->out;

		m->out = o->next;
		out_free(o);
	}
	m->out_tail = NULL;
}

