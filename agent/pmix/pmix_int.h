/* pmix/pmix_int.h — what the files of the agent's PMIx server share
 * (the .c files of agent/pmix; our names are psrv_*, libpmix's pmix_*).
 *
 * server.c owns the server: libpmix loaded by dlopen, the attempt's
 * namespace, and the queue through which the library's progress thread
 * hands every upcall to the agent's loop (loop_wake), so that the
 * agent's state is only ever touched from its one loop.  An upcall
 * copies what it needs into a struct req, sets its run function and
 * queues it; the loop calls run(), which answers the library through the
 * request's callback, at once or when herd replies.  Each PMIx feature
 * lives in its own file (pmix/fence.c, modex.c...) with its upcalls and
 * frames.
 */
#ifndef HERD_AGENT_PMIX_INT_H
#define HERD_AGENT_PMIX_INT_H

#include <pthread.h>
#include <stdbool.h>

#include <pmix.h>
#include <pmix_server.h>

#include "agent/agent.h"

/* libpmix is opened at the first pmix launch, not linked: loading it
 * (with libevent and libmunge) cost every agent start about 1.3 ms of the
 * node's CPU, pmix job or not.  Every PMIx_ function this file calls,
 * directly or through pmix.h's macros (PMIX_INFO_LOAD...), is a pointer of
 * this table, filled by psrv_lib_open(); the names below make the calls
 * read as they would against the linked library. */
#define PSRV_SONAME "libpmix.so.2"
#define PSRV_LIB_FNS(X)                                                    \
	X(PMIx_Data_load)                                                  \
	X(PMIx_Data_pack)                                                  \
	X(PMIx_Data_unload)                                                \
	X(PMIx_Data_unpack)                                                \
	X(PMIx_Data_array_destruct)                                        \
	X(PMIx_Error_string)                                               \
	X(PMIx_Info_load)                                                  \
	X(PMIx_Notify_event)                                               \
	X(PMIx_Value_destruct)                                             \
	X(PMIx_generate_ppn)                                               \
	X(PMIx_generate_regex)                                             \
	X(PMIx_server_deregister_nspace)                                   \
	X(PMIx_server_dmodex_request)                                      \
	X(PMIx_server_finalize)                                            \
	X(PMIx_server_generate_cpuset_string)                              \
	X(PMIx_server_generate_locality_string)                            \
	X(PMIx_server_init)                                                \
	X(PMIx_server_register_client)                                     \
	X(PMIx_server_register_nspace)                                     \
	X(PMIx_server_setup_fork)

struct psrv_lib {
	void *handle;
#define PSRV_LIB_FIELD(name) __typeof__(name) *fn_##name;
	PSRV_LIB_FNS(PSRV_LIB_FIELD)
#undef PSRV_LIB_FIELD
};
extern struct psrv_lib psrv_lib;

#define PMIx_Data_load (*psrv_lib.fn_PMIx_Data_load)
#define PMIx_Data_pack (*psrv_lib.fn_PMIx_Data_pack)
#define PMIx_Data_unload (*psrv_lib.fn_PMIx_Data_unload)
#define PMIx_Data_unpack (*psrv_lib.fn_PMIx_Data_unpack)
#define PMIx_Data_array_destruct (*psrv_lib.fn_PMIx_Data_array_destruct)
#define PMIx_Error_string (*psrv_lib.fn_PMIx_Error_string)
#define PMIx_Info_load (*psrv_lib.fn_PMIx_Info_load)
#define PMIx_Notify_event (*psrv_lib.fn_PMIx_Notify_event)
#define PMIx_Value_destruct (*psrv_lib.fn_PMIx_Value_destruct)
#define PMIx_generate_ppn (*psrv_lib.fn_PMIx_generate_ppn)
#define PMIx_generate_regex (*psrv_lib.fn_PMIx_generate_regex)
#define PMIx_server_deregister_nspace                                      \
	(*psrv_lib.fn_PMIx_server_deregister_nspace)
#define PMIx_server_dmodex_request                                         \
	(*psrv_lib.fn_PMIx_server_dmodex_request)
#define PMIx_server_finalize (*psrv_lib.fn_PMIx_server_finalize)
#define PMIx_server_generate_cpuset_string                                 \
	(*psrv_lib.fn_PMIx_server_generate_cpuset_string)
#define PMIx_server_generate_locality_string                               \
	(*psrv_lib.fn_PMIx_server_generate_locality_string)
#define PMIx_server_init (*psrv_lib.fn_PMIx_server_init)
#define PMIx_server_register_client (*psrv_lib.fn_PMIx_server_register_client)
#define PMIx_server_register_nspace (*psrv_lib.fn_PMIx_server_register_nspace)
#define PMIx_server_setup_fork (*psrv_lib.fn_PMIx_server_setup_fork)

struct psrv_state;

/* The most ranks a job's namespace registers (each rank's data is sent
 * to every node's library). */
#define PSRV_JOB_RANKS_MAX (1u << 20)

/* Work handed from the PMIx progress thread to the loop. */
struct req {
	/* Runs on the loop; answers the library through the callback
	 * (now or later).  The request is freed after it returns. */
	void (*run)(struct psrv_state *p, struct req *r);
	pmix_proc_t proc;	/* the process the upcall is about */
	char *data;		/* our copy of the upcall's blob */
	size_t ndata;
	int status;
	char msg[512];
	pmix_modex_cbfunc_t modex_cb;
	pmix_op_cbfunc_t op_cb;
	pmix_info_cbfunc_t info_cb;
	pmix_lookup_cbfunc_t lookup_cb;
	pmix_spawn_cbfunc_t spawn_cb;
	void *cbdata;
	void *arg;		/* the feature's own payload, freed with */
	void (*free_arg)(void *arg);
	struct req *next;
};

/* A fence sent to herd, waiting for FENCE_DONE. */
struct fence {
	int seq;
	pmix_modex_cbfunc_t cb;
	void *cbdata;
	struct fence *next;
};

struct psrv_state {
	struct agent *a;
	bool server_up;
	char nspace[PMIX_MAX_NSLEN + 1];	/* the current attempt's */
	bool nspace_registered;
	char tmpdir[300];
	char nsdir[300 + PMIX_MAX_NSLEN + 2];	/* tmpdir/nspace: PMIX_NSDIR */
	bool wedged;		/* a call's callback never came (server.c) */
	pthread_mutex_t lock;	/* guards queue */
	struct req *queue, *queue_tail;
	struct fence *fences;	/* pending, oldest first */
	int fence_seq;
	struct psrv_spawn_state *spawn;	/* pmix/spawn.c, or NULL */
	struct fence_set *fence_sets;	/* fences joined per procs */
	uint32_t job_size;		/* of the attempt's namespace */
	struct psrv_modex *modex;	/* pmix/modex.c */
	struct psrv_pubsub *pubsub;	/* pmix/pubsub.c: pending operations */
};

/* Progress thread side.  A new request (NULL when out of memory) with
 * proc copied from p (may be NULL); queue it with psrv_enqueue, which
 * wakes the loop. */
struct req *psrv_req_new(void (*run)(struct psrv_state *p, struct req *r),
			 const pmix_proc_t *proc);
void psrv_enqueue(struct req *r);

/* An upcall herd does not serve: completes through cbfunc with
 * PMIX_ERR_NOT_SUPPORTED, from the loop (an upcall left unset, or one
 * that refuses synchronously, wedges libpmix 4.2's progress thread).  Each returns what the upcall returns.  One per callback
 * type. */
pmix_status_t psrv_refuse(pmix_op_cbfunc_t cbfunc, void *cbdata);
pmix_status_t psrv_refuse_info(pmix_info_cbfunc_t cbfunc, void *cbdata);
pmix_status_t psrv_refuse_lookup(pmix_lookup_cbfunc_t cbfunc, void *cbdata);
pmix_status_t psrv_refuse_spawn(pmix_spawn_cbfunc_t cbfunc, void *cbdata);

/* The upcalls (server.c's module table); each file serves its own.  A
 * declaration of function NAME of the upcall type TYPE (a pointer
 * type in pmix_server.h): */
#define PSRV_UPCALL(type, name) __typeof__(*(type)0) name

/* pmix/modex.c: */
PSRV_UPCALL(pmix_server_dmodex_req_fn_t, psrv_up_direct_modex);
/* A new attempt: fails what is pending (loop side). */
void psrv_modex_clear(struct psrv_state *p);
/* After PMIx_server_finalize: frees what is left. */
void psrv_modex_fini(struct psrv_state *p);
/* pmix/pubsub.c: */
PSRV_UPCALL(pmix_server_publish_fn_t, psrv_up_publish);
PSRV_UPCALL(pmix_server_lookup_fn_t, psrv_up_lookup);
PSRV_UPCALL(pmix_server_unpublish_fn_t, psrv_up_unpublish);
/* pmix/event.c: */
PSRV_UPCALL(pmix_server_register_events_fn_t, psrv_up_register_events);
/* Loop side: event code from the server to the processes of the job's
 * namespace that info's PMIX_EVENT_CUSTOM_RANGE names, on this node and
 * (through herd, as from rank from) on those of ranks (an array of rank
 * numbers; empty: every node); takes info (PMIX_INFO_CREATE'd). */
void psrv_event_raise(struct psrv_state *p, pmix_status_t code,
		      pmix_rank_t from, json_t *ranks, pmix_info_t *info,
		      size_t ninfo);
PSRV_UPCALL(pmix_server_deregister_events_fn_t, psrv_up_deregister_events);
PSRV_UPCALL(pmix_server_notify_event_fn_t, psrv_up_notify_event);
/* pmix/spawn.c: */
PSRV_UPCALL(pmix_server_spawn_fn_t, psrv_up_spawn);
PSRV_UPCALL(pmix_server_connect_fn_t, psrv_up_connect);
PSRV_UPCALL(pmix_server_disconnect_fn_t, psrv_up_disconnect);
/* pmix/api.c: */
PSRV_UPCALL(pmix_server_query_fn_t, psrv_up_query);
PSRV_UPCALL(pmix_server_log_fn_t, psrv_up_log);
PSRV_UPCALL(pmix_server_alloc_fn_t, psrv_up_allocate);
PSRV_UPCALL(pmix_server_job_control_fn_t, psrv_up_job_control);
PSRV_UPCALL(pmix_server_monitor_fn_t, psrv_up_monitor);
PSRV_UPCALL(pmix_server_get_cred_fn_t, psrv_up_get_credential);
PSRV_UPCALL(pmix_server_validate_cred_fn_t, psrv_up_validate_credential);
PSRV_UPCALL(pmix_server_iof_fn_t, psrv_up_iof_pull);
PSRV_UPCALL(pmix_server_stdin_fn_t, psrv_up_push_stdin);
PSRV_UPCALL(pmix_server_grp_fn_t, psrv_up_group);
PSRV_UPCALL(pmix_server_fabric_fn_t, psrv_up_fabric);

/* A request sent to herd, waiting for SPAWN_DONE or CONNECT_DONE. */
struct pending {
	int seq;
	bool spawn; /* else connect, disconnect or fence */
	pmix_spawn_cbfunc_t spawn_cb;
	pmix_op_cbfunc_t op_cb;
	pmix_modex_cbfunc_t modex_cb; /* a fence */
	void *cbdata;
	struct pending *next;
};

/* pmix/spawn.c: a new pending request of this attempt with its seq
 * (NULL: no memory), and the one of seq taken off the list (NULL: none;
 * the caller frees it). */
struct pending *psrv_pending_add(struct psrv_state *p, bool spawn);
struct pending *psrv_pending_take(struct psrv_state *p, int seq, bool spawn);

/* server.c: waiting for a PMIx operation's callback, bounded (a wedged
 * library must not make the agent unkillable).  psrv_op_wait_new()
 * returns a waiter (NULL: no memory) whose callback is psrv_op_done
 * (cbdata: the waiter); psrv_op_wait_for(p, w, rc), with rc what the
 * call returned, waits when the call went on asynchronously, frees w
 * (but after a timeout, when the callback may still come: p->wedged is
 * then set) and returns the operation's status. */
struct op_wait;
struct op_wait *psrv_op_wait_new(void);
void psrv_op_done(pmix_status_t status, void *cbdata);
pmix_status_t psrv_op_wait_for(struct psrv_state *p, struct op_wait *w,
			       pmix_status_t rc);

/* pmix/fence.c: the fence upcall; and every pending fence forgotten
 * with the fence names counted so far (a new attempt, the end), each
 * answered PMIX_ERR_TIMEOUT first when answer. */
PSRV_UPCALL(pmix_server_fencenb_fn_t, psrv_up_fence_nb);
void psrv_fences_clear(struct psrv_state *p, bool answer);

/* pmix/nspace.c: the attempt's namespace registered with its job
 * data from LAUNCH (launch, its "pmix" object pj, its "ranks"), 0 or -1
 * with err; and deregistered (when registered). */
int psrv_nspace_register(struct agent *a, json_t *launch, json_t *pj,
			 json_t *ranks, struct herd_err *err);
void psrv_nspace_deregister(struct psrv_state *p);
/* i as key's array of n infos (PMIX_DATA_ARRAY): returns its first
 * info (NULL: no memory) and, when out is given, the array. */
pmix_info_t *psrv_info_array(pmix_info_t *i, const char *key, size_t n,
			     pmix_data_array_t **out);

/* pmix/nspace.c: register (deregister) a namespace and wait for the
 * library's answer; the PMIX_CPUSET and PMIX_LOCALITY_STRING of a cpu
 * list into pi[0..1] (returns how many). */
pmix_status_t psrv_register_nspace_wait(struct psrv_state *p,
					const char *nspace, int nlocal,
					pmix_info_t *info, size_t ninfo);
void psrv_deregister_nspace_wait(struct psrv_state *p, const char *nspace);
size_t psrv_cpuset_info(pmix_info_t *pi, const char *cpus);

/* The job's map as LAUNCH's "nodes" and "ppn" give it, for every rank:
 * its node (index in "nodes") and its local rank there; per node its
 * host, size and "ppn" segment (the peers).  Parsed from copies. */
struct job_map {
	char *hosts_buf, *ppn_buf;
	char **host;		/* [nnodes] */
	char **peers;		/* [nnodes] "r,r,..." */
	uint32_t *nsize;	/* [nnodes] */
	uint32_t *node_of;	/* [job_size] */
	uint16_t *lrank_of;	/* [job_size] */
	size_t nnodes;
	uint32_t job_size;
};

/* 0, or -1 with err: every rank 0..job_size-1 placed once, as many ppn
 * segments as nodes, at most 65535 ranks a node; free m after either. */
int psrv_job_map_parse(struct job_map *m, const char *nodes,
		       const char *ppn, uint32_t job_size,
		       struct herd_err *err);
void psrv_job_map_free(struct job_map *m);

/* pmix/spawn.c, loop side: the rank or spawned process proc names, or
 * NULL; at a new attempt and at exit: pending spawns and connects fail,
 * spawned namespaces are deregistered. */
struct rank *psrv_rank_of(struct psrv_state *p, const pmix_proc_t *proc);
/* Namespaces by number, as herd names them: 0 the job's, N spawn N's
 * ("<job's>.sN"); -1 for one this agent does not know. */
int psrv_ns_index(struct psrv_state *p, const char *nspace);
void psrv_ns_name(struct psrv_state *p, int id, char *buf, size_t size);
void psrv_spawn_reset(struct psrv_state *p);
/* A fence (r: its data, r->arg its r->status procs) over processes of a
 * spawned namespace is gathered as a collective over those processes
 * (CONNECT "fence", pmix/spawn.c): true when taken (answered through
 * r->modex_cb then); false for a fence of the job's namespace alone. */
bool psrv_spawn_fence(struct psrv_state *p, struct req *r);
/* Direct modex of a spawned namespace's process (r->proc): DMODEX with
 * its namespace's number; herd's DMODEX_DATA with "ns" answers it. */
void psrv_spawn_dmodex(struct psrv_state *p, struct req *r);
void psrv_spawn_on_dmodex_data(struct agent *a, struct proto_frame *f);
/* pmix/pubsub.c, shared with pmix/event.c: a PMIx range's wire name
 * ("session" for UNDEF and RM) and back (unknown: SESSION); data packed
 * by PMIx into a new blob (*out, free()); a buffer over a copy of data to
 * unpack (PMIX_DATA_BUFFER_DESTRUCT it after).  Both return PMIX_SUCCESS
 * or the library's error. */
const char *psrv_range_name(pmix_data_range_t r);
pmix_data_range_t psrv_range_of(const char *name);
pmix_status_t psrv_pack_blob(void *src, int32_t n, pmix_data_type_t type,
			     char **out, size_t *len);
pmix_status_t psrv_unpack_start(pmix_data_buffer_t *buf, const void *data,
				size_t len);
/* Pending publish/lookup/unpublish: failed (PMIX_ERR_TIMEOUT: the attempt
 * is over) and dropped; free_all also frees their list (the agent's end,
 * then without calling back: the server is gone). */
void psrv_pubsub_clear(struct psrv_state *p, bool free_all);
/* pmix/api.c, loop side: the attempt's job for PMIx_Query_info (copied;
 * NULL nspace: none). */
void psrv_api_job_set(const char *nspace, uint32_t size,
		      const char *const *rank_host, const bool *local,
		      const char *exe);

/* pmix/guard.c: the uid of a process of another user connected to this
 * agent's PMIx server, or -1 (none; any thread); and its one line on
 * stderr. */
long psrv_guard_stranger(void);
void psrv_guard_say(long uid, const char *what);

/* pmix/fence_hold.c: a fence none of whose processes is this node's is
 * answered PMIX_ERR_BAD_PARAM before libpmix holds it forever.  init:
 * once, with the library's handle, before PMIx_server_init; active: the
 * refusal is in force (the library is the version built with and calls
 * the agent's handler).  Loop side, around every (de)registration:
 * add a namespace (before) with its nlocal local ranks, peers "r,r,..."
 * (NULL when none); remove it (after). */
void psrv_fence_hold_init(void *lib);
bool psrv_fence_hold_active(void);
void psrv_fence_hold_add(const char *nspace, int nlocal, const char *peers);
void psrv_fence_hold_remove(const char *nspace);

/* pmix/topo.c, loop side: this node's topology for PMIX_LOCAL_TOPO:
 * start getting it (once: from the cache, else discovered on a thread),
 * and its hwloc XML (waits for the discovery; NULL: none, the ranks
 * discover their own). */
void psrv_topo_start(struct agent *a);
const char *psrv_topo_xml(struct agent *a);
/* Whether this node has an RDMA device (any thread; read once). */
bool psrv_node_has_fabric(void);

#endif
