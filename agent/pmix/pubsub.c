/* pmix/pubsub.c — PMIx_Publish, PMIx_Lookup, PMIx_Unpublish.
 *
 * The controller holds the published data (launcher/ctl/pmix/pubsub.c): a
 * rank's data must outlive its node, and a lookup must see what any node
 * published.  Each upcall packs what it was given on the progress thread
 * (a value with PMIx_Data_pack, so every PMIx type crosses the wire as
 * the library itself would carry it: strings, byte objects, arrays,
 * procs...), and the loop sends PUBLISH, LOOKUP or UNPUBLISH and keeps
 * the library's callback in the list of pending operations until herd's
 * PUBSUB_DONE answers it.  A new attempt (or the agent's end) fails what
 * is still pending.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pmix/pmix_int.h"

/* One operation waiting for PUBSUB_DONE. */
struct pubsub_op {
	int id;
	int attempt;
	pmix_op_cbfunc_t op_cb;		/* publish, unpublish */
	pmix_lookup_cbfunc_t lookup_cb; /* lookup */
	void *cbdata;
	struct pubsub_op *next;
};

struct psrv_pubsub {
	struct pubsub_op *ops;
	int seq;
};

static const char *range_name(pmix_data_range_t r)
{
	switch (r) {
	case PMIX_RANGE_LOCAL:
		return "local";
	case PMIX_RANGE_NAMESPACE:
		return "namespace";
	case PMIX_RANGE_GLOBAL:
		return "global";
	case PMIX_RANGE_CUSTOM:
		return "custom";
	case PMIX_RANGE_PROC_LOCAL:
		return "proc_local";
	default: /* UNDEF, RM, SESSION: the job */
		return "session";
	}
}

const char *psrv_range_name(pmix_data_range_t r)
{
	return range_name(r);
}

pmix_data_range_t psrv_range_of(const char *name)
{
	static const struct {
		const char *name;
		pmix_data_range_t r;
	} t[] = {{"local", PMIX_RANGE_LOCAL},
		 {"namespace", PMIX_RANGE_NAMESPACE},
		 {"session", PMIX_RANGE_SESSION},
		 {"global", PMIX_RANGE_GLOBAL},
		 {"custom", PMIX_RANGE_CUSTOM},
		 {"proc_local", PMIX_RANGE_PROC_LOCAL}};

	for (size_t i = 0; name && i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(name, t[i].name))
			return t[i].r;
	return PMIX_RANGE_SESSION;
}

static const char *persist_name(pmix_persistence_t p)
{
	switch (p) {
	case PMIX_PERSIST_INDEF:
		return "indef";
	case PMIX_PERSIST_FIRST_READ:
		return "first_read";
	case PMIX_PERSIST_PROC:
		return "proc";
	case PMIX_PERSIST_APP:
		return "app";
	default:
		return "session";
	}
}

/* Packs v into a new blob (*out, *len; free()).  PMIX_SUCCESS or an
 * error. */
pmix_status_t psrv_pack_blob(void *src, int32_t n, pmix_data_type_t type,
			     char **out, size_t *len)
{
	pmix_data_buffer_t buf;
	pmix_byte_object_t bo = {NULL, 0};
	pmix_status_t rc;

	PMIX_DATA_BUFFER_CONSTRUCT(&buf);
	rc = PMIx_Data_pack(NULL, &buf, src, n, type);
	if (rc == PMIX_SUCCESS)
		rc = PMIx_Data_unload(&buf, &bo);
	PMIX_DATA_BUFFER_DESTRUCT(&buf);
	*out = bo.bytes;
	*len = bo.size;
	return rc;
}

/* A buffer over a copy of data[0..len) for PMIx_Data_unpack (the library
 * takes the copy); destruct it after. */
pmix_status_t psrv_unpack_start(pmix_data_buffer_t *buf, const void *data,
				size_t len)
{
	pmix_byte_object_t bo;

	PMIX_DATA_BUFFER_CONSTRUCT(buf);
	if (!len)
		return PMIX_SUCCESS;
	bo.bytes = malloc(len);
	if (!bo.bytes)
		return PMIX_ERR_NOMEM;
	memcpy(bo.bytes, data, len);
	bo.size = len;
	return PMIx_Data_load(buf, &bo); /* takes bo's bytes */
}

static struct psrv_pubsub *pubsub_of(struct psrv_state *p)
{
	if (!p->pubsub)
		p->pubsub = calloc(1, sizeof(*p->pubsub));
	return p->pubsub;
}

static void fail_op(struct pubsub_op *op, pmix_status_t rc)
{
	if (op->op_cb)
		op->op_cb(rc, op->cbdata);
	else if (op->lookup_cb)
		op->lookup_cb(rc, NULL, 0, op->cbdata);
}

void psrv_pubsub_clear(struct psrv_state *p, bool free_all)
{
	struct psrv_pubsub *ps = p->pubsub;

	if (!ps)
		return;
	for (struct pubsub_op *op = ps->ops, *next; op; op = next) {
		next = op->next;
		if (!free_all)
			fail_op(op, PMIX_ERR_TIMEOUT);
		free(op);
	}
	ps->ops = NULL;
	if (free_all) {
		free(ps);
		p->pubsub = NULL;
	}
}

/* Loop: sends r's frame (body in r->arg) and keeps its callback. */
static void run_send(struct psrv_state *p, struct req *r, enum proto_type t)
{
	struct agent *a = p->a;
	struct psrv_pubsub *ps = pubsub_of(p);
	struct pubsub_op *op = ps ? calloc(1, sizeof(*op)) : NULL;
	json_t *body = r->arg;

	if (!op || !p->nspace_registered || r->status != PMIX_SUCCESS) {
		struct pubsub_op tmp = {.op_cb = r->op_cb,
					.lookup_cb = r->lookup_cb,
					.cbdata = r->cbdata};

		free(op);
		fail_op(&tmp,
			r->status != PMIX_SUCCESS ? r->status : PMIX_ERR_NOMEM);
		return;
	}
	op->id = ++ps->seq;
	op->attempt = a->attempt;
	op->op_cb = r->op_cb;
	op->lookup_cb = r->lookup_cb;
	op->cbdata = r->cbdata;
	op->next = ps->ops;
	ps->ops = op;
	json_object_set_new(body, "attempt", json_integer(a->attempt));
	json_object_set_new(body, "id", json_integer(op->id));
	json_object_set_new(body, "rank", json_integer(r->proc.rank));
	json_object_set_new(body, "nspace", json_string(p->nspace));
	r->arg = NULL; /* agent_send takes it */
	agent_send(a, t, body, r->data, r->ndata);
}

static void run_publish(struct psrv_state *p, struct req *r)
{
	run_send(p, r, PROTO_PUBLISH);
}

static void run_lookup(struct psrv_state *p, struct req *r)
{
	run_send(p, r, PROTO_LOOKUP);
}

static void run_unpublish(struct psrv_state *p, struct req *r)
{
	run_send(p, r, PROTO_UNPUBLISH);
}

static void free_json(void *arg)
{
	json_decref(arg);
}

/* The directives every call may carry (not data). */
static bool directive(const pmix_info_t *i, pmix_data_range_t *range)
{
	if (PMIX_CHECK_KEY(i, PMIX_RANGE)) {
		if (i->value.type == PMIX_DATA_RANGE)
			*range = i->value.data.range;
		return true;
	}
	return PMIX_CHECK_KEY(i, PMIX_USERID) ||
	       PMIX_CHECK_KEY(i, PMIX_GRPID) ||
	       PMIX_CHECK_KEY(i, PMIX_TIMEOUT) ||
	       PMIX_CHECK_KEY(i, PMIX_WAIT) ||
	       PMIX_CHECK_KEY(i, PMIX_PERSISTENCE);
}

static json_t *keys_json(char **keys)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && keys && keys[i]; i++)
		json_array_append_new(arr, json_pack("{s:s}", "key", keys[i]));
	return arr;
}

/* A request for a call with data or keys: its callback set by the
 * caller; status says what the loop must answer instead of sending. */
static struct req *new_req(void (*run)(struct psrv_state *, struct req *),
			   const pmix_proc_t *proc, json_t *body)
{
	struct req *r = body ? psrv_req_new(run, proc) : NULL;

	if (!r) {
		json_decref(body);
		return NULL;
	}
	r->arg = body;
	r->free_arg = free_json;
	r->status = PMIX_SUCCESS;
	return r;
}

static pmix_status_t publish_ours(const pmix_proc_t *proc,
				  const pmix_info_t info[], size_t ninfo,
				  pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	/* PRRTE's data server's defaults (and the standard's). */
	pmix_data_range_t range = PMIX_RANGE_SESSION;
	pmix_persistence_t persist = PMIX_PERSIST_SESSION;
	json_t *keys = json_array();
	char *all = NULL;
	size_t total = 0;
	struct req *r;
	pmix_status_t rc = PMIX_SUCCESS;

	for (size_t i = 0; i < ninfo; i++)
		if (PMIX_CHECK_KEY(&info[i], PMIX_PERSISTENCE) &&
		    info[i].value.type == PMIX_PERSIST)
			persist = info[i].value.data.persist;
	for (size_t i = 0; keys && rc == PMIX_SUCCESS && i < ninfo; i++) {
		char *blob = NULL, *grown;
		size_t len = 0;

		if (directive(&info[i], &range))
			continue;
		if (json_array_size(keys) >= PROTO_PUBSUB_KEYS_MAX ||
		    strlen(info[i].key) > PROTO_PUBSUB_KEY_MAX) {
			rc = PMIX_ERR_BAD_PARAM;
			break;
		}
		rc = psrv_pack_blob((void *)&info[i].value, 1, PMIX_VALUE,
				    &blob, &len);
		if (rc != PMIX_SUCCESS)
			break;
		if (len > PROTO_PUBSUB_VALUE_MAX ||
		    total + len > PROTO_PUBSUB_DATA_MAX) {
			free(blob);
			rc = PMIX_ERR_BAD_PARAM; /* too big to publish */
			break;
		}
		grown = realloc(all, total + len + 1);
		if (!grown) {
			free(blob);
			rc = PMIX_ERR_NOMEM;
			break;
		}
		all = grown;
		memcpy(all + total, blob, len);
		total += len;
		free(blob);
		json_array_append_new(keys, json_pack("{s:s, s:I}", "key",
						      info[i].key, "size",
						      (json_int_t)len));
	}
	if (rc == PMIX_SUCCESS && json_array_size(keys) == 0)
		rc = PMIX_ERR_BAD_PARAM; /* nothing to publish */
	r = new_req(run_publish, proc,
		    keys ? json_pack("{s:s, s:s, s:o}", "range",
				     range_name(range), "persist",
				     persist_name(persist), "keys", keys)
			 : NULL);
	if (!r) {
		free(all);
		return PMIX_ERR_NOMEM;
	}
	r->status = rc;
	r->data = all;
	r->ndata = total;
	r->op_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

/* Refused while a process of another user is connected to the server
 * (pmix/guard.c). */
pmix_status_t psrv_up_publish(const pmix_proc_t *proc, const pmix_info_t info[],
			      size_t ninfo, pmix_op_cbfunc_t cbfunc,
			      void *cbdata)
{
	long stranger = psrv_guard_stranger();

	if (stranger >= 0) {
		psrv_guard_say(stranger, "a PMIx publish");
		return psrv_refuse(cbfunc, cbdata);
	}
	return publish_ours(proc, info, ninfo, cbfunc, cbdata);
}

static size_t count_keys(char **keys)
{
	size_t n = 0;

	while (keys && keys[n])
		n++;
	return n;
}

static bool keys_ok(char **keys)
{
	for (size_t i = 0; keys && keys[i]; i++)
		if (!keys[i][0] || strlen(keys[i]) > PROTO_PUBSUB_KEY_MAX)
			return false;
	return count_keys(keys) <= PROTO_PUBSUB_KEYS_MAX;
}

static pmix_status_t lookup_ours(const pmix_proc_t *proc, char **keys,
				 const pmix_info_t info[], size_t ninfo,
				 pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
	pmix_data_range_t range = PMIX_RANGE_SESSION;
	json_int_t wait = -1, timeout_ms = 0;
	size_t nkeys = count_keys(keys);
	struct req *r;

	for (size_t i = 0; i < ninfo; i++) {
		const pmix_value_t *v = &info[i].value;

		if (directive(&info[i], &range) &&
		    PMIX_CHECK_KEY(&info[i], PMIX_WAIT)) {
			/* bool (true: all) or a count (0: all) */
			if (v->type == PMIX_BOOL)
				wait = v->data.flag ? 0 : -1;
			else {
				if (v->type == PMIX_INT)
					wait = v->data.integer;
				else if (v->type == PMIX_UINT32)
					wait = v->data.uint32;
				else if (v->type == PMIX_SIZE)
					wait = (json_int_t)v->data.size;
				else
					wait = 0;
				/* a count out of range: every key */
				if (wait < 0 || wait > (json_int_t)nkeys)
					wait = 0;
			}
		}
		if (PMIX_CHECK_KEY(&info[i], PMIX_TIMEOUT)) {
			/* seconds; 0: none (then the attempt's end) */
			if (v->type == PMIX_INT && v->data.integer > 0)
				timeout_ms = (json_int_t)v->data.integer * 1000;
			else if (v->type == PMIX_UINT32)
				timeout_ms = (json_int_t)v->data.uint32 * 1000;
		}
	}
	r = new_req(run_lookup, proc,
		    json_pack("{s:s, s:o, s:I, s:I}", "range",
			      range_name(range), "keys", keys_json(keys),
			      "wait", wait, "timeout_ms", timeout_ms));
	if (!r)
		return PMIX_ERR_NOMEM;
	if (!nkeys || !keys_ok(keys))
		r->status = PMIX_ERR_BAD_PARAM;
	r->lookup_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

/* Refused while a process of another user is connected to the server
 * (pmix/guard.c). */
pmix_status_t psrv_up_lookup(const pmix_proc_t *proc, char **keys,
			     const pmix_info_t info[], size_t ninfo,
			     pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
	long stranger = psrv_guard_stranger();

	if (stranger >= 0) {
		psrv_guard_say(stranger, "a PMIx lookup");
		return psrv_refuse_lookup(cbfunc, cbdata);
	}
	return lookup_ours(proc, keys, info, ninfo, cbfunc, cbdata);
}

static pmix_status_t unpublish_ours(const pmix_proc_t *proc, char **keys,
				    const pmix_info_t info[], size_t ninfo,
				    pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	pmix_data_range_t range = PMIX_RANGE_SESSION;
	struct req *r;

	for (size_t i = 0; i < ninfo; i++)
		directive(&info[i], &range);
	r = new_req(run_unpublish, proc,
		    json_pack("{s:s, s:o}", "range", range_name(range), "keys",
			      keys_json(keys)));
	if (!r)
		return PMIX_ERR_NOMEM;
	if (!keys_ok(keys))
		r->status = PMIX_ERR_BAD_PARAM;
	r->op_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

/* Refused while a process of another user is connected to the server
 * (pmix/guard.c). */
pmix_status_t psrv_up_unpublish(const pmix_proc_t *proc, char **keys,
				const pmix_info_t info[], size_t ninfo,
				pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	long stranger = psrv_guard_stranger();

	if (stranger >= 0) {
		psrv_guard_say(stranger, "a PMIx unpublish");
		return psrv_refuse(cbfunc, cbdata);
	}
	return unpublish_ours(proc, keys, info, ninfo, cbfunc, cbdata);
}

static pmix_status_t status_of(const char *s)
{
	if (!strcmp(s, "ok"))
		return PMIX_SUCCESS;
	if (!strcmp(s, "partial"))
		return PMIX_ERR_PARTIAL_SUCCESS;
	if (!strcmp(s, "duplicate"))
		return PMIX_ERR_DUPLICATE_KEY;
	if (!strcmp(s, "timeout"))
		return PMIX_ERR_TIMEOUT;
	if (!strcmp(s, "limit"))
		return PMIX_ERR_OUT_OF_RESOURCE;
	return PMIX_ERR_NOT_FOUND; /* not_found, ended */
}

/* LOOKUP's answer: every found value unpacked into pdata for the
 * library (which copies them before the callback returns). */
static void answer_lookup(struct pubsub_op *op, pmix_status_t rc,
			  struct proto_frame *f)
{
	json_t *found = json_object_get(f->body, "found");
	size_t n = json_array_size(found), off = 0;
	pmix_pdata_t *pd = NULL;

	if (rc != PMIX_SUCCESS && rc != PMIX_ERR_PARTIAL_SUCCESS) {
		op->lookup_cb(rc, NULL, 0, op->cbdata);
		return;
	}
	PMIX_PDATA_CREATE(pd, n);
	for (size_t i = 0; pd && i < n; i++) {
		json_t *e = json_array_get(found, i);
		size_t size =
		    (size_t)json_integer_value(json_object_get(e, "size"));
		pmix_data_buffer_t buf;
		int32_t one = 1;

		if (size > f->data_len - off) {
			rc = PMIX_ERR_UNPACK_FAILURE;
			break;
		}
		PMIX_LOAD_PROCID(
		    &pd[i].proc,
		    json_string_value(json_object_get(e, "nspace")),
		    (pmix_rank_t)json_integer_value(
			json_object_get(e, "rank")));
		PMIX_LOAD_KEY(pd[i].key,
			      json_string_value(json_object_get(e, "key")));
		/* An array of values (here one), unpacked in place. */
		if (psrv_unpack_start(&buf, f->data + off, size) !=
			PMIX_SUCCESS ||
		    PMIx_Data_unpack(NULL, &buf, &pd[i].value, &one,
				     PMIX_VALUE) != PMIX_SUCCESS)
			rc = PMIX_ERR_UNPACK_FAILURE;
		PMIX_DATA_BUFFER_DESTRUCT(&buf);
		off += size;
		if (rc == PMIX_ERR_UNPACK_FAILURE)
			break;
	}
	if (!pd && n)
		rc = PMIX_ERR_NOMEM;
	if (rc == PMIX_ERR_UNPACK_FAILURE || rc == PMIX_ERR_NOMEM)
		op->lookup_cb(rc, NULL, 0, op->cbdata);
	else
		op->lookup_cb(rc, pd, n, op->cbdata);
	/* Not PMIX_PDATA_FREE: its inline helper calls libpmix directly,
	 * which would make every agent load it at start (pmix/pmix_int.h). */
	for (size_t i = 0; pd && i < n; i++)
		PMIx_Value_destruct(&pd[i].value);
	free(pd);
}

void psrv_on_pubsub_done(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	int id = (int)json_integer_value(json_object_get(f->body, "id"));
	int att = (int)json_integer_value(json_object_get(f->body, "attempt"));
	pmix_status_t rc =
	    status_of(json_string_value(json_object_get(f->body, "status")));
	struct pubsub_op **pp, *op;

	if (!p || !p->pubsub || att != a->attempt)
		return;
	for (pp = &p->pubsub->ops; *pp && (*pp)->id != id; pp = &(*pp)->next)
		;
	if (!(op = *pp))
		return;
	*pp = op->next;
	if (op->lookup_cb)
		answer_lookup(op, rc, f);
	else
		op->op_cb(rc, op->cbdata);
	free(op);
}
