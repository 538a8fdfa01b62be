/* ctl/rejoin.c — survivors keep training (restart.survivors: keep).
 *
 * Every rank of an attempt has a control channel to herd (HERD_CONTROL,
 * agent/control.c); a rank that speaks herd's elastic protocol
 * (python/herd/elastic.py) says hello on it.  When a node fails while
 * every rank of the attempt said hello, and a spare (or a readmitted
 * node) can take its place, the attempt is not stopped:
 *
 *   1. the generation goes from G to G+1; every surviving rank is told
 *      the new membership at once (it abandons the step in flight and
 *      destroys its process group);
 *   2. the failed node's ranks are launched on the spare with the same
 *      global ranks and HERD_GENERATION=G+1 (as soon as its agent is up);
 *   3. every rank forms the group of G+1 over herd's store (below) and
 *      the replacement gets the model from the lowest surviving rank;
 *   4. each rank reports stepping in G+1; when the last one has, the
 *      `rejoin` event says how long it took from the failure.
 *
 * A rank that does not report in time (health.rejoin_timeout), another
 * failure meanwhile, or no spare: the attempt fails as it always did
 * (the classic restart), and `rejoin` says fell_back and why.  A job
 * whose ranks never said hello, or restart.survivors: restart, never
 * comes here.
 *
 * The store: herd.elastic's process groups rendezvous on a key-value
 * table per generation that herd holds in memory, reached only through
 * the ranks' control channels (a socket in the agent's 0700 directory,
 * peer uid checked), so no other local user can read or write it —
 * unlike a TCPStore on MASTER_PORT, which every local user can reach.
 * Values are opaque base64 strings except for `add`, whose counter is
 * the decimal text c10d keeps.  A get or wait on a missing key waits in
 * herd until a set makes it true; the rank's side bounds the wait.
 *
 * Nothing here changes the lifecycle: a fall-back posts ATTEMPT_FAILED,
 * which RUN already takes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "launcher/ctl/ctl_int.h"

/* "rank 3" or "ranks 4-5", into buf. */
static void ranks_said(char *buf, size_t size, int first, int count)
{
	if (count == 1)
		snprintf(buf, size, "rank %d", first);
	else
		snprintf(buf, size, "ranks %d-%d", first, first + count - 1);
}

/* Keys of one generation's table: a process group's rendezvous sets a
 * handful per rank. */
#define REJOIN_STORE_KEYS_MAX 65536
/* A get or wait that is not answered yet; past this, the oldest goes
 * unanswered (the rank's own timeout ends its wait). */
#define REJOIN_WAITERS_MAX 4096
/* Bytes of one value (base64): a line of the control channel is at most
 * half of PROTO_JSON_MAX. */
#define REJOIN_VALUE_MAX (256u * 1024)
/* 64 MiB: the bytes of values herd holds for the job's stores, all
 * generations together; a rank that writes more is refused, not herd's
 * memory grown without bound. */
#define REJOIN_STORE_BYTES_MAX (64u * 1024 * 1024)

struct waiter {
	int node;	/* index into c->nodes */
	int rank, conn;
	json_int_t id;
	int gen;
	json_t *keys;	/* array of strings */
	bool get;	/* get: answer with the value of keys[0] */
};

struct ctl_rejoin {
	int gen;		/* the membership's generation now */
	bool *hello;		/* [world_size] said hello this attempt */
	bool *stepping;		/* [world_size] stepping in gen */
	bool active;		/* a rejoin is under way */
	int64_t t0_ms;		/* wall clock of the node's failure */
	struct node *spare;	/* takes the failed node's ranks */
	int first_rank, n_ranks;	/* the failed node's */
	int index;			/* its node rank */
	bool launched;
	long timer;		/* health.rejoin_timeout */
	long launch_timer;
	json_t *tables;		/* {"G": {key: base64}} */
	size_t bytes;		/* of the values in tables (at most
				 * REJOIN_STORE_BYTES_MAX) */
	struct waiter *waiters;
	int n_waiters;
};

static struct ctl_rejoin *rj_of(struct ctl *c)
{
	if (!c->rejoin)
		c->rejoin = calloc(1, sizeof(*c->rejoin));
	return c->rejoin;
}

int ctl_rejoin_generation(const struct ctl *c)
{
	return c->rejoin ? c->rejoin->gen : 0;
}

static void waiter_drop(struct ctl_rejoin *rj, int i)
{
	json_decref(rj->waiters[i].keys);
	rj->waiters[i] = rj->waiters[--rj->n_waiters];
}

static void timers_stop(struct ctl *c, struct ctl_rejoin *rj)
{
	if (rj->timer)
		loop_timer_del(c->loop, rj->timer);
	if (rj->launch_timer)
		loop_timer_del(c->loop, rj->launch_timer);
	rj->timer = rj->launch_timer = 0;
}

void ctl_rejoin_attempt(struct ctl *c)
{
	struct ctl_rejoin *rj = rj_of(c);
	size_t n = (size_t)(c->world_size > 0 ? c->world_size : 1);

	if (!rj)
		return;
	timers_stop(c, rj);
	free(rj->hello);
	free(rj->stepping);
	rj->hello = calloc(n, sizeof(bool));
	rj->stepping = calloc(n, sizeof(bool));
	rj->gen = 0;
	rj->active = false;
	rj->spare = NULL;
	json_decref(rj->tables);
	rj->tables = json_object();
	rj->bytes = 0;
	while (rj->n_waiters)
		waiter_drop(rj, 0);
}

void ctl_rejoin_free(struct ctl *c)
{
	struct ctl_rejoin *rj = c->rejoin;

	if (!rj)
		return;
	timers_stop(c, rj);
	while (rj->n_waiters)
		waiter_drop(rj, 0);
	free(rj->waiters);
	json_decref(rj->tables);
	free(rj->hello);
	free(rj->stepping);
	free(rj);
	c->rejoin = NULL;
}

/* One message to rank's connection `to` (0: every one that said hello). */
static void send_msg(struct ctl *c, struct node *n, int rank, int to,
		     json_t *msg)
{
	json_t *body;

	if (!n || !n->conn || conn_is_dead(n->conn) || !msg) {
		json_decref(msg);
		return;
	}
	body = json_pack("{s:i, s:i, s:i, s:o}", "attempt", c->attempt, "rank",
			 rank, "to", to, "msg", msg);
	if (body && ctl_send(c, n, PROTO_RANK_CTL, body, NULL, 0) < 0)
		fprintf(stderr, "herd: %s: cannot send rank %d its control "
				"message\n",
			n->host, rank);
	json_decref(body);
}

/* --- the fall-back and the end of a rejoin ------------------------------- */

static void say_fell_back(struct ctl *c, struct ctl_rejoin *rj,
			  const char *why)
{
	events_emit(c->ev, "rejoin",
		    json_pack("{s:i, s:i, s:b, s:s}", "attempt", c->attempt,
			      "generation", rj->gen, "fell_back", 1, "reason",
			      why));
	fprintf(stderr, "herd: the survivors cannot keep training: %s; "
			"restarting every rank\n",
		why);
}

void ctl_rejoin_attempt_over(struct ctl *c, const char *why)
{
	struct ctl_rejoin *rj = c->rejoin;

	if (!rj || !rj->active)
		return;
	rj->active = false;
	timers_stop(c, rj);
	say_fell_back(c, rj, why);
}

static void on_rejoin_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	struct ctl_rejoin *rj = c->rejoin;
	char why[256], list[128] = "";
	size_t len = 0;
	char grace[SPEC_DURATION_TEXT];

	(void)loop;
	rj->timer = 0;
	if (!rj->active)
		return;
	for (int r = 0; r < c->world_size && len < sizeof(list) - 12; r++)
		if (!rj->stepping[r])
			len += (size_t)snprintf(list + len, sizeof(list) - len,
						"%s%d", len ? "," : "", r);
	snprintf(why, sizeof(why),
		 "rank %s did not rejoin within health.rejoin_timeout (%s)",
		 list,
		 spec_duration_text(c->spec->health.rejoin_timeout_ms, grace,
				    sizeof(grace)));
	ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
}

/* Every rank steps in the new generation: the rejoin is over. */
static void rejoined(struct ctl *c, struct ctl_rejoin *rj)
{
	int64_t ms = loop_wall_ms() - rj->t0_ms;
	char key[16];
	const char *k;
	json_t *v;
	void *tmp;

	rj->active = false;
	timers_stop(c, rj);
	events_emit(c->ev, "rejoin",
		    json_pack("{s:i, s:i, s:i, s:[s], s:I, s:b}", "attempt",
			      c->attempt, "generation", rj->gen, "survivors",
			      c->world_size - rj->n_ranks, "replacement",
			      rj->spare->host, "ms", (json_int_t)ms,
			      "fell_back", 0));
	{
		char who[48];

		ranks_said(who, sizeof(who), rj->first_rank, rj->n_ranks);
		fprintf(stderr,
			"herd: %s rejoined on %s: generation %d, every rank "
			"training again %" PRId64 " ms after the failure\n",
			who, rj->spare->host, rj->gen, ms);
	}
	/* Tables of older generations are of no use to anyone now. */
	snprintf(key, sizeof(key), "%d", rj->gen);
	json_object_foreach_safe(rj->tables, tmp, k, v)
	{
		if (strcmp(k, key))
			json_object_del(rj->tables, k);
	}
	rj->bytes = 0;
	json_object_foreach(json_object_get(rj->tables, key), k, v)
		rj->bytes += json_string_length(v);
}

/* --- the replacement -------------------------------------------------------- */

static void launch_replacement(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	struct ctl_rejoin *rj = c->rejoin;
	struct node *n = rj->spare;
	struct herd_err err;
	char *command = NULL;
	json_t *body;

	(void)loop;
	rj->launch_timer = 0;
	if (!rj->active || rj->launched || n->state != NODE_UP)
		return;
	rj->launched = true;
	herd_err_clear(&err);
	n->index = rj->index;
	if (ctl_plan_replacement(c, n, rj->first_rank, rj->n_ranks, &err) <
		    0 ||
	    !(command = ctl_render_command(c, &err))) {
		char why[600];

		snprintf(why, sizeof(why), "the replacement on %s: %.400s",
			 n->host, err.text);
		ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, why);
		return;
	}
	body = ctl_launch_body(c, n, command);
	if (ctl_send(c, n, PROTO_LAUNCH, body, NULL, 0) < 0)
		ctl_post(c, CTL_EV_NODE_FAILED, n, 0,
			 "cannot send the replacement's LAUNCH");
	json_decref(body);
	free(command);
	/* rank_start (with the generation) comes with each rank's STARTED
	 * (ctl/warm.c). */
}

void ctl_rejoin_node_up(struct ctl *c, struct node *n)
{
	struct ctl_rejoin *rj = c->rejoin;

	if (rj && rj->active && rj->spare == n && !rj->launched &&
	    !rj->launch_timer)
		rj->launch_timer =
		    loop_timer_add(c->loop, 0, launch_replacement, c);
}

bool ctl_rejoin_start(struct ctl *c, struct node *failed)
{
	struct ctl_rejoin *rj = c->rejoin;
	int idx = (int)(failed - c->nodes), first = -1, count = 0;
	struct node *spare;
	json_t *replaced;

	if (c->spec->restart.survivors != SPEC_SURVIVORS_KEEP ||
	    c->spec->launch.mode == SPEC_MODE_PMIX || !rj || !rj->hello ||
	    rj->active || !c->ranks || c->n_slots != c->world_size)
		return false;
	for (int r = 0; r < c->world_size; r++) {
		bool on_failed = c->ranks[r].node == idx;

		if (!rj->hello[r] || (!on_failed && c->ranks[r].done))
			return false; /* the classic restart, as always */
		if (on_failed) {
			if (first < 0)
				first = r;
			count++;
		}
	}
	if (count == 0)
		return false;
	spare = ctl_take_spare_now(c);
	if (!spare) {
		say_fell_back(c, rj, "no spare node to take the failed "
				     "node's ranks");
		return false;
	}
	rj->active = true;
	rj->launched = false;
	rj->t0_ms = loop_wall_ms();
	rj->gen++;
	rj->spare = spare;
	rj->first_rank = first;
	rj->n_ranks = count;
	rj->index = failed->index;
	memset(rj->stepping, 0, (size_t)c->world_size * sizeof(bool));
	for (int r = first; r < first + count; r++)
		c->ranks[r].node = (int)(spare - c->nodes);
	{
		char who[48];

		ranks_said(who, sizeof(who), first, count);
		fprintf(stderr,
			"herd: %s %s to %s; the other ranks keep training "
			"(generation %d)\n",
			who, count == 1 ? "moves" : "move", spare->host,
			rj->gen);
	}
	replaced = json_array();
	for (int r = first; r < first + count; r++)
		json_array_append_new(replaced, json_integer(r));
	for (int r = 0; r < c->world_size; r++) {
		if (r >= first && r < first + count)
			continue;
		send_msg(c, &c->nodes[c->ranks[r].node], r, 0,
			 json_pack("{s:s, s:i, s:i, s:i, s:s, s:i, s:O}",
				   "op", "membership", "generation", rj->gen,
				   "world_size", c->world_size, "rank", r,
				   "master_addr",
				   c->master_addr ? c->master_addr : "",
				   "master_port",
				   (int)((c->spec->launch.master_port + rj->gen) %
					 65536),
				   "replaced", replaced));
	}
	json_decref(replaced);
	rj->timer = loop_timer_add(c->loop, c->spec->health.rejoin_timeout_ms,
				   on_rejoin_timeout, c);
	if (spare->state == NODE_UP)
		ctl_rejoin_node_up(c, spare);
	return true;
}

/* --- the store -------------------------------------------------------------- */

static json_t *table_of(struct ctl_rejoin *rj, int gen)
{
	char key[16];
	json_t *t;

	snprintf(key, sizeof(key), "%d", gen);
	if ((t = json_object_get(rj->tables, key)))
		return t;
	t = json_object();
	json_object_set_new(rj->tables, key, t);
	return json_object_get(rj->tables, key);
}

static bool all_present(json_t *t, json_t *keys)
{
	size_t i;
	json_t *k;

	json_array_foreach(keys, i, k)
	{
		if (!json_object_get(t, json_string_value(k)))
			return false;
	}
	return true;
}

static void reply(struct ctl *c, struct node *n, int rank, int conn,
		  json_int_t id, json_t *fields)
{
	if (!fields)
		return;
	json_object_set_new(fields, "op", json_string("store_reply"));
	json_object_set_new(fields, "id", json_integer(id));
	send_msg(c, n, rank, conn, fields);
}

/* Answers every waiter of generation gen that can be answered now. */
static void wake(struct ctl *c, struct ctl_rejoin *rj, int gen)
{
	json_t *t = table_of(rj, gen);

	for (int i = 0; i < rj->n_waiters;) {
		struct waiter *w = &rj->waiters[i];

		if (w->gen != gen || !all_present(t, w->keys)) {
			i++;
			continue;
		}
		reply(c, &c->nodes[w->node], w->rank, w->conn, w->id,
		      w->get ? json_pack("{s:O}", "value",
					 json_object_get(
					     t, json_string_value(json_array_get(
						    w->keys, 0))))
			     : json_pack("{s:b}", "ok", 1));
		waiter_drop(rj, i);
	}
}

/* The decimal counter `add` keeps under key (0 when missing or not a
 * number). */
static long long counter(json_t *t, const char *key)
{
	const char *b64 = json_string_value(json_object_get(t, key));
	unsigned char buf[64];
	char *end;
	long long v;
	int len;

	if (!b64 || strlen(b64) > 80)
		return 0;
	len = EVP_DecodeBlock(buf, (const unsigned char *)b64,
			      (int)strlen(b64));
	if (len <= 0)
		return 0;
	while (len > 0 && (buf[len - 1] == '\0'))
		len--;
	buf[len] = '\0';
	v = strtoll((char *)buf, &end, 10);
	return *end ? 0 : v;
}

static json_t *b64_text(const char *text)
{
	unsigned char out[64];

	EVP_EncodeBlock(out, (const unsigned char *)text, (int)strlen(text));
	return json_string((char *)out);
}

static void store_op(struct ctl *c, struct node *n, int rank, int conn,
		     json_t *msg)
{
	struct ctl_rejoin *rj = c->rejoin;
	json_t *jid = json_object_get(msg, "id");
	json_int_t id = json_integer_value(jid);
	const char *cmd = json_string_value(json_object_get(msg, "cmd"));
	const char *key = json_string_value(json_object_get(msg, "key"));
	json_t *value = json_object_get(msg, "value");
	json_t *gen_j = json_object_get(msg, "gen");
	int gen = (int)json_integer_value(gen_j);
	json_t *t, *keys;

	if (!json_is_integer(jid) || !cmd || !json_is_integer(gen_j))
		return;
	if (gen < rj->gen - 1 || gen > rj->gen) {
		reply(c, n, rank, conn, id,
		      json_pack("{s:s}", "error",
				"no store for that generation"));
		return;
	}
	if ((value && (!json_is_string(value) ||
		       json_string_length(value) > REJOIN_VALUE_MAX)) ||
	    (key && strlen(key) > 4096)) {
		reply(c, n, rank, conn, id,
		      json_pack("{s:s}", "error", "value or key too long"));
		return;
	}
	t = table_of(rj, gen);
	if (!strcmp(cmd, "num_keys")) {
		reply(c, n, rank, conn, id,
		      json_pack("{s:I}", "value",
				(json_int_t)json_object_size(t)));
		return;
	}
	if (!strcmp(cmd, "check") || !strcmp(cmd, "wait")) {
		keys = json_object_get(msg, "keys");
		if (!json_is_array(keys) || json_array_size(keys) > 1024)
			goto bad;
		for (size_t i = 0; i < json_array_size(keys); i++)
			if (!json_is_string(json_array_get(keys, i)))
				goto bad;
		if (!strcmp(cmd, "check") || all_present(t, keys)) {
			reply(c, n, rank, conn, id,
			      json_pack("{s:b}", "ok", all_present(t, keys)));
			return;
		}
		goto wait;
	}
	if (!key)
		goto bad;
	keys = json_pack("[s]", key);
	if (!strcmp(cmd, "get")) {
		json_t *v = json_object_get(t, key);

		if (v) {
			reply(c, n, rank, conn, id,
			      json_pack("{s:O}", "value", v));
			json_decref(keys);
			return;
		}
		goto wait_owned;
	}
	json_decref(keys);
	if (!strcmp(cmd, "delete")) {
		bool had = json_object_get(t, key) != NULL;

		json_object_del(t, key);
		reply(c, n, rank, conn, id, json_pack("{s:b}", "ok", had));
		return;
	}
	if (json_object_size(t) >= REJOIN_STORE_KEYS_MAX &&
	    !json_object_get(t, key)) {
		reply(c, n, rank, conn, id,
		      json_pack("{s:s}", "error", "too many keys"));
		return;
	}
	if (value && rj->bytes + json_string_length(value) >
			 REJOIN_STORE_BYTES_MAX) {
		reply(c, n, rank, conn, id,
		      json_pack("{s:s}", "error", "the store is full"));
		return;
	}
	if (value)	/* an upper bound: a replaced value is counted twice */
		rj->bytes += json_string_length(value);
	if (!strcmp(cmd, "set") && json_is_string(value)) {
		json_object_set(t, key, value);
		reply(c, n, rank, conn, id, json_pack("{s:b}", "ok", 1));
	} else if (!strcmp(cmd, "add") &&
		   json_is_integer(json_object_get(msg, "amount"))) {
		long long v = counter(t, key) +
			      json_integer_value(json_object_get(msg, "amount"));
		char text[32];

		snprintf(text, sizeof(text), "%lld", v);
		json_object_set_new(t, key, b64_text(text));
		reply(c, n, rank, conn, id,
		      json_pack("{s:I}", "value", (json_int_t)v));
	} else if (!strcmp(cmd, "compare_set") && json_is_string(value) &&
		   json_is_string(json_object_get(msg, "expected"))) {
		json_t *cur = json_object_get(t, key);
		const char *exp =
		    json_string_value(json_object_get(msg, "expected"));

		if ((!cur && !*exp) ||
		    (cur && !strcmp(json_string_value(cur), exp))) {
			json_object_set(t, key, value);
			cur = value;
		}
		reply(c, n, rank, conn, id,
		      json_pack("{s:O}", "value",
				cur ? cur : json_object_get(msg, "expected")));
	} else {
		goto bad;
	}
	wake(c, rj, gen);
	return;
bad:
	reply(c, n, rank, conn, id,
	      json_pack("{s:s}", "error", "malformed store request"));
	return;
wait:
	json_incref(keys);
wait_owned:
	if (rj->n_waiters >= REJOIN_WAITERS_MAX)
		waiter_drop(rj, 0);
	{
		struct waiter *ws = realloc(
		    rj->waiters, (size_t)(rj->n_waiters + 1) * sizeof(*ws));

		if (!ws) {
			json_decref(keys);
			return;
		}
		rj->waiters = ws;
		ws[rj->n_waiters++] = (struct waiter){
		    .node = (int)(n - c->nodes),
		    .rank = rank,
		    .conn = conn,
		    .id = id,
		    .gen = gen,
		    .keys = keys,
		    .get = !strcmp(cmd, "get"),
		};
	}
}

/* --- RANK_CTL from an agent ------------------------------------------------ */

void ctl_rejoin_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	struct ctl_rejoin *rj = c->rejoin;
	json_t *b = f->body, *msg = json_object_get(b, "msg");
	int rank = (int)json_integer_value(json_object_get(b, "rank"));
	int conn = (int)json_integer_value(json_object_get(b, "conn"));
	const char *op = json_string_value(json_object_get(msg, "op"));
	int gen = (int)json_integer_value(json_object_get(msg, "generation"));

	if (!rj || !rj->hello ||
	    json_integer_value(json_object_get(b, "attempt")) != c->attempt ||
	    !c->ranks || rank < 0 || rank >= c->world_size ||
	    &c->nodes[c->ranks[rank].node] != n)
		return; /* of an attempt or a node already over */
	if (!strcmp(op, "hello")) {
		rj->hello[rank] = true;
	} else if (!strcmp(op, "stepping")) {
		if (!rj->active || gen != rj->gen)
			return;
		rj->stepping[rank] = true;
		for (int r = 0; r < c->world_size; r++)
			if (!rj->stepping[r])
				return;
		rejoined(c, rj);
	} else if (!strcmp(op, "store")) {
		store_op(c, n, rank, conn, msg);
	}
}
