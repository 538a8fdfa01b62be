/* ctl/pmix/pubsub.c — the job's PMIx data server: what ranks
 * publish with PMIx_Publish (MPI_Publish_name), others find with
 * PMIx_Lookup (MPI_Lookup_name) and owners withdraw with PMIx_Unpublish.
 *
 * The controller holds the data because it outlives any node.  Values are
 * opaque here: each is one pmix_value_t packed by the publishing agent's
 * PMIx library, handed back byte for byte to the looking-up agent, whose
 * library unpacks it.  What herd reads is the frame's JSON: key, owner
 * (namespace, rank, node), range and persistence.
 *
 * The herd job is the PMIx session; each attempt is one namespace
 * ("herd.<job>.<attempt>").  So, as the standard has it:
 *   range       who can see it: proc_local the owner; local its node's
 *               ranks; namespace the ranks of its attempt; session,
 *               global, custom every rank of the job, later attempts too.
 *               A lookup's own range narrows where it looks the same way.
 *   persistence how long it is held: first_read until one lookup returns
 *               it; proc until its rank exits; app until its attempt
 *               ends; session and indef until the job ends (or an
 *               unpublish).
 * A key published again while a visible entry holds it is refused
 * (PMIX_ERR_DUPLICATE_KEY) — unless that entry's attempt is over: its
 * owner is gone, and a restarted program republishing its names must
 * not fail, so the new entry replaces it.  Unpublish removes the
 * caller's own entries only.
 *
 * A lookup with PMIX_WAIT waits until enough of its keys are visible,
 * for its PMIX_TIMEOUT (then PMIX_ERR_TIMEOUT) or until its attempt ends
 * (the agent fails it then).  Bounded: CTL_PUBSUB_ENTRIES_MAX entries and
 * CTL_PUBSUB_BYTES_MAX bytes held, CTL_PUBSUB_WAITS_MAX waiting lookups;
 * past them a call fails with "limit" (PMIX_ERR_OUT_OF_RESOURCE).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ctl/ctl_int.h"
#include "herd/ratelog.h"

/* 4,096 entries and 64 MiB of values: far more than MPI programs
 * publish (a port name or two per server), small next to herd. */
#define CTL_PUBSUB_ENTRIES_MAX 4096
#define CTL_PUBSUB_BYTES_MAX   (64u * 1024 * 1024)
/* 4,096 lookups waiting: one per rank of a large job. */
#define CTL_PUBSUB_WAITS_MAX 4096

enum pub_range { R_PROC, R_LOCAL, R_NSPACE, R_JOB };
enum pub_persist { P_INDEF, P_FIRST_READ, P_PROC, P_APP, P_SESSION };

struct pub_entry {
	char *key;
	char *nspace;
	int rank;
	int attempt;
	int node; /* index in ctl.nodes */
	enum pub_range range;
	enum pub_persist persist;
	char *value;
	size_t len;
	struct pub_entry *next;
};

/* Who asks: the rank, its namespace, node and attempt, and its range. */
struct pub_who {
	const char *nspace;
	int rank;
	int node;
	int attempt;
	enum pub_range range;
};

struct pub_wait {
	struct ctl *c;
	int node, attempt, id, rank;
	char *nspace;
	enum pub_range range;
	json_t *keys; /* [{key}] */
	int need;     /* keys that must be found */
	long timer;
	struct pub_wait *next;
};

/* Refused publishes are said in a few lines, then at most one per
 * PUBSUB_REFUSED_LOG_MS with a count: a program that publishes in a loop
 * past the limit must not flood herd's stderr. */
#define PUBSUB_REFUSED_LOG_BURST 3
#define PUBSUB_REFUSED_LOG_MS	 10000

struct ctl_pubsub {
	struct pub_entry *entries;
	size_t n_entries, bytes;
	struct pub_wait *waits;
	size_t n_waits;
	struct ratelog refused;
	long refused_timer;	/* the summary of lines left out */
	char refused_last[128]; /* "rank R on HOST" */
};

static enum pub_range range_of(const char *s)
{
	if (!strcmp(s, "proc_local"))
		return R_PROC;
	if (!strcmp(s, "local"))
		return R_LOCAL;
	if (!strcmp(s, "namespace"))
		return R_NSPACE;
	return R_JOB; /* session, global, custom */
}

static enum pub_persist persist_of(const char *s)
{
	if (!strcmp(s, "indef"))
		return P_INDEF;
	if (!strcmp(s, "first_read"))
		return P_FIRST_READ;
	if (!strcmp(s, "proc"))
		return P_PROC;
	if (!strcmp(s, "app"))
		return P_APP;
	return P_SESSION;
}

static struct ctl_pubsub *ps_of(struct ctl *c)
{
	if (!c->pubsub && (c->pubsub = calloc(1, sizeof(*c->pubsub))))
		ratelog_init(&c->pubsub->refused, PUBSUB_REFUSED_LOG_BURST,
			     PUBSUB_REFUSED_LOG_MS);
	return c->pubsub;
}

/* How many refusals were left out since the last line, if any. */
static void refused_say_left_out(struct ctl_pubsub *ps, unsigned long n)
{
	if (n)
		fprintf(stderr,
			"herd: %lu more PMIx_Publish refused (the latest from "
			"%s): the job holds at most %d entries (%u bytes); at "
			"most one such line every %d s\n",
			n, ps->refused_last, CTL_PUBSUB_ENTRIES_MAX,
			CTL_PUBSUB_BYTES_MAX, PUBSUB_REFUSED_LOG_MS / 1000);
}

static void refused_summary(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	struct ctl_pubsub *ps = c->pubsub;

	(void)loop;
	if (!ps)
		return;
	ps->refused_timer = 0;
	refused_say_left_out(ps, ratelog_flush(&ps->refused, loop_now_ms()));
}

/* A publish refused at the job's limit: one line, rate-limited. */
static void refused_log(struct ctl *c, struct ctl_pubsub *ps, int rank,
			const char *host)
{
	int64_t now = loop_now_ms();
	unsigned long left_out = 0;

	snprintf(ps->refused_last, sizeof(ps->refused_last), "rank %d on %s",
		 rank, host);
	if (ratelog_hit(&ps->refused, now, &left_out)) {
		fprintf(stderr,
			"herd: rank %d on %s: PMIx_Publish refused: the job "
			"holds %zu entries (%zu bytes), at most %d (%u)",
			rank, host, ps->n_entries, ps->bytes,
			CTL_PUBSUB_ENTRIES_MAX, CTL_PUBSUB_BYTES_MAX);
		if (left_out)
			fprintf(stderr,
				" (and %lu more not shown since the last such "
				"line)",
				left_out);
		fputc('\n', stderr);
		return;
	}
	if (!ps->refused_timer) {
		ps->refused_timer =
		    loop_timer_add(c->loop, ratelog_due(&ps->refused) - now,
				   refused_summary, c);
		if (ps->refused_timer < 0)
			ps->refused_timer = 0; /* the count waits for free */
	}
}

/* Does range r of a rank (nspace, rank, node) include the other's? */
static bool in_range(enum pub_range r, const char *ns1, int rank1, int node1,
		     const char *ns2, int rank2, int node2)
{
	switch (r) {
	case R_PROC:
		return !strcmp(ns1, ns2) && rank1 == rank2;
	case R_LOCAL:
		return node1 == node2;
	case R_NSPACE:
		return !strcmp(ns1, ns2);
	default:
		return true;
	}
}

/* Can w see e (e's range includes w, and w's lookup range includes
 * e)? */
static bool visible(const struct pub_entry *e, const struct pub_who *w)
{
	return in_range(e->range, e->nspace, e->rank, e->node, w->nspace,
			w->rank, w->node) &&
	       in_range(w->range, w->nspace, w->rank, w->node, e->nspace,
			e->rank, e->node);
}

static void entry_free(struct ctl_pubsub *ps, struct pub_entry **pp)
{
	struct pub_entry *e = *pp;

	*pp = e->next;
	ps->n_entries--;
	ps->bytes -= e->len;
	free(e->key);
	free(e->nspace);
	free(e->value);
	free(e);
}

static struct pub_entry **find(struct ctl_pubsub *ps, const char *key,
			       const struct pub_who *w)
{
	struct pub_entry **pp;

	for (pp = &ps->entries; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->key, key) && visible(*pp, w))
			return pp;
	return NULL;
}

static void answer(struct ctl *c, int node, int id, const char *status,
		   json_t *found, const char *data, size_t len)
{
	struct node *n = &c->nodes[node];
	json_t *body;

	if (n->state != NODE_UP || !n->conn) {
		json_decref(found);
		return;
	}
	body = json_pack("{s:i, s:i, s:s}", "attempt", c->attempt, "id", id,
			 "status", status);
	if (body && found)
		json_object_set(body, "found", found);
	json_decref(found);
	if (body)
		ctl_send(c, n, PROTO_PUBSUB_DONE, body, data, len);
	json_decref(body);
}

static void wait_free(struct ctl *c, struct pub_wait **pp)
{
	struct pub_wait *w = *pp;

	*pp = w->next;
	c->pubsub->n_waits--;
	if (w->timer)
		loop_timer_del(c->loop, w->timer);
	json_decref(w->keys);
	free(w->nspace);
	free(w);
}

/* Looks keys up for who; answers and returns true when at least need
 * of them are found (or timed_out: with what there is), else false and
 * nothing changes. */
static bool try_lookup(struct ctl *c, int node, int id,
		       const struct pub_who *who, json_t *keys, int need,
		       bool timed_out)
{
	struct ctl_pubsub *ps = c->pubsub;
	size_t nkeys = json_array_size(keys), total = 0, off = 0;
	struct pub_entry **hit[PROTO_PUBSUB_KEYS_MAX];
	int found = 0;
	json_t *arr;
	char *data = NULL;
	const char *status;

	for (size_t i = 0; i < nkeys && i < PROTO_PUBSUB_KEYS_MAX; i++) {
		const char *k = json_string_value(
		    json_object_get(json_array_get(keys, i), "key"));

		hit[i] = ps ? find(ps, k, who) : NULL;
		if (hit[i]) {
			found++;
			total += (*hit[i])->len;
		}
	}
	if (found < need && !timed_out)
		return false;
	arr = json_array();
	if (total && !(data = malloc(total))) {
		json_decref(arr);
		answer(c, node, id, "limit", NULL, NULL, 0);
		return true;
	}
	for (size_t i = 0; arr && i < nkeys && i < PROTO_PUBSUB_KEYS_MAX; i++) {
		struct pub_entry *e;

		if (!hit[i])
			continue;
		e = *hit[i];
		json_array_append_new(
		    arr, json_pack("{s:s, s:s, s:i, s:I}", "key", e->key,
				   "nspace", e->nspace, "rank", e->rank, "size",
				   (json_int_t)e->len));
		if (e->len)
			memcpy(data + off, e->value, e->len);
		off += e->len;
	}
	status = found == (int)nkeys	     ? "ok"
		 : timed_out && found < need ? "timeout"
		 : found		     ? "partial"
					     : "not_found";
	answer(c, node, id, status, found ? arr : NULL, data, total);
	if (!found)
		json_decref(arr);
	free(data);
	/* First read: gone once returned (found again: earlier entries
	 * moved, so look again). */
	for (size_t i = 0; ps && i < nkeys && i < PROTO_PUBSUB_KEYS_MAX; i++) {
		const char *k = json_string_value(
		    json_object_get(json_array_get(keys, i), "key"));
		struct pub_entry **pp = hit[i] ? find(ps, k, who) : NULL;

		if (pp && (*pp)->persist == P_FIRST_READ)
			entry_free(ps, pp);
	}
	return true;
}

static void on_wait_timeout(struct loop *loop, void *arg)
{
	struct pub_wait *w = arg, **pp;
	struct ctl *c = w->c;
	struct pub_who who = {w->nspace, w->rank, w->node, w->attempt,
			      w->range};

	(void)loop;
	w->timer = 0;
	try_lookup(c, w->node, w->id, &who, w->keys, w->need, true);
	for (pp = &c->pubsub->waits; *pp && *pp != w; pp = &(*pp)->next)
		;
	if (*pp)
		wait_free(c, pp);
}

/* After a publish: every waiting lookup that can be answered is. */
static void wake_waits(struct ctl *c)
{
	struct pub_wait **pp = &c->pubsub->waits;

	while (*pp) {
		struct pub_wait *w = *pp;
		struct pub_who who = {w->nspace, w->rank, w->node, w->attempt,
				      w->range};

		if (try_lookup(c, w->node, w->id, &who, w->keys, w->need,
			       false))
			wait_free(c, pp);
		else
			pp = &w->next;
	}
}

/* The frame's common fields; false when it is not for this attempt. */
static bool who_of(struct ctl *c, struct node *n, struct proto_frame *f,
		   struct pub_who *w)
{
	json_t *b = f->body;

	w->attempt = (int)json_integer_value(json_object_get(b, "attempt"));
	w->rank = (int)json_integer_value(json_object_get(b, "rank"));
	w->nspace = json_string_value(json_object_get(b, "nspace"));
	w->node = (int)(n - c->nodes);
	w->range = range_of(json_string_value(json_object_get(b, "range")));
	return w->attempt == c->attempt && n->member &&
	       ctl_serves(c, CTL_SERVE_RANKS);
}

void ctl_pubsub_publish(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *keys = json_object_get(f->body, "keys");
	int id = (int)json_integer_value(json_object_get(f->body, "id"));
	enum pub_persist persist =
	    persist_of(json_string_value(json_object_get(f->body, "persist")));
	struct ctl_pubsub *ps = ps_of(c);
	size_t nkeys = json_array_size(keys), total = 0, off = 0;
	struct pub_who who;

	if (!who_of(c, n, f, &who))
		return;
	if (!ps) {
		answer(c, who.node, id, "limit", NULL, NULL, 0);
		return;
	}
	for (size_t i = 0; i < nkeys; i++)
		total += (size_t)json_integer_value(
		    json_object_get(json_array_get(keys, i), "size"));
	if (total != f->data_len) {
		answer(c, who.node, id, "limit", NULL, NULL, 0);
		return;
	}
	if (ps->n_entries + nkeys > CTL_PUBSUB_ENTRIES_MAX ||
	    ps->bytes + total > CTL_PUBSUB_BYTES_MAX) {
		refused_log(c, ps, who.rank, n->host);
		answer(c, who.node, id, "limit", NULL, NULL, 0);
		return;
	}
	/* All or nothing: a duplicate refuses the whole call.  Any rank
	 * that could see either entry would see two values. */
	for (size_t i = 0; i < nkeys; i++) {
		const char *k = json_string_value(
		    json_object_get(json_array_get(keys, i), "key"));

		for (struct pub_entry **pp = &ps->entries; *pp;) {
			struct pub_entry *e = *pp;

			/* Some rank could see both: e's range holds the
			 * publisher, or the new range holds e's owner. */
			if (strcmp(e->key, k) ||
			    !(in_range(e->range, e->nspace, e->rank, e->node,
				       who.nspace, who.rank, who.node) ||
			      in_range(who.range, who.nspace, who.rank,
				       who.node, e->nspace, e->rank,
				       e->node))) {
				pp = &e->next;
				continue;
			}
			if (e->attempt < c->attempt) {
				entry_free(ps, pp); /* its owner is gone */
				continue;
			}
			answer(c, who.node, id, "duplicate", NULL, NULL, 0);
			return;
		}
	}
	for (size_t i = 0; i < nkeys; i++) {
		json_t *k = json_array_get(keys, i);
		size_t len =
		    (size_t)json_integer_value(json_object_get(k, "size"));
		struct pub_entry *e = calloc(1, sizeof(*e));

		if (!e ||
		    !(e->key = strdup(
			  json_string_value(json_object_get(k, "key")))) ||
		    !(e->nspace = strdup(who.nspace)) ||
		    (len && !(e->value = malloc(len)))) {
			if (e) {
				free(e->key);
				free(e->nspace);
				free(e);
			}
			answer(c, who.node, id, "limit", NULL, NULL, 0);
			return;
		}
		e->rank = who.rank;
		e->attempt = who.attempt;
		e->node = who.node;
		e->range = who.range;
		e->persist = persist;
		if (len)
			memcpy(e->value, f->data + off, len);
		e->len = len;
		off += len;
		e->next = ps->entries;
		ps->entries = e;
		ps->n_entries++;
		ps->bytes += len;
	}
	answer(c, who.node, id, "ok", NULL, NULL, 0);
	wake_waits(c);
}

void ctl_pubsub_lookup(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *b = f->body, *keys = json_object_get(b, "keys");
	int id = (int)json_integer_value(json_object_get(b, "id"));
	int wait = (int)json_integer_value(json_object_get(b, "wait"));
	json_int_t timeout_ms =
	    json_integer_value(json_object_get(b, "timeout_ms"));
	int nkeys = (int)json_array_size(keys);
	struct ctl_pubsub *ps = ps_of(c);
	struct pub_who who;
	struct pub_wait *w;

	if (!who_of(c, n, f, &who))
		return;
	if (try_lookup(c, who.node, id, &who, keys,
		       wait < 0	   ? 0
		       : wait == 0 ? nkeys
				   : wait,
		       false))
		return;
	/* Not there yet, and the caller waits. */
	if (!ps || ps->n_waits >= CTL_PUBSUB_WAITS_MAX ||
	    !(w = calloc(1, sizeof(*w)))) {
		answer(c, who.node, id, "limit", NULL, NULL, 0);
		return;
	}
	if (!(w->nspace = strdup(who.nspace))) {
		free(w);
		answer(c, who.node, id, "limit", NULL, NULL, 0);
		return;
	}
	w->c = c;
	w->node = who.node;
	w->attempt = who.attempt;
	w->id = id;
	w->rank = who.rank;
	w->range = who.range;
	w->keys = json_incref(keys);
	w->need = wait == 0 ? nkeys : wait;
	if (timeout_ms > 0)
		w->timer =
		    loop_timer_add(c->loop, timeout_ms, on_wait_timeout, w);
	w->next = ps->waits;
	ps->waits = w;
	ps->n_waits++;
}

void ctl_pubsub_unpublish(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *keys = json_object_get(f->body, "keys");
	int id = (int)json_integer_value(json_object_get(f->body, "id"));
	size_t nkeys = json_array_size(keys);
	struct ctl_pubsub *ps = ps_of(c);
	struct pub_who who;
	int gone = 0;

	if (!who_of(c, n, f, &who))
		return;
	for (struct pub_entry **pp = ps ? &ps->entries : NULL; pp && *pp;) {
		struct pub_entry *e = *pp;
		bool mine =
		    !strcmp(e->nspace, who.nspace) && e->rank == who.rank;
		bool named = nkeys == 0;

		for (size_t i = 0; !named && i < nkeys; i++)
			named = !strcmp(e->key,
					json_string_value(json_object_get(
					    json_array_get(keys, i), "key")));
		if (mine && named) {
			entry_free(ps, pp);
			gone++;
		} else {
			pp = &e->next;
		}
	}
	answer(c, who.node, id, gone || nkeys == 0 ? "ok" : "not_found", NULL,
	       NULL, 0);
}

void ctl_pubsub_rank_gone(struct ctl *c, int rank)
{
	struct ctl_pubsub *ps = c->pubsub;

	for (struct pub_entry **pp = ps ? &ps->entries : NULL; pp && *pp;) {
		if ((*pp)->persist == P_PROC && (*pp)->rank == rank &&
		    (*pp)->attempt == c->attempt)
			entry_free(ps, pp);
		else
			pp = &(*pp)->next;
	}
}

void ctl_pubsub_attempt_over(struct ctl *c)
{
	struct ctl_pubsub *ps = c->pubsub;

	if (!ps)
		return;
	while (ps->waits)
		wait_free(c, &ps->waits);
	for (struct pub_entry **pp = &ps->entries; *pp;) {
		if ((*pp)->persist == P_PROC || (*pp)->persist == P_APP)
			entry_free(ps, pp);
		else
			pp = &(*pp)->next;
	}
}

void ctl_pubsub_free(struct ctl *c)
{
	struct ctl_pubsub *ps = c->pubsub;

	if (!ps)
		return;
	while (ps->waits)
		wait_free(c, &ps->waits);
	while (ps->entries)
		entry_free(ps, &ps->entries);
	if (ps->refused_timer)
		loop_timer_del(c->loop, ps->refused_timer);
	refused_say_left_out(ps, ratelog_flush(&ps->refused, loop_now_ms()));
	free(ps);
	c->pubsub = NULL;
}
