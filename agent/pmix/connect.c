/* pmix/connect.c — PMIx_Connect and PMIx_Disconnect, fences over
 * processes of spawned namespaces, and the direct modex of spawned
 * processes: each a CONNECT (DMODEX) to herd, answered by CONNECT_DONE
 * (DMODEX_DATA) once every node hosting the processes sent the same
 * (pmix/spawn.c says how namespaces are named).  The upcalls run on the
 * progress thread and only queue; the rest runs on the loop. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pmix/pmix_int.h"

/* procs as CONNECT names them ({ns, rank}; -1: every rank), or NULL
 * with *st the status why not. */
static json_t *procs_json(struct psrv_state *p, const pmix_proc_t *procs,
			  size_t n, pmix_status_t *st)
{
	json_t *arr = json_array();

	*st = PMIX_ERR_NOMEM;
	for (size_t i = 0; arr && i < n; i++) {
		int ns = psrv_ns_index(p, procs[i].nspace);
		json_int_t rank = procs[i].rank == PMIX_RANK_WILDCARD
				      ? -1
				      : (json_int_t)procs[i].rank;

		if (ns < 0 || rank > INT32_MAX) {
			*st = ns < 0 ? PMIX_ERR_NOT_FOUND : PMIX_ERR_BAD_PARAM;
			json_decref(arr);
			return NULL;
		}
		json_array_append_new(
		    arr, json_pack("{s:i, s:I}", "ns", ns, "rank", rank));
	}
	return arr;
}

static void run_connect(struct psrv_state *p, struct req *r)
{
	const pmix_proc_t *procs = (const pmix_proc_t *)(void *)r->data;
	size_t n = r->ndata / sizeof(*procs);
	struct agent *a = p->a;
	pmix_status_t st;
	json_t *arr = procs_json(p, procs, n, &st);
	struct pending *pd;

	if (!arr || !(pd = psrv_pending_add(p, false))) {
		json_decref(arr);
		r->op_cb(arr ? PMIX_ERR_NOMEM : st, r->cbdata);
		return;
	}
	pd->op_cb = r->op_cb;
	pd->cbdata = r->cbdata;
	agent_send(a, PROTO_CONNECT,
		   json_pack("{s:i, s:i, s:s, s:o}", "attempt", a->attempt,
			     "seq", pd->seq, "op",
			     r->status ? "disconnect" : "connect", "procs",
			     arr),
		   NULL, 0);
}

bool psrv_spawn_fence(struct psrv_state *p, struct req *r)
{
	const pmix_proc_t *procs = r->arg;
	size_t n = r->arg ? (size_t)r->status : 0;
	struct agent *a = p->a;
	struct pending *pd;
	pmix_status_t st;
	bool other = false;
	json_t *arr;

	for (size_t i = 0; i < n && !other; i++)
		other =
		    strncmp(procs[i].nspace, p->nspace, PMIX_MAX_NSLEN) != 0;
	if (!other)
		return false;
	arr = procs_json(p, procs, n, &st);
	if (!arr || !(pd = psrv_pending_add(p, false))) {
		json_decref(arr);
		r->modex_cb(arr ? PMIX_ERR_NOMEM : st, NULL, 0, r->cbdata, NULL,
			    NULL);
		return true;
	}
	pd->modex_cb = r->modex_cb;
	pd->cbdata = r->cbdata;
	agent_send(a, PROTO_CONNECT,
		   json_pack("{s:i, s:i, s:s, s:o}", "attempt", a->attempt,
			     "seq", pd->seq, "op", "fence", "procs", arr),
		   r->data, r->ndata);
	return true;
}

static void run_refuse_op(struct psrv_state *p, struct req *r)
{
	(void)p;
	r->op_cb(PMIX_ERR_BAD_PARAM, r->cbdata);
}

static pmix_status_t connect_queue(const pmix_proc_t procs[], size_t nprocs,
				   int disconnect, pmix_op_cbfunc_t cbfunc,
				   void *cbdata)
{
	bool bad = !procs || nprocs == 0 || nprocs > PROTO_CONNECT_PROCS_MAX;
	struct req *r = psrv_req_new(bad ? run_refuse_op : run_connect, NULL);

	if (!r)
		return PMIX_ERR_NOMEM;
	r->op_cb = cbfunc;
	r->cbdata = cbdata;
	r->status = disconnect;
	if (!bad) {
		r->ndata = nprocs * sizeof(*procs);
		r->data = malloc(r->ndata);
		if (!r->data) {
			free(r);
			return PMIX_ERR_NOMEM;
		}
		memcpy(r->data, procs, r->ndata);
	}
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

pmix_status_t psrv_up_connect(const pmix_proc_t procs[], size_t nprocs,
			      const pmix_info_t info[], size_t ninfo,
			      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)info;
	(void)ninfo;
	return connect_queue(procs, nprocs, 0, cbfunc, cbdata);
}

pmix_status_t psrv_up_disconnect(const pmix_proc_t procs[], size_t nprocs,
				 const pmix_info_t info[], size_t ninfo,
				 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)info;
	(void)ninfo;
	return connect_queue(procs, nprocs, 1, cbfunc, cbdata);
}

static void free_data(void *cbdata)
{
	free(cbdata);
}

/* Answers a pending fence or direct modex: st, or (PMIX_SUCCESS) a copy
 * of f's data, which the library owns until it calls free_data.  Frees
 * pd. */
static void modex_answer(struct pending *pd, pmix_status_t st,
			 const struct proto_frame *f)
{
	char *copy = NULL;

	if (st != PMIX_SUCCESS) {
		pd->modex_cb(st, NULL, 0, pd->cbdata, NULL, NULL);
	} else if (f->data_len && !(copy = malloc(f->data_len))) {
		pd->modex_cb(PMIX_ERR_NOMEM, NULL, 0, pd->cbdata, NULL, NULL);
	} else {
		if (copy)
			memcpy(copy, f->data, f->data_len);
		pd->modex_cb(PMIX_SUCCESS, copy, f->data_len, pd->cbdata,
			     free_data, copy);
	}
	free(pd);
}

void psrv_on_connect_done(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	int att = (int)json_integer_value(json_object_get(f->body, "attempt"));
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	int st = (int)json_integer_value(json_object_get(f->body, "status"));
	struct pending *pd;

	if (!p || att != a->attempt || !(pd = psrv_pending_take(p, seq, false)))
		return;
	st = st == 0 ? PMIX_SUCCESS : st > 0 ? PMIX_ERROR : st;
	if (pd->modex_cb) {
		modex_answer(pd, st, f);
		return;
	}
	pd->op_cb(st, pd->cbdata);
	free(pd);
}

/* --- direct modex of spawned processes ------------------------------------ */

void psrv_spawn_dmodex(struct psrv_state *p, struct req *r)
{
	struct agent *a = p->a;
	int ns = psrv_ns_index(p, r->proc.nspace);
	struct pending *pd;

	if (ns <= 0 || r->proc.rank > INT32_MAX) {
		r->modex_cb(PMIX_ERR_NOT_FOUND, NULL, 0, r->cbdata, NULL, NULL);
		return;
	}
	if (!(pd = psrv_pending_add(p, false))) {
		r->modex_cb(PMIX_ERR_NOMEM, NULL, 0, r->cbdata, NULL, NULL);
		return;
	}
	pd->modex_cb = r->modex_cb;
	pd->cbdata = r->cbdata;
	agent_send(a, PROTO_DMODEX,
		   json_pack("{s:i, s:i, s:i, s:i}", "attempt", a->attempt,
			     "seq", pd->seq, "rank", (int)r->proc.rank, "ns",
			     ns),
		   NULL, 0);
}

void psrv_spawn_on_dmodex_data(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	int att = (int)json_integer_value(json_object_get(f->body, "attempt"));
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	int st = (int)json_integer_value(json_object_get(f->body, "status"));
	struct pending *pd;

	if (!p || att != a->attempt ||
	    !(pd = psrv_pending_take(p, seq, false)) || !pd->modex_cb) {
		return;
	}
	modex_answer(pd,
		     st == 0			    ? PMIX_SUCCESS
		     : st == PROTO_DMODEX_NOT_FOUND ? PMIX_ERR_NOT_FOUND
		     : st == PROTO_DMODEX_UNREACH   ? PMIX_ERR_UNREACH
		     : st > 0			    ? PMIX_ERROR
						    : st,
		     f);
}
