/* pmix/fence_hold.c — the fences libpmix would hold forever, refused.
 *
 * libpmix's server gathers a fence's contributions on its node itself
 * and calls the host's fence_nb only once every listed process of this
 * node has joined (new_tracker and pmix_server_fence, 4.2's
 * src/server/pmix_server_ops.c): it counts the listed processes it knows
 * to be local and waits until that many have called.  A fence none of
 * whose processes is on this node ({nspace, 9999}, {"no-such-ns", 0}, or
 * ranks of other nodes only: the caller not among them) counts none while
 * its caller has joined: it never reaches the host, no timer runs unless
 * the caller passed PMIX_TIMEOUT, and the caller waits forever.
 *
 * Such a fence is refused before the library takes it.  The library
 * hands a client's fence message to its own pmix_server_fence through
 * its PLT, so the definition below, exported from the agent's executable
 * (the Makefile's --export-dynamic-symbol), is the one it calls: it reads
 * the message's procs from a view of the buffer (the message itself is
 * not consumed) and answers PMIX_ERR_BAD_PARAM, which the library sends
 * the caller at once, when none of them is this node's; any other fence
 * goes on to the library's function.  The buffer's layout is the
 * installed library's (its internal header, from the same package).
 * Nothing is refused when the library is not the version the agent was
 * built with, when the export is missing, or when a message does not
 * read exactly as a fence (every byte of it: procs, then info).
 *
 * Which processes are this node's: a table of the namespaces the agent
 * registers, each with its local ranks (the PMIX_LOCAL_PEERS it gives the
 * library), written by the loop before each registration and dropped
 * after each deregistration, read on the progress thread under a lock.
 * While it changes, a fence goes on to the library: one is never refused
 * that the library would complete.  Rank numbers match as the library
 * matches them: a rank among the local ones, or PMIX_RANK_WILDCARD of a
 * namespace with any local process.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/pmix/pmix_int.h"

/* libpmix's own message buffer (installed with its development files). */
#include "src/mca/bfrops/bfrops_types.h"

/* At most this many namespaces are known (the job's and its spawns). */
#define HOLD_NS_MAX 512
/* A fence message that names more is passed on unread. */
#define HOLD_PROCS_MAX (1u << 20)
#define HOLD_INFO_MAX  1024

typedef pmix_status_t (*server_fence_fn)(void *cd, pmix_buffer_t *buf,
					 pmix_modex_cbfunc_t modexcbfunc,
					 pmix_op_cbfunc_t opcbfunc);

struct hold_ns {
	char name[PMIX_MAX_NSLEN + 1];
	bool any_local;	    /* ranks unknown: every proc counts as local */
	pmix_rank_t *ranks; /* sorted */
	size_t n;
};

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hold_ns hold_ns[HOLD_NS_MAX];
static size_t hold_n;
static bool hold_full; /* a namespace did not fit: refuse none */
/* Set once on the loop before PMIx_server_init starts the progress
 * thread, read there after. */
static server_fence_fn hold_real;
static bool hold_on;

/* The library's name for the fence message's handler: defined here, so
 * the library calls this first.  cd is its caller caddy, passed on. */
pmix_status_t pmix_server_fence(void *cd, pmix_buffer_t *buf,
				pmix_modex_cbfunc_t modexcbfunc,
				pmix_op_cbfunc_t opcbfunc);

static int rank_cmp(const void *a, const void *b)
{
	pmix_rank_t x = *(const pmix_rank_t *)a, y = *(const pmix_rank_t *)b;

	return x < y ? -1 : x > y;
}

/* "OpenPMIx 4.2.2..." the same major.minor.release as pmix_version.h. */
static bool version_matches(void *lib)
{
	const char *(*get)(void);
	unsigned maj, min, rel;
	const char *v;

	*(void **)&get = dlsym(lib, "PMIx_Get_version");
	if (!get || !(v = get()))
		return false;
	v = strpbrk(v, "0123456789");
	return v && sscanf(v, "%u.%u.%u", &maj, &min, &rel) == 3 &&
	       maj == PMIX_VERSION_MAJOR && min == PMIX_VERSION_MINOR &&
	       rel == PMIX_VERSION_RELEASE;
}

void psrv_fence_hold_init(void *lib)
{
	server_fence_fn mine = pmix_server_fence, found;

	*(void **)&hold_real = dlsym(lib, "pmix_server_fence");
	*(void **)&found = dlsym(RTLD_DEFAULT, "pmix_server_fence");
	/* The library's own function, and ours the one calls reach. */
	hold_on = hold_real && hold_real != mine && found == mine &&
		  version_matches(lib);
}

bool psrv_fence_hold_active(void)
{
	return hold_on;
}

/* Loop side.  peers: "r,r,..." (the local ranks), or NULL with nlocal
 * 0.  A list that does not give nlocal ranks counts every proc of the
 * namespace as local. */
void psrv_fence_hold_add(const char *nspace, int nlocal, const char *peers)
{
	struct hold_ns e = {0};
	const char *s = peers;
	char *end;

	snprintf(e.name, sizeof(e.name), "%s", nspace);
	if (nlocal > 0) {
		e.ranks = calloc((size_t)nlocal, sizeof(*e.ranks));
		while (e.ranks && s && *s && e.n < (size_t)nlocal) {
			unsigned long r = strtoul(s, &end, 10);

			if (end == s || r >= PMIX_RANK_VALID)
				break;
			e.ranks[e.n++] = (pmix_rank_t)r;
			s = *end == ',' ? end + 1 : end;
		}
		if (!e.ranks || e.n != (size_t)nlocal || (s && *s))
			e.any_local = true;
		else
			qsort(e.ranks, e.n, sizeof(*e.ranks), rank_cmp);
	}
	pthread_mutex_lock(&hold_lock);
	for (size_t i = 0; i < hold_n; i++)
		if (!strcmp(hold_ns[i].name, e.name)) {
			free(hold_ns[i].ranks);
			hold_ns[i] = hold_ns[--hold_n];
			break;
		}
	if (hold_n < HOLD_NS_MAX)
		hold_ns[hold_n++] = e;
	else {
		free(e.ranks);
		hold_full = true;
	}
	pthread_mutex_unlock(&hold_lock);
}

void psrv_fence_hold_remove(const char *nspace)
{
	pthread_mutex_lock(&hold_lock);
	for (size_t i = 0; i < hold_n; i++)
		if (!strncmp(hold_ns[i].name, nspace, PMIX_MAX_NSLEN)) {
			free(hold_ns[i].ranks);
			hold_ns[i] = hold_ns[--hold_n];
			break;
		}
	pthread_mutex_unlock(&hold_lock);
}

/* Whether any of procs is this node's; caller holds hold_lock. */
static bool any_local(const pmix_proc_t *procs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < hold_n; j++) {
			const struct hold_ns *e = &hold_ns[j];

			if (strncmp(e->name, procs[i].nspace, PMIX_MAX_NSLEN))
				continue;
			if (e->any_local ||
			    (e->n && (procs[i].rank == PMIX_RANK_WILDCARD ||
				      bsearch(&procs[i].rank, e->ranks, e->n,
					      sizeof(*e->ranks), rank_cmp))))
				return true;
		}
	return false;
}

/* The fence message's procs (*procs, free()), read from a view of buf
 * that must end exactly after its info; 0, or -1: it does not read. */
static int fence_read(const pmix_buffer_t *buf, pmix_proc_t **procs,
		      size_t *nprocs)
{
	pmix_data_buffer_t v = {
	    .base_ptr = buf->base_ptr,
	    .pack_ptr = buf->pack_ptr,
	    .unpack_ptr = buf->unpack_ptr,
	    .bytes_allocated = buf->bytes_allocated,
	    .bytes_used = buf->bytes_used,
	};
	pmix_info_t *info = NULL;
	size_t n = 0, ninfo = 0;
	int32_t cnt = 1;
	int ret = -1;

	*procs = NULL;
	if (buf->type != PMIX_BFROP_BUFFER_NON_DESC || !v.unpack_ptr ||
	    v.pack_ptr < v.unpack_ptr)
		return -1;
	if (PMIx_Data_unpack(NULL, &v, &n, &cnt, PMIX_SIZE) != PMIX_SUCCESS ||
	    cnt != 1 || n < 1 || n > HOLD_PROCS_MAX ||
	    n > (size_t)(v.pack_ptr - v.unpack_ptr))
		return -1;
	if (!(*procs = calloc(n, sizeof(**procs))))
		return -1;
	cnt = (int32_t)n;
	if (PMIx_Data_unpack(NULL, &v, *procs, &cnt, PMIX_PROC) !=
		PMIX_SUCCESS ||
	    cnt != (int32_t)n)
		goto out;
	cnt = 1;
	if (PMIx_Data_unpack(NULL, &v, &ninfo, &cnt, PMIX_SIZE) !=
		PMIX_SUCCESS ||
	    cnt != 1 || ninfo > HOLD_INFO_MAX)
		goto out;
	if (ninfo) {
		PMIX_INFO_CREATE(info, ninfo);
		cnt = (int32_t)ninfo;
		if (!info ||
		    PMIx_Data_unpack(NULL, &v, info, &cnt, PMIX_INFO) !=
			PMIX_SUCCESS ||
		    cnt != (int32_t)ninfo)
			goto out;
	}
	if (v.unpack_ptr == v.pack_ptr) {
		*nprocs = n;
		ret = 0;
	}
out:
	if (info)
		PMIX_INFO_FREE(info, ninfo);
	if (ret < 0) {
		free(*procs);
		*procs = NULL;
	}
	return ret;
}

pmix_status_t pmix_server_fence(void *cd, pmix_buffer_t *buf,
				pmix_modex_cbfunc_t modexcbfunc,
				pmix_op_cbfunc_t opcbfunc)
{
	pmix_proc_t *procs = NULL;
	size_t n = 0;
	bool refuse = false;

	if (!hold_real)
		return PMIX_ERR_NOT_SUPPORTED;
	if (hold_on && fence_read(buf, &procs, &n) == 0) {
		pthread_mutex_lock(&hold_lock);
		refuse = !hold_full && !any_local(procs, n);
		pthread_mutex_unlock(&hold_lock);
	}
	free(procs);
	if (refuse)
		return PMIX_ERR_BAD_PARAM;
	return hold_real(cd, buf, modexcbfunc, opcbfunc);
}
