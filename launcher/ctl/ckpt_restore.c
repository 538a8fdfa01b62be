/* ctl/ckpt_restore.c — which checkpoint each rank of an attempt resumes
 * from (memory, a peer's copy fetched before LAUNCH, or disk), the
 * persist timer, and the same choice for a replacement rank
 * (ctl/ckpt.c says how the tiers work). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/ckpt.h"
#include "herd/logtree.h"
static const char *const tier_names[] = {
	[TIER_NONE] = "none", [TIER_MEMORY] = "memory",
	[TIER_PEER] = "peer", [TIER_DISK] = "disk"};

/* ---- restore ------------------------------------------------------------- */

void ckpt_free_res(struct ctl_ckpt *k)
{
	for (int r = 0; r < k->n_res; r++)
		free(k->res[r].path);
	free(k->res);
	k->res = NULL;
	k->n_res = 0;
}

/* The step in a disk checkpoint's name (its last digits), or -1. */
long ckpt_disk_step(const char *path)
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
long ckpt_newest_whole(struct ctl *c, long floor)
{
	struct ctl_ckpt *k = c->ckpt;
	long *cand = NULL;
	size_t n = 0, cap = 0;
	long best = -1;

	for (int i = 0; k && i < c->n_nodes; i++) {
		json_t *s;
		size_t j;

		if (!ckpt_live(&c->nodes[i]) || !k->inv[i].steps)
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

			all = ckpt_holder_of(c, r, cand[i], -1, &p) >= 0;
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
		k->res[r].step = ckpt_disk_step(c->checkpoint);
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
	if (cmd && k->attempt == c->attempt && ctl_serves(c, CTL_SERVE_ATTEMPT))
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
	struct ctl_ckpt *k = ckpt_get(c);
	long disk = ckpt_disk_step(c->checkpoint), step;

	if (!k)
		return 0;
	ckpt_free_res(k);
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
	/* A step in memory as new as the disk's counts too: local memory
	 * comes before disk for it. */
	step = ckpt_newest_whole(c, disk >= 0 ? disk - 1 : disk);
	if (step < 0)
		return 0;
	for (int r = 0; r < c->world_size; r++) {
		struct resume *re = &k->res[r];
		int dst = c->ranks[r].node;
		bool p;

		re->step = step;
		if (ckpt_holds(c, dst, r, step, &p)) {
			re->tier = p ? TIER_PEER : TIER_MEMORY;
			re->holder = dst;
			re->path = step_path(c, dst, r, step, p);
			continue;
		}
		if (step == disk)
			continue; /* disk has it: no fetch to wait for */
		re->holder = ckpt_holder_of(c, r, step, dst, &p);
		re->tier = TIER_PEER;
		re->waiting = true;
		k->waiting++;
		{
			struct xfer *x = ckpt_push(c, XFER_FETCH, re->holder, p, dst,
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
	if (k->persisting || !ctl_serves(c, CTL_SERVE_ATTEMPT))
		return;
	floor = k->persisted;
	if (ckpt_disk_step(c->checkpoint) > floor)
		floor = ckpt_disk_step(c->checkpoint);
	step = ckpt_newest_whole(c, floor);
	if (step < 0 || (h = ckpt_holder_of(c, 0, step, -1, &p)) < 0 ||
	    !(x = ckpt_xfer_new(c, XFER_PERSIST, h, -1, 0, step)))
		return;
	b = json_pack("{s:I, s:i, s:I, s:b, s:s}", "id", (json_int_t)x->id,
		      "rank", 0, "step", (json_int_t)step, "peer", p, "dir",
		      c->spec->checkpoint.dir);
	if (!b || ctl_send(c, &c->nodes[h], PROTO_CKPT_PERSIST, b, NULL, 0) < 0)
		ckpt_xfer_drop(c, x);
	else
		k->persisting = true;
	json_decref(b);
}

/* ---- for a replacement rank (survivors kept) ------------------------------- */

int ctl_ckpt_resume_for(struct ctl *c, int rank, int node,
			struct ctl_ckpt_where *w)
{
	long step = ckpt_newest_whole(c, ckpt_disk_step(c->checkpoint));
	bool p;
	int h;

	memset(w, 0, sizeof(*w));
	w->step = -1;
	w->holder = -1;
	if (step < 0 || (h = ckpt_holds(c, node, rank, step, &p) ? node
			     : ckpt_holder_of(c, rank, step, node, &p)) < 0) {
		w->step = ckpt_disk_step(c->checkpoint);
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
	struct xfer *x = ckpt_push(c, XFER_FETCH, from, peer, to, rank, step);

	if (!x)
		return -1;
	x->done = done;
	x->arg = arg;
	return x->id;
}

