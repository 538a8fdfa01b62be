/* pmix.c — the agent as the PMIx server of its ranks (launch.mode pmix),
 * what slurmstepd or prted are to MPI programs (DESIGN.md "PMIx facts").
 *
 * Per attempt the agent registers one namespace with the job's maps and
 * every rank's data, registers each local rank as a client and gives it
 * PMIx_server_setup_fork's environment.  The PMIx library calls us back
 * on its own progress thread; those callbacks never block and never touch
 * the agent's state: they queue a request and wake the loop through a
 * pipe, and the loop does the work (STYLE.md rule 6):
 *   fence_nb  → FENCE to herd, which gathers the contributions of the
 *               nodes hosting the fence's procs and answers FENCE_DONE
 *               with the concatenation; then the library's callback,
 *               whose data we free in its release function;
 *   direct_modex → pmix_modex.c;
 *   abort     → ABORT to herd, which ends the attempt everywhere;
 *   client_connected / client_finalized → noted per rank: a rank that
 *               exits 0 without ever connecting ran as a singleton.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dlfcn.h>
#include <hwloc.h>

#include "pmix_int.h"

struct pmix_lib pmix_lib;

/* Opens libpmix once (it stays loaded); 0, or -1 with err. */
static int pmix_lib_open(struct herd_err *err)
{
	const char *e;
	void *h;

	if (pmix_lib.handle)
		return 0;
	h = dlopen(PMIX_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return herd_errprintf(err,
				      "launch.mode pmix: cannot load %s (%s); "
				      "install PMIx 4 on the node",
				      PMIX_SONAME, (e = dlerror()) ? e : "?");
#define PMIX_LIB_SYM(name)                                                 \
	if (!(*(void **)&pmix_lib.fn_##name = dlsym(h, #name)))            \
		return herd_errprintf(err,                                 \
				      "launch.mode pmix: %s has no %s; "   \
				      "install PMIx 4 on the node",        \
				      PMIX_SONAME, #name);
	PMIX_LIB_FNS(PMIX_LIB_SYM)
#undef PMIX_LIB_SYM
	pmix_lib.handle = h;
	return 0;
}

/* A namespace name: "herd.<job>.<attempt>", cut to what PMIx allows. */
#define PMIX_NSPACE_FMT "herd.%.*s.%d"

/* The one server of this process (the PMIx library has one too). */
static struct pmix_state *the_pmix;

/* --- progress thread side: queue and wake, nothing else ---------------- */

struct req *pmix_req_new(void (*run)(struct pmix_state *p, struct req *r),
			 const pmix_proc_t *proc)
{
	struct req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->run = run;
	if (proc)
		PMIX_PROC_LOAD(&r->proc, proc->nspace, proc->rank);
	return r;
}

void pmix_enqueue(struct req *r)
{
	struct pmix_state *p = the_pmix;
	char b = 1;
	ssize_t n;

	pthread_mutex_lock(&p->lock);
	if (p->queue_tail)
		p->queue_tail->next = r;
	else
		p->queue = r;
	p->queue_tail = r;
	pthread_mutex_unlock(&p->lock);
	n = write(p->wake[1], &b, 1);
	(void)n;	/* a full pipe already wakes the loop */
}

/* Refusals: each answers its callback type with NOT_SUPPORTED. */
static void run_refuse(struct pmix_state *p, struct req *r)
{
	const pmix_status_t no = PMIX_ERR_NOT_SUPPORTED;

	(void)p;
	if (r->op_cb)
		r->op_cb(no, r->cbdata);
	else if (r->modex_cb)
		r->modex_cb(no, NULL, 0, r->cbdata, NULL, NULL);
	else if (r->info_cb)
		r->info_cb(no, NULL, 0, r->cbdata, NULL, NULL);
	else if (r->lookup_cb)
		r->lookup_cb(no, NULL, 0, r->cbdata);
	else if (r->spawn_cb)
		r->spawn_cb(no, NULL, r->cbdata);
	else if (r->cred_cb)
		r->cred_cb(no, NULL, NULL, 0, r->cbdata);
	else if (r->valid_cb)
		r->valid_cb(no, NULL, 0, r->cbdata);
	else if (r->tool_cb)
		r->tool_cb(no, NULL, r->cbdata);
}

/* Queues r (its one callback set by the caller) or, out of memory,
 * says so at once. */
static pmix_status_t refuse_queue(struct req *r)
{
	if (!r)
		return PMIX_ERR_NOMEM;
	pmix_enqueue(r);
	return PMIX_SUCCESS;
}

#define REFUSE_WITH(field)                                                 \
	struct req *r = pmix_req_new(run_refuse, NULL);                    \
                                                                           \
	if (r) {                                                           \
		r->field = cbfunc;                                         \
		r->cbdata = cbdata;                                        \
	}                                                                  \
	return refuse_queue(r)

pmix_status_t pmix_refuse(pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(op_cb);
}

pmix_status_t pmix_refuse_modex(pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(modex_cb);
}

pmix_status_t pmix_refuse_info(pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(info_cb);
}

pmix_status_t pmix_refuse_lookup(pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(lookup_cb);
}

pmix_status_t pmix_refuse_spawn(pmix_spawn_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(spawn_cb);
}

pmix_status_t pmix_refuse_cred(pmix_credential_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(cred_cb);
}

pmix_status_t pmix_refuse_valid(pmix_validation_cbfunc_t cbfunc,
				void *cbdata)
{
	REFUSE_WITH(valid_cb);
}

void pmix_refuse_tool(pmix_tool_connection_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r = pmix_req_new(run_refuse, NULL);

	if (!r) {
		cbfunc(PMIX_ERR_NOMEM, NULL, cbdata);
		return;
	}
	r->tool_cb = cbfunc;
	r->cbdata = cbdata;
	pmix_enqueue(r);
}

struct pmix_state *pmix_state_of(struct agent *a)
{
	return a->pmix;
}

static void run_connected(struct pmix_state *p, struct req *r)
{
	struct rank *rk = pmix_rank_of(p, &r->proc);

	if (rk)
		rk->pmix_connected = true;
}

static pmix_status_t on_client_connected(const pmix_proc_t *proc,
					 void *server_object,
					 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r = pmix_req_new(run_connected, proc);

	(void)server_object;
	(void)cbfunc;
	(void)cbdata;
	if (r)
		pmix_enqueue(r);
	return PMIX_OPERATION_SUCCEEDED;
}

static pmix_status_t on_client_finalized(const pmix_proc_t *proc,
					 void *server_object,
					 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)proc;
	(void)server_object;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_OPERATION_SUCCEEDED;
}

static void run_abort(struct pmix_state *p, struct req *r)
{
	struct agent *a = p->a;

	agent_send(a, PROTO_ABORT,
		   json_pack("{s:i, s:i, s:i, s:s}", "attempt", a->attempt,
			     "rank", (int)r->proc.rank, "status", r->status,
			     "message", r->msg),
		   NULL, 0);
	/* The client waits for this before it exits. */
	if (r->op_cb)
		r->op_cb(PMIX_SUCCESS, r->cbdata);
}

static pmix_status_t on_abort(const pmix_proc_t *proc, void *server_object,
			      int status, const char msg[], pmix_proc_t procs[],
			      size_t nprocs, pmix_op_cbfunc_t cbfunc,
			      void *cbdata)
{
	struct req *r = pmix_req_new(run_abort, proc);

	(void)server_object;
	(void)procs;
	(void)nprocs;
	if (!r)
		return PMIX_ERR_NOMEM;
	r->status = status;
	snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
	r->op_cb = cbfunc;
	r->cbdata = cbdata;
	pmix_enqueue(r);
	return PMIX_SUCCESS;
}

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
static char *fence_procs(struct pmix_state *p, const pmix_proc_t *procs,
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
	cap = nprocs * 24 + 1;	/* "lo-hi," per range at most */
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
		len += (size_t)snprintf(s + len, cap - len, lo == hi ? "%s%u"
							: "%s%u-%u",
					len ? "," : "", lo, hi);
	}
	free(rk);
	if (len * 2 > PROTO_JSON_MAX) {	/* would not fit FENCE */
		free(s);
		*rc = PMIX_ERR_NOT_SUPPORTED;
		return NULL;
	}
	return s;
}

/* This agent's count of fences over procs, this one included. */
static int fence_count(struct pmix_state *p, const char *procs)
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

static void fences_clear(struct pmix_state *p, bool answer)
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

static void run_fence(struct pmix_state *p, struct req *r)
{
	struct agent *a = p->a;
	struct fence *f, **tail;
	pmix_status_t rc;
	char *procs;
	int count;

	/* Over processes of a spawned namespace: pmix_spawn.c's. */
	if (pmix_spawn_fence(p, r))
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

static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs,
			      const pmix_info_t info[], size_t ninfo,
			      char *data, size_t ndata,
			      pmix_modex_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r = pmix_req_new(run_fence, NULL);

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
		if (nprocs > INT_MAX || !(r->arg = malloc(nprocs * sizeof(*procs)))) {
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
	pmix_enqueue(r);
	return PMIX_SUCCESS;
}

/* Every upcall is set: an unset one wedges libpmix 4.2 (issue 16).
 * listener stays the library's own; client_connected2 unset makes it
 * call client_connected. */
static pmix_server_module_t module = {
	.client_connected = on_client_connected,
	.client_finalized = on_client_finalized,
	.abort = on_abort,
	.fence_nb = on_fence,
	.direct_modex = pmix_up_direct_modex,
	.publish = pmix_up_publish,
	.lookup = pmix_up_lookup,
	.unpublish = pmix_up_unpublish,
	.spawn = pmix_up_spawn,
	.connect = pmix_up_connect,
	.disconnect = pmix_up_disconnect,
	.register_events = pmix_up_register_events,
	.deregister_events = pmix_up_deregister_events,
	.notify_event = pmix_up_notify_event,
	.query = pmix_up_query,
	.tool_connected = pmix_up_tool_connected,
	.log = pmix_up_log,
	.allocate = pmix_up_allocate,
	.job_control = pmix_up_job_control,
	.monitor = pmix_up_monitor,
	.get_credential = pmix_up_get_credential,
	.validate_credential = pmix_up_validate_credential,
	.iof_pull = pmix_up_iof_pull,
	.push_stdin = pmix_up_push_stdin,
	.group = pmix_up_group,
	.fabric = pmix_up_fabric,
};

/* --- loop side ----------------------------------------------------------- */

static void req_free(struct req *r)
{
	if (r->free_arg)
		r->free_arg(r->arg);
	free(r->data);
	free(r);
}

static void run_queue(struct pmix_state *p)
{
	struct req *r;

	for (;;) {
		pthread_mutex_lock(&p->lock);
		r = p->queue;
		if (r) {
			p->queue = r->next;
			if (!p->queue)
				p->queue_tail = NULL;
		}
		pthread_mutex_unlock(&p->lock);
		if (!r)
			break;
		r->run(p, r);
		req_free(r);
	}
}

static void on_wake(struct loop *loop, int fd, short revents, void *arg)
{
	struct pmix_state *p = arg;
	char buf[256];

	(void)loop;
	(void)revents;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	run_queue(p);
}

void pmix_drain(struct agent *a)
{
	static bool draining;

	if (!a->pmix || draining)
		return;
	draining = true;
	run_queue(a->pmix);
	draining = false;
}

static void release_fence_data(void *cbdata)
{
	free(cbdata);
}

void pmix_on_fence_done(struct agent *a, struct proto_frame *f)
{
	struct pmix_state *p = a->pmix;
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

/* --- setup ---------------------------------------------------------------- */

/* Waits for a PMIx operation's callback (run on the progress thread). */
struct op_wait {
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool done;
	pmix_status_t status;
};

static void op_done(pmix_status_t status, void *cbdata)
{
	struct op_wait *w = cbdata;

	pthread_mutex_lock(&w->m);
	w->status = status;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

static pmix_status_t op_wait_for(struct op_wait *w, pmix_status_t rc)
{
	if (rc == PMIX_OPERATION_SUCCEEDED)
		return PMIX_SUCCESS;
	if (rc != PMIX_SUCCESS)
		return rc;
	pthread_mutex_lock(&w->m);
	while (!w->done)
		pthread_cond_wait(&w->cv, &w->m);
	pthread_mutex_unlock(&w->m);
	return w->status;
}

#define OP_WAIT_INIT                                                       \
	{                                                                  \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, \
			PMIX_SUCCESS                                       \
	}

static int server_up(struct agent *a, struct herd_err *err)
{
	struct pmix_state *p = a->pmix;
	pmix_info_t *info;
	pmix_status_t rc;

	if (p->server_up)
		return 0;
	if (pmix_lib_open(err) < 0)
		return -1;
	/* Its own directory for the rendezvous files (DESIGN.md), in the
	 * agent's private run directory: never a shared path such as
	 * /tmp/pmix, which another user could make first and so read or
	 * replace the server's rendezvous (its URI and socket). */
	if (!a->run_dir[0])
		return herd_errprintf(err,
				      "launch.mode pmix: the agent has no "
				      "private run directory (TMPDIR full or "
				      "not writable?) for the PMIx server's "
				      "rendezvous files");
	snprintf(p->tmpdir, sizeof(p->tmpdir), "%s/pmix", a->run_dir);
	if (mkdir(p->tmpdir, 0700) < 0 && errno != EEXIST)
		return herd_errprintf(err, "cannot create %s: %s", p->tmpdir,
				      strerror(errno));
	/* ds12/ds21 alone crash or hang on this stack; hash is safe. */
	setenv("PMIX_MCA_gds", "hash", 0);
	PMIX_INFO_CREATE(info, 2);
	PMIX_INFO_LOAD(&info[0], PMIX_SERVER_TMPDIR, p->tmpdir, PMIX_STRING);
	PMIX_INFO_LOAD(&info[1], PMIX_SYSTEM_TMPDIR, p->tmpdir, PMIX_STRING);
	rc = PMIx_server_init(&module, info, 2);
	PMIX_INFO_FREE(info, 2);
	if (rc != PMIX_SUCCESS)
		return herd_errprintf(err, "PMIx_server_init: %s",
				      PMIx_Error_string(rc));
	p->server_up = true;
	return 0;
}

static int state_new(struct agent *a, struct herd_err *err)
{
	struct pmix_state *p = calloc(1, sizeof(*p));

	if (!p)
		return herd_errprintf(err, "out of memory");
	p->a = a;
	pthread_mutex_init(&p->lock, NULL);
	if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(p);
		return herd_errprintf(err, "pipe: %s", strerror(errno));
	}
	loop_fd_add(a->loop, p->wake[0], POLLIN, on_wake, p);
	a->pmix = p;
	the_pmix = p;
	return 0;
}

static void info_u32(pmix_info_t *i, const char *key, uint32_t v)
{
	PMIX_INFO_LOAD(i, key, &v, PMIX_UINT32);
}

static void info_str(pmix_info_t *i, const char *key, const char *v)
{
	PMIX_INFO_LOAD(i, key, v, PMIX_STRING);
}

/* Job info for the attempt's namespace, from LAUNCH's "pmix" object:
 *   {"nspace", "nodes": "h1,h2" (node order), "ppn": "0,1;2,3" (ranks
 *    per node, same order), "job_size", "num_nodes", "node_id",
 *    "hostname", "local": [ranks here]}
 * and LAUNCH's ranks (same order as "local") for their cpusets. */
/* The rank's binding, published as PMIX_CPUSET and PMIX_LOCALITY_STRING
 * (what MPI uses to tell which peers share a socket or NUMA node), where
 * the library can make them.  Fills pi[0..] and returns how many. */
static size_t cpuset_info(pmix_info_t *pi, const char *cpus)
{
	hwloc_bitmap_t b;
	pmix_cpuset_t cs;
	char *str = NULL;
	size_t n = 0;

	if (!cpus || !cpus[0] || !(b = hwloc_bitmap_alloc()))
		return 0;
	if (hwloc_bitmap_list_sscanf(b, cpus) == 0) {
		cs.source = "hwloc";
		cs.bitmap = b;
		if (PMIx_server_generate_cpuset_string(&cs, &str) ==
			    PMIX_SUCCESS &&
		    str) {
			PMIX_INFO_LOAD(&pi[n++], PMIX_CPUSET, str, PMIX_STRING);
			free(str);
			str = NULL;
		}
		if (PMIx_server_generate_locality_string(&cs, &str) ==
			    PMIX_SUCCESS &&
		    str) {
			PMIX_INFO_LOAD(&pi[n++], PMIX_LOCALITY_STRING, str,
				       PMIX_STRING);
			free(str);
		}
	}
	hwloc_bitmap_free(b);
	return n;
}

static int register_nspace(struct agent *a, json_t *pj, json_t *ranks,
			   struct herd_err *err)
{
	struct pmix_state *p = a->pmix;
	const char *nodes = json_string_value(json_object_get(pj, "nodes"));
	const char *ppn = json_string_value(json_object_get(pj, "ppn"));
	const char *host = json_string_value(json_object_get(pj, "hostname"));
	json_t *local = json_object_get(pj, "local");
	uint32_t job_size =
		(uint32_t)json_integer_value(json_object_get(pj, "job_size"));
	uint32_t num_nodes =
		(uint32_t)json_integer_value(json_object_get(pj, "num_nodes"));
	uint32_t node_id =
		(uint32_t)json_integer_value(json_object_get(pj, "node_id"));
	size_t nlocal = json_array_size(local), ninfo, k = 0;
	char *node_regex = NULL, *proc_regex = NULL, peers[8192] = "";
	struct op_wait w = OP_WAIT_INIT;
	pmix_info_t *info = NULL;
	pmix_status_t rc;
	size_t plen = 0;
	int ret = -1;

	if (!nodes || !ppn || !host || !json_is_array(local) || !job_size)
		return herd_errprintf(err, "LAUNCH lacks the pmix job map");
	if (PMIx_generate_regex(nodes, &node_regex) != PMIX_SUCCESS ||
	    PMIx_generate_ppn(ppn, &proc_regex) != PMIX_SUCCESS) {
		herd_errprintf(err, "cannot encode the job map for PMIx");
		goto out;
	}
	for (size_t i = 0; i < nlocal && plen < sizeof(peers) - 16; i++)
		plen += (size_t)snprintf(peers + plen, sizeof(peers) - plen,
					 "%s%d", i ? "," : "",
					 (int)json_integer_value(
						 json_array_get(local, i)));

	ninfo = 12 + nlocal;
	PMIX_INFO_CREATE(info, ninfo);
	PMIX_INFO_LOAD(&info[k++], PMIX_NODE_MAP, node_regex, PMIX_REGEX);
	PMIX_INFO_LOAD(&info[k++], PMIX_PROC_MAP, proc_regex, PMIX_REGEX);
	info_u32(&info[k++], PMIX_JOB_SIZE, job_size);
	info_u32(&info[k++], PMIX_MAX_PROCS, job_size);
	info_u32(&info[k++], PMIX_UNIV_SIZE, job_size);
	info_u32(&info[k++], PMIX_LOCAL_SIZE, (uint32_t)nlocal);
	info_str(&info[k++], PMIX_LOCAL_PEERS, peers);
	info_u32(&info[k++], PMIX_NUM_NODES, num_nodes);
	info_u32(&info[k++], PMIX_NODEID, node_id);
	info_str(&info[k++], PMIX_HOSTNAME, host);
	info_str(&info[k++], PMIX_JOBID, p->nspace);
	info_u32(&info[k++], PMIX_APPNUM, 0);
	/* Per rank: PMIX_RANK first (DESIGN.md), then its local and node
	 * ranks and host. */
	for (size_t i = 0; i < nlocal; i++) {
		pmix_data_array_t *darray;
		pmix_info_t *pi;
		pmix_rank_t rank =
			(pmix_rank_t)json_integer_value(json_array_get(local, i));
		uint16_t lr = (uint16_t)i;

		PMIX_DATA_ARRAY_CREATE(darray, 6, PMIX_INFO);
		pi = (pmix_info_t *)darray->array;
		PMIX_INFO_LOAD(&pi[0], PMIX_RANK, &rank, PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[1], PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
		PMIX_INFO_LOAD(&pi[2], PMIX_NODE_RANK, &lr, PMIX_UINT16);
		PMIX_INFO_LOAD(&pi[3], PMIX_HOSTNAME, host, PMIX_STRING);
		darray->size = 4 + cpuset_info(&pi[4], json_string_value(
			json_object_get(json_array_get(ranks, i), "cpus")));
		PMIX_LOAD_KEY(info[k].key, PMIX_PROC_DATA);
		info[k].value.type = PMIX_DATA_ARRAY;
		info[k].value.data.darray = darray;
		k++;
	}
	rc = op_wait_for(&w, PMIx_server_register_nspace(p->nspace, (int)nlocal,
							 info, k, op_done, &w));
	if (rc != PMIX_SUCCESS) {
		herd_errprintf(err, "PMIx_server_register_nspace: %s",
			       PMIx_Error_string(rc));
		goto out;
	}
	p->nspace_registered = true;
	p->job_size = job_size;
	ret = 0;
out:
	if (info)
		PMIX_INFO_FREE(info, ninfo);
	free(node_regex);
	free(proc_regex);
	return ret;
}

pmix_status_t pmix_register_nspace_wait(const char *nspace, int nlocal,
					pmix_info_t *info, size_t ninfo)
{
	struct op_wait w = OP_WAIT_INIT;

	return op_wait_for(&w, PMIx_server_register_nspace(
				       nspace, nlocal, info, ninfo, op_done, &w));
}

void pmix_deregister_nspace_wait(const char *nspace)
{
	struct op_wait w = OP_WAIT_INIT;

	PMIx_server_deregister_nspace(nspace, op_done, &w);
	op_wait_for(&w, PMIX_SUCCESS);
}

size_t pmix_cpuset_info(pmix_info_t *pi, const char *cpus)
{
	return cpuset_info(pi, cpus);
}

static void deregister_nspace(struct pmix_state *p)
{
	struct op_wait w = OP_WAIT_INIT;

	if (!p->nspace_registered)
		return;
	PMIx_server_deregister_nspace(p->nspace, op_done, &w);
	op_wait_for(&w, PMIX_SUCCESS);
	p->nspace_registered = false;
}

int pmix_prepare(struct agent *a, json_t *launch, struct herd_err *err)
{
	json_t *pj = json_object_get(launch, "pmix");
	const char *job = json_string_value(json_object_get(pj, "job"));

	if (!json_is_object(pj))
		return 0;	/* not a pmix launch */
	if (!a->pmix && state_new(a, err) < 0)
		return -1;
	if (server_up(a, err) < 0)
		return -1;
	/* Ranks of the last attempt are gone (rank_launch checked). */
	/* Direct modex requests answered while libpmix still knows them. */
	pmix_modex_clear(a->pmix);
	pmix_spawn_reset(a->pmix);
	deregister_nspace(a->pmix);
	fences_clear(a->pmix, true);
	pmix_pubsub_clear(a->pmix, false);
	snprintf(a->pmix->nspace, sizeof(a->pmix->nspace), PMIX_NSPACE_FMT,
		 PMIX_MAX_NSLEN - 16, job ? job : "job", a->attempt);
	return register_nspace(a, pj, json_object_get(launch, "ranks"), err);
}

int pmix_setup_rank(struct agent *a, struct rank *r, struct envv *env,
		    struct herd_err *err)
{
	struct pmix_state *p = a->pmix;

	if (!p || !p->nspace_registered)
		return 0;
	return pmix_setup_proc(a, p->nspace, (uint32_t)r->rank, env, err);
}

int pmix_setup_proc(struct agent *a, const char *nspace, uint32_t rank,
		    struct envv *env, struct herd_err *err)
{
	struct op_wait w = OP_WAIT_INIT;
	char **penv = NULL;
	pmix_proc_t proc;
	pmix_status_t rc;
	int ret = 0;

	if (!a->pmix || !a->pmix->server_up)
		return herd_errprintf(err, "no PMIx server on this node");
	PMIX_PROC_LOAD(&proc, nspace, (pmix_rank_t)rank);
	rc = op_wait_for(&w, PMIx_server_register_client(&proc, getuid(),
							 getgid(), NULL,
							 op_done, &w));
	if (rc != PMIX_SUCCESS)
		return herd_errprintf(err, "PMIx_server_register_client: %s",
				      PMIx_Error_string(rc));
	rc = PMIx_server_setup_fork(&proc, &penv);
	if (rc != PMIX_SUCCESS)
		return herd_errprintf(err, "PMIx_server_setup_fork: %s",
				      PMIx_Error_string(rc));
	for (char **e = penv; e && *e; e++) {
		char *eq = strchr(*e, '=');

		if (!eq)
			continue;
		*eq = '\0';
		if (envv_set(env, *e, eq + 1) < 0)
			ret = herd_errprintf(err, "out of memory");
		*eq = '=';
	}
	/* Open MPI 4.1 direct launch falls back to singletons without it
	 * (DESIGN.md); set unless the job's environment says otherwise. */
	if (ret == 0 && envv_set(env, "OMPI_MCA_schizo", "^orte") < 0)
		ret = herd_errprintf(err, "out of memory");
	for (char **e = penv; e && *e; e++)
		free(*e);
	free(penv);
	return ret;
}

void pmix_fini(struct agent *a)
{
	struct pmix_state *p = a->pmix;

	if (!p)
		return;
	fences_clear(p, false);
	pmix_pubsub_clear(p, true);
	if (p->server_up) {
		pmix_spawn_reset(p);
		deregister_nspace(p);
		PMIx_server_finalize();
	}
	/* After the progress thread is gone: nothing calls back any more. */
	pmix_modex_fini(p);
	/* Requests the progress thread queued after the last wake-up. */
	for (struct req *r = p->queue, *next; r; r = next) {
		next = r->next;
		req_free(r);
	}
	loop_fd_del(a->loop, p->wake[0]);
	close(p->wake[0]);
	close(p->wake[1]);
	pthread_mutex_destroy(&p->lock);
	free(p);
	a->pmix = NULL;
	the_pmix = NULL;
}

#if defined(__SANITIZE_ADDRESS__)
/* libpmix 4.2 keeps a few small allocations from PMIx_server_init and
 * its value loading past PMIx_server_finalize: not ours to free, so
 * LeakSanitizer (sanitizer builds only) lets them be. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:libpmix.so\n";
}

const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "print_suppressions=0";
}
#endif
