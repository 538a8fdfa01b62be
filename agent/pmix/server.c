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
 *   direct_modex → pmix/modex.c;
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
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <hwloc.h>

#include "agent/pmix/pmix_int.h"

struct psrv_lib psrv_lib;

/* Opens libpmix once (it stays loaded); 0, or -1 with err. */
static int psrv_lib_open(struct herd_err *err)
{
	const char *e;
	void *h;

	if (psrv_lib.handle)
		return 0;
	h = dlopen(PSRV_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return herd_errprintf(err,
				      "launch.mode pmix: cannot load %s (%s); "
				      "install PMIx 4 on the node",
				      PSRV_SONAME, (e = dlerror()) ? e : "?");
#define PSRV_LIB_SYM(name)                                                 \
	if (!(*(void **)&psrv_lib.fn_##name = dlsym(h, #name)))            \
		return herd_errprintf(err,                                 \
				      "launch.mode pmix: %s has no %s; "   \
				      "install PMIx 4 on the node",        \
				      PSRV_SONAME, #name);
	PSRV_LIB_FNS(PSRV_LIB_SYM)
#undef PSRV_LIB_SYM
	psrv_fence_hold_init(h);
	if (!psrv_fence_hold_active())
		fprintf(stderr,
			"herd-agent: %s is not the PMIx %ld.%ld.%ld this agent "
			"was built with: a fence over processes none of which "
			"is on this node waits until its PMIX_TIMEOUT\n",
			PSRV_SONAME, PMIX_VERSION_MAJOR, PMIX_VERSION_MINOR,
			PMIX_VERSION_RELEASE);
	psrv_lib.handle = h;
	return 0;
}

/* A namespace name: "herd.<job>.<attempt>", cut to what PMIx allows. */
#define PSRV_NSPACE_FMT "herd.%.*s.%d"

/* The one server of this process (the PMIx library has one too). */
static struct psrv_state *the_pmix;

/* --- progress thread side: queue and wake, nothing else ---------------- */

struct req *psrv_req_new(void (*run)(struct psrv_state *p, struct req *r),
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

void psrv_enqueue(struct req *r)
{
	struct psrv_state *p = the_pmix;

	pthread_mutex_lock(&p->lock);
	if (p->queue_tail)
		p->queue_tail->next = r;
	else
		p->queue = r;
	p->queue_tail = r;
	pthread_mutex_unlock(&p->lock);
	/* p->a->loop is set before the server starts and outlives it. */
	loop_wake(p->a->loop);
}

/* Refusals: each answers its callback type with NOT_SUPPORTED. */
static void run_refuse(struct psrv_state *p, struct req *r)
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
}

/* Queues r (its one callback set by the caller) or, out of memory,
 * says so at once. */
static pmix_status_t refuse_queue(struct req *r)
{
	if (!r)
		return PMIX_ERR_NOMEM;
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

#define REFUSE_WITH(field)                                                 \
	struct req *r = psrv_req_new(run_refuse, NULL);                    \
                                                                           \
	if (r) {                                                           \
		r->field = cbfunc;                                         \
		r->cbdata = cbdata;                                        \
	}                                                                  \
	return refuse_queue(r)

pmix_status_t psrv_refuse(pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(op_cb);
}

pmix_status_t psrv_refuse_info(pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(info_cb);
}

pmix_status_t psrv_refuse_lookup(pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(lookup_cb);
}

pmix_status_t psrv_refuse_spawn(pmix_spawn_cbfunc_t cbfunc, void *cbdata)
{
	REFUSE_WITH(spawn_cb);
}

static void run_connected(struct psrv_state *p, struct req *r)
{
	struct rank *rk = psrv_rank_of(p, &r->proc);

	if (rk)
		rk->pmix_connected = true;
}

static pmix_status_t on_client_connected(const pmix_proc_t *proc,
					 void *server_object,
					 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	struct req *r;
	long stranger = psrv_guard_stranger();

	(void)server_object;
	(void)cbfunc;
	(void)cbdata;
	/* Refused, the library closes the connection: it may be the
	 * stranger's, claiming to be one of our ranks (pmix/guard.c). */
	if (stranger >= 0) {
		psrv_guard_say(stranger, "a PMIx client connection");
		return PMIX_ERR_NO_PERMISSIONS;
	}
	r = psrv_req_new(run_connected, proc);
	if (r)
		psrv_enqueue(r);
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

static void run_abort(struct psrv_state *p, struct req *r)
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
	struct req *r = psrv_req_new(run_abort, proc);

	(void)server_object;
	(void)procs;
	(void)nprocs;
	if (!r)
		return PMIX_ERR_NOMEM;
	r->status = status;
	snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
	r->op_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
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

static void fences_clear(struct psrv_state *p, bool answer)
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

static pmix_status_t on_fence(const pmix_proc_t procs[], size_t nprocs,
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
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

/* Every upcall but tool_connected is set: an unset one wedges libpmix
 * 4.2 (issue 16).
 * listener stays the library's own; client_connected2 unset makes it
 * call client_connected. */
static pmix_server_module_t module = {
	.client_connected = on_client_connected,
	.client_finalized = on_client_finalized,
	.abort = on_abort,
	.fence_nb = on_fence,
	.direct_modex = psrv_up_direct_modex,
	.publish = psrv_up_publish,
	.lookup = psrv_up_lookup,
	.unpublish = psrv_up_unpublish,
	.spawn = psrv_up_spawn,
	.connect = psrv_up_connect,
	.disconnect = psrv_up_disconnect,
	.register_events = psrv_up_register_events,
	.deregister_events = psrv_up_deregister_events,
	.notify_event = psrv_up_notify_event,
	.query = psrv_up_query,
	/* tool_connected stays unset: libpmix 4.2.2 crashes on any tool
	 * the host refuses through the callback (its error path frees the
	 * tool's peer and unlinks a namespace from a list it is not in:
	 * t0920), while unset it refuses a tool that asks for an identity
	 * at once, itself.  A tool that names itself is taken as a tool,
	 * never as a rank (client_connected is not called for it). */
	.log = psrv_up_log,
	.allocate = psrv_up_allocate,
	.job_control = psrv_up_job_control,
	.monitor = psrv_up_monitor,
	.get_credential = psrv_up_get_credential,
	.validate_credential = psrv_up_validate_credential,
	.iof_pull = psrv_up_iof_pull,
	.push_stdin = psrv_up_push_stdin,
	.group = psrv_up_group,
	.fabric = psrv_up_fabric,
};

/* --- loop side ----------------------------------------------------------- */

static void req_free(struct req *r)
{
	if (r->free_arg)
		r->free_arg(r->arg);
	free(r->data);
	free(r);
}

static void run_queue(struct psrv_state *p)
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

/* Also runs after wake-ups that were not ours (loop_stop): the queue
 * is then empty or holds what the next wake-up would have run. */
static void on_wake(struct loop *loop, void *arg)
{
	(void)loop;
	run_queue(arg);
}

void psrv_drain(struct agent *a)
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

/* --- setup ---------------------------------------------------------------- */

/* Waits for a PMIx operation's callback (run on the progress thread),
 * at most PSRV_OP_WAIT_S: a wedged library (issue 16: a progress thread
 * stuck in its message handler) must not make the agent unkillable.  The
 * waiter lives on the heap: one that timed out is left to the callback
 * that may still come (a few bytes, once), and the server is marked
 * wedged: no later wait, and no PMIx_server_finalize. */
#define PSRV_OP_WAIT_S 30
/* The teardown's bound before herd's HEARTBEAT told health.timeout
 * (its default), and the least one (a normal teardown takes about half a
 * second). */
#define PSRV_FINI_WAIT_MS 3000
#define PSRV_FINI_WAIT_MIN_MS 1000

struct op_wait {
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool done;
	pmix_status_t status;
};

static struct op_wait *op_wait_new(void)
{
	struct op_wait *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;

	if (!w)
		return NULL;
	pthread_mutex_init(&w->m, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	return w;
}

static void op_wait_free(struct op_wait *w)
{
	pthread_mutex_destroy(&w->m);
	pthread_cond_destroy(&w->cv);
	free(w);
}

static void op_done(pmix_status_t status, void *cbdata)
{
	struct op_wait *w = cbdata;

	pthread_mutex_lock(&w->m);
	w->status = status;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

/* rc: what the call returned.  Frees w, except after a timeout. */
static pmix_status_t op_wait_for(struct psrv_state *p, struct op_wait *w,
				 pmix_status_t rc)
{
	struct timespec until;
	int e = 0;

	if (rc == PMIX_OPERATION_SUCCEEDED || rc != PMIX_SUCCESS) {
		op_wait_free(w);
		return rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc;
	}
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += PSRV_OP_WAIT_S;
	pthread_mutex_lock(&w->m);
	while (!w->done && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&w->cv, &w->m, &until);
	rc = w->done ? w->status : PMIX_ERR_TIMEOUT;
	pthread_mutex_unlock(&w->m);
	if (rc == PMIX_ERR_TIMEOUT && !w->done) {
		p->wedged = true;
		fprintf(stderr,
			"herd-agent: the PMIx library did not answer in %d s; "
			"its server is given up\n",
			PSRV_OP_WAIT_S);
		return rc;	/* w stays: the callback may still come */
	}
	op_wait_free(w);
	return rc;
}

static int server_up(struct agent *a, struct herd_err *err)
{
	struct psrv_state *p = a->pmix;
	pmix_info_t *info;
	pmix_status_t rc;

	if (p->server_up)
		return 0;
	if (psrv_lib_open(err) < 0)
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
	struct psrv_state *p = calloc(1, sizeof(*p));

	if (!p)
		return herd_errprintf(err, "out of memory");
	p->a = a;
	pthread_mutex_init(&p->lock, NULL);
	loop_on_wake(a->loop, on_wake, p);
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

void psrv_job_map_free(struct job_map *m)
{
	free(m->hosts_buf);
	free(m->ppn_buf);
	free(m->host);
	free(m->peers);
	free(m->nsize);
	free(m->node_of);
	free(m->lrank_of);
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

/* 0, or -1 with err: every rank 0..job_size-1 placed once, as many ppn
 * segments as nodes, at most 65535 ranks a node. */
int psrv_job_map_parse(struct job_map *m, const char *nodes,
		       const char *ppn, uint32_t job_size,
		       struct herd_err *err)
{
	char *save = NULL, *tok;
	size_t i = 0;

	memset(m, 0, sizeof(*m));
	m->job_size = job_size;
	m->nnodes = count_char(nodes, ',') + 1;
	if (count_char(ppn, ';') + 1 != m->nnodes)
		return herd_errprintf(err, "LAUNCH's pmix map: %zu nodes, "
					   "%zu rank lists",
				      m->nnodes, count_char(ppn, ';') + 1);
	m->hosts_buf = strdup(nodes);
	m->ppn_buf = strdup(ppn);
	m->host = calloc(m->nnodes, sizeof(*m->host));
	m->peers = calloc(m->nnodes, sizeof(*m->peers));
	m->nsize = calloc(m->nnodes, sizeof(*m->nsize));
	m->node_of = malloc(job_size * sizeof(*m->node_of));
	m->lrank_of = malloc(job_size * sizeof(*m->lrank_of));
	if (!m->hosts_buf || !m->ppn_buf || !m->host || !m->peers ||
	    !m->nsize || !m->node_of || !m->lrank_of)
		return herd_errprintf(err, "out of memory");
	for (uint32_t r = 0; r < job_size; r++)
		m->node_of[r] = UINT32_MAX;
	for (tok = strtok_r(m->hosts_buf, ",", &save); tok && i < m->nnodes;
	     tok = strtok_r(NULL, ",", &save))
		m->host[i++] = tok;
	if (i != m->nnodes)
		return herd_errprintf(err, "LAUNCH's pmix map: empty host");
	/* Segments may be empty (";;"): split by hand. */
	tok = m->ppn_buf;
	for (i = 0; i < m->nnodes; i++) {
		char *end = strchr(tok, ';'), *p;

		if (end)
			*end = '\0';
		m->peers[i] = tok;
		for (p = tok; *p;) {
			char *e;
			unsigned long r = strtoul(p, &e, 10);

			if (e == p || r >= job_size ||
			    m->node_of[r] != UINT32_MAX ||
			    m->nsize[i] >= UINT16_MAX || (*e && *e != ','))
				return herd_errprintf(err,
						      "LAUNCH's pmix map: bad "
						      "rank list \"%.40s\"",
						      tok);
			m->node_of[r] = (uint32_t)i;
			m->lrank_of[r] = (uint16_t)m->nsize[i]++;
			p = *e ? e + 1 : e;
		}
		tok = end ? end + 1 : tok + strlen(tok);
	}
	for (uint32_t r = 0; r < job_size; r++)
		if (m->node_of[r] == UINT32_MAX)
			return herd_errprintf(err, "LAUNCH's pmix map: rank "
						   "%u is on no node",
					      r);
	return 0;
}

/* The ranks' working directory, absolute (launch.workdir, relative to
 * where the agent runs, or that directory). */
static void job_wdir(json_t *launch, char *buf, size_t len)
{
	const char *wd = json_string_value(json_object_get(launch, "workdir"));
	char cwd[4096];

	if (wd && wd[0] == '/') {
		snprintf(buf, len, "%s", wd);
		return;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), "/");
	if (wd && wd[0] && snprintf(buf, len, "%s/%s", cwd, wd) < (int)len)
		return;
	snprintf(buf, len, "%s", cwd);
}

static pmix_info_t *info_array(pmix_info_t *i, const char *key, size_t n,
			       pmix_data_array_t **out)
{
	pmix_data_array_t *d;

	PMIX_DATA_ARRAY_CREATE(d, n, PMIX_INFO);
	PMIX_LOAD_KEY(i->key, key);
	i->value.type = PMIX_DATA_ARRAY;
	i->value.data.darray = d;
	*out = d;
	return d ? (pmix_info_t *)d->array : NULL;
}

/* Registers the attempt's namespace: the job (maps, sizes, directories),
 * its one app, every node and EVERY rank of the job (not only this
 * node's: a rank may ask for a remote rank's node, local rank...), with
 * this node's ranks' bindings. */
static int register_nspace(struct agent *a, json_t *launch, json_t *pj,
			   json_t *ranks, struct herd_err *err)
{
	struct psrv_state *p = a->pmix;
	const char *nodes = json_string_value(json_object_get(pj, "nodes"));
	const char *ppn = json_string_value(json_object_get(pj, "ppn"));
	const char *host = json_string_value(json_object_get(pj, "hostname"));
	json_t *local = json_object_get(pj, "local");
	uint32_t job_size =
		(uint32_t)json_integer_value(json_object_get(pj, "job_size"));
	uint32_t node_id =
		(uint32_t)json_integer_value(json_object_get(pj, "node_id"));
	size_t nlocal = json_array_size(local), ninfo = 0, k = 0;
	char *node_regex = NULL, *proc_regex = NULL, wdir[4096];
	const char *topo;
	struct job_map m;
	pmix_info_t *info = NULL;
	pmix_status_t rc;
	const bool no = false;
	int ret = -1;

	memset(&m, 0, sizeof(m));
	if (!nodes || !ppn || !host || !json_is_array(local) || !job_size ||
	    job_size > PSRV_JOB_RANKS_MAX)
		return herd_errprintf(err, "LAUNCH lacks the pmix job map");
	if (psrv_job_map_parse(&m, nodes, ppn, job_size, err) < 0)
		goto out;
	/* This node: the one holding its first rank (the map's order). */
	if (nlocal) {
		json_int_t r0 = json_integer_value(json_array_get(local, 0));

		if (r0 < 0 || r0 >= job_size)
			goto bad_local;
		node_id = m.node_of[r0];
		for (size_t i = 0; i < nlocal; i++) {
			json_int_t r = json_integer_value(json_array_get(local, i));

			if (r < 0 || r >= job_size || m.node_of[r] != node_id ||
			    m.lrank_of[r] != i)
				goto bad_local;
		}
	}
	if (PMIx_generate_regex(nodes, &node_regex) != PMIX_SUCCESS ||
	    PMIx_generate_ppn(ppn, &proc_regex) != PMIX_SUCCESS) {
		herd_errprintf(err, "cannot encode the job map for PMIx");
		goto out;
	}
	job_wdir(launch, wdir, sizeof(wdir));
	snprintf(p->nsdir, sizeof(p->nsdir), "%s/%s", p->tmpdir, p->nspace);
	if (mkdir(p->nsdir, 0700) < 0 && errno != EEXIST) {
		herd_errprintf(err, "cannot create %s: %s", p->nsdir,
			       strerror(errno));
		goto out;
	}

	ninfo = 25 + m.nnodes + job_size;
	PMIX_INFO_CREATE(info, ninfo);
	if (!info) {
		herd_errprintf(err, "out of memory");
		goto out;
	}
	PMIX_INFO_LOAD(&info[k++], PMIX_NODE_MAP, node_regex, PMIX_REGEX);
	PMIX_INFO_LOAD(&info[k++], PMIX_PROC_MAP, proc_regex, PMIX_REGEX);
	info_u32(&info[k++], PMIX_JOB_SIZE, job_size);
	info_u32(&info[k++], PMIX_MAX_PROCS, job_size);
	info_u32(&info[k++], PMIX_UNIV_SIZE, job_size);
	info_u32(&info[k++], PMIX_NUM_NODES, (uint32_t)m.nnodes);
	info_u32(&info[k++], PMIX_JOB_NUM_APPS, 1);
	info_str(&info[k++], PMIX_JOBID, p->nspace);
	PMIX_INFO_LOAD(&info[k++], PMIX_SPAWNED, &no, PMIX_BOOL);
	info_str(&info[k++], PMIX_WDIR, wdir);
	info_str(&info[k++], PMIX_TMPDIR, p->tmpdir);
	info_str(&info[k++], PMIX_NSDIR, p->nsdir);
	/* This node (the library's local view). */
	if (nlocal && (topo = psrv_topo_xml(a)))
		info_str(&info[k++], PMIX_LOCAL_TOPO, topo);
	if (nlocal) {
		info_u32(&info[k++], PMIX_LOCAL_SIZE, (uint32_t)nlocal);
		info_u32(&info[k++], PMIX_NODE_SIZE, (uint32_t)nlocal);
		info_str(&info[k++], PMIX_LOCAL_PEERS, m.peers[node_id]);
		PMIX_INFO_LOAD(&info[k++], PMIX_LOCALLDR,
			       &(pmix_rank_t){(pmix_rank_t)json_integer_value(
				       json_array_get(local, 0))},
			       PMIX_PROC_RANK);
	}
	info_u32(&info[k++], PMIX_NODEID, node_id);
	info_str(&info[k++], PMIX_HOSTNAME, host);
	info_u32(&info[k++], PMIX_APPNUM, 0);
	/* The one app. */
	{
		pmix_data_array_t *d;
		pmix_info_t *ai = info_array(&info[k++], PMIX_APP_INFO_ARRAY,
					     4, &d);
		pmix_rank_t ldr = 0;

		info_u32(&ai[0], PMIX_APPNUM, 0);
		info_u32(&ai[1], PMIX_APP_SIZE, job_size);
		PMIX_INFO_LOAD(&ai[2], PMIX_APPLDR, &ldr, PMIX_PROC_RANK);
		info_str(&ai[3], PMIX_WDIR, wdir);
	}
	/* Every node. */
	for (size_t i = 0; i < m.nnodes; i++) {
		pmix_data_array_t *d;
		pmix_info_t *ni = info_array(&info[k++], PMIX_NODE_INFO_ARRAY,
					     6, &d);
		pmix_rank_t ldr = 0;

		info_u32(&ni[0], PMIX_NODEID, (uint32_t)i);
		info_str(&ni[1], PMIX_HOSTNAME, m.host[i]);
		info_u32(&ni[2], PMIX_LOCAL_SIZE, m.nsize[i]);
		info_u32(&ni[3], PMIX_NODE_SIZE, m.nsize[i]);
		info_str(&ni[4], PMIX_LOCAL_PEERS, m.peers[i]);
		d->size = 5;
		if (m.nsize[i]) {	/* the first of its list */
			ldr = (pmix_rank_t)strtoul(m.peers[i], NULL, 10);
			PMIX_INFO_LOAD(&ni[5], PMIX_LOCALLDR, &ldr,
				       PMIX_PROC_RANK);
			d->size = 6;
		}
	}
	/* Every rank: PMIX_RANK first (DESIGN.md); this node's also get
	 * their binding. */
	for (uint32_t r = 0; r < job_size; r++) {
		pmix_data_array_t *d;
		pmix_info_t *pi = info_array(&info[k++], PMIX_PROC_DATA, 10,
					     &d);
		pmix_rank_t rank = r;
		uint16_t lr = m.lrank_of[r];
		uint32_t nid = m.node_of[r];

		PMIX_INFO_LOAD(&pi[0], PMIX_RANK, &rank, PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[1], PMIX_LOCAL_RANK, &lr, PMIX_UINT16);
		PMIX_INFO_LOAD(&pi[2], PMIX_NODE_RANK, &lr, PMIX_UINT16);
		info_u32(&pi[3], PMIX_APPNUM, 0);
		PMIX_INFO_LOAD(&pi[4], PMIX_APP_RANK, &rank, PMIX_PROC_RANK);
		PMIX_INFO_LOAD(&pi[5], PMIX_GLOBAL_RANK, &rank,
			       PMIX_PROC_RANK);
		info_u32(&pi[6], PMIX_NODEID, nid);
		info_str(&pi[7], PMIX_HOSTNAME, m.host[nid]);
		d->size = 8;
		if (nlocal && nid == node_id)
			d->size += cpuset_info(
				&pi[8], json_string_value(json_object_get(
						json_array_get(ranks, lr),
						"cpus")));
	}
	rc = psrv_register_nspace_wait(p, p->nspace, (int)nlocal, info, k);
	if (rc != PMIX_SUCCESS) {
		herd_errprintf(err, "PMIx_server_register_nspace: %s",
			       PMIx_Error_string(rc));
		goto out;
	}
	p->nspace_registered = true;
	p->job_size = job_size;
	{
		const char **rh = malloc(job_size * sizeof(*rh));
		bool *loc = calloc(job_size, sizeof(*loc));

		for (uint32_t r = 0; rh && loc && r < job_size; r++) {
			rh[r] = m.host[m.node_of[r]];
			loc[r] = nlocal && m.node_of[r] == node_id;
		}
		if (rh && loc)
			psrv_api_job_set(p->nspace, job_size, rh, loc,
					 json_string_value(json_object_get(
						 launch, "command")));
		free(rh);
		free(loc);
	}
	ret = 0;
	goto out;
bad_local:
	herd_errprintf(err, "LAUNCH's pmix map: this node's ranks are not "
			    "one node's of the map");
out:
	if (info)
		PMIX_INFO_FREE(info, ninfo);
	free(node_regex);
	free(proc_regex);
	psrv_job_map_free(&m);
	return ret;
}

pmix_status_t psrv_register_nspace_wait(struct psrv_state *p,
					const char *nspace, int nlocal,
					pmix_info_t *info, size_t ninfo)
{
	const char *peers = NULL;
	struct op_wait *w;
	pmix_status_t rc;

	if (p->wedged)
		return PMIX_ERR_TIMEOUT;
	if (!(w = op_wait_new()))
		return PMIX_ERR_NOMEM;
	for (size_t i = 0; i < ninfo; i++)
		if (PMIX_CHECK_KEY(&info[i], PMIX_LOCAL_PEERS) &&
		    info[i].value.type == PMIX_STRING)
			peers = info[i].value.data.string;
	/* Known before the library can see a fence naming it. */
	psrv_fence_hold_add(nspace, nlocal, peers);
	rc = op_wait_for(p, w,
			 PMIx_server_register_nspace(nspace, nlocal, info,
						     ninfo, op_done, w));
	if (rc != PMIX_SUCCESS)
		psrv_fence_hold_remove(nspace);
	return rc;
}

void psrv_deregister_nspace_wait(struct psrv_state *p, const char *nspace)
{
	struct op_wait *w;

	if (!p->wedged && (w = op_wait_new())) {
		PMIx_server_deregister_nspace(nspace, op_done, w);
		op_wait_for(p, w, PMIX_SUCCESS);
	}
	psrv_fence_hold_remove(nspace);
}

size_t psrv_cpuset_info(pmix_info_t *pi, const char *cpus)
{
	return cpuset_info(pi, cpus);
}

static void deregister_nspace(struct psrv_state *p)
{
	struct op_wait *w;

	if (!p->nspace_registered)
		return;
	p->nspace_registered = false;
	psrv_api_job_set(NULL, 0, NULL, NULL, NULL);
	if (p->wedged || !(w = op_wait_new())) {
		psrv_fence_hold_remove(p->nspace);
		return;
	}
	PMIx_server_deregister_nspace(p->nspace, op_done, w);
	op_wait_for(p, w, PMIX_SUCCESS);
	psrv_fence_hold_remove(p->nspace);
	if (p->nsdir[0])
		rmdir(p->nsdir);	/* a rank's files stay, with run_dir */
}

void psrv_warm(struct agent *a)
{
	struct herd_err err;

	herd_err_clear(&err);
	/* A failure is said again, with its reason, by the LAUNCH. */
	if (!a->pmix && state_new(a, &err) < 0)
		return;
	psrv_topo_start(a);
	server_up(a, &err);
}

int psrv_prepare(struct agent *a, json_t *launch, struct herd_err *err)
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
	psrv_modex_clear(a->pmix);
	psrv_spawn_reset(a->pmix);
	deregister_nspace(a->pmix);
	fences_clear(a->pmix, true);
	psrv_pubsub_clear(a->pmix, false);
	snprintf(a->pmix->nspace, sizeof(a->pmix->nspace), PSRV_NSPACE_FMT,
		 PMIX_MAX_NSLEN - 16, job ? job : "job", a->attempt);
	if (a->pmix->wedged)
		return herd_errprintf(err, "the PMIx library stopped answering "
					   "(an earlier call waited %d s)",
				      PSRV_OP_WAIT_S);
	return register_nspace(a, launch, pj, json_object_get(launch, "ranks"),
			       err);
}

int psrv_setup_rank(struct agent *a, struct rank *r, struct envv *env,
		    struct herd_err *err)
{
	struct psrv_state *p = a->pmix;

	if (!p || !p->nspace_registered)
		return 0;
	return psrv_setup_proc(a, p->nspace, (uint32_t)r->rank, env, err);
}

int psrv_setup_proc(struct agent *a, const char *nspace, uint32_t rank,
		    struct envv *env, struct herd_err *err)
{
	struct psrv_state *p = a->pmix;
	struct op_wait *w;
	char **penv = NULL;
	pmix_proc_t proc;
	pmix_status_t rc;
	int ret = 0;

	if (!p || !p->server_up)
		return herd_errprintf(err, "no PMIx server on this node");
	if (p->wedged)
		return herd_errprintf(err, "the PMIx library stopped answering");
	if (!(w = op_wait_new()))
		return herd_errprintf(err, "out of memory");
	PMIX_PROC_LOAD(&proc, nspace, (pmix_rank_t)rank);
	rc = op_wait_for(p, w, PMIx_server_register_client(&proc, getuid(),
							   getgid(), NULL,
							   op_done, w));
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
	/* No RDMA device: Open MPI would probe its fabric transports in
	 * every rank and then take ob1 (pmix/topo.c). */
	if (ret == 0 && !getenv("OMPI_MCA_pml") && !psrv_node_has_fabric() &&
	    envv_set(env, "OMPI_MCA_pml", "ob1") < 0)
		ret = herd_errprintf(err, "out of memory");
	for (char **e = penv; e && *e; e++)
		free(*e);
	free(penv);
	return ret;
}

/* The library's teardown, bounded: libpmix 4.2's PMIx_server_finalize
 * can spin forever in its progress thread's event loop (seen after a
 * PMIx_Connect over the whole namespace, at 100 % of a core).  An agent whose herd is gone must be gone within
 * health.timeout (at least 1 s), whatever the library does: a watchdog
 * thread ends the process if the teardown has not returned by then.  Its ranks and their
 * keepers are gone already (main.c kills and reaps them first). */
struct fini_watch {
	pthread_mutex_t m;
	pthread_cond_t cv;
	bool done;
	int64_t ms;
};

static void *fini_watchdog(void *arg)
{
	struct fini_watch *w = arg;
	struct timespec until;
	int e = 0;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(w->ms / 1000);
	until.tv_nsec += (long)(w->ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->m);
	while (!w->done && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&w->cv, &w->m, &until);
	if (!w->done) {
		fprintf(stderr,
			"herd-agent: the PMIx library did not shut down in "
			"%lld ms; exiting without it\n",
			(long long)w->ms);
		_exit(0);
	}
	pthread_mutex_unlock(&w->m);
	return NULL;
}

void psrv_fini(struct agent *a)
{
	struct psrv_state *p = a->pmix;
	struct fini_watch w = {.ms = a->hb_timeout_ms > 0 ? a->hb_timeout_ms
							  : PSRV_FINI_WAIT_MS};
	pthread_condattr_t ca;
	pthread_t watchdog;
	bool watching = false;

	if (!p)
		return;
	if (w.ms < PSRV_FINI_WAIT_MIN_MS)
		w.ms = PSRV_FINI_WAIT_MIN_MS;
	fences_clear(p, false);
	psrv_pubsub_clear(p, true);
	if (p->server_up) {
		pthread_mutex_init(&w.m, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&w.cv, &ca);
		pthread_condattr_destroy(&ca);
		watching =
		    pthread_create(&watchdog, NULL, fini_watchdog, &w) == 0;
		psrv_spawn_reset(p);
		deregister_nspace(p);
		/* A wedged library would hang here too. */
		if (!p->wedged)
			PMIx_server_finalize();
		if (watching) {
			pthread_mutex_lock(&w.m);
			w.done = true;
			pthread_cond_signal(&w.cv);
			pthread_mutex_unlock(&w.m);
			pthread_join(watchdog, NULL);
		}
		pthread_mutex_destroy(&w.m);
		pthread_cond_destroy(&w.cv);
	}
	/* After the progress thread is gone: nothing calls back any more. */
	psrv_modex_fini(p);
	/* Requests the progress thread queued after the last wake-up. */
	for (struct req *r = p->queue, *next; r; r = next) {
		next = r->next;
		req_free(r);
	}
	loop_on_wake(a->loop, NULL, NULL);
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
