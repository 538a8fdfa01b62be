/* pmix/server.c — the agent as the PMIx server of its ranks (launch.mode
 * pmix), what slurmstepd or prted are to MPI programs.
 *
 * Per attempt the agent registers one namespace with the job's maps and
 * every rank's data (pmix/nspace.c), registers each local rank as a
 * client and gives it PMIx_server_setup_fork's environment.  The PMIx
 * library calls us back on its own progress thread; those callbacks
 * never block and never touch the agent's state: they queue a request
 * and wake the loop (loop_wake), and the loop does the work, so the
 * agent's state has one thread:
 *   fence_nb  → pmix/fence.c;
 *   direct_modex → pmix/modex.c;
 *   abort     → ABORT to herd, which ends the attempt everywhere;
 *   client_connected / client_finalized → noted per rank: a rank that
 *               exits 0 without ever connecting ran as a singleton.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

#include "agent/pmix/pmix_int.h"
#include "herd/loop.h"

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

/* Every upcall but tool_connected is set: an unset one wedges libpmix
 * 4.2's progress thread.
 * listener stays the library's own; client_connected2 unset makes it
 * call client_connected. */
static pmix_server_module_t module = {
	.client_connected = on_client_connected,
	.client_finalized = on_client_finalized,
	.abort = on_abort,
	.fence_nb = psrv_up_fence_nb,
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
	 * tool's peer and unlinks a namespace from a list it is not in),
	 * while unset it refuses a tool that asks for an identity
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

/* --- setup ---------------------------------------------------------------- */

/* Waits for a PMIx operation's callback (run on the progress thread),
 * at most PSRV_OP_WAIT_S: a wedged library (a progress thread stuck in
 * its message handler) must not make the agent unkillable.  The
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

struct op_wait *psrv_op_wait_new(void)
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

void psrv_op_done(pmix_status_t status, void *cbdata)
{
	struct op_wait *w = cbdata;

	pthread_mutex_lock(&w->m);
	w->status = status;
	w->done = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->m);
}

/* rc: what the call returned.  Frees w, except after a timeout. */
pmix_status_t psrv_op_wait_for(struct psrv_state *p, struct op_wait *w,
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
	/* Its own directory for the rendezvous files (each agent its own
	 * PMIX_SERVER_TMPDIR), in the agent's private run directory: never a shared path such as
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
	psrv_nspace_deregister(a->pmix);
	psrv_fences_clear(a->pmix, true);
	psrv_pubsub_clear(a->pmix, false);
	snprintf(a->pmix->nspace, sizeof(a->pmix->nspace), PSRV_NSPACE_FMT,
		 PMIX_MAX_NSLEN - 16, job ? job : "job", a->attempt);
	if (a->pmix->wedged)
		return herd_errprintf(err, "the PMIx library stopped answering "
					   "(an earlier call waited %d s)",
				      PSRV_OP_WAIT_S);
	return psrv_nspace_register(a, launch, pj, json_object_get(launch, "ranks"),
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
	if (!(w = psrv_op_wait_new()))
		return herd_errprintf(err, "out of memory");
	PMIX_PROC_LOAD(&proc, nspace, (pmix_rank_t)rank);
	rc = psrv_op_wait_for(p, w, PMIx_server_register_client(&proc, getuid(),
							   getgid(), NULL,
							   psrv_op_done, w));
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
	/* Open MPI 4.1 direct launch silently falls back to singletons
	 * (size 1, exit 0) without it; set unless the job's environment
	 * says otherwise. */
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

	loop_time_in(CLOCK_MONOTONIC, &until, w->ms);
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
	psrv_fences_clear(p, false);
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
		psrv_nspace_deregister(p);
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
