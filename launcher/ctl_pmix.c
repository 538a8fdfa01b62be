/* ctl_pmix.c — herd's side of the agents' PMIx servers (launch.mode pmix):
 * what the controller does for MPI programs that no one node can do
 * alone.
 *
 *   FENCE   a fence contribution; when every member node with ranks has
 *           sent its own, FENCE_DONE carries the concatenation, in node
 *           order, back to all of them; each fence has a timer
 *           (health.fence_timeout) that fails the attempt and names the
 *           nodes that never contributed;
 *   ABORT   MPI_Abort: the program ends the job (CTL_EV_ABORT).
 *
 * Everything here is per attempt: ctl_pmix_clear() drops what is in
 * flight when an attempt ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_int.h"

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

static int fence_find(struct ctl *c, int seq)
{
	for (int k = 0; k < c->n_fences; k++)
		if (c->fences[k].seq == seq)
			return k;
	return -1;
}

static bool fence_member(const struct node *n)
{
	return n->member && n->state == NODE_UP && n->n_ranks > 0;
}

/* Each fence has its own timer; the one that fires takes the fence that
 * is due first. */
static void on_fence_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	int64_t now = loop_now_ms();
	int k = -1, seq;
	char why[512];
	size_t len;

	(void)loop;
	for (int i = 0; i < c->n_fences; i++)
		if (c->fences[i].timer && c->fences[i].due_ms <= now &&
		    (k < 0 || c->fences[i].due_ms < c->fences[k].due_ms))
			k = i;
	if (k < 0)
		return;
	seq = c->fences[k].seq;
	c->fences[k].timer = 0;
	len = (size_t)snprintf(why, sizeof(why),
			       "PMIx fence %d timed out after %.0f s; never "
			       "contributed:",
			       seq, (double)c->spec->health.fence_timeout_ms /
					    1000.0);
	for (int i = 0; i < c->n_nodes && len < sizeof(why); i++)
		if (fence_member(&c->nodes[i]) && !c->fences[k].got[i])
			len += (size_t)snprintf(why + len, sizeof(why) - len,
						" %s", c->nodes[i].host);
	fence_free(c, k);
	fprintf(stderr, "herd: %s\n", why);
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

void ctl_pmix_fence(struct ctl *c, struct node *n, struct proto_frame *f)
{
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	json_t *att = json_object_get(f->body, "attempt");
	int idx = (int)(n - c->nodes), k, want = 0;
	struct fence *fe;
	char *all = NULL;
	size_t total = 0, off = 0;

	if (c->state != CTL_RUN || !fence_member(n) ||
	    json_integer_value(att) != c->attempt)
		return;
	k = fence_find(c, seq);
	if (k < 0) {
		struct fence *nf = realloc(c->fences, (size_t)(c->n_fences + 1) *
							      sizeof(*nf));

		if (!nf)
			return;
		c->fences = nf;
		k = c->n_fences++;
		fe = &c->fences[k];
		memset(fe, 0, sizeof(*fe));
		fe->seq = seq;
		fe->got = calloc((size_t)c->n_nodes, sizeof(*fe->got));
		fe->parts = calloc((size_t)c->n_nodes, sizeof(*fe->parts));
		fe->part_len = calloc((size_t)c->n_nodes, sizeof(*fe->part_len));
		if (!fe->got || !fe->parts || !fe->part_len) {
			fence_free(c, k);
			return;
		}
		/* Before the timer, so that it is due when the timer
		 * fires. */
		fe->due_ms = loop_now_ms() + c->spec->health.fence_timeout_ms;
		fe->timer = loop_timer_add(c->loop,
					   c->spec->health.fence_timeout_ms,
					   on_fence_timeout, c);
	}
	fe = &c->fences[k];
	if (fe->got[idx])
		return;
	fe->got[idx] = true;
	fe->n_got++;
	if (f->data_len) {
		fe->parts[idx] = malloc(f->data_len);
		if (!fe->parts[idx])
			return;
		memcpy(fe->parts[idx], f->data, f->data_len);
		fe->part_len[idx] = f->data_len;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		want += fence_member(&c->nodes[i]);
		total += fe->part_len[i];
	}
	if (fe->n_got < want)
		return;
	/* Everyone is in: the concatenation, in node order, to all. */
	if (total && !(all = malloc(total))) {
		fence_free(c, k);
		ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1,
			 "out of memory gathering a PMIx fence");
		return;
	}
	for (int i = 0; i < c->n_nodes; i++) {
		if (fe->part_len[i])
			memcpy(all + off, fe->parts[i], fe->part_len[i]);
		off += fe->part_len[i];
	}
	for (int i = 0; i < c->n_nodes; i++) {
		json_t *body;

		if (!fence_member(&c->nodes[i]))
			continue;
		body = json_pack("{s:i, s:i, s:i}", "attempt", c->attempt,
				 "seq", seq, "status", 0);
		conn_send(c->nodes[i].conn, PROTO_FENCE_DONE, body, all, total,
			  NULL);
		json_decref(body);
	}
	free(all);
	fence_free(c, k);
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
	if (status <= 0 || status > 255)
		status = 1;
	snprintf(why, sizeof(why), "rank %d on %s called MPI_Abort (status %d)%s%.300s",
		 rank, n->host, status, msg && *msg ? ": " : "",
		 msg ? msg : "");
	ctl_post(c, CTL_EV_ABORT, n, status, why);
}

