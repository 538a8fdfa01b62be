/* pmix/spawn.c — PMIx_Spawn, with pmix/connect.c PMIx_Connect and
 * PMIx_Disconnect: what the agent does for MPI_Comm_spawn,
 * spawn_multiple, MPI_Comm_connect/accept and MPI_Intercomm_create.
 *
 *   spawn       the upcall copies the apps (command, arguments,
 *               environment, cwd, count, PMIX_HOST / PMIX_ADD_HOST) and
 *               the loop sends SPAWN to herd, which places the processes
 *               on the job's nodes and sends SPAWN_LAUNCH to every member
 *               agent: each registers the new namespace
 *               ("<job's>.s<N>", with PMIX_PARENT_ID and PMIX_SPAWNED),
 *               starts its own processes as it starts ranks (keeper,
 *               group, output, EXIT; rank.c) and answers SPAWN_UP; when
 *               all are in herd answers SPAWN_DONE and the library's
 *               callback gets the namespace.
 *   connect,    a collective over the listed processes across
 *   disconnect  namespaces, like a fence without data: the library calls
 *               us once its local participants are in; CONNECT goes to
 *               herd, which answers CONNECT_DONE when every node hosting
 *               them sent the same.  A fence over processes of a spawned
 *               namespace (or of several) goes the same way with its
 *               data ("fence"): herd hands back the concatenation.
 *               Every member agent knows every
 *               namespace of the attempt (SPAWN_LAUNCH registers a
 *               spawn's everywhere, even with no process here), as the
 *               library needs for the job info it hands the clients.
 *
 * Upcalls run on the library's progress thread: they copy and queue
 * (pmix/pmix_int.h); everything else runs on the agent's loop.  Namespaces are
 * named to herd by number: 0 the job's, N spawn N.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pmix/pmix_int.h"

/* A spawn's namespace known to this agent. */
struct spawn_ns {
	int id;
	char name[PMIX_MAX_NSLEN + 1];
};

struct psrv_spawn_state {
	struct spawn_ns *ns;
	int n_ns;
	struct pending *pending;
	int seq;
};

/* 512 KiB: the most one spawn's apps may weigh on the wire (half a JSON
 * header, PROTO_JSON_MAX). */
#define SPAWN_APPS_BYTES_MAX (512u * 1024)

static struct psrv_spawn_state *state_of(struct psrv_state *p)
{
	if (!p->spawn)
		p->spawn = calloc(1, sizeof(*p->spawn));
	return p->spawn;
}

void psrv_ns_name(struct psrv_state *p, int id, char *buf, size_t size)
{
	if (id == 0)
		snprintf(buf, size, "%s", p->nspace);
	else
		snprintf(buf, size, "%.*s.s%d", PMIX_MAX_NSLEN - 12, p->nspace,
			 id);
}

int psrv_ns_index(struct psrv_state *p, const char *nspace)
{
	struct psrv_spawn_state *s = p->spawn;

	if (!strncmp(nspace, p->nspace, PMIX_MAX_NSLEN))
		return 0;
	for (int i = 0; s && i < s->n_ns; i++)
		if (!strncmp(nspace, s->ns[i].name, PMIX_MAX_NSLEN))
			return s->ns[i].id;
	return -1;
}

static bool ns_known(struct psrv_state *p, int id)
{
	struct psrv_spawn_state *s = p->spawn;

	for (int i = 0; s && i < s->n_ns; i++)
		if (s->ns[i].id == id)
			return true;
	return id == 0;
}

struct rank *psrv_rank_of(struct psrv_state *p, const pmix_proc_t *proc)
{
	struct agent *a = p->a;
	int ns = psrv_ns_index(p, proc->nspace);

	if (ns < 0)
		return NULL;
	for (int i = 0; i < a->n_ranks; i++) {
		struct rank *r = &a->ranks[i];

		if (r->spawn == ns &&
		    (pmix_rank_t)(ns ? r->srank : r->rank) == proc->rank)
			return r;
	}
	return NULL;
}

struct pending *psrv_pending_add(struct psrv_state *p, bool spawn)
{
	struct psrv_spawn_state *s = state_of(p);
	struct pending *pd = s ? calloc(1, sizeof(*pd)) : NULL;

	if (!pd)
		return NULL;
	pd->seq = ++s->seq;
	pd->spawn = spawn;
	pd->next = s->pending;
	s->pending = pd;
	return pd;
}

struct pending *psrv_pending_take(struct psrv_state *p, int seq,
				  bool spawn)
{
	struct psrv_spawn_state *s = p->spawn;

	for (struct pending **pp = s ? &s->pending : NULL; pp && *pp;
	     pp = &(*pp)->next) {
		struct pending *pd = *pp;

		if (pd->seq == seq && pd->spawn == spawn) {
			*pp = pd->next;
			return pd;
		}
	}
	return NULL;
}

void psrv_spawn_reset(struct psrv_state *p)
{
	struct psrv_spawn_state *s = p->spawn;

	if (!s)
		return;
	for (struct pending *pd = s->pending, *next; pd; pd = next) {
		next = pd->next;
		if (pd->spawn)
			pd->spawn_cb(PMIX_ERR_TIMEOUT, NULL, pd->cbdata);
		else if (pd->modex_cb)
			pd->modex_cb(PMIX_ERR_TIMEOUT, NULL, 0, pd->cbdata,
				     NULL, NULL);
		else
			pd->op_cb(PMIX_ERR_TIMEOUT, pd->cbdata);
		free(pd);
	}
	for (int i = 0; i < s->n_ns; i++)
		psrv_deregister_nspace_wait(p, s->ns[i].name);
	free(s->ns);
	free(s);
	p->spawn = NULL;
}

/* --- spawn ---------------------------------------------------------------- */

/* Adds the hosts of a comma-separated list to arr. */
static void hosts_add(json_t *arr, const char *list)
{
	char *copy = list ? strdup(list) : NULL, *save = NULL;

	for (char *h = copy ? strtok_r(copy, ",", &save) : NULL; h;
	     h = strtok_r(NULL, ",", &save))
		if (*h && json_array_size(arr) < PROTO_SPAWN_ARGS_MAX)
			json_array_append_new(arr, json_string(h));
	free(copy);
}

static void hosts_from_info(json_t *arr, const pmix_info_t *info, size_t ninfo)
{
	for (size_t i = 0; info && i < ninfo; i++)
		if ((PMIX_CHECK_KEY(&info[i], PMIX_HOST) ||
		     PMIX_CHECK_KEY(&info[i], PMIX_ADD_HOST)) &&
		    info[i].value.type == PMIX_STRING)
			hosts_add(arr, info[i].value.data.string);
}

static json_t *strings(char **v, size_t skip, size_t *bytes, bool *over)
{
	json_t *arr = json_array();
	size_t n = 0;

	for (char **e = v; e && *e; e++, n++) {
		if (n < skip)
			continue;
		if (json_array_size(arr) >= PROTO_SPAWN_ARGS_MAX) {
			*over = true;
			break;
		}
		*bytes += strlen(*e) + 8;
		json_array_append_new(arr, json_string(*e));
	}
	return arr;
}

static void json_free_arg(void *arg)
{
	json_decref(arg);
}

/* Progress thread: the apps as SPAWN carries them, or a status why not
 * (r->status, r->msg). */
static void spawn_copy(struct req *r, const pmix_info_t job_info[],
		       size_t ninfo, const pmix_app_t apps[], size_t napps)
{
	json_t *arr = json_array(), *job_hosts = json_array();
	size_t bytes = 0, total = 0;
	bool over = false;

	r->status = PMIX_SUCCESS;
	if (!arr || !job_hosts) {
		r->status = PMIX_ERR_NOMEM;
		goto out;
	}
	if (napps == 0 || napps > PROTO_SPAWN_APPS_MAX) {
		r->status = PMIX_ERR_BAD_PARAM;
		snprintf(r->msg, sizeof(r->msg), "%zu apps (1..%d)", napps,
			 PROTO_SPAWN_APPS_MAX);
		goto out;
	}
	hosts_from_info(job_hosts, job_info, ninfo);
	for (size_t i = 0; i < napps; i++) {
		const pmix_app_t *ap = &apps[i];
		json_t *app, *hosts;

		if (!ap->cmd || !*ap->cmd || ap->maxprocs < 1 ||
		    ap->maxprocs > PROTO_SPAWN_PROCS_MAX) {
			r->status = ap->maxprocs > PROTO_SPAWN_PROCS_MAX
					? PMIX_ERR_OUT_OF_RESOURCE
					: PMIX_ERR_BAD_PARAM;
			snprintf(r->msg, sizeof(r->msg),
				 "app %zu: no command or %d processes "
				 "(1..%d)",
				 i, ap->maxprocs, PROTO_SPAWN_PROCS_MAX);
			goto out;
		}
		total += (size_t)ap->maxprocs;
		bytes += strlen(ap->cmd) + (ap->cwd ? strlen(ap->cwd) : 0);
		/* argv[0] is the program's name: the command. */
		app = json_pack("{s:s, s:o, s:o, s:i}", "cmd", ap->cmd, "argv",
				strings(ap->argv, 1, &bytes, &over), "env",
				strings(ap->env, 0, &bytes, &over), "np",
				ap->maxprocs);
		if (!app) {
			r->status = PMIX_ERR_NOMEM;
			goto out;
		}
		if (ap->cwd && *ap->cwd)
			json_object_set_new(app, "cwd", json_string(ap->cwd));
		hosts = json_deep_copy(job_hosts);
		hosts_from_info(hosts, ap->info, ap->ninfo);
		if (json_array_size(hosts))
			json_object_set_new(app, "hosts", hosts);
		else
			json_decref(hosts);
		json_array_append_new(arr, app);
	}
	if (over || bytes > SPAWN_APPS_BYTES_MAX) {
		r->status = PMIX_ERR_BAD_PARAM;
		snprintf(r->msg, sizeof(r->msg),
			 "the apps' arguments and environment are over %u "
			 "bytes or %d entries",
			 SPAWN_APPS_BYTES_MAX, PROTO_SPAWN_ARGS_MAX);
		goto out;
	}
	if (total > PROTO_SPAWN_PROCS_MAX) {
		r->status = PMIX_ERR_OUT_OF_RESOURCE;
		snprintf(r->msg, sizeof(r->msg),
			 "%zu processes in one spawn (at most %d)", total,
			 PROTO_SPAWN_PROCS_MAX);
		goto out;
	}
	r->arg = arr;
	r->free_arg = json_free_arg;
	arr = NULL;
out:
	json_decref(arr);
	json_decref(job_hosts);
}

static void run_spawn(struct psrv_state *p, struct req *r)
{
	struct agent *a = p->a;
	struct pending *pd;
	int ns;

	if (r->status != PMIX_SUCCESS) {
		if (r->msg[0])
			fprintf(stderr, "herd-agent: PMIx_Spawn refused: %s\n",
				r->msg);
		r->spawn_cb(r->status, NULL, r->cbdata);
		return;
	}
	ns = psrv_ns_index(p, r->proc.nspace);
	if (ns < 0 || !(pd = psrv_pending_add(p, true))) {
		r->spawn_cb(ns < 0 ? PMIX_ERR_NOT_FOUND : PMIX_ERR_NOMEM, NULL,
			    r->cbdata);
		return;
	}
	pd->spawn_cb = r->spawn_cb;
	pd->cbdata = r->cbdata;
	agent_send(a, PROTO_SPAWN,
		   json_pack("{s:i, s:i, s:i, s:i, s:O}", "attempt", a->attempt,
			     "seq", pd->seq, "ns", ns, "rank",
			     (int)r->proc.rank, "apps", r->arg),
		   NULL, 0);
}

pmix_status_t psrv_up_spawn(const pmix_proc_t *proc,
			    const pmix_info_t job_info[], size_t ninfo,
			    const pmix_app_t apps[], size_t napps,
			    pmix_spawn_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r;
	long stranger = psrv_guard_stranger();

	/* A tool of another user (the library takes tools without asking
	 * us) must not start processes as the job's user. */
	if (stranger >= 0) {
		psrv_guard_say(stranger, "a PMIx spawn");
		return psrv_refuse_spawn(cbfunc, cbdata);
	}
	r = psrv_req_new(run_spawn, proc);
	if (!r)
		return PMIX_ERR_NOMEM;
	r->spawn_cb = cbfunc;
	r->cbdata = cbdata;
	spawn_copy(r, job_info, ninfo, apps, napps);
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

void psrv_on_spawn_done(struct agent *a, struct proto_frame *f)
{
	struct psrv_state *p = a->pmix;
	int att = (int)json_integer_value(json_object_get(f->body, "attempt"));
	int seq = (int)json_integer_value(json_object_get(f->body, "seq"));
	int st = (int)json_integer_value(json_object_get(f->body, "status"));
	int id = (int)json_integer_value(json_object_get(f->body, "spawn"));
	const char *why = json_string_value(json_object_get(f->body, "error"));
	char name[PMIX_MAX_NSLEN + 1];
	struct pending *pd;

	if (!p || att != a->attempt || !(pd = psrv_pending_take(p, seq, true)))
		return;
	if (why)
		fprintf(stderr, "herd-agent: PMIx_Spawn failed: %s\n", why);
	if (st == 0 && !ns_known(p, id))
		st = PMIX_ERR_NOT_FOUND;
	if (st == 0) {
		psrv_ns_name(p, id, name, sizeof(name));
		pd->spawn_cb(PMIX_SUCCESS, name, pd->cbdata);
	} else {
		pd->spawn_cb(st > 0 ? PMIX_ERROR : st, NULL, pd->cbdata);
	}
	free(pd);
}

static char **str_vec(json_t *arr)
{
	size_t n = json_array_size(arr);
	char **v = calloc(n + 1, sizeof(*v));

	for (size_t i = 0; v && i < n; i++)
		v[i] = (char *)json_string_value(json_array_get(arr, i));
	return v;
}

/* Registers spawn id's namespace as the job's is registered (pmix/nspace.c's
 * psrv_nspace_register): its maps, sizes, parent, every app, every node and
 * EVERY process of the spawn (not only this node's: the parent asks for
 * a child's local rank, node... wherever the child runs), with
 * this node's processes' bindings. */
static int register_spawn(struct psrv_state *p, json_t *b, const char *name,
			  json_t *local, struct herd_err *err)
{
	const char *nodes = json_string_value(json_object_get(b, "nodes"));
	const char *ppn = json_string_value(json_object_get(b, "ppn"));
	const char *host = json_string_value(json_object_get(b, "hostname"));
	json_t *apps = json_object_get(b, "apps");
	uint32_t size =
	    (uint32_t)json_integer_value(json_object_get(b, "size"));
	uint32_t node_id =
	    (uint32_t)json_integer_value(json_object_get(b, "node_id"));
	uint32_t napps = (uint32_t)json_array_size(apps);
	size_t nlocal = json_array_size(local), ninfo = 0, k = 0;
	char *node_regex = NULL, *proc_regex = NULL;
	char parent_ns[PMIX_MAX_NSLEN + 1];
	const char **cpus_of = NULL, *topo;
	uint32_t *app_of = NULL, *app_first = NULL, here = UINT32_MAX;
	pmix_info_t *info = NULL;
	struct job_map m;
	pmix_proc_t parent;
	pmix_status_t rc;
	bool yes = true;
	int ret = -1;

	memset(&m, 0, sizeof(m));
	if (!nodes || !ppn || !host || !size || size > PROTO_SPAWN_PROCS_MAX ||
	    !napps) {
		herd_errprintf(err, "SPAWN_LAUNCH lacks the spawn's map");
		goto out;
	}
	if (psrv_job_map_parse(&m, nodes, ppn, size, err) < 0)
		goto out;
	for (size_t i = 0; i < m.nnodes; i++)
		if (!strcmp(m.host[i], host))
			here = (uint32_t)i;
	/* Every process's app: the apps' processes follow each other in
	 * rank order (np each). */
	cpus_of = calloc(size, sizeof(*cpus_of));
	app_of = calloc(size, sizeof(*app_of));
	app_first = calloc(napps, sizeof(*app_first));
	if (!cpus_of || !app_of || !app_first) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	for (uint32_t i = 0, r = 0; i < napps; i++) {
		json_int_t np = json_integer_value(
		    json_object_get(json_array_get(apps, i), "np"));

		app_first[i] = r;
		for (json_int_t j = 0; j < np && r < size; j++)
			app_of[r++] = i;
	}
	for (size_t i = 0; i < nlocal; i++) {
		json_t *jl = json_array_get(local, i);
		json_int_t r = json_integer_value(json_object_get(jl, "rank"));

		if (r < 0 || r >= size || here == UINT32_MAX ||
		    m.node_of[r] != here) {
			herd_errprintf(err,
				       "SPAWN_LAUNCH: process %d is not "
				       "this node's in the spawn's map",
				       (int)r);
			goto out;
		}
		cpus_of[r] = json_string_value(json_object_get(jl, "cpus"));
	}
	if (here != UINT32_MAX)
		node_id = here;
	psrv_ns_name(p,
		     (int)json_integer_value(json_object_get(b, "parent_ns")),
		     parent_ns, sizeof(parent_ns));
	PMIX_PROC_LOAD(
	    &parent, parent_ns,
	    (pmix_rank_t)json_integer_value(json_object_get(b, "parent_rank")));
	if (PMIx_generate_regex(nodes, &node_regex) != PMIX_SUCCESS ||
	    PMIx_generate_ppn(ppn, &proc_regex) != PMIX_SUCCESS) {
		herd_errprintf(err, "cannot encode spawn maps for PMIx");
		goto out;
	}
	ninfo = 20 + napps + m.nnodes + size;
	PMIX_INFO_CREATE(info, ninfo);
	if (!info) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	PMIX_INFO_LOAD(&info[k++], PMIX_NODE_MAP, node_regex, PMIX_REGEX);
	PMIX_INFO_LOAD(&info[k++], PMIX_PROC_MAP, proc_regex, PMIX_REGEX);
	PMIX_INFO_LOAD(&info[k++], PMIX_JOB_SIZE, &size, PMIX_UINT32);
	PMIX_INFO_LOAD(&info[k++], PMIX_MAX_PROCS, &size, PMIX_UINT32);
	PMIX_INFO_LOAD(&info[k++], PMIX_UNIV_SIZE, &size, PMIX_UINT32);
	PMIX_INFO_LOAD(&info[k++], PMIX_NUM_NODES,
		       &(uint32_t){(uint32_t)m.nnodes}, PMIX_UINT32);
	PMIX_INFO_LOAD(&info[k++], PMIX_NODEID, &node_id, PMIX_UINT32);
	PMIX_INFO_LOAD(&info[k++], PMIX_HOSTNAME, host, PMIX_STRING);
	PMIX_INFO_LOAD(&info[k++], PMIX_JOBID, name, PMIX_STRING);
	PMIX_INFO_LOAD(&info[k++], PMIX_JOB_NUM_APPS, &napps, PMIX_UINT32);
	PMIX_INFO_LOAD(&info[k++], PMIX_PARENT_ID, &parent, PMIX_PROC);
	PMIX_INFO_LOAD(&info[k++], PMIX_SPAWNED, &yes, PMIX_BOOL);
	if (here != UINT32_MAX && m.nsize[here]) {
		PMIX_INFO_LOAD(&info[k++], PMIX_LOCAL_SIZE, &m.nsize[here],
			       PMIX_UINT32);
		PMIX_INFO_LOAD(&info[k++], PMIX_NODE_SIZE, &m.nsize[here],
			       PMIX_UINT32);
		PMIX_INFO_LOAD(&info[k++], PMIX_LOCAL_PEERS, m.peers[here],
			       PMIX_STRING);
		PMIX_INFO_LOAD(&info[k++], PMIX_LOCALLDR,
			       &(pmix_rank_t){(pmix_rank_t)strtoul(
				   m.peers[here], NULL, 10)},
			       PMIX_PROC_RANK);
		/* The node's topology, as for the job's ranks. */
		if ((topo = psrv_topo_xml(p->a)))
			PMIX_INFO_LOAD(&info[k++], PMIX_LOCAL_TOPO, topo,
				       PMIX_STRING);
	}
	/* Every app. */
	for (uint32_t i = 0; i < napps; i++) {
		pmix_info_t *ai =
		    psrv_info_array(&info[k++], PMIX_APP_INFO_ARRAY, 3, NULL);
		uint32_t asz =
		    (i + 1 < napps ? app_first[i + 1] : size) - app_first[i];

		PMIX_INFO_LOAD(&ai[0], PMIX_APPNUM, &i, PMIX_UINT32);
		PMIX_INFO_LOAD(&ai[1], PMIX_APP_SIZE, &asz, PMIX_UINT32);
		PMIX_INFO_LOAD(&ai[2], PMIX_APPLDR,
			       &(pmix_rank_t){app_first[i]}, PMIX_PROC_RANK);
	}
	/* Every node of the spawn. */
	for (size_t i = 0; i < m.nnodes; i++) {
		pmix_info_t *ni =
		    psrv_info_array(&info[k++], PMIX_NODE_INFO_ARRAY, 6, NULL);
		pmix_data_array_t *d = info[k - 1].value.data.darray;

		PMIX_INFO_LOAD(&ni[0], PMIX_NODEID, &(uint32_t){(uint32_t)i},
			       PMIX_UINT32);
		PMIX_INFO_LOAD(&ni[1], PMIX_HOSTNAME, m.host[i], PMIX_STRING);
		PMIX_INFO_LOAD(&ni[2], PMIX_LOCAL_SIZE, &m.nsize[i],
			       PMIX_UINT32);
		PMIX_INFO_LOAD(&ni[3], PMIX_NODE_SIZE, &m.nsize[i],
			       PMIX_UINT32);
		PMIX_INFO_LOAD(&ni[4], PMIX_LOCAL_PEERS, m.peers[i],
			       PMIX_STRING);
		d->size = 5;
		if (m.nsize[i]) {
			PMIX_INFO_LOAD(&ni[5], PMIX_LOCALLDR,
				       &(pmix_rank_t){(pmix_rank_t)strtoul(
					   m.peers[i], NULL, 10)},
				       PMIX_PROC_RANK);
			d->size = 6;
		}
	}
	/* Every process: PMIX_RANK first; this node's with their binding. */
	for (uint32_t r = 0; r < size; r++) {
		pmix_info_t *pi =
		    psrv_info_array(&info[k++], PMIX_PROC_DATA, 10, NULL);
		pmix_data_array_t *d = info[k - 1].value.data.darray;
		uint32_t nid = m.node_of[r];

		PMIX_INFO_LOAD(&pi[0], PMIX_RANK, &r, PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[1], PMIX_LOCAL_RANK, &m.lrank_of[r],
			       PMIX_UINT16);
		PMIX_INFO_LOAD(&pi[2], PMIX_NODE_RANK, &m.lrank_of[r],
			       PMIX_UINT16);
		PMIX_INFO_LOAD(&pi[3], PMIX_APPNUM, &app_of[r], PMIX_UINT32);
		PMIX_INFO_LOAD(&pi[4], PMIX_APP_RANK,
			       &(pmix_rank_t){r - app_first[app_of[r]]},
			       PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[5], PMIX_GLOBAL_RANK, &r, PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[6], PMIX_NODEID, &nid, PMIX_UINT32);
		PMIX_INFO_LOAD(&pi[7], PMIX_HOSTNAME, m.host[nid], PMIX_STRING);
		d->size = 8 + psrv_cpuset_info(&pi[8], cpus_of[r]);
	}
	rc = psrv_register_nspace_wait(p, name, (int)nlocal, info, k);
	if (rc != PMIX_SUCCESS) {
		herd_errprintf(err, "PMIx_server_register_nspace %s: %s", name,
			       PMIx_Error_string(rc));
		goto out;
	}
	ret = 0;
out:
	if (info)
		PMIX_INFO_FREE(info, ninfo);
	free(node_regex);
	free(proc_regex);
	free(cpus_of);
	free(app_of);
	free(app_first);
	psrv_job_map_free(&m);
	return ret;
}

void psrv_on_spawn_launch(struct agent *a, struct proto_frame *f)
{
	/* Processes here are the lifecycle's (the agent runs again when
	 * the node's own ranks are over while the attempt goes on
	 * elsewhere; not while it stops). */
	if (json_array_size(json_object_get(f->body, "local")))
		agent_post(a, AGENT_EV_SPAWN, f->body);
	else
		psrv_spawn_launch(a, f->body, true);
}

void psrv_spawn_launch(struct agent *a, json_t *b, bool may_run)
{
	struct psrv_state *p = a->pmix;
	int att = (int)json_integer_value(json_object_get(b, "attempt"));
	int id = (int)json_integer_value(json_object_get(b, "spawn"));
	json_t *apps = json_object_get(b, "apps");
	json_t *local = json_object_get(b, "local");
	struct psrv_spawn_state *s;
	struct spawn_ns *ns;
	struct herd_err err;
	json_t *jl;
	size_t i;

	herd_err_clear(&err);
	if (att != a->attempt)
		return;
	if (!p || !p->nspace_registered || !(s = state_of(p))) {
		herd_errprintf(&err, "no PMIx namespace on this node");
		goto answer;
	}
	if (ns_known(p, id)) {
		herd_errprintf(&err, "spawn %d is known already", id);
		goto answer;
	}
	if (json_array_size(local) && !may_run) {
		herd_errprintf(&err, "the node's ranks are over (%s)",
			       agent_state_name(a->state));
		goto answer;
	}
	ns = realloc(s->ns, (size_t)(s->n_ns + 1) * sizeof(*ns));
	if (!ns) {
		herd_errprintf(&err, "out of memory");
		goto answer;
	}
	s->ns = ns;
	ns = &s->ns[s->n_ns];
	ns->id = id;
	psrv_ns_name(p, id, ns->name, sizeof(ns->name));
	if (register_spawn(p, b, ns->name, local, &err) < 0)
		goto answer;
	s->n_ns++;
	json_array_foreach(local, i, jl)
	{
		json_t *app = json_array_get(
		    apps,
		    (size_t)json_integer_value(json_object_get(jl, "app")));
		char **argv = str_vec(json_object_get(app, "argv"));
		char **env = str_vec(json_object_get(app, "env"));
		struct rank_proc rp = {
		    .id = (int)json_integer_value(json_object_get(jl, "id")),
		    .spawn = id,
		    .srank =
			(int)json_integer_value(json_object_get(jl, "rank")),
		    .nspace = ns->name,
		    .cmd = json_string_value(json_object_get(app, "cmd")),
		    .argv = argv,
		    .env = env,
		    .cwd = json_string_value(json_object_get(app, "cwd")),
		    .cpus = json_string_value(json_object_get(jl, "cpus")),
		};
		int rc = -1;

		if (!app || !argv || !env || !rp.cmd)
			herd_errprintf(&err, "out of memory");
		else
			rc = rank_spawn_proc(a, &rp, &err);
		free(argv);
		free(env);
		if (rc < 0)
			break;
	}
answer:
	agent_send(
	    a, PROTO_SPAWN_UP,
	    err.text[0]
		? json_pack("{s:i, s:i, s:s}", "attempt", a->attempt, "spawn",
			    id, "error", err.text)
		: json_pack("{s:i, s:i}", "attempt", a->attempt, "spawn", id),
	    NULL, 0);
}
