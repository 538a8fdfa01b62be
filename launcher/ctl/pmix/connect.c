/* ctl/pmix/connect.c — herd's side of PMIx_Connect and PMIx_Disconnect
 * (MPI_Comm_connect/accept, MPI_Intercomm_create): a collective over
 * processes of any namespaces, done when every node hosting them sent
 * the same list (and op); CONNECT_DONE to each, or a timeout status
 * after health.fence_timeout.  A fence over processes of a spawned
 * namespace (op "fence") is the same with data: the contributions,
 * concatenated in node order, go back to each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/pmix/dyn_int.h"

void dyn_connect_free(struct ctl *c, int k)
{
	struct dyn_connect *x = &c->dyn->conns[k];

	if (x->timer)
		loop_timer_del(c->loop, x->timer);
	for (int i = 0; x->parts && i < c->n_nodes; i++)
		free(x->parts[i]);
	free(x->parts);
	free(x->part_len);
	free(x->key);
	free(x->want);
	free(x->seq);
	c->dyn->conns[k] = c->dyn->conns[--c->dyn->n_conns];
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Marks the nodes hosting (ns, rank) in want.  Returns 0, or -1 when
 * there is no such process. */
static int mark_proc(struct ctl *c, int ns, json_int_t rank, bool *want)
{
	int first = 0, size = c->world_size;

	if (ns != 0) {
		struct dyn_spawn *s = dyn_spawn_by_id(c, ns);

		if (!s)
			return -1;
		first = s->first_slot;
		size = s->size;
	}
	if (rank >= size)
		return -1;
	for (int r = rank < 0 ? 0 : (int)rank;
	     r < (rank < 0 ? size : (int)rank + 1); r++)
		want[c->ranks[first + r].node] = true;
	return 0;
}

static void connect_answer(struct ctl *c, int node, int seq, int status,
			   const char *data, size_t len)
{
	json_t *body = json_pack("{s:i, s:i, s:i}", "attempt", c->attempt,
				 "seq", seq, "status", status);

	if (c->nodes[node].conn)
		ctl_send(c, &c->nodes[node], PROTO_CONNECT_DONE, body, data,
			 len);
	json_decref(body);
}

/* Everyone is in: a fence's contributions, concatenated in node order,
 * or none, to each. */
static void connect_complete(struct ctl *c, int k)
{
	struct dyn_connect *x = &c->dyn->conns[k];
	size_t total = 0, off = 0;
	char *all = NULL;
	int st = 0;

	for (int m = 0; m < c->n_nodes; m++)
		total += x->part_len[m];
	if (total && !(all = malloc(total)))
		st = ST_ERROR;
	for (int m = 0; all && m < c->n_nodes; m++) {
		if (x->part_len[m])
			memcpy(all + off, x->parts[m], x->part_len[m]);
		off += x->part_len[m];
	}
	for (int m = 0; m < c->n_nodes; m++)
		if (x->seq[m])
			connect_answer(c, m, x->seq[m], st, all,
				       all ? total : 0);
	free(all);
	dyn_connect_free(c, k);
}

static void on_connect_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	int64_t now = loop_now_ms();
	char took[SPEC_DURATION_TEXT];
	int k = -1;

	(void)loop;
	for (int i = 0; c->dyn && i < c->dyn->n_conns; i++)
		if (c->dyn->conns[i].due_ms <= now &&
		    (k < 0 ||
		     c->dyn->conns[i].due_ms < c->dyn->conns[k].due_ms))
			k = i;
	if (k < 0)
		return;
	c->dyn->conns[k].timer = 0;
	fprintf(stderr,
		"herd: PMIx %.40s timed out after %s; nodes "
		"that never joined:",
		c->dyn->conns[k].key,
		spec_duration_text(c->spec->health.fence_timeout_ms, took,
				   sizeof(took)));
	for (int i = 0; i < c->n_nodes; i++) {
		if (c->dyn->conns[k].seq[i])
			connect_answer(c, i, c->dyn->conns[k].seq[i],
				       ST_TIMEOUT, NULL, 0);
		else if (c->dyn->conns[k].want[i])
			fprintf(stderr, " %s", c->nodes[i].host);
	}
	fputc('\n', stderr);
	dyn_connect_free(c, k);
}

void ctl_connect_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *procs = json_object_get(f->body, "procs"), *p;
	const char *op = json_string_value(json_object_get(f->body, "op"));
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	int idx = (int)(n - c->nodes), k = -1, st = 0;
	size_t np = json_array_size(procs), i, len;
	struct ctl_dyn *d;
	struct dyn_connect *x;
	bool *want = NULL;
	char **names = NULL, *key = NULL;
	FILE *fk;

	if (json_integer_value(json_object_get(f->body, "attempt")) !=
	    c->attempt)
		return;
	if (!ctl_serves(c, CTL_SERVE_ATTEMPT) || !dyn_node_in(n) ||
	    !(d = dyn_of(c))) {
		connect_answer(c, idx, seq, ST_ERROR, NULL, 0);
		return;
	}
	want = calloc((size_t)c->n_nodes, sizeof(bool));
	names = calloc(np, sizeof(*names));
	if (!want || !names) {
		st = ST_ERROR;
		goto out;
	}
	json_array_foreach(procs, i, p)
	{
		int ns = (int)json_integer_value(json_object_get(p, "ns"));
		json_int_t rank =
		    json_integer_value(json_object_get(p, "rank"));

		if (mark_proc(c, ns, rank, want) < 0) {
			st = ST_NOT_FOUND;
			goto out;
		}
		if (asprintf(&names[i], "%d:%lld", ns, (long long)rank) < 0) {
			names[i] = NULL;
			st = ST_ERROR;
			goto out;
		}
	}
	if (!want[idx]) {
		st = ST_BAD_PARAM; /* none of them is on this node */
		goto out;
	}
	qsort(names, np, sizeof(*names), cmp_str);
	len = 0;
	if (!(fk = open_memstream(&key, &len))) {
		st = ST_ERROR;
		goto out;
	}
	fputs(op, fk);
	for (i = 0; i < np; i++)
		fprintf(fk, " %s", names[i]);
	fclose(fk);
	for (int j = 0; j < d->n_conns && k < 0; j++)
		if (!strcmp(d->conns[j].key, key))
			k = j;
	if (k < 0) {
		x = realloc(d->conns, (size_t)(d->n_conns + 1) * sizeof(*x));
		if (!x) {
			st = ST_ERROR;
			goto out;
		}
		d->conns = x;
		x = &d->conns[d->n_conns];
		memset(x, 0, sizeof(*x));
		x->seq = calloc((size_t)c->n_nodes, sizeof(int));
		x->parts = calloc((size_t)c->n_nodes, sizeof(*x->parts));
		x->part_len = calloc((size_t)c->n_nodes, sizeof(size_t));
		if (!x->seq || !x->parts || !x->part_len) {
			free(x->seq);
			free(x->parts);
			free(x->part_len);
			st = ST_ERROR;
			goto out;
		}
		x->key = key;
		x->want = want;
		key = NULL;
		want = NULL;
		for (int m = 0; m < c->n_nodes; m++)
			x->n_want += x->want[m];
		x->due_ms = loop_now_ms() + c->spec->health.fence_timeout_ms;
		x->timer =
		    loop_timer_add(c->loop, c->spec->health.fence_timeout_ms,
				   on_connect_timeout, c);
		k = d->n_conns++;
	}
	x = &d->conns[k];
	if (x->seq[idx]) {
		st = ST_BAD_PARAM; /* the same again before it is done */
		goto out;
	}
	if (f->data_len) {
		if (!(x->parts[idx] = malloc(f->data_len))) {
			st = ST_ERROR;
			goto out;
		}
		memcpy(x->parts[idx], f->data, f->data_len);
		x->part_len[idx] = f->data_len;
	}
	x->seq[idx] = seq;
	x->n_got++;
	if (x->n_got == x->n_want)
		connect_complete(c, k);
out:
	if (st)
		connect_answer(c, idx, seq, st, NULL, 0);
	for (i = 0; names && i < np; i++)
		free(names[i]);
	free(names);
	free(want);
	free(key);
}
