/* pmix/event.c — events between ranks and herd's failures as events.
 *
 * PMIx_Notify_event from a rank: the library delivers it to the node's
 * own ranks itself and calls notify_event for the rest; we pack the
 * event's info (PMIx_Data_pack) and send EVENT to herd, which forwards
 * it to the nodes in its range; each of them hands it to its ranks with
 * the server's PMIx_Notify_event (the library applies the range,
 * custom ones included).  herd's PROC_FAILED (a rank or node of the
 * attempt failed) becomes PMIX_ERR_PROC_ABORTED (exit, node lost) or
 * PMIX_ERR_PROC_ABORTED_BY_SIG with the affected processes, before herd
 * stops the attempt.  register/deregister_events are accepted: herd
 * sends what it generates whoever asked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pmix/pmix_int.h"

/* Answers PMIX_SUCCESS through the callback from the loop. */
static void run_accept(struct psrv_state *p, struct req *r)
{
	(void)p;
	if (r->op_cb)
		r->op_cb(PMIX_SUCCESS, r->cbdata);
}

static pmix_status_t accept_op(pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r = psrv_req_new(run_accept, NULL);

	if (!r)
		return PMIX_ERR_NOMEM;
	r->op_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

pmix_status_t psrv_up_register_events(pmix_status_t *codes, size_t ncodes,
				      const pmix_info_t info[], size_t ninfo,
				      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)codes;
	(void)ncodes;
	(void)info;
	(void)ninfo;
	return accept_op(cbfunc, cbdata);
}

pmix_status_t psrv_up_deregister_events(pmix_status_t *codes, size_t ncodes,
					pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)codes;
	(void)ncodes;
	return accept_op(cbfunc, cbdata);
}

/* What the loop sends (in r->arg), and the event's range. */
struct notify {
	pmix_status_t code;
	pmix_data_range_t range;
	json_t *procs; /* custom range: the ranks, or NULL (all) */
};

static void notify_free(void *arg)
{
	struct notify *n = arg;

	json_decref(n->procs);
	free(n);
}

static bool is_local_rank(struct agent *a, pmix_rank_t rank)
{
	for (int i = 0; i < a->n_ranks; i++)
		if ((pmix_rank_t)a->ranks[i].rank == rank)
			return true;
	return false;
}

static void run_notify(struct psrv_state *p, struct req *r)
{
	struct agent *a = p->a;
	struct notify *n = r->arg;
	json_t *body;

	/* Only our own ranks' events go out: one that came from herd is
	 * already everywhere it is going. */
	if (r->status == PMIX_SUCCESS && p->nspace_registered &&
	    PMIX_CHECK_NSPACE(r->proc.nspace, p->nspace) &&
	    is_local_rank(a, r->proc.rank) && n->range != PMIX_RANGE_LOCAL &&
	    n->range != PMIX_RANGE_PROC_LOCAL) {
		body = json_pack(
		    "{s:i, s:i, s:i, s:s, s:s, s:o}", "attempt", a->attempt,
		    "code", (int)n->code, "rank", (int)r->proc.rank, "nspace",
		    p->nspace, "range", psrv_range_name(n->range), "procs",
		    n->procs ? json_incref(n->procs) : json_array());
		agent_send(a, PROTO_EVENT, body, r->data, r->ndata);
	}
}

/* The custom range's ranks in our namespace, or NULL: every rank (a
 * wildcard, or procs of another namespace: herd cannot tell, so every
 * node gets it and the library filters). */
static json_t *custom_ranks(const pmix_info_t *i, const char *nspace)
{
	const pmix_proc_t *procs = NULL;
	size_t n = 0;
	json_t *arr;

	if (i->value.type == PMIX_DATA_ARRAY && i->value.data.darray &&
	    i->value.data.darray->type == PMIX_PROC) {
		procs = i->value.data.darray->array;
		n = i->value.data.darray->size;
	} else if (i->value.type == PMIX_PROC && i->value.data.proc) {
		procs = i->value.data.proc;
		n = 1;
	}
	if (!procs || n > PROTO_LAUNCH_RANKS_MAX || !(arr = json_array()))
		return NULL;
	for (size_t k = 0; k < n; k++) {
		if (!PMIX_CHECK_NSPACE(procs[k].nspace, nspace) ||
		    procs[k].rank >= PMIX_RANK_VALID) {
			json_decref(arr);
			return NULL;
		}
		json_array_append_new(arr, json_integer(procs[k].rank));
	}
	return arr;
}

/* info[0..ninfo) packed as an event's data: the count, then the array
 * (the receiver needs the count).  PMIX_SUCCESS with bo's bytes the
 * caller frees, or libpmix's error. */
static pmix_status_t pack_infos(const pmix_info_t *info, size_t ninfo,
				pmix_byte_object_t *bo)
{
	uint32_t cnt = (uint32_t)ninfo;
	pmix_data_buffer_t buf;
	pmix_status_t rc;

	PMIX_DATA_BUFFER_CONSTRUCT(&buf);
	rc = PMIx_Data_pack(NULL, &buf, &cnt, 1, PMIX_UINT32);
	if (rc == PMIX_SUCCESS && ninfo)
		rc = PMIx_Data_pack(NULL, &buf, (void *)info, (int32_t)ninfo,
				    PMIX_INFO);
	if (rc == PMIX_SUCCESS)
		rc = PMIx_Data_unload(&buf, bo);
	PMIX_DATA_BUFFER_DESTRUCT(&buf);
	return rc;
}

static pmix_status_t notify_event_ours(pmix_status_t code,
				       const pmix_proc_t *source,
				       pmix_data_range_t range,
				       pmix_info_t info[], size_t ninfo,
				       pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r = psrv_req_new(run_notify, source);
	struct notify *n = r ? calloc(1, sizeof(*n)) : NULL;
	pmix_byte_object_t bo = {NULL, 0};
	pmix_status_t rc;

	/* Out of memory: not forwarded (the library is told all is done,
	 * see below). */
	if (!n) {
		free(r);
		return PMIX_OPERATION_SUCCEEDED;
	}
	(void)cbfunc;
	(void)cbdata;
	n->code = code;
	n->range = range;
	r->arg = n;
	r->free_arg = notify_free;
	for (size_t i = 0; range == PMIX_RANGE_CUSTOM && source && i < ninfo;
	     i++)
		if (PMIX_CHECK_KEY(&info[i], PMIX_EVENT_CUSTOM_RANGE))
			n->procs = custom_ranks(&info[i], source->nspace);
	rc = pack_infos(info, ninfo, &bo);
	if (rc == PMIX_SUCCESS && bo.size > PROTO_EVENT_DATA_MAX)
		rc = PMIX_ERR_BAD_PARAM; /* too much info to forward */
	r->status = rc;
	r->data = bo.bytes;
	r->ndata = rc == PMIX_SUCCESS ? bo.size : 0;
	psrv_enqueue(r);
	/* Done here: everything is copied.  libpmix 4.2 frees its request
	 * when this upcall returns PMIX_SUCCESS (its prm framework counts
	 * only OPERATION_IN_PROGRESS as pending), so a callback later is a
	 * use after free that wedges its progress thread at the next event;
	 * and it delivers to this node's own ranks only once we said we
	 * are done. */
	return PMIX_OPERATION_SUCCEEDED;
}

/* Refused while a process of another user is connected to the server
 * (pmix/guard.c). */
pmix_status_t psrv_up_notify_event(pmix_status_t code,
				   const pmix_proc_t *source,
				   pmix_data_range_t range, pmix_info_t info[],
				   size_t ninfo, pmix_op_cbfunc_t cbfunc,
				   void *cbdata)
{
	long stranger = psrv_guard_stranger();

	if (stranger >= 0) {
		psrv_guard_say(stranger, "a PMIx notify_event");
		return PMIX_ERR_NO_PERMISSIONS; /* at once: see above */
	}
	return notify_event_ours(code, source, range, info, ninfo, cbfunc,
				 cbdata);
}

/* --- herd -> agent ------------------------------------------------------- */

/* Info handed to PMIx_Notify_event, freed when the library is done. */
struct delivery {
	pmix_info_t *info;
	size_t ninfo;
};

static void delivered(pmix_status_t status, void *cbdata)
{
	struct delivery *d = cbdata;

	(void)status;
	PMIX_INFO_FREE(d->info, d->ninfo);
	free(d);
}

/* Hands the event to the node's ranks; takes info. */
static void deliver(pmix_status_t code, const pmix_proc_t *source,
		    pmix_data_range_t range, pmix_info_t *info, size_t ninfo)
{
	struct delivery *d = calloc(1, sizeof(*d));
	pmix_status_t rc;

	if (!d) {
		PMIX_INFO_FREE(info, ninfo);
		return;
	}
	d->info = info;
	d->ninfo = ninfo;
	rc = PMIx_Notify_event(code, source, range, info, ninfo, delivered, d);
	if (rc != PMIX_SUCCESS) /* no callback will come */
		delivered(rc, d);
}

void psrv_event_raise(struct psrv_state *p, pmix_status_t code,
		      pmix_rank_t from, json_t *ranks, pmix_info_t *info,
		      size_t ninfo)
{
	struct agent *a = p->a;
	pmix_byte_object_t bo = {NULL, 0};
	pmix_status_t rc;

	rc = pack_infos(info, ninfo, &bo);
	if (rc == PMIX_SUCCESS && bo.size <= PROTO_EVENT_DATA_MAX)
		agent_send(a, PROTO_EVENT,
			   json_pack("{s:i, s:i, s:i, s:s, s:s, s:O}",
				     "attempt", a->attempt, "code", (int)code,
				     "rank", (int)from, "nspace", p->nspace,
				     "range",
				     psrv_range_name(PMIX_RANGE_CUSTOM),
				     "procs", ranks),
			   bo.bytes, bo.size);
	free(bo.bytes);
	/* Here from the server itself: the library hands no event to its
	 * source, and the requestor is one of the targets. */
	deliver(code, NULL, PMIX_RANGE_CUSTOM, info, ninfo);
}

void psrv_on_event(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	json_t *b = f->body;
	pmix_data_buffer_t buf;
	pmix_info_t *info = NULL;
	pmix_proc_t source;
	uint32_t n = 0;
	int32_t one = 1;

	if (!p || !p->nspace_registered ||
	    json_integer_value(json_object_get(b, "attempt")) != a->attempt ||
	    strcmp(json_string_value(json_object_get(b, "nspace")), p->nspace))
		return;
	if (psrv_unpack_start(&buf, f->data, f->data_len) != PMIX_SUCCESS ||
	    PMIx_Data_unpack(NULL, &buf, &n, &one, PMIX_UINT32) !=
		PMIX_SUCCESS ||
	    n > 1024) {
		PMIX_DATA_BUFFER_DESTRUCT(&buf);
		return;
	}
	if (n) {
		int32_t got = (int32_t)n;

		PMIX_INFO_CREATE(info, n);
		if (!info ||
		    PMIx_Data_unpack(NULL, &buf, info, &got, PMIX_INFO) !=
			PMIX_SUCCESS ||
		    got != (int32_t)n) {
			if (info)
				PMIX_INFO_FREE(info, n);
			PMIX_DATA_BUFFER_DESTRUCT(&buf);
			return;
		}
	}
	PMIX_DATA_BUFFER_DESTRUCT(&buf);
	PMIX_LOAD_PROCID(
	    &source, p->nspace,
	    (pmix_rank_t)json_integer_value(json_object_get(b, "rank")));
	deliver((pmix_status_t)json_integer_value(json_object_get(b, "code")),
		&source,
		psrv_range_of(json_string_value(json_object_get(b, "range"))),
		info, n);
}

void psrv_on_proc_failed(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	json_t *b = f->body, *ranks = json_object_get(b, "ranks");
	const char *kind = json_string_value(json_object_get(b, "kind"));
	const char *host = json_string_value(json_object_get(b, "host"));
	size_t nr = json_array_size(ranks), k = 0;
	int status = (int)json_integer_value(json_object_get(b, "status"));
	pmix_data_array_t *darray;
	pmix_info_t *info;
	pmix_proc_t *procs, source;
	pmix_status_t code;

	if (!p || !p->nspace_registered || !nr ||
	    json_integer_value(json_object_get(b, "attempt")) != a->attempt)
		return;
	code = !strcmp(kind, "signal") ? PMIX_ERR_PROC_ABORTED_BY_SIG
				       : PMIX_ERR_PROC_ABORTED;
	PMIX_INFO_CREATE(info, 4);
	if (!info)
		return;
	PMIX_DATA_ARRAY_CREATE(darray, nr, PMIX_PROC);
	if (!darray) {
		PMIX_INFO_FREE(info, 4);
		return;
	}
	procs = darray->array;
	for (size_t i = 0; i < nr; i++)
		PMIX_LOAD_PROCID(
		    &procs[i], p->nspace,
		    (pmix_rank_t)json_integer_value(json_array_get(ranks, i)));
	PMIX_INFO_LOAD(&info[k++], PMIX_EVENT_AFFECTED_PROC, &procs[0],
		       PMIX_PROC);
	PMIX_LOAD_KEY(info[k].key, PMIX_EVENT_AFFECTED_PROCS);
	info[k].value.type = PMIX_DATA_ARRAY;
	info[k].value.data.darray = darray;
	k++;
	PMIX_INFO_LOAD(&info[k++], PMIX_EXIT_CODE, &status, PMIX_INT);
	if (host)
		PMIX_INFO_LOAD(&info[k++], PMIX_HOSTNAME, host, PMIX_STRING);
	/* From the job's namespace (the range's check needs it); no rank of
	 * it sent it: herd did. */
	PMIX_LOAD_PROCID(&source, p->nspace, PMIX_RANK_UNDEF);
	deliver(code, &source, PMIX_RANGE_NAMESPACE, info, k);
}
