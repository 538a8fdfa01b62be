/* ctl/ckpt.c — the controller's part of checkpoints in memory.
 *
 * Every node's agent owns a memory tier (agent/ckpt/mem.c) and tells herd
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

#include "launcher/ctl/ckpt.h"
#include "herd/logtree.h"
#include "herd/text.h"
struct ctl_ckpt *ckpt_get(struct ctl *c)
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

bool ckpt_live(const struct node *n)
{
	return n->state == NODE_UP && n->conn;
}

static int node_index(struct ctl *c, struct node *n)
{
	return (int)(n - c->nodes);
}

/* Does node i hold rank's step?  *peer: as a peer copy (own first). */
bool ckpt_holds(struct ctl *c, int i, int rank, long step, bool *peer)
{
	struct ctl_ckpt *k = c->ckpt;
	json_t *s;
	size_t j;
	bool found = false;

	if (!k || !ckpt_live(&c->nodes[i]) || !k->inv[i].steps)
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
int ckpt_holder_of(struct ctl *c, int rank, long step, int not, bool *peer)
{
	int best = -1;

	for (int i = 0; i < c->n_nodes; i++) {
		bool p;

		if (i == not || !ckpt_holds(c, i, rank, step, &p))
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

struct xfer *ckpt_xfer_new(struct ctl *c, enum xfer_kind kind, int src,
			     int dst, int rank, long step)
{
	struct ctl_ckpt *k = ckpt_get(c);
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

void ckpt_xfer_drop(struct ctl *c, struct xfer *x)
{
	struct ctl_ckpt *k = c->ckpt;
	size_t i = (size_t)(x - k->x);

	memmove(&k->x[i], &k->x[i + 1], (k->nx - i - 1) * sizeof(*x));
	k->nx--;
}

/* Asks node src to send rank's step (own or peer copy) to node dst. */
struct xfer *ckpt_push(struct ctl *c, enum xfer_kind kind, int src,
			 bool peer, int dst, int rank, long step)
{
	struct xfer *x = ckpt_xfer_new(c, kind, src, dst, rank, step);
	json_t *b;

	if (!x)
		return NULL;
	b = json_pack("{s:I, s:i, s:I, s:b, s:i}", "id", (json_int_t)x->id,
		      "rank", rank, "step", (json_int_t)step, "peer", peer,
		      "node", dst);
	if (!b ||
	    ctl_send(c, &c->nodes[src], PROTO_CKPT_PUSH, b, NULL, 0) < 0) {
		json_decref(b);
		ckpt_xfer_drop(c, x);
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

		if (!c->nodes[t].member || !ckpt_live(&c->nodes[t]))
			continue;
		sent++;
		if (ckpt_holds(c, t, rank, step, &p))
			continue;
		ckpt_push(c, XFER_REPLICA, i, false, t, rank, step);
	}
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
	/* checkpoint.memory: off: the agent has no tier, its ranks no
	 * HERD_CKPT_MEM (herd.ckpt saves nothing; scripts keep to disk). */
	if (s->checkpoint.memory == SPEC_MEMORY_OFF || !ckpt_get(c))
		return;
	b = json_pack("{s:s, s:s, s:I, s:b}", "dir",
		      s->checkpoint.memory_dir ? s->checkpoint.memory_dir
					       : "/dev/shm",
		      "job", job, "max", (json_int_t)s->checkpoint.memory_max,
		      "keep", s->checkpoint.keep_memory);
	if (b)
		ctl_send(c, n, PROTO_CKPT_CONF, b, NULL, 0);
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
	struct ctl_ckpt *k = ckpt_get(c);
	int i = node_index(c, n);
	struct inv *v;
	json_t *steps = json_object_get(b, "steps"), *s, *old;
	const char *why;
	size_t j;

	if (!k)
		return;
	herd_json_clean(json_object_get(b, "error")); /* printed below */
	why = json_string_value(json_object_get(b, "error"));
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
	    x->dst != dst || dst >= c->n_nodes || !ckpt_live(&c->nodes[dst]) ||
	    json_integer_value(json_object_get(b, "rank")) != x->rank ||
	    json_integer_value(json_object_get(b, "step")) != x->step)
		return;
	out = json_deep_copy(b);
	if (!out)
		return;
	json_object_del(out, "to");
	json_object_set_new(out, "from", json_integer(x->src));
	ctl_send(c, &c->nodes[dst], PROTO_CKPT_DATA, out, f->data, f->data_len);
	json_decref(out);
}

static void finish(struct ctl *c, struct xfer *x, bool ok, const char *path,
		   const char *error, json_int_t bytes)
{
	int64_t ms = loop_now_ms() - x->t0;
	struct xfer done = *x;
	const char *src = c->nodes[x->src].host;
	const char *dst = x->dst >= 0 ? c->nodes[x->dst].host : NULL;

	ckpt_xfer_drop(c, x);
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
	/* The error is printed and in the events; the path is the rank's
	 * to restore from, kept as it is. */
	herd_json_clean(json_object_get(b, "error"));
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
	ckpt_free_res(k);
	free(k->command);
	free(k);
	c->ckpt = NULL;
}
