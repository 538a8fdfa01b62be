/* ctl_ckpt.c — the controller's part of checkpoints in memory.
 *
 * Every node's agent owns a memory tier (agent/ckpt_mem.c) and tells herd
 * what it holds (CKPT_INV, whole, on each change).  Herd keeps those
 * inventories and decides everything that involves two nodes:
 *
 *   replicas  a rank's new step on node N is copied to the next
 *             checkpoint.replicas live members after N (a ring in node
 *             order): CKPT_PUSH to N, its CKPT_DATA chunks relayed to the
 *             peer.  Only transfers herd asked for are relayed, and only
 *             from the node it asked: a peer copy comes from the job's
 *             own agents, over herd's authenticated connections.
 *   persist   every checkpoint.persist_every, the newest step that every
 *             rank holds in memory is written to checkpoint.dir by the
 *             node holding rank 0's copy (CKPT_PERSIST): the step of rank
 *             0, as train.py's own disk checkpoints are (with DDP every
 *             rank's state is the same), whole or not at all.
 *   restore   at each attempt, the newest step complete for every rank
 *             across the tiers: a rank whose node holds it resumes from
 *             there (tier memory, or peer for a copy that came from
 *             another node); one whose node does not gets it fetched from
 *             a holder before LAUNCH (tier peer); none newer in memory
 *             than on disk: disk, as before.  HERD_RESUME_FROM is per
 *             rank.  A fetch that fails sends every rank to disk.
 *
 * A step counts only when the agent found it complete (step_N holding
 * COMPLETE, renamed into place whole): a torn step is never offered.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_int.h"
#include "herd/logtree.h"

/* What herd waits for fetches before LAUNCH; then every rank goes to
 * disk. */
#define CKPT_FETCH_WAIT_MS 60000

enum xfer_kind { XFER_REPLICA = 1, XFER_FETCH, XFER_PERSIST };

struct xfer {
	long id;
	enum xfer_kind kind;
	int src, dst;		/* node indexes (dst -1: persist) */
	int rank;
	long step;
	int64_t t0;
	void (*done)(struct ctl *c, void *arg, bool ok, const char *path,
		     int64_t ms);
	void *arg;
};

struct inv {
	char *dir;		/* the job's directory on that node */
	json_t *steps;		/* [{rank, step, bytes, peer}] */
	bool said_error, said_full;
};

enum tier { TIER_NONE, TIER_MEMORY, TIER_PEER, TIER_DISK };

struct resume {
	long step;
	enum tier tier;
	int holder;		/* node index holding it */
	char *path;		/* HERD_RESUME_FROM; NULL: the job's */
	bool waiting;
	int64_t ms;
};

struct ctl_ckpt {
	struct inv *inv;	/* [c->n_nodes] */
	struct xfer *x;
	size_t nx;
	long next_id;
	long persisted;		/* newest step persisted, -1 none */
	bool persisting;
	long persist_timer;
	/* The attempt being launched. */
	int attempt;
	struct resume *res;	/* [world_size] */
	int n_res;
	int waiting;		/* fetches before LAUNCH */
	char *command;
	long fetch_timer, launch_timer;
	bool said_fetch;
};

static const char *const tier_names[] = {
	[TIER_NONE] = "none", [TIER_MEMORY] = "memory",
	[TIER_PEER] = "peer", [TIER_DISK] = "disk"};

static struct ctl_ckpt *get(struct ctl *c)
{
	if (!c->ckpt) {
		c->ckpt = calloc(1, sizeof(*c->ckpt));
		if (c->ckpt &&
		    !(c->ckpt->inv = calloc((size_t)c->n_nodes,
					    sizeof(*c->ckpt->inv)))) {
			free(c->ckpt);
			c->ckpt = NULL;
		}
		if (c->ckpt)
			c->ckpt->persisted = -1;
	}
	return c->ckpt;
}

static bool live(const struct node *n)
{
	return n->state == NODE_UP && n->conn;
}

static int node_index(struct ctl *c, struct node *n)
{
	return (int)(n - c->nodes);
}

/* Does node i hold rank's step?  *peer: as a peer copy (own first). */
static bool holds(struct ctl *c, int i, int rank, long step, bool *peer)
{
	struct ctl_ckpt *k = c->ckpt;
	json_t *s;
	size_t j;
	bool found = false;

	if (!k || !live(&c->nodes[i]) || !k->inv[i].steps)
		return false;
	json_array_foreach(k->inv[i].steps, j, s)
	{
		if (json_integer_value(json_object_get(s, "rank")) != rank ||
		    json_integer_value(json_object_get(s, "step")) != step)
			continue;
		if (!json_is_true(json_object_get(s, "peer"))) {
			*peer = false;
			return true;
		}
		*peer = true;
		found = true;
	}
	return found;
}

/* A live node other than `not` holding rank's step (own copy first), or
 * -1. */
static int holder_of(struct ctl *c, int rank, long step, int not, bool *peer)
{
	int best = -1;

	for (int i = 0; i < c->n_nodes; i++) {
		bool p;

		if (i == not || !holds(c, i, rank, step, &p))
			continue;
		if (!p) {
			*peer = false;
			return i;
		}
		if (best < 0) {
			best = i;
			*peer = true;
		}
	}
	return best;
}

/* ---- transfers ----------------------------------------------------------- */

static struct xfer *xfer_new(struct ctl *c, enum xfer_kind kind, int src,
			     int dst, int rank, long step)
{
	struct ctl_ckpt *k = get(c);
	struct xfer *x;

	if (!k || !(x = realloc(k->x, (k->nx + 1) * sizeof(*x))))
		return NULL;
	k->x = x;
	x = &k->x[k->nx++];
	memset(x, 0, sizeof(*x));
	x->id = ++k->next_id;
	x->kind = kind;
	x->src = src;
	x->dst = dst;
	x->rank = rank;
	x->step = step;
	x->t0 = loop_now_ms();
	return x;
}

static struct xfer *xfer_find(struct ctl *c, long id)
{
	for (size_t i = 0; c->ckpt && i < c->ckpt->nx; i++)
		if (c->ckpt->x[i].id == id)
			return &c->ckpt->x[i];
	return NULL;
}

static void xfer_drop(struct ctl *c, struct xfer *x)
{
	struct ctl_ckpt *k = c->ckpt;
	size_t i = (size_t)(x - k->x);

	memmove(&k->x[i], &k->x[i + 1], (k->nx - i - 1) * sizeof(*x));
	k->nx--;
}

/* Asks node src to send rank's step (own or peer copy) to node dst. */
static struct xfer *push(struct ctl *c, enum xfer_kind kind, int src,
			 bool peer, int dst, int rank, long step)
{
	struct xfer *x = xfer_new(c, kind, src, dst, rank, step);
	json_t *b;

	if (!x)
		return NULL;
	b = json_pack("{s:I, s:i, s:I, s:b, s:i}", "id", (json_int_t)x->id,
		      "rank", rank, "step", (json_int_t)step, "peer", peer,
		      "node", dst);
	if (!b || conn_send(c->nodes[src].conn, PROTO_CKPT_PUSH, b, NULL, 0,
			    NULL) < 0) {
		json_decref(b);
		xfer_drop(c, x);
		return NULL;
	}
	json_decref(b);
	return x;
}

/* The ring: the next live members after node i, at most n. */
static void replicate(struct ctl *c, int i, int rank, long step)
{
	int want = c->spec->checkpoint.replicas, sent = 0;

	for (int d = 1; d < c->n_nodes && sent < want; d++) {
		int t = (i + d) % c->n_nodes;
		bool p;

		if (!c->nodes[t].member || !live(&c->nodes[t]))
			continue;
		sent++;
		if (holds(c, t, rank, step, &p))
			continue;
		push(c, XFER_REPLICA, i, false, t, rank, step);
	}
}

/* ---- restore ------------------------------------------------------------- */

static void free_res(struct ctl_ckpt *k)
{
	for (int r = 0; r < k->n_res; r++)
		free(k->res[r].path);
	free(k->res);
	k->res = NULL;
	k->n_res = 0;
}

/* The step in a disk checkpoint's name (its last digits), or -1. */
static long disk_step(const char *path)
{
	const char *base, *p;
	long v = -1;

	if (!path)
		return -1;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	p = base + strlen(base);
	while (p > base && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (*p)
		v = strtol(p, NULL, 10);
	return v;
}

static char *step_path(struct ctl *c, int node, int rank, long step,
		       bool peer)
{
	char *s = NULL;

	if (asprintf(&s, "%s/%srank-%d/step_%08ld", c->ckpt->inv[node].dir,
		     peer ? "peer/" : "", rank, step) < 0)
		return NULL;
	return s;
}

static int cmp_desc(const void *x, const void *y)
{
	long a = *(const long *)x, b = *(const long *)y;

	return a < b ? 1 : a > b ? -1 : 0;
}

/* The newest step above floor that every rank of the attempt holds on
 * some live node, or -1. */
static long newest_whole(struct ctl *c, long floor)
{
	struct ctl_ckpt *k = c->ckpt;
	long *cand = NULL;
	size_t n = 0, cap = 0;
	long best = -1;

	for (int i = 0; k && i < c->n_nodes; i++) {
		json_t *s;
		size_t j;

		if (!live(&c->nodes[i]) || !k->inv[i].steps)
			continue;
		json_array_foreach(k->inv[i].steps, j, s)
		{
			long st = (long)json_integer_value(
			    json_object_get(s, "step"));

			if (st <= floor)
				continue;
			if (n == cap) {
				long *nc = realloc(cand, (cap = cap * 2 + 16) *
							     sizeof(*nc));
				if (!nc)
					goto out;
				cand = nc;
			}
			cand[n++] = st;
		}
	}
	if (n)
		qsort(cand, n, sizeof(*cand), cmp_desc);
	for (size_t i = 0; i < n && best < 0; i++) {
		bool all = true;

		if (i && cand[i] == cand[i - 1])
			continue;
		for (int r = 0; r < c->world_size && all; r++) {
			bool p;

			all = holder_of(c, r, cand[i], -1, &p) >= 0;
		}
		if (all && c->world_size > 0)
			best = cand[i];
	}
out:
	free(cand);
	return best;
}

static void to_disk(struct ctl *c)
{
	struct ctl_ckpt *k = c->ckpt;

	for (int r = 0; r < k->n_res; r++) {
		free(k->res[r].path);
		k->res[r].path = NULL;
		k->res[r].tier = c->checkpoint ? TIER_DISK : TIER_NONE;
		k->res[r].step = disk_step(c->checkpoint);
		k->res[r].holder = c->ranks[r].node;
		k->res[r].waiting = false;
		k->res[r].ms = 0;
	}
}

static void on_launch_now(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	struct ctl_ckpt *k = c->ckpt;
	char *cmd = k->command;

	(void)loop;
	k->launch_timer = 0;
	k->command = NULL;
	if (k->fetch_timer)
		loop_timer_del(c->loop, k->fetch_timer);
	k->fetch_timer = 0;
	if (cmd && k->attempt == c->attempt && c->state == CTL_RUN)
		ctl_launch_send(c, cmd);
	free(cmd);
}

static void on_fetched(struct ctl *c, void *arg, bool ok, const char *path,
		       int64_t ms)
{
	struct ctl_ckpt *k = c->ckpt;
	int r = (int)(intptr_t)arg;

	if (!k || r >= k->n_res || !k->res[r].waiting)
		return;
	k->res[r].waiting = false;
	k->waiting--;
	if (ok && path) {
		k->res[r].path = strdup(path);
		k->res[r].ms = ms;
	} else if (k->waiting >= 0) {
		if (!k->said_fetch)
			fprintf(stderr,
				"herd: the peer copy of rank %d step %ld "
				"could not be fetched: every rank resumes from "
				"disk\n",
				r, k->res[r].step);
		k->said_fetch = true;
		to_disk(c);
		k->waiting = 0;
	}
	/* Posted: this may run inside a node's close. */
	if (k->waiting == 0 && k->command && !k->launch_timer)
		k->launch_timer = loop_timer_add(c->loop, 0, on_launch_now, c);
}

static void on_fetch_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	struct ctl_ckpt *k = c->ckpt;

	(void)loop;
	k->fetch_timer = 0;
	for (int r = 0; r < k->n_res; r++)
		if (k->res[r].waiting) {
			on_fetched(c, (void *)(intptr_t)r, false, NULL, 0);
			break;
		}
}

int ctl_ckpt_plan(struct ctl *c, const char *command)
{
	struct ctl_ckpt *k = get(c);
	long floor = disk_step(c->checkpoint), step;

	if (!k)
		return 0;
	free_res(k);
	free(k->command);
	k->command = NULL;
	k->waiting = 0;
	k->attempt = c->attempt;
	k->said_fetch = false;
	if (!(k->res = calloc((size_t)(c->world_size ? c->world_size : 1),
			      sizeof(*k->res))))
		return 0;
	k->n_res = c->world_size;
	to_disk(c);
	step = newest_whole(c, floor);
	if (step < 0)
		return 0;
	for (int r = 0; r < c->world_size; r++) {
		struct resume *re = &k->res[r];
		int dst = c->ranks[r].node;
		bool p;

		re->step = step;
		if (holds(c, dst, r, step, &p)) {
			re->tier = p ? TIER_PEER : TIER_MEMORY;
			re->holder = dst;
			re->path = step_path(c, dst, r, step, p);
			continue;
		}
		re->holder = holder_of(c, r, step, dst, &p);
		re->tier = TIER_PEER;
		re->waiting = true;
		k->waiting++;
		{
			struct xfer *x = push(c, XFER_FETCH, re->holder, p, dst,
					      r, step);

			if (x) {
				x->done = on_fetched;
				x->arg = (void *)(intptr_t)r;
			} else {
				re->waiting = false;
				k->waiting--;
				to_disk(c);
				break;
			}
		}
	}
	if (k->waiting <= 0) {
		/* Fetches may have been started before one failed: they
		 * land as copies nobody waits for. */
		k->waiting = 0;
		return 0;
	}
	k->command = strdup(command);
	k->fetch_timer = loop_timer_add(c->loop, CKPT_FETCH_WAIT_MS,
					on_fetch_timeout, c);
	if (!k->command) {
		to_disk(c);
		k->waiting = 0;
		return 0;
	}
	return 1;
}

const char *ctl_ckpt_rank_path(struct ctl *c, int rank)
{
	struct ctl_ckpt *k = c->ckpt;

	if (!k || k->attempt != c->attempt || rank < 0 || rank >= k->n_res)
		return NULL;
	return k->res[rank].path;
}

static void on_persist_tick(struct loop *loop, void *arg);

void ctl_ckpt_launched(struct ctl *c)
{
	struct ctl_ckpt *k = c->ckpt;

	if (!k || k->attempt != c->attempt)
		return;
	for (int r = 0; r < k->n_res; r++) {
		struct resume *re = &k->res[r];

		if (re->tier == TIER_NONE)
			continue;
		events_emit(c->ev, "checkpoint_restored",
			    json_pack("{s:i, s:I, s:s, s:s, s:I, s:i}", "rank",
				      r, "step", (json_int_t)re->step, "tier",
				      tier_names[re->tier], "host",
				      c->nodes[re->holder].host, "ms",
				      (json_int_t)re->ms, "attempt",
				      c->attempt));
	}
	if (k->n_res && k->res[0].tier != TIER_NONE &&
	    k->res[0].tier != TIER_DISK)
		fprintf(stderr,
			"herd: attempt %d resumes from step %ld in memory\n",
			c->attempt, k->res[0].step);
	if (!k->persist_timer && c->spec->checkpoint.dir &&
	    c->spec->checkpoint.persist_every_ms > 0)
		k->persist_timer = loop_timer_add(
		    c->loop, c->spec->checkpoint.persist_every_ms,
		    on_persist_tick, c);
}

/* ---- persist ------------------------------------------------------------- */

static void on_persist_tick(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	struct ctl_ckpt *k = c->ckpt;
	long floor, step;
	int h;
	bool p;
	struct xfer *x;
	json_t *b;

	(void)loop;
	k->persist_timer = loop_timer_add(
	    c->loop, c->spec->checkpoint.persist_every_ms, on_persist_tick, c);
	if (k->persisting || c->state != CTL_RUN)
		return;
	floor = k->persisted;
	if (disk_step(c->checkpoint) > floor)
		floor = disk_step(c->checkpoint);
	step = newest_whole(c, floor);
	if (step < 0 || (h = holder_of(c, 0, step, -1, &p)) < 0 ||
	    !(x = xfer_new(c, XFER_PERSIST, h, -1, 0, step)))
		return;
	b = json_pack("{s:I, s:i, s:I, s:b, s:s}", "id", (json_int_t)x->id,
		      "rank", 0, "step", (json_int_t)step, "peer", p, "dir",
		      c->spec->checkpoint.dir);
	if (!b || conn_send(c->nodes[h].conn, PROTO_CKPT_PERSIST, b, NULL, 0,
			    NULL) < 0)
		xfer_drop(c, x);
	else
		k->persisting = true;
	json_decref(b);
}

/* ---- frames -------------------------------------------------------------- */

void ctl_ckpt_node_up(struct ctl *c, struct node *n)
{
	const struct spec *s = c->spec;
	char job[256], *p;
	json_t *b;

	snprintf(job, sizeof(job), "%s-%s-n%d", s->name ? s->name : "job",
		 c->lt ? logtree_run_id(c->lt) : "run", node_index(c, n));
	for (p = job; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		      (*p == '.' && p != job)))
			*p = '_';
	if (!get(c))
		return;
	b = json_pack("{s:s, s:s, s:I, s:b}", "dir",
		      s->checkpoint.memory_dir ? s->checkpoint.memory_dir
					       : "/dev/shm",
		      "job", job, "max", (json_int_t)s->checkpoint.memory_max,
		      "keep", s->checkpoint.keep_memory);
	if (b)
		conn_send(n->conn, PROTO_CKPT_CONF, b, NULL, 0, NULL);
	json_decref(b);
}

static bool listed(json_t *steps, json_t *s)
{
	json_t *o;
	size_t j;

	json_array_foreach(steps, j, o)
	{
		if (json_equal(json_object_get(o, "rank"),
			       json_object_get(s, "rank")) &&
		    json_equal(json_object_get(o, "step"),
			       json_object_get(s, "step")) &&
		    json_equal(json_object_get(o, "peer"),
			       json_object_get(s, "peer")))
			return true;
	}
	return false;
}

static void on_inv(struct ctl *c, struct node *n, json_t *b)
{
	struct ctl_ckpt *k = get(c);
	int i = node_index(c, n);
	struct inv *v;
	json_t *steps = json_object_get(b, "steps"), *s, *old;
	const char *why = json_string_value(json_object_get(b, "error"));
	size_t j;

	if (!k)
		return;
	v = &k->inv[i];
	if (why && !v->said_error) {
		fprintf(stderr, "herd: %s: memory tier: %s\n", n->host, why);
		v->said_error = true;
	}
	if (json_is_true(json_object_get(b, "full")) && !v->said_full) {
		fprintf(stderr,
			"herd: %s: the memory tier is full "
			"(checkpoint.memory_max): checkpoints fall back to "
			"disk\n",
			n->host);
		events_emit(c->ev, "checkpoint_memory_full",
			    json_pack("{s:s}", "host", n->host));
		v->said_full = true;
	}
	free(v->dir);
	v->dir = strdup(json_string_value(json_object_get(b, "dir")));
	old = v->steps;
	v->steps = json_incref(steps);
	json_array_foreach(steps, j, s)
	{
		int rank = (int)json_integer_value(json_object_get(s, "rank"));
		long step = (long)json_integer_value(json_object_get(s, "step"));

		if (json_is_true(json_object_get(s, "peer")) ||
		    (old && listed(old, s)))
			continue;
		events_emit(c->ev, "checkpoint_saved",
			    json_pack("{s:i, s:I, s:s, s:s, s:O}", "rank", rank,
				      "step", (json_int_t)step, "tier",
				      "memory", "host", n->host, "bytes",
				      json_object_get(s, "bytes")));
		if (n->member)
			replicate(c, i, rank, step);
	}
	json_decref(old);
}

static void on_data(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *b = f->body, *out;
	struct xfer *x =
	    xfer_find(c, (long)json_integer_value(json_object_get(b, "id")));
	int dst = (int)json_integer_value(json_object_get(b, "to"));

	/* Only what herd asked for, from the node it asked. */
	if (!x || x->kind == XFER_PERSIST || x->src != node_index(c, n) ||
	    x->dst != dst || dst >= c->n_nodes || !live(&c->nodes[dst]) ||
	    json_integer_value(json_object_get(b, "rank")) != x->rank ||
	    json_integer_value(json_object_get(b, "step")) != x->step)
		return;
	out = json_deep_copy(b);
	if (!out)
		return;
	json_object_del(out, "to");
	json_object_set_new(out, "from", json_integer(x->src));
	conn_send(c->nodes[dst].conn, PROTO_CKPT_DATA, out, f->data,
		  f->data_len, NULL);
	json_decref(out);
}

static void finish(struct ctl *c, struct xfer *x, bool ok, const char *path,
		   const char *error, json_int_t bytes)
{
	int64_t ms = loop_now_ms() - x->t0;
	struct xfer done = *x;
	const char *src = c->nodes[x->src].host;
	const char *dst = x->dst >= 0 ? c->nodes[x->dst].host : NULL;

	xfer_drop(c, x);
	if (done.kind == XFER_PERSIST) {
		c->ckpt->persisting = false;
		if (ok)
			c->ckpt->persisted = done.step;
		events_emit(c->ev, ok ? "checkpoint_persisted"
				      : "checkpoint_persist_failed",
			    json_pack("{s:i, s:I, s:s, s:s?, s:s?, s:I, s:I}",
				      "rank", done.rank, "step",
				      (json_int_t)done.step, "host", src,
				      "path", path, "error", error, "bytes",
				      bytes, "ms", (json_int_t)ms));
		if (!ok)
			fprintf(stderr,
				"herd: %s: step %ld could not be written to "
				"checkpoint.dir: %s\n",
				src, done.step, error ? error : "?");
	} else if (ok) {
		events_emit(c->ev, "checkpoint_replicated",
			    json_pack("{s:i, s:I, s:s, s:s, s:I, s:I, s:s}",
				      "rank", done.rank, "step",
				      (json_int_t)done.step, "host", src,
				      "peer", dst, "bytes", bytes, "ms",
				      (json_int_t)ms, "why",
				      done.kind == XFER_FETCH ? "restore"
							      : "replica"));
	} else {
		events_emit(c->ev, "checkpoint_copy_failed",
			    json_pack("{s:i, s:I, s:s, s:s?, s:s?}", "rank",
				      done.rank, "step", (json_int_t)done.step,
				      "host", src, "peer", dst, "error",
				      error));
	}
	if (done.done)
		done.done(c, done.arg, ok, path, ms);
}

static void on_ack(struct ctl *c, struct node *n, json_t *b)
{
	struct xfer *x =
	    xfer_find(c, (long)json_integer_value(json_object_get(b, "id")));
	int i = node_index(c, n);
	bool ok = json_is_true(json_object_get(b, "ok"));

	if (!x)
		return;
	/* The destination says whole or not; the source only that it
	 * could not send (a persist: its node is the source). */
	if (x->kind == XFER_PERSIST ? i != x->src
				    : (i != x->dst && (ok || i != x->src)))
		return;
	finish(c, x, ok, json_string_value(json_object_get(b, "path")),
	       json_string_value(json_object_get(b, "error")),
	       json_integer_value(json_object_get(b, "bytes")));
}

void ctl_ckpt_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	switch (f->type) {
	case PROTO_CKPT_INV:
		on_inv(c, n, f->body);
		break;
	case PROTO_CKPT_DATA:
		on_data(c, n, f);
		break;
	case PROTO_CKPT_ACK:
		on_ack(c, n, f->body);
		break;
	default:
		break;
	}
}

void ctl_ckpt_node_gone(struct ctl *c, struct node *n)
{
	struct ctl_ckpt *k = c->ckpt;
	int i = node_index(c, n);

	if (!k)
		return;
	json_decref(k->inv[i].steps);
	k->inv[i].steps = NULL;
	for (size_t j = 0; j < k->nx;) {
		struct xfer *x = &k->x[j];

		if (x->src == i || x->dst == i)
			finish(c, x, false, NULL, "its node is gone", 0);
		else
			j++;
	}
}

/* ---- for a replacement rank (survivors kept) ------------------------------- */

int ctl_ckpt_resume_for(struct ctl *c, int rank, int node,
			struct ctl_ckpt_where *w)
{
	long step = newest_whole(c, disk_step(c->checkpoint));
	bool p;
	int h;

	memset(w, 0, sizeof(*w));
	w->step = -1;
	w->holder = -1;
	if (step < 0 || (h = holds(c, node, rank, step, &p) ? node
			     : holder_of(c, rank, step, node, &p)) < 0) {
		w->step = disk_step(c->checkpoint);
		w->tier = c->checkpoint ? "disk" : NULL;
		w->path = c->checkpoint ? strdup(c->checkpoint) : NULL;
		return c->checkpoint ? 0 : -1;
	}
	w->step = step;
	w->holder = h;
	w->peer = p;
	w->tier = h == node && !p ? "memory" : "peer";
	w->local = h == node;
	if (w->local)
		w->path = step_path(c, h, rank, step, p);
	return 0;
}

long ctl_ckpt_fetch(struct ctl *c, int rank, long step, int from, bool peer,
		    int to,
		    void (*done)(struct ctl *c, void *arg, bool ok,
				 const char *path, int64_t ms),
		    void *arg)
{
	struct xfer *x = push(c, XFER_FETCH, from, peer, to, rank, step);

	if (!x)
		return -1;
	x->done = done;
	x->arg = arg;
	return x->id;
}

void ctl_ckpt_free(struct ctl *c)
{
	struct ctl_ckpt *k = c->ckpt;

	if (!k)
		return;
	if (k->persist_timer)
		loop_timer_del(c->loop, k->persist_timer);
	if (k->fetch_timer)
		loop_timer_del(c->loop, k->fetch_timer);
	if (k->launch_timer)
		loop_timer_del(c->loop, k->launch_timer);
	for (int i = 0; i < c->n_nodes; i++) {
		free(k->inv[i].dir);
		json_decref(k->inv[i].steps);
	}
	free(k->inv);
	free(k->x);
	free_res(k);
	free(k->command);
	free(k);
	c->ckpt = NULL;
}
