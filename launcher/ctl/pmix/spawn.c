/* ctl/pmix/spawn.c — herd's side of PMIx_Spawn: what MPI_Comm_spawn and
 * spawn_multiple need from the runtime (PMIx_Connect and Disconnect, for
 * MPI_Comm_connect/accept and MPI_Intercomm_create, are in
 * ctl/pmix/connect.c).
 *
 *   SPAWN        a process asked for new processes: herd places them on
 *                the job's member nodes (those PMIX_HOST / PMIX_ADD_HOST
 *                name, which must be nodes of the job, else every one),
 *                least loaded first, each bound as the node's local rank
 *                of the same index would be; opens their logs
 *                (attempt-N/spawn-S-rank-R.log); sends SPAWN_LAUNCH to
 *                every member agent (each registers the namespace, even
 *                with no process of its own, so that connect and get
 *                work everywhere) and answers SPAWN_DONE to the asker
 *                when every SPAWN_UP is in.  The processes are slots of
 *                c->ranks past the job's ranks: their output is tagged
 *                "[sS:R]", their exit counts as a rank's (a failure fails
 *                the attempt), and they stop with the attempt.
 *
 * Limits (said to the asker as a PMIx status, and in one line on herd's
 * stderr): PROTO_SPAWN_PROCS_MAX (256) processes per spawn and alive at
 * once in the attempt, CTL_SPAWN_LOCAL_MAX (64) alive at once per node
 * (the room an agent keeps), CTL_SPAWN_TOTAL_MAX processes spawned in
 * all per attempt, PROTO_SPAWN_APPS_MAX (16) apps.  A process that
 * exited frees its room (loops that spawn and reap children go on).
 * Everything is per attempt: ctl_spawn_clear() drops it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/text.h"
#include "launcher/ctl/pmix/dyn_int.h"

/* The agent's AGENT_SPAWN_LOCAL_MAX. */
#define CTL_SPAWN_LOCAL_MAX 64
/* Every spawned process keeps a slot of c->ranks (its status, its log's
 * name) until the attempt ends. */
#define CTL_SPAWN_TOTAL_MAX 16384

bool dyn_node_in(const struct node *n)
{
	return n->member && n->state == NODE_UP;
}

struct ctl_dyn *dyn_of(struct ctl *c)
{
	if (!c->dyn) {
		c->dyn = calloc(1, sizeof(*c->dyn));
		if (c->dyn && !(c->dyn->per_node =
				    calloc((size_t)c->n_nodes, sizeof(int)))) {
			free(c->dyn);
			c->dyn = NULL;
		}
	}
	return c->dyn;
}

void ctl_spawn_clear(struct ctl *c)
{
	struct ctl_dyn *d = c->dyn;

	if (!d)
		return;
	for (int i = 0; i < d->n_spawns; i++) {
		if (d->spawns[i].timer)
			loop_timer_del(c->loop, d->spawns[i].timer);
		free(d->spawns[i].want);
		free(d->spawns[i].got);
	}
	while (d->n_conns > 0)
		dyn_connect_free(c, 0);
	free(d->conns);
	free(d->spawns);
	free(d->per_node);
	free(d);
	c->dyn = NULL;
}

void ctl_spawn_tag(struct ctl *c, int slot, char *buf, size_t size)
{
	struct rank_slot *r = &c->ranks[slot];

	if (c->opt->verbose)
		snprintf(buf, size, "[%s:s%d:%d] ", c->nodes[r->node].host,
			 r->spawn, r->srank);
	else
		snprintf(buf, size, "[s%d:%d] ", r->spawn, r->srank);
}

struct dyn_spawn *dyn_spawn_by_id(struct ctl *c, int id)
{
	for (int i = 0; c->dyn && i < c->dyn->n_spawns; i++)
		if (c->dyn->spawns[i].id == id)
			return &c->dyn->spawns[i];
	return NULL;
}

static void spawn_answer(struct ctl *c, int node, int seq, int status, int id,
			 const char *error)
{
	json_t *body = json_pack("{s:i, s:i, s:i}", "attempt", c->attempt,
				 "seq", seq, "status", status);

	if (status == 0)
		json_object_set_new(body, "spawn", json_integer(id));
	if (error && *error)
		json_object_set_new(body, "error", json_string(error));
	if (c->nodes[node].conn)
		ctl_send(c, &c->nodes[node], PROTO_SPAWN_DONE, body, NULL, 0);
	json_decref(body);
}

/* Node index of host (the name the job gave it, or its hostname), a
 * member that is up; -1 when none. */
static int host_node(struct ctl *c, const char *host)
{
	for (int i = 0; i < c->n_nodes; i++) {
		struct node *n = &c->nodes[i];

		if (dyn_node_in(n) &&
		    (!strcmp(n->host, host) ||
		     (n->hostname && !strcmp(n->hostname, host))))
			return i;
	}
	return -1;
}

/* Places np processes of app on its candidate nodes, least spawned-on
 * first; node_of[] gets the node indexes.  Returns 0, or a PMIx status
 * with why. */
static int place_app(struct ctl *c, json_t *app, int np, int *node_of,
		     int *load, char *why, size_t size)
{
	json_t *hosts = json_object_get(app, "hosts"), *h;
	bool *cand = calloc((size_t)c->n_nodes, sizeof(bool));
	int n_cand = 0;
	size_t i;

	if (!cand)
		return ST_ERROR;
	json_array_foreach(hosts, i, h)
	{
		int k = host_node(c, json_string_value(h));

		if (k < 0) {
			snprintf(why, size,
				 "host %.200s is not a node of the job",
				 json_string_value(h));
			free(cand);
			return ST_BAD_PARAM;
		}
		n_cand += !cand[k];
		cand[k] = true;
	}
	if (!n_cand)
		for (int k = 0; k < c->n_nodes; k++)
			if (dyn_node_in(&c->nodes[k]) &&
			    c->nodes[k].n_ranks > 0) {
				cand[k] = true;
				n_cand++;
			}
	for (int p = 0; p < np; p++) {
		int best = -1;

		for (int k = 0; k < c->n_nodes; k++)
			if (cand[k] && (best < 0 || load[k] < load[best]))
				best = k;
		if (best < 0 || load[best] >= CTL_SPAWN_LOCAL_MAX) {
			snprintf(why, size,
				 "no node has room for another spawned "
				 "process (at most %d alive at once per "
				 "node)",
				 CTL_SPAWN_LOCAL_MAX);
			free(cand);
			return ST_OUT_OF_RESOURCE;
		}
		node_of[p] = best;
		load[best]++;
	}
	free(cand);
	return 0;
}

static void on_spawn_timeout(struct loop *loop, void *arg);

/* Opens attempt-N/spawn-S-rank-R.log for slot (none for herd plan). */
static void open_spawn_log(struct ctl *c, int slot)
{
	struct rank_slot *r = &c->ranks[slot];
	char name[96], *path;
	struct herd_err err;
	int fd;

	if (!c->lt)
		return;
	snprintf(name, sizeof(name), "attempt-%d/spawn-%d-rank-%d.log",
		 c->attempt, r->spawn, r->srank);
	if ((fd = logtree_create(c->lt, name, &err)) < 0) {
		fprintf(stderr, "herd: %s\n", err.text);
		return;
	}
	if (asprintf(&path, "%s/%s", logtree_run_dir(c->lt), name) < 0) {
		close(fd);
		return;
	}
	r->log = logfile_new(fd, path, 0);
	free(path);
	if (!r->log)
		close(fd);
}

/* The SPAWN_LAUNCH body for node k. */
static json_t *launch_body(struct ctl *c, struct dyn_spawn *s, int k,
			   json_t *apps, const int *node_of, const int *app_of,
			   int parent_ns, int parent_rank)
{
	struct node *n = &c->nodes[k];
	json_t *local = json_array(), *lapps = json_array(), *app;
	char *nodes = NULL, *ppn = NULL;
	size_t nl = 0, pl = 0;
	FILE *fn = open_memstream(&nodes, &nl), *fp = open_memstream(&ppn, &pl);
	int num_nodes = 0, node_id = n->index > 0 ? n->index : 0, loc = 0;
	size_t i;
	json_t *body;

	for (int m = 0; m < c->n_nodes && fn && fp; m++) {
		bool first = true;

		for (int r = 0; r < s->size; r++) {
			if (node_of[r] != m)
				continue;
			if (first) {
				fprintf(fn, "%s%s", num_nodes ? "," : "",
					c->nodes[m].hostname
					    ? c->nodes[m].hostname
					    : c->nodes[m].host);
				fputs(num_nodes ? ";" : "", fp);
				num_nodes++;
			}
			fprintf(fp, "%s%d", first ? "" : ",", r);
			first = false;
		}
	}
	if (fn)
		fclose(fn);
	if (fp)
		fclose(fp);
	for (int r = 0; r < s->size; r++) {
		json_t *jl;

		if (node_of[r] != k)
			continue;
		jl = json_pack("{s:i, s:i, s:i}", "rank", r, "id",
			       s->first_slot + r, "app", app_of[r]);
		/* The binding of the node's local rank of the same index. */
		if (n->bind && n->n_ranks > 0 && n->bind[loc % n->n_ranks].cpus)
			json_object_set_new(
			    jl, "cpus",
			    json_string(n->bind[loc % n->n_ranks].cpus));
		json_array_append_new(local, jl);
		loc++;
	}
	json_array_foreach(apps, i, app)
	{
		json_t *a = json_deep_copy(app);

		json_object_del(a, "hosts");
		json_array_append_new(lapps, a);
	}
	body = json_pack(
	    "{s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:i, s:i, s:s, "
	    "s:o, s:o}",
	    "attempt", c->attempt, "spawn", s->id, "parent_ns", parent_ns,
	    "parent_rank", parent_rank, "size", s->size, "nodes",
	    nodes ? nodes : "", "ppn", ppn ? ppn : "", "num_nodes",
	    num_nodes ? num_nodes : 1, "node_id", node_id, "hostname",
	    n->hostname ? n->hostname : n->host, "apps", lapps, "local", local);
	free(nodes);
	free(ppn);
	return body;
}

void ctl_spawn_frame(struct ctl *c, struct node *n, struct proto_frame *f)
{
	json_t *b = f->body, *apps = json_object_get(b, "apps"), *app;
	int idx = (int)(n - c->nodes);
	int seq = (int)json_integer_value(json_object_get(b, "seq"));
	int ns = (int)json_integer_value(json_object_get(b, "ns"));
	int prank = (int)json_integer_value(json_object_get(b, "rank"));
	int total = 0, st = 0, *node_of = NULL, *app_of = NULL, *load = NULL;
	struct ctl_dyn *d;
	struct dyn_spawn *s;
	struct rank_slot *slots;
	char why[300] = "";
	json_t *procs;
	size_t i;

	if (json_integer_value(json_object_get(b, "attempt")) != c->attempt)
		return;
	if (!ctl_serves(c, CTL_SERVE_ATTEMPT) || !dyn_node_in(n)) {
		spawn_answer(c, idx, seq, ST_ERROR, 0,
			     "the attempt is not running");
		return;
	}
	if (!(d = dyn_of(c))) {
		spawn_answer(c, idx, seq, ST_ERROR, 0, "out of memory");
		return;
	}
	if (ns != 0 && !dyn_spawn_by_id(c, ns)) {
		spawn_answer(c, idx, seq, ST_NOT_FOUND, 0,
			     "the asker's namespace is not known");
		return;
	}
	json_array_foreach(apps, i, app) total +=
	    (int)json_integer_value(json_object_get(app, "np"));
	if (total > PROTO_SPAWN_PROCS_MAX - d->n_procs) {
		snprintf(why, sizeof(why),
			 "%d more processes: at most %d alive at once per "
			 "attempt (%d running)",
			 total, PROTO_SPAWN_PROCS_MAX, d->n_procs);
		st = ST_OUT_OF_RESOURCE;
		goto refuse;
	}
	if (total > CTL_SPAWN_TOTAL_MAX - d->n_total) {
		snprintf(why, sizeof(why),
			 "%d more processes: at most %d spawned per attempt "
			 "in all (%d spawned)",
			 total, CTL_SPAWN_TOTAL_MAX, d->n_total);
		st = ST_OUT_OF_RESOURCE;
		goto refuse;
	}
	node_of = calloc((size_t)total, sizeof(int));
	app_of = calloc((size_t)total, sizeof(int));
	load = calloc((size_t)c->n_nodes, sizeof(int));
	s = realloc(d->spawns, (size_t)(d->n_spawns + 1) * sizeof(*s));
	if (s)
		d->spawns = s;
	slots =
	    realloc(c->ranks, (size_t)(c->n_slots + total) * sizeof(*c->ranks));
	if (slots)
		c->ranks = slots;
	if (!node_of || !app_of || !load || !s || !slots) {
		st = ST_ERROR;
		snprintf(why, sizeof(why), "out of memory");
		goto refuse;
	}
	memcpy(load, d->per_node, (size_t)c->n_nodes * sizeof(int));
	{
		int at = 0;

		json_array_foreach(apps, i, app)
		{
			int np =
			    (int)json_integer_value(json_object_get(app, "np"));

			st = place_app(c, app, np, node_of + at, load, why,
				       sizeof(why));
			if (st)
				goto refuse;
			for (int p = 0; p < np; p++)
				app_of[at + p] = (int)i;
			at += np;
		}
	}
	s = &d->spawns[d->n_spawns++];
	memset(s, 0, sizeof(*s));
	s->id = d->n_spawns;
	s->asker = idx;
	s->seq = seq;
	s->size = total;
	s->first_slot = c->n_slots;
	s->t0_ms = loop_now_ms();
	s->want = calloc((size_t)c->n_nodes, sizeof(bool));
	s->got = calloc((size_t)c->n_nodes, sizeof(bool));
	if (!s->want || !s->got) {
		s->answered = true;
		spawn_answer(c, idx, seq, ST_ERROR, 0, "out of memory");
		goto out;
	}
	memcpy(d->per_node, load, (size_t)c->n_nodes * sizeof(int));
	d->n_procs += total;
	d->n_total += total;
	procs = json_array();
	for (int r = 0; r < total; r++) {
		struct rank_slot *sl = &c->ranks[c->n_slots + r];

		memset(sl, 0, sizeof(*sl));
		sl->node = node_of[r];
		sl->spawn = s->id;
		sl->srank = r;
		json_array_append_new(procs,
				      json_pack("{s:i, s:s}", "rank", r, "host",
						c->nodes[node_of[r]].host));
	}
	c->n_slots += total;
	for (int r = 0; r < total; r++)
		open_spawn_log(c, s->first_slot + r);
	events_emit(c->ev, "spawn",
		    json_pack("{s:i, s:i, s:i, s:s, s:i, s:i, s:o}", "attempt",
			      c->attempt, "spawn", s->id, "size", total, "host",
			      n->host, "ns", ns, "rank", prank, "procs",
			      procs));
	for (int k = 0; k < c->n_nodes; k++) {
		json_t *body;

		if (!dyn_node_in(&c->nodes[k]) || !c->nodes[k].conn)
			continue;
		body = launch_body(c, s, k, apps, node_of, app_of, ns, prank);
		ctl_send(c, &c->nodes[k], PROTO_SPAWN_LAUNCH, body, NULL, 0);
		json_decref(body);
		s->want[k] = true;
		s->n_want++;
	}
	s->due_ms = loop_now_ms() + c->spec->health.fence_timeout_ms;
	s->timer = loop_timer_add(c->loop, c->spec->health.fence_timeout_ms,
				  on_spawn_timeout, c);
	goto out;
refuse:
	/* why may name a host the rank asked for (place_app). */
	herd_text_clean(why);
	fprintf(stderr, "herd: PMIx_Spawn from %s refused: %s\n", n->host, why);
	spawn_answer(c, idx, seq, st, 0, why);
out:
	free(node_of);
	free(app_of);
	free(load);
}

void ctl_spawn_proc_gone(struct ctl *c, int slot)
{
	struct ctl_dyn *d = c->dyn;
	int node = c->ranks[slot].node;

	if (!d)
		return;
	if (d->n_procs > 0)
		d->n_procs--;
	if (node >= 0 && node < c->n_nodes && d->per_node[node] > 0)
		d->per_node[node]--;
}

/* The spawn is over for the asker: launched, or the attempt fails (some
 * of its processes may run: no spawn is left half-started). */
static void spawn_finish(struct ctl *c, struct dyn_spawn *s, const char *why)
{
	if (s->timer) {
		loop_timer_del(c->loop, s->timer);
		s->timer = 0;
	}
	s->answered = true;
	if (why) {
		char msg[512];

		snprintf(msg, sizeof(msg), "PMIx_Spawn %d failed: %s", s->id,
			 why);
		spawn_answer(c, s->asker, s->seq, ST_JOB_FAILED_TO_LAUNCH, 0,
			     msg);
		events_emit(c->ev, "spawn_failed",
			    json_pack("{s:i, s:i, s:s}", "attempt", c->attempt,
				      "spawn", s->id, "reason", msg));
		fprintf(stderr, "herd: %s; stopping the attempt\n", msg);
		ctl_post(c, CTL_EV_ATTEMPT_FAILED, NULL, 1, msg);
		return;
	}
	spawn_answer(c, s->asker, s->seq, 0, s->id, NULL);
	events_emit(c->ev, "spawn_up",
		    json_pack("{s:i, s:i, s:I}", "attempt", c->attempt, "spawn",
			      s->id, "ms",
			      (json_int_t)(loop_now_ms() - s->t0_ms)));
}

static void on_spawn_timeout(struct loop *loop, void *arg)
{
	struct ctl *c = arg;
	int64_t now = loop_now_ms();
	struct dyn_spawn *s = NULL;
	char why[300], took[SPEC_DURATION_TEXT];
	size_t len;

	(void)loop;
	for (int i = 0; c->dyn && i < c->dyn->n_spawns; i++) {
		struct dyn_spawn *x = &c->dyn->spawns[i];

		if (x->timer && x->due_ms <= now &&
		    (!s || x->due_ms < s->due_ms))
			s = x;
	}
	if (!s)
		return;
	s->timer = 0;
	len = (size_t)snprintf(
	    why, sizeof(why), "no answer in %s from",
	    spec_duration_text(c->spec->health.fence_timeout_ms, took,
			       sizeof(took)));
	for (int k = 0; k < c->n_nodes && len < sizeof(why); k++)
		if (s->want[k] && !s->got[k])
			len += (size_t)snprintf(why + len, sizeof(why) - len,
						" %s", c->nodes[k].host);
	spawn_finish(c, s, why);
}

void ctl_spawn_up(struct ctl *c, struct node *n, struct proto_frame *f)
{
	int id = (int)json_integer_value(json_object_get(f->body, "spawn"));
	const char *error;
	int idx = (int)(n - c->nodes);
	struct dyn_spawn *s;

	/* The agent's words: on herd's terminal, in the events. */
	herd_json_clean(json_object_get(f->body, "error"));
	error = json_string_value(json_object_get(f->body, "error"));
	if (json_integer_value(json_object_get(f->body, "attempt")) !=
		c->attempt ||
	    !(s = dyn_spawn_by_id(c, id)) || s->answered || !s->want[idx] ||
	    s->got[idx])
		return;
	s->got[idx] = true;
	s->n_got++;
	if (error && !s->error[0])
		snprintf(s->error, sizeof(s->error), "%s: %s", n->host, error);
	if (s->n_got == s->n_want)
		spawn_finish(c, s, s->error[0] ? s->error : NULL);
}

int ctl_spawn_node_of(struct ctl *c, int ns, int rank)
{
	struct dyn_spawn *s;

	if (ns == 0)
		return rank >= 0 && rank < c->world_size && c->ranks
			   ? c->ranks[rank].node
			   : -1;
	if (!(s = dyn_spawn_by_id(c, ns)) || rank < 0 || rank >= s->size)
		return -1;
	return c->ranks[s->first_slot + rank].node;
}
