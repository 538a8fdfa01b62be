/* ctl/pmix/pmix.c — herd's side of the agents' PMIx servers (launch.mode pmix):
 * what the controller does for MPI programs that no one node can do
 * alone.
 *
 *   FENCE   a fence contribution, named by its procs and count (the same
 *           on every node): when every node hosting its procs has sent
 *           its own, FENCE_DONE carries the concatenation, in node order,
 *           back to them; fences over different procs run side by side;
 *           each has a timer (health.fence_timeout) that fails the
 *           attempt and names the nodes that never contributed;
 *   DMODEX  direct modex: relayed to the node hosting the rank, whose
 *           DMODEX_DATA is relayed back (herd keeps nothing; answered at
 *           once when the rank is not in the attempt or its node is
 *           down);
 *   ABORT   MPI_Abort: the program ends the job (CTL_EV_ABORT).
 *
 * Everything here is per attempt: ctl_pmix_clear() drops what is in
 * flight when an attempt ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/text.h"
#include "launcher/ctl/ctl_int.h"

static void fence_free(struct ctl *c, int k)
{
	struct fence *f = &c->fences[k];

	if (f->timer)
		loop_timer_del(c->loop, f->timer);
	for (int i = 0; f->parts && i < c->n_nodes; i++)
		free(f->parts[i]);
	free(f->parts);
	free(f->part_len);
	free(f->got);
	free(f->in);
	free(f->ids);
	free(f->procs);
	c->fences[k] = c->fences[--c->n_fences];
}

void ctl_pmix_clear(struct ctl *c)
{
	ctl_spawn_clear(c);
	while (c->n_fences > 0)
		fence_free(c, 0);
	free(c->fences);
	c->fences = NULL;
}

static int fence_find(struct ctl *c, const char *procs, int count)
{
	for (int k = 0; k < c->n_fences; k++)
		if (c->fences[k].count == count &&
		    strcmp(c->fences[k].procs, procs) == 0)
			return k;
	return -1;
}

static bool fence_member(const struct node *n)
{
	return n->member && n->state == NODE_UP && n->n_ranks > 0;
}

/* Marks the nodes hosting ranks lo..hi in fe->in; -1 for a rank outside
 * the attempt.  A node's ranks are contiguous: one step per node. */
static int fence_mark(void *arg, int lo, int hi)
{
	struct ctl *c = ((void **)arg)[0];
	struct fence *fe = ((void **)arg)[1];

	for (long r = lo; r <= hi;) {
		struct node *m;
		long next;
		int i;

		if (r >= c->world_size || !c->ranks)
			return -1;
		i = c->ranks[r].node;
		m = &c->nodes[i];
		if (!fe->in[i] && fence_member(m)) {
			fe->in[i] = true;
			fe->want++;
		}
		next = (long)m->first_rank + m->n_ranks;
		if (next <= r)	/* never loop on a bad map */
			return -1;
		r = next;
	}
	return 0;
}

/* Each fence has its own timer; the one that fires takes the fence that
 * is due first. */
static void on_fence_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	int64_t now = loop_now_ms();
	int k = -1;
	char why[512], took[SPEC_DURATION_TEXT];
	size_t len;

	(void)loop;
	for (int i = 0; i < c->n_fences; i++)
		if (c->fences[i].timer && c->fences[i].due_ms <= now &&
		    (k < 0 || c->fences[i].due_ms < c->fences[k].due_ms))
			k = i;
	if (k < 0)
		return;
	c->fences[k].timer = 0;
	len = (size_t)snprintf(
	    why, sizeof(why),
	    "PMIx fence %d over ranks %.64s%s timed out "
	    "after %s; never contributed:",
	    c->fences[k].count, c->fences[k].procs,
	    strlen(c->fences[k].procs) > 64 ? "..." : "",
	    spec_duration_text(c->spec->health.fence_timeout_ms, took,
			       sizeof(took)));
	for (int i = 0; i < c->n_nodes && len < sizeof(why); i++)
		if (c->fences[k].in[i] && !c->fences[k].got[i])
			len += (size_t)snprintf(why + len, sizeof(why) - len,
						" %s", c->nodes[i].host);
	fence_free(c, k);
	fprintf(stderr, "herd: %s\n", why);
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

/* FENCE_DONE's status when herd fails the fence (the agents fail it for
 * their ranks at once, whatever the value). */
#define CTL_FENCE_FAILED 1

/* Fence k cannot complete (why): every node that contributed gets a
 * failed FENCE_DONE now, rather than each waiting out
 * health.fence_timeout, and the attempt fails. */
static void fence_fail(struct ctl *c, int k, const char *why)
{
	struct fence *fe = &c->fences[k];

	fprintf(stderr, "herd: %s\n", why);
	for (int i = 0; i < c->n_nodes; i++) {
		json_t *body;

		if (!fe->got[i] || !fence_member(&c->nodes[i]))
			continue;
		body = json_pack("{s:i, s:i, s:i}", "attempt", c->attempt,
				 "seq", fe->ids[i], "status", CTL_FENCE_FAILED);
		ctl_send(c, &c->nodes[i], PROTO_FENCE_DONE, body, NULL, 0);
		json_decref(body);
	}
	fence_free(c, k);
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

/* A new fence named (procs, count): its node set, its buffers, its
 * timer.  Returns its index, or -1 (procs name a rank outside the
 * attempt, or out of memory). */
static int fence_new(struct ctl *c, const char *procs, int count)
{
	struct fence *nf = realloc(c->fences,
				   (size_t)(c->n_fences + 1) * sizeof(*nf));
	struct fence *fe;
	void *walk[2];
	int k, all;

	if (!nf)
		return -1;
	c->fences = nf;
	k = c->n_fences++;
	fe = &c->fences[k];
	memset(fe, 0, sizeof(*fe));
	fe->count = count;
	fe->procs = strdup(procs);
	fe->got = calloc((size_t)c->n_nodes, sizeof(*fe->got));
	fe->in = calloc((size_t)c->n_nodes, sizeof(*fe->in));
	fe->ids = calloc((size_t)c->n_nodes, sizeof(*fe->ids));
	fe->parts = calloc((size_t)c->n_nodes, sizeof(*fe->parts));
	fe->part_len = calloc((size_t)c->n_nodes, sizeof(*fe->part_len));
	if (!fe->procs || !fe->got || !fe->in || !fe->ids || !fe->parts ||
	    !fe->part_len) {
		fence_free(c, k);
		return -1;
	}
	walk[0] = c;
	walk[1] = fe;
	all = proto_procs_walk(procs, fence_mark, walk);
	if (all < 0) {
		fence_free(c, k);
		return -1;
	}
	if (all == 1)
		for (int i = 0; i < c->n_nodes; i++)
			if (fence_member(&c->nodes[i])) {
				fe->in[i] = true;
				fe->want++;
			}
	/* Before the timer, so that it is due when the timer fires. */
	fe->due_ms = loop_now_ms() + c->spec->health.fence_timeout_ms;
	fe->timer = loop_timer_add(c->loop, c->spec->health.fence_timeout_ms,
				   on_fence_timeout, c);
	return k;
}

void ctl_pmix_fence(struct ctl *c, struct node *n, struct proto_frame *f)
{
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	json_t *att = json_object_get(f->body, "attempt");
	json_t *jc = json_object_get(f->body, "count");
	const char *procs =
		json_string_value(json_object_get(f->body, "procs"));
	int count = jc ? (int)json_integer_value(jc) : seq;
	int idx = (int)(n - c->nodes), k;
	struct fence *fe;
	char *all = NULL;
	size_t total = 0, off = 0;

	if (!procs)
		procs = "*";
	if (!ctl_serves(c, CTL_SERVE_ATTEMPT) || !fence_member(n) ||
	    json_integer_value(att) != c->attempt)
		return;
	k = fence_find(c, procs, count);
	if (k < 0 && (k = fence_new(c, procs, count)) < 0) {
		char why[256];

		snprintf(why, sizeof(why),
			 "PMIx fence from %s over ranks %.64s: not ranks of "
			 "this attempt (or out of memory)",
			 n->host, procs);
		fprintf(stderr, "herd: %s\n", why);
		ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
		return;
	}
	fe = &c->fences[k];
	if (!fe->in[idx]) {
		fprintf(stderr,
			"herd: %s joined PMIx fence %d over ranks %.64s but "
			"hosts none of them; ignored\n",
			n->host, count, procs);
		return;
	}
	if (fe->got[idx])
		return;
	if (!fe->n_got)
		fe->seq = seq;
	/* A contribution counts once it is kept: one lost to memory would
	 * complete the fence without it. */
	fe->got[idx] = true;
	fe->ids[idx] = seq;
	if (f->data_len) {
		if (!(fe->parts[idx] = malloc(f->data_len))) {
			fence_fail(c, k,
				   "out of memory keeping a PMIx fence "
				   "contribution");
			return;
		}
		memcpy(fe->parts[idx], f->data, f->data_len);
		fe->part_len[idx] = f->data_len;
	}
	fe->n_got++;
	if (fe->n_got < fe->want)
		return;
	/* Everyone is in: the concatenation, in node order, to them, in one
	 * frame each; more than a frame carries cannot be sent. */
	for (int i = 0; i < c->n_nodes; i++)
		total += fe->part_len[i];
	if (total > c->fence_data_max) {
		char why[512];

		snprintf(why, sizeof(why),
			 "PMIx fence %d over ranks %.64s%s gathered %zu bytes "
			 "from %d nodes, more than the %zu a FENCE_DONE frame "
			 "carries (the %u-byte frame limit); the fence fails "
			 "on every node",
			 count, procs, strlen(procs) > 64 ? "..." : "", total,
			 fe->want, c->fence_data_max, PROTO_FRAME_MAX);
		fence_fail(c, k, why);
		return;
	}
	if (total && !(all = malloc(total))) {
		fence_fail(c, k, "out of memory gathering a PMIx fence");
		return;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		if (fe->part_len[i])
			memcpy(all + off, fe->parts[i], fe->part_len[i]);
		off += fe->part_len[i];
	}
	for (int i = 0; i < c->n_nodes; i++) {
		json_t *body;

		if (!fe->in[i] || !fence_member(&c->nodes[i]))
			continue;
		body = json_pack("{s:i, s:i, s:i}", "attempt", c->attempt,
				 "seq", fe->ids[i], "status", 0);
		ctl_send(c, &c->nodes[i], PROTO_FENCE_DONE, body, all, total);
		json_decref(body);
	}
	free(all);
	fence_free(c, k);
}

/* Direct modex: herd relays, keeping nothing; the asking agent's timer
 * bounds the wait.  DMODEX from the asking node goes to the node hosting
 * the rank, with `from`; its DMODEX_DATA comes back to `from`. */
static void dmodex_answer(struct ctl *c, struct node *to, int seq, int ns,
			  int rank, int status, const void *data, size_t len)
{
	json_t *body = json_pack("{s:i, s:i, s:i, s:i}", "attempt",
				 c->attempt, "seq", seq, "rank", rank,
				 "status", status);

	if (ns)	/* a spawned namespace's process (ctl/pmix/spawn.c) */
		json_object_set_new(body, "ns", json_integer(ns));
	ctl_send(c, to, PROTO_DMODEX_DATA, body, data, len);
	json_decref(body);
}

void ctl_pmix_dmodex(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *b = f->body;
	int seq = (int)json_integer_value(json_object_get(b, "seq"));
	int rank = (int)json_integer_value(json_object_get(b, "rank"));
	int ns = (int)json_integer_value(json_object_get(b, "ns"));
	int k;
	struct node *t;
	json_t *body;

	if (!ctl_serves(c, CTL_SERVE_ATTEMPT) || !n->member ||
	    n->state != NODE_UP ||
	    json_integer_value(json_object_get(b, "attempt")) != c->attempt)
		return;
	if ((k = ctl_spawn_node_of(c, ns, rank)) < 0) {
		dmodex_answer(c, n, seq, ns, rank, PROTO_DMODEX_NOT_FOUND, NULL,
			      0);
		return;
	}
	t = &c->nodes[k];
	if (!t->member || t->state != NODE_UP) {
		dmodex_answer(c, n, seq, ns, rank, PROTO_DMODEX_UNREACH, NULL,
			      0);
		return;
	}
	body = json_pack("{s:i, s:i, s:i, s:i}", "attempt", c->attempt, "seq",
			 seq, "rank", rank, "from", (int)(n - c->nodes));
	if (ns)
		json_object_set_new(body, "ns", json_integer(ns));
	ctl_send(c, t, PROTO_DMODEX, body, NULL, 0);
	json_decref(body);
}

void ctl_pmix_dmodex_data(struct ctl *c, struct node *n,
			  struct proto_frame *f)
{
	json_t *b = f->body;
	int seq = (int)json_integer_value(json_object_get(b, "seq"));
	int rank = (int)json_integer_value(json_object_get(b, "rank"));
	int from = (int)json_integer_value(json_object_get(b, "from"));
	int status = (int)json_integer_value(json_object_get(b, "status"));
	int ns = (int)json_integer_value(json_object_get(b, "ns"));
	int k = ctl_spawn_node_of(c, ns, rank);

	/* Only the node hosting the rank answers for it, only to a node of
	 * the attempt. */
	if (!ctl_serves(c, CTL_SERVE_ATTEMPT) ||
	    json_integer_value(json_object_get(b, "attempt")) != c->attempt ||
	    k < 0 || &c->nodes[k] != n || from >= c->n_nodes ||
	    !c->nodes[from].member || c->nodes[from].state != NODE_UP)
		return;
	dmodex_answer(c, &c->nodes[from], seq, ns, rank, status, f->data,
		      status == 0 ? f->data_len : 0);
}

/* MPI_Abort: the program itself ends the job, at once and everywhere,
 * with the abort's status; no restart. */
void ctl_pmix_abort(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *body = f->body;
	int rank = (int)json_integer_value(json_object_get(body, "rank"));
	int status = (int)json_integer_value(json_object_get(body, "status"));
	const char *msg = json_string_value(json_object_get(body, "message"));
	char why[512];

	if (json_integer_value(json_object_get(body, "attempt")) != c->attempt)
		return;
	/* As mpirun and srun: the low byte (MPI_Abort(-1) exits 255); 0
	 * (mpirun: 0) still fails the job. */
	status &= 0xff;
	if (status == 0)
		status = 1;
	snprintf(why, sizeof(why), "rank %d on %s called MPI_Abort (status %d)%s%.300s",
		 rank, n->host, status, msg && *msg ? ": " : "",
		 msg ? msg : "");
	/* The program's message, cut to fit: on herd's terminal and in
	 * the events. */
	ctl_post(c, CTL_EV_ABORT, n, status, herd_text_clean(why));
}

