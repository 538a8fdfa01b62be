/* pmix/modex.c — direct modex: a PMIx_Get for a process on
 * another node whose data no fence collected.
 *
 * Asking side: libpmix calls direct_modex once per remote rank (it keeps
 * later requests for the same rank on its own tracker until the first is
 * answered); the loop sends DMODEX {attempt, seq, rank} to herd, which
 * forwards it to the agent hosting the rank.  Requests wait in a table
 * indexed by rank (O(1) per request and answer, whatever the job size),
 * so that a duplicate libpmix did not collapse joins the one in flight.
 * Each has a deadline: DMODEX_TIMEOUT_MS, or the client's PMIX_TIMEOUT
 * when shorter; then PMIX_ERR_TIMEOUT.  One sweep timer (every
 * DMODEX_SWEEP_MS while any is pending) walks the list of pending
 * requests: no timer per request, since the loop's timers are a plain
 * array and thousands of requests in flight are normal at scale.  herd answers at once when the rank is
 * not in the attempt (PMIX_ERR_NOT_FOUND) or its node is not up
 * (PMIX_ERR_UNREACH).
 *
 * Serving side: DMODEX from herd → PMIx_server_dmodex_request for the
 * local rank (the library answers once the rank has committed); its
 * callback, on the progress thread, copies the blob into a request for
 * the loop, which sends DMODEX_DATA back through herd.  The asking agent
 * hands the blob to the library, which owns a copy until it calls the
 * release function.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pmix/pmix_int.h"

/* 60 s: the most a PMIx_Get waits for another node's data without a
 * PMIX_TIMEOUT of its own. */
#define DMODEX_TIMEOUT_MS 60000
/* How often the pending requests are checked for their deadline. */
#define DMODEX_SWEEP_MS 250

/* A request of ours in flight: one per remote rank. */
struct dm_wait {
	pmix_modex_cbfunc_t cb;
	void *cbdata;
	struct dm_wait *next;
};

struct dm_pend {
	struct psrv_state *p;
	pmix_rank_t rank;
	int seq;
	int64_t due_ms;
	struct dm_wait *waiters;
	struct dm_pend *prev, *next;	/* pending, oldest first */
};

/* A request we serve, until the library's callback: linked under
 * p->lock, since the callback unlinks it on the progress thread. */
struct dm_serve {
	struct psrv_state *p;
	int attempt, seq, rank, from;
	int ns;		/* 0: the job's namespace; N: spawn N's */
	struct dm_serve *prev, *next;
};

struct psrv_modex {
	struct dm_pend **by_rank;	/* [job_size] */
	uint32_t n;
	int seq;
	struct dm_pend *head, *tail;	/* pending */
	long sweep;			/* timer, 0 when none */
	struct dm_serve *serving;
};

static struct psrv_modex *modex_of(struct psrv_state *p)
{
	if (!p->modex)
		p->modex = calloc(1, sizeof(*p->modex));
	return p->modex;
}

static void release_copy(void *cbdata)
{
	free(cbdata);
}

/* Answers every waiter of pend (each gets its own copy of the data) and
 * frees it. */
static void pend_finish(struct dm_pend *pend, pmix_status_t status,
			const void *data, size_t len)
{
	struct psrv_state *p = pend->p;
	struct psrv_modex *m = p->modex;

	if (m && pend->rank < m->n && m->by_rank[pend->rank] == pend)
		m->by_rank[pend->rank] = NULL;
	if (m) {
		if (pend->prev)
			pend->prev->next = pend->next;
		else
			m->head = pend->next;
		if (pend->next)
			pend->next->prev = pend->prev;
		else
			m->tail = pend->prev;
	}
	for (struct dm_wait *w = pend->waiters, *next; w; w = next) {
		char *copy = NULL;
		pmix_status_t st = status;

		next = w->next;
		if (st == PMIX_SUCCESS && len && !(copy = malloc(len)))
			st = PMIX_ERR_NOMEM;
		if (copy)
			memcpy(copy, data, len);
		if (st == PMIX_SUCCESS)
			w->cb(st, copy, len, w->cbdata, release_copy, copy);
		else
			w->cb(st, NULL, 0, w->cbdata, NULL, NULL);
		free(w);
	}
	free(pend);
}

static void on_sweep(struct loop *loop, void *arg)
{
	struct psrv_state *p = arg;
	struct psrv_modex *m = p->modex;
	int64_t now = loop_now_ms();

	m->sweep = 0;
	for (struct dm_pend *pend = m->head, *next; pend; pend = next) {
		next = pend->next;
		if (pend->due_ms > now)
			continue;
		fprintf(stderr,
			"herd-agent: PMIx direct modex for rank %u timed "
			"out\n",
			pend->rank);
		pend_finish(pend, PMIX_ERR_TIMEOUT, NULL, 0);
	}
	if (m->head)
		m->sweep = loop_timer_add(loop, DMODEX_SWEEP_MS, on_sweep, p);
}

/* Loop side of the upcall: r->proc is the rank asked for, r->status the
 * client's PMIX_TIMEOUT in seconds (0: none). */
static void run_request(struct psrv_state *p, struct req *r)
{
	struct agent *a = p->a;
	struct psrv_modex *m = modex_of(p);
	struct dm_wait *w = calloc(1, sizeof(*w));
	struct dm_pend *pend;
	pmix_rank_t rank = r->proc.rank;
	int64_t ms = DMODEX_TIMEOUT_MS;

	if (!m || !w) {
		free(w);
		r->modex_cb(PMIX_ERR_NOMEM, NULL, 0, r->cbdata, NULL, NULL);
		return;
	}
	w->cb = r->modex_cb;
	w->cbdata = r->cbdata;
	/* A spawned namespace's process: pmix/spawn.c asks. */
	if (p->nspace_registered &&
	    strncmp(r->proc.nspace, p->nspace, PMIX_MAX_NSLEN) != 0 &&
	    psrv_ns_index(p, r->proc.nspace) > 0) {
		free(w);
		psrv_spawn_dmodex(p, r);
		return;
	}
	if (!p->nspace_registered ||
	    strncmp(r->proc.nspace, p->nspace, PMIX_MAX_NSLEN) != 0 ||
	    rank >= p->job_size) {
		free(w);
		r->modex_cb(PMIX_ERR_NOT_FOUND, NULL, 0, r->cbdata, NULL,
			    NULL);
		return;
	}
	if (!m->by_rank || m->n != p->job_size) {
		free(m->by_rank);
		m->n = 0;
		if (!(m->by_rank = calloc(p->job_size, sizeof(*m->by_rank)))) {
			free(w);
			r->modex_cb(PMIX_ERR_NOMEM, NULL, 0, r->cbdata, NULL,
				    NULL);
			return;
		}
		m->n = p->job_size;
	}
	if ((pend = m->by_rank[rank])) {	/* in flight: wait with it */
		w->next = pend->waiters;
		pend->waiters = w;
		return;
	}
	if (!(pend = calloc(1, sizeof(*pend)))) {
		free(w);
		r->modex_cb(PMIX_ERR_NOMEM, NULL, 0, r->cbdata, NULL, NULL);
		return;
	}
	pend->p = p;
	pend->rank = rank;
	pend->seq = m->seq = m->seq == INT32_MAX ? 1 : m->seq + 1;
	pend->waiters = w;
	if (r->status > 0 && (int64_t)r->status * 1000 < ms)
		ms = (int64_t)r->status * 1000;
	pend->due_ms = loop_now_ms() + ms;
	pend->prev = m->tail;
	if (m->tail)
		m->tail->next = pend;
	else
		m->head = pend;
	m->tail = pend;
	if (m->sweep <= 0)	/* none, or none could be set: try again */
		m->sweep = loop_timer_add(a->loop, DMODEX_SWEEP_MS, on_sweep,
					  p);
	m->by_rank[rank] = pend;
	agent_send(a, PROTO_DMODEX,
		   json_pack("{s:i, s:i, s:i}", "attempt", a->attempt, "seq",
			     pend->seq, "rank", (int)rank),
		   NULL, 0);
}

pmix_status_t psrv_up_direct_modex(const pmix_proc_t *proc,
				   const pmix_info_t info[], size_t ninfo,
				   pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r = psrv_req_new(run_request, proc);

	if (!r)
		return PMIX_ERR_NOMEM;
	for (size_t i = 0; i < ninfo; i++) {
		const pmix_value_t *v = &info[i].value;

		if (strncmp(info[i].key, PMIX_TIMEOUT, PMIX_MAX_KEYLEN) != 0)
			continue;
		if (v->type == PMIX_INT)
			r->status = v->data.integer;
		else if (v->type == PMIX_INT32)
			r->status = v->data.int32;
		else if (v->type == PMIX_UINT32)
			r->status = v->data.uint32 > INT_MAX
					    ? INT_MAX
					    : (int)v->data.uint32;
	}
	r->modex_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

/* herd's DMODEX_DATA: the answer to one of ours. */
void psrv_modex_on_data(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	struct psrv_modex *m = p ? p->modex : NULL;
	json_t *b = f->body;
	int att = (int)json_integer_value(json_object_get(b, "attempt"));
	int seq = (int)json_integer_value(json_object_get(b, "seq"));
	json_int_t rank = json_integer_value(json_object_get(b, "rank"));
	int st = (int)json_integer_value(json_object_get(b, "status"));
	struct dm_pend *pend;
	pmix_status_t status;

	if (json_integer_value(json_object_get(b, "ns")) > 0) {
		psrv_spawn_on_dmodex_data(a, f);
		return;
	}
	if (!m || att != a->attempt || rank < 0 || (uint64_t)rank >= m->n ||
	    !(pend = m->by_rank[rank]) || pend->seq != seq)
		return;	/* late: timed out, or another attempt's */
	if (st == 0)
		status = PMIX_SUCCESS;
	else if (st == PROTO_DMODEX_NOT_FOUND)
		status = PMIX_ERR_NOT_FOUND;
	else if (st == PROTO_DMODEX_UNREACH)
		status = PMIX_ERR_UNREACH;
	else
		status = st;
	pend_finish(pend, status, f->data, f->data_len);
}

/* --- serving side --------------------------------------------------------- */

static void serve_reply(struct agent *a, const struct dm_serve *s, int status,
			const void *data, size_t len)
{
	if (status > 0)
		status = PMIX_ERROR;
	json_t *body = json_pack("{s:i, s:i, s:i, s:i, s:i}", "attempt",
				 s->attempt, "seq", s->seq, "rank", s->rank,
				 "from", s->from, "status", status);

	if (s->ns)
		json_object_set_new(body, "ns", json_integer(s->ns));
	agent_send(a, PROTO_DMODEX_DATA, body, data, status == 0 ? len : 0);
}

static void run_served(struct psrv_state *p, struct req *r)
{
	serve_reply(p->a, r->arg, r->status, r->data, r->ndata);
}

static void serve_unlink(struct psrv_state *p, struct dm_serve *s)
{
	struct psrv_modex *m = p->modex;

	if (s->prev)
		s->prev->next = s->next;
	else
		m->serving = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
}

/* The library's answer, on its progress thread: copy and queue. */
static void on_served(pmix_status_t status, char *data, size_t ndata,
		      void *cbdata)
{
	struct dm_serve *s = cbdata;
	struct psrv_state *p = s->p;
	struct req *r;

	pthread_mutex_lock(&p->lock);
	serve_unlink(p, s);
	pthread_mutex_unlock(&p->lock);
	if (!(r = psrv_req_new(run_served, NULL))) {
		free(s);	/* the asking agent times out */
		return;
	}
	r->arg = s;
	r->free_arg = free;
	r->status = status == PMIX_SUCCESS ? 0 : status;
	if (status == PMIX_SUCCESS && ndata) {
		if (!(r->data = malloc(ndata)))
			r->status = PMIX_ERR_NOMEM;
		else {
			memcpy(r->data, data, ndata);
			r->ndata = ndata;
		}
	}
	psrv_enqueue(r);
}

/* herd's DMODEX: another node asks for the data of our rank. */
void psrv_modex_on_request(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	struct psrv_modex *m = p ? modex_of(p) : NULL;
	json_t *b = f->body;
	struct dm_serve *s = calloc(1, sizeof(*s));
	pmix_proc_t proc;
	pmix_status_t rc;

	if (!s)
		return;
	s->p = p;
	s->attempt = (int)json_integer_value(json_object_get(b, "attempt"));
	s->seq = (int)json_integer_value(json_object_get(b, "seq"));
	s->rank = (int)json_integer_value(json_object_get(b, "rank"));
	s->from = (int)json_integer_value(json_object_get(b, "from"));
	s->ns = (int)json_integer_value(json_object_get(b, "ns"));
	if (!m || !p->nspace_registered || s->attempt != a->attempt ||
	    (s->ns == 0 && (uint32_t)s->rank >= p->job_size)) {
		serve_reply(a, s, PMIX_ERR_NOT_FOUND, NULL, 0);
		free(s);
		return;
	}
	if (s->ns) {
		char name[PMIX_MAX_NSLEN + 1];

		psrv_ns_name(p, s->ns, name, sizeof(name));
		PMIX_PROC_LOAD(&proc, name, (pmix_rank_t)s->rank);
	} else {
		PMIX_PROC_LOAD(&proc, p->nspace, (pmix_rank_t)s->rank);
	}
	pthread_mutex_lock(&p->lock);
	s->next = m->serving;
	if (s->next)
		s->next->prev = s;
	m->serving = s;
	pthread_mutex_unlock(&p->lock);
	rc = PMIx_server_dmodex_request(&proc, on_served, s);
	if (rc != PMIX_SUCCESS) {
		/* Not called back: answer now. */
		pthread_mutex_lock(&p->lock);
		serve_unlink(p, s);
		pthread_mutex_unlock(&p->lock);
		serve_reply(a, s, rc, NULL, 0);
		free(s);
	}
}

/* --- attempts and exit ------------------------------------------------------ */

void psrv_modex_clear(struct psrv_state *p)
{
	struct psrv_modex *m = p->modex;

	if (!m)
		return;
	while (m->head)
		pend_finish(m->head, PMIX_ERR_TIMEOUT, NULL, 0);
	if (m->sweep > 0)
		loop_timer_del(p->a->loop, m->sweep);
	m->sweep = 0;
	free(m->by_rank);
	m->by_rank = NULL;
	m->n = 0;
}

void psrv_modex_fini(struct psrv_state *p)
{
	struct psrv_modex *m = p->modex;

	if (!m)
		return;
	for (struct dm_pend *pend = m->head, *pnext; pend; pend = pnext) {
		pnext = pend->next;
		for (struct dm_wait *w = pend->waiters, *next; w; w = next) {
			next = w->next;
			free(w);
		}
		free(pend);
	}
	if (m->sweep > 0)
		loop_timer_del(p->a->loop, m->sweep);
	free(m->by_rank);
	/* The progress thread is gone: these are never called back. */
	for (struct dm_serve *s = m->serving, *next; s; s = next) {
		next = s->next;
		free(s);
	}
	free(m);
	p->modex = NULL;
}
