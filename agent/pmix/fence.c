/* pmix/fence.c — fences: a rank's PMIx_Fence(_nb) becomes FENCE to
 * herd, which gathers the contributions of the nodes hosting the
 * fence's procs and answers FENCE_DONE with their concatenation; then
 * the library's callback, whose data is freed in its release function.
 * The upcall runs on the progress thread and only queues (pmix_int.h);
 * everything else runs on the loop. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pmix/pmix_int.h"

/* Fences over any set of processes.  libpmix calls fence_nb once per node
 * and fence, with the procs every participant passed (the same array on
 * every node).  The fence's name, the same on every node without a word
 * between them: its procs in a canonical form (FENCE's "procs": "*" or
 * sorted rank ranges) and how many fences over those procs this agent has
 * joined in the attempt (two fences over the same procs complete in the
 * same order everywhere: no participant starts the second before the
 * first is done).  herd gathers from exactly the nodes hosting procs. */
struct fence_set {
	char *procs;
	int count;
	struct fence_set *next;
};

static int cmp_rank(const void *x, const void *y)
{
	pmix_rank_t a = *(const pmix_rank_t *)x, b = *(const pmix_rank_t *)y;

	return a < b ? -1 : a > b;
}

/* The canonical procs of a fence: "*" or "0-3,6"; NULL with *rc set
 * (procs of another namespace, a rank outside the job, no memory). */
static char *fence_procs(struct psrv_state *p, const pmix_proc_t *procs,
			 size_t nprocs, pmix_status_t *rc)
{
	pmix_rank_t *rk;
	size_t n = 0, len = 0, cap;
	char *s;

	*rc = PMIX_ERR_NOMEM;
	for (size_t i = 0; i < nprocs; i++) {
		if (strncmp(procs[i].nspace, p->nspace, PMIX_MAX_NSLEN) != 0) {
			*rc = PMIX_ERR_NOT_SUPPORTED;
			return NULL;
		}
		if (procs[i].rank == PMIX_RANK_WILDCARD)
			return strdup("*");
		if (procs[i].rank >= p->job_size) {
			*rc = PMIX_ERR_BAD_PARAM;
			return NULL;
		}
	}
	if (nprocs == 0)
		return strdup("*");
	if (!(rk = malloc(nprocs * sizeof(*rk))))
		return NULL;
	for (size_t i = 0; i < nprocs; i++)
		rk[i] = procs[i].rank;
	qsort(rk, nprocs, sizeof(*rk), cmp_rank);
	cap = nprocs * 24 + 1; /* "lo-hi," per range at most */
	if (!(s = malloc(cap))) {
		free(rk);
		return NULL;
	}
	while (n < nprocs) {
		pmix_rank_t lo = rk[n], hi = lo;

		while (n < nprocs && rk[n] <= hi + 1) {
			if (rk[n] > hi)
				hi = rk[n];
			n++;
		}
		len += (size_t)snprintf(s + len, cap - len,
					lo == hi ? "%s%u" : "%s%u-%u",
					len ? "," : "", lo, hi);
	}
	free(rk);
	if (len * 2 > PROTO_JSON_MAX) { /* would not fit FENCE */
		free(s);
		*rc = PMIX_ERR_NOT_SUPPORTED;
		return NULL;
	}
	return s;
}

/* This agent's count of fences over procs, this one included. */
static int fence_count(struct psrv_state *p, const char *procs)
{
	struct fence_set *fs;

	for (fs = p->fence_sets; fs; fs = fs->next)
		if (strcmp(fs->procs, procs) == 0)
			return ++fs->count;
	if (!(fs = calloc(1, sizeof(*fs))) || !(fs->procs = strdup(procs))) {
		free(fs);
		return -1;
	}
	fs->count = 1;
	fs->next = p->fence_sets;
	p->fence_sets = fs;
	return 1;
}

void psrv_fences_clear(struct psrv_state *p, bool answer)
{
	for (struct fence *f = p->fences, *next; f; f = next) {
		next = f->next;
		if (answer)
			f->cb(PMIX_ERR_TIMEOUT, NULL, 0, f->cbdata, NULL, NULL);
		free(f);
	}
	p->fences = NULL;
	p->fence_seq = 0;
	for (struct fence_set *fs = p->fence_sets, *next; fs; fs = next) {
		next = fs->next;
		free(fs->procs);
		free(fs);
	}
	p->fence_sets = NULL;
}

static void run_fence(struct psrv_state *p, struct req *r)
{
	struct agent *a = p->a;
	struct fence *f, **tail;
	pmix_status_t rc;
	char *procs;
	int count;

	/* Over processes of a spawned namespace: pmix/spawn.c's. */
	if (psrv_spawn_fence(p, r))
		return;
	procs = fence_procs(p, r->arg, (size_t)r->status, &rc);
	count = procs ? fence_count(p, procs) : -1;
	if (!procs || count < 0 || !(f = calloc(1, sizeof(*f)))) {
		free(procs);
		r->modex_cb(procs ? PMIX_ERR_NOMEM : rc, NULL, 0, r->cbdata,
			    NULL, NULL);
		return;
	}
	f->seq = ++p->fence_seq;
	f->cb = r->modex_cb;
	f->cbdata = r->cbdata;
	for (tail = &p->fences; *tail; tail = &(*tail)->next)
		;
	*tail = f;
	agent_send(a, PROTO_FENCE,
		   json_pack("{s:i, s:i, s:s, s:i}", "attempt", a->attempt,
			     "seq", f->seq, "procs", procs, "count", count),
		   r->data, r->ndata);
	free(procs);
}

pmix_status_t psrv_up_fence_nb(const pmix_proc_t procs[], size_t nprocs,
			       const pmix_info_t info[], size_t ninfo,
			       char *data, size_t ndata,
			       pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r = psrv_req_new(run_fence, NULL);

	(void)info;
	(void)ninfo;
	if (!r)
		return PMIX_ERR_NOMEM;
	r->ndata = ndata;
	if (ndata) {
		r->data = malloc(ndata);
		if (!r->data) {
			free(r);
			return PMIX_ERR_NOMEM;
		}
		memcpy(r->data, data, ndata);
	}
	/* The procs, for the loop to name the fence (r->status: how many). */
	if (nprocs) {
		if (nprocs > INT_MAX ||
		    !(r->arg = malloc(nprocs * sizeof(*procs)))) {
			free(r->data);
			free(r);
			return PMIX_ERR_NOMEM;
		}
		memcpy(r->arg, procs, nprocs * sizeof(*procs));
		r->free_arg = free;
	}
	r->status = (int)nprocs;
	r->modex_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

static void release_fence_data(void *cbdata)
{
	free(cbdata);
}

void psrv_on_fence_done(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	int att = (int)json_integer_value(json_object_get(f->body, "attempt"));
	json_t *st = json_object_get(f->body, "status");
	struct fence **pp, *fe;
	char *copy = NULL;

	if (!p || att != a->attempt)
		return;
	for (pp = &p->fences; *pp && (*pp)->seq != seq; pp = &(*pp)->next)
		;
	if (!(fe = *pp))
		return;
	*pp = fe->next;
	if (json_is_integer(st) && json_integer_value(st) != 0) {
		fe->cb(PMIX_ERR_TIMEOUT, NULL, 0, fe->cbdata, NULL, NULL);
		free(fe);
		return;
	}
	/* The library owns the data until it calls the release function. */
	if (f->data_len && !(copy = malloc(f->data_len))) {
		fe->cb(PMIX_ERR_NOMEM, NULL, 0, fe->cbdata, NULL, NULL);
		free(fe);
		return;
	}
	if (copy)
		memcpy(copy, f->data, f->data_len);
	fe->cb(PMIX_SUCCESS, copy, f->data_len, fe->cbdata, release_fence_data,
	       copy);
	free(fe);
}
