/* ctl/hang.c — evidence of a hang: before an attempt with a
 * hung rank is failed, every member agent is asked for the stacks of its
 * running ranks (STACKS, agent/stacks.c), and the culprit is named.
 *
 * The lifecycle (ctl/table.c ctl_table[]): a HUNG in RUN moves the job to
 * STACKS and starts the collection here; further HUNG reports are merged;
 * each agent's answer is an event (CTL_EV_STACKS); when every asked node
 * answered or failed, or CTL_STACKS_WAIT_MS passed, STACKS_DONE takes the
 * job back to RUN, where the attempt fails as before, with the evidence
 * in the events and on the terminal.  A node that fails meanwhile is out
 * as usual and counts as answered (without stacks), so nothing waits
 * for it.
 *
 * The culprit: among the ranks whose stack is not in a collective while
 * others are (agent/stacks.c has the table of collectives), those seen
 * in their own code first, else among all, the one whose progress
 * stopped first (oldest last sign of life); the lowest rank on a tie.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/ctl_int.h"
#include "herd/text.h"

struct hang_rank {
	bool hung;	      /* reported hung by its agent */
	json_int_t silent_ms; /* as reported */
	bool answered;	      /* its agent sent its stack */
	const char *method;   /* "python", "gdb", "none" (static) */
	char *frame;	      /* "FUNC (file:line)", or NULL */
	char *error;	      /* why there is no frame, or NULL */
	bool in_collective;
	int64_t last_sign_ms; /* wall clock; 0: unknown */
};

struct ctl_hang {
	int n;		     /* world size when it began */
	struct hang_rank *r; /* [rank] */
	bool *asked;	     /* [node index]: answer due */
	int pending;
	long timer;
	int64_t began_wall_ms;
};

static void on_wait_over(struct loop *loop, void *arg)
{
	struct ctl *c = arg;

	(void)loop;
	if (c->hang)
		c->hang->timer = 0;
	ctl_post(c, CTL_EV_STACKS_DONE, NULL, 0, NULL);
}

void ctl_hang_free(struct ctl *c)
{
	struct ctl_hang *h = c->hang;

	if (!h)
		return;
	if (h->timer && c->loop)
		loop_timer_del(c->loop, h->timer);
	for (int i = 0; i < h->n; i++) {
		free(h->r[i].frame);
		free(h->r[i].error);
	}
	free(h->r);
	free(h->asked);
	free(h);
	c->hang = NULL;
}

static const char *method_name(const char *m)
{
	if (m && !strcmp(m, "python"))
		return "python";
	if (m && !strcmp(m, "gdb"))
		return "gdb";
	return "none";
}

void ctl_hang_merge(struct ctl *c, struct node *n, json_t *body)
{
	struct ctl_hang *h = c->hang;
	json_t *e;
	size_t i;

	(void)n;
	if (!h)
		return;
	json_array_foreach(json_object_get(body, "hung"), i, e)
	{
		json_int_t rank =
		    json_integer_value(json_object_get(e, "rank"));

		if (rank < 0 || rank >= h->n || h->r[rank].hung)
			continue;
		h->r[rank].hung = true;
		h->r[rank].silent_ms =
		    json_integer_value(json_object_get(e, "silent_ms"));
	}
}

void ctl_hang_begin(struct ctl *c, struct node *n, json_t *body)
{
	struct ctl_hang *h;
	json_t *ask;

	ctl_hang_free(c);
	h = calloc(1, sizeof(*h));
	if (!h ||
	    !(h->r = calloc((size_t)(c->world_size > 0 ? c->world_size : 1),
			    sizeof(*h->r))) ||
	    !(h->asked = calloc((size_t)c->n_nodes, sizeof(*h->asked)))) {
		if (h)
			free(h->r);
		free(h);
		fprintf(stderr, "herd: out of memory: no stacks of the hung "
				"ranks\n");
		ctl_post(c, CTL_EV_STACKS_DONE, NULL, 0, NULL);
		return;
	}
	h->n = c->world_size;
	h->began_wall_ms = loop_wall_ms();
	c->hang = h;
	ctl_hang_merge(c, n, body);
	{
		json_t *e = json_array_get(json_object_get(body, "hung"), 0);

		fprintf(stderr,
			"herd: rank %d on %s hung (no output and no progress "
			"for %.1f s); asking every node for its ranks' "
			"stacks\n",
			(int)json_integer_value(json_object_get(e, "rank")),
			n->host,
			(double)json_integer_value(
			    json_object_get(e, "silent_ms")) /
			    1000.0);
	}
	ask = json_pack("{s:i}", "attempt", c->attempt);
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *m = &c->nodes[i];

		if (!m->member || m->state != NODE_UP || m->n_ranks == 0 ||
		    !m->conn || conn_is_dead(m->conn))
			continue;
		if (ctl_send(c, m, PROTO_STACKS, ask, NULL, 0) < 0)
			continue; /* its close handler fails it */
		h->asked[i] = true;
		h->pending++;
	}
	json_decref(ask);
	if (h->pending == 0) {
		ctl_post(c, CTL_EV_STACKS_DONE, NULL, 0, NULL);
		return;
	}
	h->timer = loop_timer_add(c->loop, c->stacks_wait_ms, on_wait_over, c);
	if (h->timer < 0)
		h->timer = 0;
}

/* Node n will not answer (it answered, or failed): the collection is
 * done when nobody else is due. */
static void node_in(struct ctl *c, struct node *n)
{
	struct ctl_hang *h = c->hang;
	int i = (int)(n - c->nodes);

	if (!h || i < 0 || i >= c->n_nodes || !h->asked[i])
		return;
	h->asked[i] = false;
	if (--h->pending == 0) {
		if (h->timer)
			loop_timer_del(c->loop, h->timer);
		h->timer = 0;
		ctl_post(c, CTL_EV_STACKS_DONE, NULL, 0, NULL);
	}
}

void ctl_hang_answer(struct ctl *c, struct node *n, json_t *body)
{
	struct ctl_hang *h = c->hang;
	json_t *e;
	size_t i;

	if (!h)
		return;
	json_array_foreach(json_object_get(body, "ranks"), i, e)
	{
		json_int_t rank =
		    json_integer_value(json_object_get(e, "rank"));
		const char *frame, *error;
		struct hang_rank *r;

		/* Only the node's own ranks. */
		if (rank < 0 || rank >= h->n || !c->ranks ||
		    rank >= c->world_size ||
		    &c->nodes[c->ranks[rank].node] != n)
			continue;
		r = &h->r[rank];
		frame = json_string_value(json_object_get(e, "frame"));
		error = json_string_value(json_object_get(e, "error"));
		r->answered = true;
		r->method = method_name(
		    json_string_value(json_object_get(e, "method")));
		free(r->frame);
		free(r->error);
		/* The frame is the rank's text (a function or file name
		 * of its own making): no control character of it reaches
		 * herd's terminal line, the attempt's reason or the events. */
		r->frame = herd_text_clean(frame ? strdup(frame) : NULL);
		r->error = herd_text_clean(error ? strdup(error) : NULL);
		r->in_collective =
		    json_is_true(json_object_get(e, "in_collective"));
		r->last_sign_ms =
		    json_integer_value(json_object_get(e, "last_sign_ms"));
	}
	node_in(c, n);
}

void ctl_hang_node_gone(struct ctl *c, struct node *n)
{
	node_in(c, n);
}

/* When rank r last showed life (wall ms), as well as is known. */
static int64_t last_sign(const struct ctl_hang *h, int r)
{
	if (h->r[r].answered && h->r[r].last_sign_ms > 0)
		return h->r[r].last_sign_ms;
	if (h->r[r].hung)
		return h->began_wall_ms - h->r[r].silent_ms;
	return INT64_MAX;
}

/* What a rank's answer says of it, for the choice of a culprit. */
enum hang_seen {
	SEEN_NONE, /* no answer */
	SEEN_COLL, /* waiting in a collective */
	SEEN_OWN,  /* in its own code, outside any collective */
	SEEN_BLANK /* answered without a frame: caught in Python's garbage
		    * collector, or back in herd's bootstrap after its
		    * script raised (a peer had died of its SIGABRT first) */
};

static enum hang_seen seen_of(const struct hang_rank *x)
{
	if (!x->answered)
		return SEEN_NONE;
	if (x->in_collective)
		return SEEN_COLL;
	return x->frame ? SEEN_OWN : SEEN_BLANK;
}

static int culprit_of(const struct ctl_hang *h)
{
	int count[SEEN_BLANK + 1] = {0};
	enum hang_seen want = SEEN_NONE;
	int best = -1;

	for (int r = 0; r < h->n; r++)
		count[seen_of(&h->r[r])]++;
	/* Some wait in a collective: one of those that do not holds the
	 * others up, one seen in its own code rather than one without a
	 * frame. */
	if (count[SEEN_COLL] && count[SEEN_OWN])
		want = SEEN_OWN;
	else if (count[SEEN_COLL] && count[SEEN_BLANK])
		want = SEEN_BLANK;
	for (int r = 0; r < h->n; r++) {
		const struct hang_rank *x = &h->r[r];

		if (!x->answered && !x->hung)
			continue;
		if (want != SEEN_NONE && seen_of(x) != want)
			continue;
		if (best < 0 || last_sign(h, r) < last_sign(h, best))
			best = r;
	}
	return best;
}

/* The function of a frame "FUNC (file:line)", into buf. */
static void frame_func(const char *frame, char *buf, size_t size)
{
	const char *end = strstr(frame, " (");
	size_t len = end ? (size_t)(end - frame) : strlen(frame);

	if (len >= size)
		len = size - 1;
	memcpy(buf, frame, len);
	buf[len] = '\0';
}

/* Appends to buf (of size, holding *len) what fmt says, cut to fit. */
static void add(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len + 1 >= size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = *len + (size_t)n >= size ? size - 1 : *len + (size_t)n;
}

/* 16: ranks named in one group of the terminal line; more are counted. */
#define HANG_LINE_RANKS 16

/* "; ranks 0,1,3 wait in all_reduce" per collective function. */
static void add_waiters(const struct ctl_hang *h, int culprit, char *buf,
			size_t size, size_t *len)
{
	bool *said = calloc((size_t)h->n, sizeof(*said));

	if (!said)
		return;
	for (int r = 0; r < h->n; r++) {
		char func[128];
		int k = 0, named = 0;

		if (said[r] || r == culprit || !h->r[r].answered ||
		    !h->r[r].in_collective)
			continue;
		frame_func(h->r[r].frame ? h->r[r].frame : "a collective", func,
			   sizeof(func));
		for (int q = r; q < h->n; q++) {
			char other[128];

			if (said[q] || q == culprit || !h->r[q].answered ||
			    !h->r[q].in_collective)
				continue;
			frame_func(h->r[q].frame ? h->r[q].frame
						 : "a collective",
				   other, sizeof(other));
			if (strcmp(func, other))
				continue;
			said[q] = true;
			k++;
		}
		add(buf, size, len, "; rank%s ", k > 1 ? "s" : "");
		for (int q = r; q < h->n && named < k; q++) {
			char other[128];

			if (q == culprit || !h->r[q].answered ||
			    !h->r[q].in_collective)
				continue;
			frame_func(h->r[q].frame ? h->r[q].frame
						 : "a collective",
				   other, sizeof(other));
			if (strcmp(func, other))
				continue;
			if (named < HANG_LINE_RANKS)
				add(buf, size, len, "%s%d", named ? "," : "",
				    q);
			else if (named == HANG_LINE_RANKS)
				add(buf, size, len, " and %d more",
				    k - HANG_LINE_RANKS);
			named++;
		}
		add(buf, size, len, " wait%s in %s", k > 1 ? "" : "s", func);
	}
	free(said);
}

void ctl_hang_end(struct ctl *c, char *why, size_t why_size)
{
	struct ctl_hang *h = c->hang;
	char limit[SPEC_DURATION_TEXT];
	char line[1024];
	size_t len = 0;
	int culprit;

	spec_duration_text(c->spec->health.progress_timeout_ms, limit,
			   sizeof(limit));
	if (!h) {
		snprintf(why, why_size,
			 "a rank hung (no output and no progress for %s)",
			 limit);
		return;
	}
	culprit = culprit_of(h);
	for (int r = 0; r < h->n; r++) {
		struct hang_rank *x = &h->r[r];
		const char *host = c->ranks && r < c->world_size
				       ? c->nodes[c->ranks[r].node].host
				       : "?";
		json_t *ev;

		if (!x->hung && r != culprit)
			continue;
		ev = json_pack(
		    "{s:i, s:i, s:s, s:I, s:s, s:b, s:b}", "attempt",
		    c->attempt, "rank", r, "host", host, "silent_ms",
		    (json_int_t)(x->hung ? x->silent_ms
					 : h->began_wall_ms - last_sign(h, r)),
		    "method", x->answered ? x->method : "none", "in_collective",
		    x->in_collective, "culprit", r == culprit);
		if (ev && x->frame)
			json_object_set_new(ev, "frame", json_string(x->frame));
		if (ev && !x->frame)
			json_object_set_new(ev, "error",
					    json_string(x->error ? x->error
							: x->answered
							    ? "no stack"
							    : "its node did "
							      "not answer"));
		events_emit(c->ev, "rank_hung", ev);
	}
	if (culprit < 0) {
		snprintf(why, why_size,
			 "a rank hung (no output and no progress for %s)",
			 limit);
	} else {
		struct hang_rank *x = &h->r[culprit];
		const char *host = c->ranks && culprit < c->world_size
				       ? c->nodes[c->ranks[culprit].node].host
				       : "?";

		if (x->frame)
			add(line, sizeof(line), &len,
			    "rank %d on %s hung in %s", culprit, host,
			    x->frame);
		else
			add(line, sizeof(line), &len,
			    "rank %d on %s hung (no stack: %s)", culprit, host,
			    x->error	  ? x->error
			    : x->answered ? "none given"
					  : "its node did not answer");
		snprintf(why, why_size,
			 "rank %d on %s hung%s%s (no output and no progress "
			 "for %s)",
			 culprit, host, x->frame ? " in " : "",
			 x->frame ? x->frame : "", limit);
		add_waiters(h, culprit, line, sizeof(line), &len);
		if (x->answered && x->in_collective)
			add(line, sizeof(line), &len,
			    "; no rank is outside a collective: its progress "
			    "stopped first");
		fprintf(stderr, "herd: %s\n", line);
	}
	ctl_hang_free(c);
}
