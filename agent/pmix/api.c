/* pmix/api.c — the rest of the PMIx server upcalls: queries, logging,
 * allocation, job control, monitoring, credentials, I/O forwarding,
 * groups, fabric.
 *
 * Refusals.  libpmix 4.2.2 answers the client of allocate, job_control,
 * monitor, get/validate_credential (and query) from the host's callback
 * by queueing the reply on the client's socket WITHOUT moving to its
 * progress thread (PMIX_SERVER_QUEUE_REPLY): called from the agent's
 * loop that races the progress thread (lost replies: the rank hangs;
 * a corrupt heap: the agent dies).  iof_pull frees its request
 * when the host says it will call back.  So these are refused by
 * returning PMIX_ERR_NOT_SUPPORTED at once: the library sends that reply
 * itself, on its thread, and nothing is left waiting.  job_control
 * (below) and query answer through the callback from the upcall itself,
 * on the library's thread.  group and fabric
 * are collective or move to the library's thread themselves: they keep
 * the refusal through the callback (a synchronous one would leave the
 * other members of a group waiting). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/pmix/pmix_int.h"

/* The most keys one PMIx_Query_info may ask. */
#define PSRV_QUERY_MAX 64

/* --- PMIx_Query_info ------------------------------------------------------
 *
 * Answered on the library's thread, at once (see the top), from a copy
 * of the attempt's job the loop leaves here at registration: the
 * library's thread never reads the agent's state.  Keys: the namespaces,
 * their info and size, the process table (every rank: host, executable,
 * state; pid 0, unknown: a remote rank's would need a
 * round trip through herd, and are not known here either: the agent's
 * child is the rank's keeper), psets (none), spawn and debug support (none).
 * Any other key: PMIX_ERR_NOT_SUPPORTED, or PMIX_QUERY_PARTIAL_SUCCESS
 * with what was answered. */
struct api_job {
	char nspace[PMIX_MAX_NSLEN + 1];
	uint32_t size;
	char **host;		/* [size], into hosts */
	char *hosts;
	bool *local;		/* [size] */
	char *exe;
};

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static struct api_job *api_job;	/* guarded by api_lock */

static void api_job_free(struct api_job *j)
{
	if (!j)
		return;
	free(j->host);
	free(j->hosts);
	free(j->local);
	free(j->exe);
	free(j);
}

void psrv_api_job_set(const char *nspace, uint32_t size,
		      const char *const *rank_host, const bool *local,
		      const char *exe)
{
	struct api_job *j = calloc(1, sizeof(*j)), *old;
	size_t len = 0, off = 0;

	if (j && nspace) {
		for (uint32_t r = 0; r < size; r++)
			len += strlen(rank_host[r]) + 1;
		j->host = calloc(size, sizeof(*j->host));
		j->hosts = malloc(len ? len : 1);
		j->local = calloc(size, sizeof(*j->local));
		j->exe = strdup(exe ? exe : "");
	}
	if (!j || !nspace || !j->host || !j->hosts || !j->local ||
	    !j->exe) {
		api_job_free(j);
		j = NULL;	/* queries answer NOT_SUPPORTED */
	} else {
		snprintf(j->nspace, sizeof(j->nspace), "%s", nspace);
		j->size = size;
		for (uint32_t r = 0; r < size; r++) {
			j->host[r] = j->hosts + off;
			off += (size_t)sprintf(j->hosts + off, "%s",
					       rank_host[r]) + 1;
			j->local[r] = local[r];
		}
	}
	pthread_mutex_lock(&api_lock);
	old = api_job;
	api_job = j;
	pthread_mutex_unlock(&api_lock);
	api_job_free(old);
}

/* The namespace a query names (PMIX_NSPACE qualifier): ours or none. */
static bool query_ours(const pmix_query_t *q, const struct api_job *j)
{
	for (size_t i = 0; i < q->nqual; i++)
		if (PMIX_CHECK_KEY(&q->qualifiers[i], PMIX_NSPACE) &&
		    q->qualifiers[i].value.type == PMIX_STRING &&
		    strcmp(q->qualifiers[i].value.data.string, j->nspace))
			return false;
	return true;
}

static void proc_table(pmix_info_t *out, const char *key,
		       const struct api_job *j, bool local_only)
{
	pmix_data_array_t *d;
	pmix_proc_info_t *pi;
	size_t n = 0;

	for (uint32_t r = 0; r < j->size; r++)
		n += !local_only || j->local[r];
	PMIX_DATA_ARRAY_CREATE(d, n, PMIX_PROC_INFO);
	PMIX_LOAD_KEY(out->key, key);
	out->value.type = PMIX_DATA_ARRAY;
	out->value.data.darray = d;
	if (!d || !n)
		return;
	pi = d->array;
	n = 0;
	for (uint32_t r = 0; r < j->size; r++) {
		if (local_only && !j->local[r])
			continue;
		PMIX_PROC_LOAD(&pi[n].proc, j->nspace, r);
		pi[n].hostname = strdup(j->host[r]);
		pi[n].executable_name = strdup(j->exe);
		pi[n].pid = 0;
		pi[n].exit_code = 0;
		pi[n].state = PMIX_PROC_STATE_RUNNING;
		n++;
	}
}

/* One answer for KEY into *out; false when herd has none. */
static bool query_key(const char *key, const pmix_query_t *q,
		      const struct api_job *j, pmix_info_t *out)
{
	bool ours = query_ours(q, j);

	if (!strcmp(key, PMIX_QUERY_NAMESPACES)) {
		PMIX_INFO_LOAD(out, key, j->nspace, PMIX_STRING);
	} else if (!strcmp(key, PMIX_QUERY_NAMESPACE_INFO)) {
		pmix_data_array_t *d, *e;
		pmix_info_t *ni;

		/* One element per namespace: an info of that key holding
		 * the namespace's own array. */
		PMIX_DATA_ARRAY_CREATE(d, 1, PMIX_INFO);
		PMIX_DATA_ARRAY_CREATE(e, 3, PMIX_INFO);
		if (!d || !e || !d->array || !e->array) {
			PMIX_DATA_ARRAY_FREE(d);
			PMIX_DATA_ARRAY_FREE(e);
			return false;
		}
		ni = e->array;
		PMIX_INFO_LOAD(&ni[0], PMIX_NSPACE, j->nspace, PMIX_STRING);
		PMIX_INFO_LOAD(&ni[1], PMIX_JOB_SIZE, &j->size, PMIX_UINT32);
		PMIX_INFO_LOAD(&ni[2], PMIX_CMD_LINE, j->exe, PMIX_STRING);
		ni = d->array;
		PMIX_LOAD_KEY(ni[0].key, PMIX_QUERY_NAMESPACE_INFO);
		ni[0].value.type = PMIX_DATA_ARRAY;
		ni[0].value.data.darray = e;
		PMIX_LOAD_KEY(out->key, key);
		out->value.type = PMIX_DATA_ARRAY;
		out->value.data.darray = d;
	} else if (!strcmp(key, PMIX_JOB_SIZE) && ours) {
		PMIX_INFO_LOAD(out, key, &j->size, PMIX_UINT32);
	} else if (!strcmp(key, PMIX_QUERY_NUM_PSETS)) {
		size_t zero = 0;

		PMIX_INFO_LOAD(out, key, &zero, PMIX_SIZE);
	} else if (!strcmp(key, PMIX_QUERY_PROC_TABLE) && ours) {
		proc_table(out, key, j, false);
	} else if (!strcmp(key, PMIX_QUERY_LOCAL_PROC_TABLE) && ours) {
		proc_table(out, key, j, true);
	} else if (!strcmp(key, PMIX_QUERY_SPAWN_SUPPORT) ||
		   !strcmp(key, PMIX_QUERY_DEBUG_SUPPORT)) {
		PMIX_INFO_LOAD(out, key, "", PMIX_STRING);	/* none */
	} else {
		return false;
	}
	return true;
}

/* The answers stay with the library until it calls query_done. */
static void query_done(void *cbdata)
{
	pmix_info_t *info = cbdata;
	size_t n = 0;

	while (info && info[n].key[0])
		n++;
	if (info)
		PMIX_INFO_FREE(info, n + 1);
}

pmix_status_t psrv_up_query(pmix_proc_t *proct, pmix_query_t *queries,
			    size_t nqueries, pmix_info_cbfunc_t cbfunc,
			    void *cbdata)
{
	size_t nkeys = 0, n = 0, asked = 0;
	pmix_info_t *info;
	pmix_status_t st;

	(void)proct;
	for (size_t q = 0; q < nqueries && q < PSRV_QUERY_MAX; q++)
		for (char **k = queries[q].keys; k && *k; k++)
			nkeys++;
	if (!cbfunc || nkeys == 0 || nkeys > PSRV_QUERY_MAX)
		return PMIX_ERR_NOT_SUPPORTED;
	/* One more, empty: the end for query_done. */
	PMIX_INFO_CREATE(info, nkeys + 1);
	if (!info)
		return PMIX_ERR_NOMEM;
	pthread_mutex_lock(&api_lock);
	for (size_t q = 0; api_job && q < nqueries; q++)
		for (char **k = queries[q].keys; k && *k; k++, asked++)
			if (query_key(*k, &queries[q], api_job, &info[n]))
				n++;
	pthread_mutex_unlock(&api_lock);
	if (n == 0) {
		PMIX_INFO_FREE(info, nkeys + 1);
		return PMIX_ERR_NOT_SUPPORTED;
	}
	st = n < nkeys ? PMIX_QUERY_PARTIAL_SUCCESS : PMIX_SUCCESS;
	(void)asked;
	/* On the library's thread: its callback may reply from here. */
	cbfunc(st, info, n, cbdata, query_done, info);
	return PMIX_SUCCESS;
}

/* --- PMIx_Log -------------------------------------------------------------
 *
 * What a rank logs goes to herd's event log ("pmix_log" events): the
 * progress thread copies the entries as text (strings as they are,
 * numbers and flags printed; other types are skipped), at most
 * PROTO_PMIX_LOG_ENTRIES_MAX of PROTO_PMIX_LOG_VALUE_MAX bytes each; the
 * loop sends them in one PMIX_LOG frame and completes the call.  The
 * callback goes from the loop, never from here: the library's log path
 * holds a lock around this upcall that its callback takes again. */
static void run_log(struct psrv_state *p, struct req *r)
{
	struct agent *a = p->a;
	json_t *entries = r->arg;

	agent_send(a, PROTO_PMIX_LOG,
		   json_pack("{s:i, s:i, s:O}", "attempt", a->attempt, "rank",
			     (int)r->proc.rank, "entries", entries),
		   NULL, 0);
	r->op_cb(PMIX_SUCCESS, r->cbdata);
}

static void free_json(void *arg)
{
	json_decref(arg);
}

/* VALUE as text into buf; false for a type not logged. */
static bool log_text(const pmix_value_t *v, char *buf, size_t len)
{
	switch (v->type) {
	case PMIX_STRING:
		snprintf(buf, len, "%s", v->data.string ? v->data.string : "");
		return true;
	case PMIX_INT:
		snprintf(buf, len, "%d", v->data.integer);
		return true;
	case PMIX_UINT32:
		snprintf(buf, len, "%u", v->data.uint32);
		return true;
	case PMIX_INT64:
		snprintf(buf, len, "%lld", (long long)v->data.int64);
		return true;
	case PMIX_UINT64:
		snprintf(buf, len, "%llu", (unsigned long long)v->data.uint64);
		return true;
	case PMIX_BOOL:
		snprintf(buf, len, "%s", v->data.flag ? "true" : "false");
		return true;
	default:
		return false;
	}
}

void psrv_up_log(const pmix_proc_t *client, const pmix_info_t data[],
		 size_t ndata, const pmix_info_t directives[], size_t ndirs,
		 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	char text[PROTO_PMIX_LOG_VALUE_MAX + 1];
	json_t *entries = json_array();
	struct req *r;

	(void)directives;
	(void)ndirs;
	for (size_t i = 0; entries && i < ndata &&
			   json_array_size(entries) < PROTO_PMIX_LOG_ENTRIES_MAX;
	     i++)
		if (data[i].key[0] && log_text(&data[i].value, text,
					       sizeof(text)))
			json_array_append_new(
				entries, json_pack("{s:s, s:s}", "key",
						   data[i].key, "value", text));
	if (!entries || json_array_size(entries) == 0 || !cbfunc) {
		json_decref(entries);
		if (psrv_refuse(cbfunc, cbdata) != PMIX_SUCCESS && cbfunc)
			cbfunc(PMIX_ERR_NOMEM, cbdata);
		return;
	}
	if (!(r = psrv_req_new(run_log, client))) {
		json_decref(entries);
		cbfunc(PMIX_ERR_NOMEM, cbdata);
		return;
	}
	r->arg = entries;
	r->free_arg = free_json;
	r->op_cb = cbfunc;
	r->cbdata = cbdata;
	psrv_enqueue(r);
}

pmix_status_t psrv_up_allocate(const pmix_proc_t *client,
			       pmix_alloc_directive_t directive,
			       const pmix_info_t data[], size_t ndata,
			       pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)client;
	(void)directive;
	(void)data;
	(void)ndata;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;	/* see the top */
}

/* --- PMIx_Job_control --------------------------------------------------------
 *
 * What a launcher can do to the job's processes: PMIX_JOB_CTRL_SIGNAL (a
 * signal), _KILL (SIGKILL), _TERMINATE (SIGTERM), each to this node's
 * ranks only (a target on another node: PMIX_ERR_NOT_SUPPORTED, nothing
 * done), and _CHECKPOINT (its ID) delivered to the targets, wherever they
 * run, as the event PMIX_JCTRL_CHECKPOINT (through herd as any event).
 * Targets: ranks of the job's namespace (none: all of them); another
 * namespace's (a spawned one's included) PMIX_ERR_BAD_PARAM.  Declarations
 * (_PREEMPTIBLE, _CHECKPOINT_METHOD / _EVENT / _SIGNAL, _ID) are taken
 * and change nothing; any other PMIX_JOB_CTRL_ request (pause, resume,
 * cancel, restart, provision) PMIX_ERR_NOT_SUPPORTED.  Checked and
 * answered on the library's thread from api_job (see the top); the
 * signal or event follows on the loop. */
enum jctrl_op { JCTRL_NONE, JCTRL_SIGNAL, JCTRL_CHECKPOINT };

struct jctrl {
	enum jctrl_op op;
	int sig;
	char ckpt_id[256];
	bool all; /* every rank of the job */
	json_t *remote; /* a signal's targets on other nodes, or NULL */
	size_t n;
	pmix_rank_t ranks[]; /* else these */
};

static void jctrl_free(void *arg)
{
	struct jctrl *j = arg;

	json_decref(j->remote);
	free(j);
}

static bool jctrl_declared(const char *key)
{
	return !strcmp(key, PMIX_JOB_CTRL_PREEMPTIBLE) ||
	       !strcmp(key, PMIX_JOB_CTRL_CHECKPOINT_METHOD) ||
	       !strcmp(key, PMIX_JOB_CTRL_CHECKPOINT_EVENT) ||
	       !strcmp(key, PMIX_JOB_CTRL_CHECKPOINT_SIGNAL) ||
	       !strcmp(key, PMIX_JOB_CTRL_ID);
}

/* The request in directives: op, signal, checkpoint ID; or an error. */
static pmix_status_t jctrl_parse(const pmix_info_t *d, size_t nd,
				 struct jctrl *j)
{
	for (size_t i = 0; i < nd; i++) {
		const char *key = d[i].key;
		enum jctrl_op op = JCTRL_NONE;
		int sig = 0;

		if (strncmp(key, "pmix.jctrl.", 11) || jctrl_declared(key))
			continue;
		if (!strcmp(key, PMIX_JOB_CTRL_SIGNAL)) {
			if (d[i].value.type != PMIX_INT ||
			    d[i].value.data.integer < 1 ||
			    d[i].value.data.integer >= 65)
				return PMIX_ERR_BAD_PARAM;
			op = JCTRL_SIGNAL;
			sig = d[i].value.data.integer;
		} else if (!strcmp(key, PMIX_JOB_CTRL_KILL) ||
			   !strcmp(key, PMIX_JOB_CTRL_TERMINATE)) {
			if (!PMIX_INFO_TRUE(&d[i]))
				continue;
			op = JCTRL_SIGNAL;
			sig = !strcmp(key, PMIX_JOB_CTRL_KILL) ? SIGKILL
							       : SIGTERM;
		} else if (!strcmp(key, PMIX_JOB_CTRL_CHECKPOINT)) {
			op = JCTRL_CHECKPOINT;
			if (d[i].value.type == PMIX_STRING &&
			    d[i].value.data.string)
				snprintf(j->ckpt_id, sizeof(j->ckpt_id), "%s",
					 d[i].value.data.string);
		} else {
			return PMIX_ERR_NOT_SUPPORTED;
		}
		if (j->op != JCTRL_NONE)
			return PMIX_ERR_BAD_PARAM; /* one request a call */
		j->op = op;
		j->sig = sig;
	}
	return PMIX_SUCCESS;
}

/* The targets, checked against the job (api_lock held): the job's ranks.
 * A signal's targets on other nodes go to j->remote, for herd to pass on
 * to their agents. */
static pmix_status_t jctrl_targets(const pmix_proc_t *req, const pmix_proc_t *t,
				   size_t nt, struct jctrl *j)
{
	const struct api_job *job = api_job;

	if (!job)
		return PMIX_ERR_NOT_SUPPORTED;
	if (nt == 0) {
		if (!req || !PMIX_CHECK_NSPACE(req->nspace, job->nspace))
			return PMIX_ERR_BAD_PARAM;
		j->all = true;
	}
	for (size_t i = 0; i < nt; i++) {
		if (!PMIX_CHECK_NSPACE(t[i].nspace, job->nspace) ||
		    (t[i].rank >= job->size && t[i].rank != PMIX_RANK_WILDCARD))
			return PMIX_ERR_BAD_PARAM;
		if (t[i].rank == PMIX_RANK_WILDCARD)
			j->all = true;
		else
			j->ranks[j->n++] = t[i].rank;
	}
	if (j->op != JCTRL_SIGNAL)
		return PMIX_SUCCESS;
	for (uint32_t r = 0; r < job->size; r++) {
		bool want = j->all;

		for (size_t i = 0; !want && i < j->n; i++)
			want = j->ranks[i] == r;
		if (!want || job->local[r])
			continue;
		if (!j->remote && !(j->remote = json_array()))
			return PMIX_ERR_NOMEM;
		if (json_array_size(j->remote) >= PROTO_JCTRL_RANKS_MAX) {
			fprintf(stderr,
				"herd-agent: PMIx_Job_control: more than %d "
				"ranks of other nodes in one signal\n",
				PROTO_JCTRL_RANKS_MAX);
			return PMIX_ERR_BAD_PARAM;
		}
		if (json_array_append_new(j->remote, json_integer(r)) < 0)
			return PMIX_ERR_NOMEM;
	}
	return PMIX_SUCCESS;
}

/* The processes of group pgid but its leader, with their parents: at
 * most max into pid/ppid; how many. */
static size_t group_members(pid_t pgid, pid_t *pid, pid_t *ppid, size_t max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	while (d && n < max && (e = readdir(d))) {
		char path[64], buf[512], *rp;
		long p = strtol(e->d_name, &rp, 10), pp = 0, pg = 0;
		ssize_t len;
		int fd;

		if (*rp || p <= 0 || p == (long)pgid)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", p);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = '\0';
		/* "pid (comm) state ppid pgrp ...": comm may hold anything,
		 * the last ')' ends it. */
		if (!(rp = strrchr(buf, ')')) ||
		    sscanf(rp + 1, " %*c %ld %ld", &pp, &pg) != 2 ||
		    pg != (long)pgid)
			continue;
		pid[n] = (pid_t)p;
		ppid[n++] = (pid_t)pp;
	}
	if (d)
		closedir(d);
	return n;
}

/* SIGKILL to the rank's group.  Any other signal to the rank's command
 * and what it started: the group but its leader, the rank's keeper
 * (which takes SIGUSR1 for the agent's death and keeps the stop signals
 * blocked), and but the `sh -c` herd runs the command with, the keeper's
 * child, unless that is the command itself (the shell exec'd it). */
static void jctrl_signal(const struct rank *rk, int sig)
{
	pid_t pid[256], ppid[256];
	size_t n, sent = 0;

	if (sig == SIGKILL) {
		kill(-rk->pid, sig);
		return;
	}
	n = group_members(rk->pid, pid, ppid, 256);
	for (size_t i = 0; i < n; i++)
		if (n == 1 || ppid[i] != rk->pid)
			sent += kill(pid[i], sig) == 0;
	if (!sent)
		fprintf(stderr,
			"herd-agent: PMIx_Job_control: rank %d has no process "
			"(yet); signal %d not sent\n",
			rk->rank, sig);
}

/* A job-control signal another node's rank asked for (SIGNAL with
 * ranks, from herd): to those of this node's job ranks, as on the
 * asker's node. */
void psrv_jctrl_signal_ranks(struct agent *a, const json_t *ranks, int sig)
{
	size_t k;
	json_t *v;

	json_array_foreach(ranks, k, v)
	{
		json_int_t want = json_integer_value(v);

		for (int i = 0; i < a->n_ranks; i++) {
			struct rank *rk = &a->ranks[i];

			if (!rk->spawn && rk->rank == want && rk->running)
				jctrl_signal(rk, sig);
		}
	}
}

static void run_jctrl(struct psrv_state *p, struct req *r)
{
	struct jctrl *j = r->arg;
	struct agent *a = p->a;
	pmix_info_t *info;
	pmix_data_array_t *d;
	pmix_proc_t *procs;
	size_t n = j->all ? 1 : j->n;
	json_t *ranks;

	if (!p->nspace_registered)
		return;
	if (j->op == JCTRL_SIGNAL) {
		for (int i = 0; i < a->n_ranks; i++) {
			struct rank *rk = &a->ranks[i];
			bool want = j->all && !rk->spawn;

			for (size_t k = 0; !want && !rk->spawn && k < j->n; k++)
				want = j->ranks[k] == (pmix_rank_t)rk->rank;
			if (want && rk->running)
				jctrl_signal(rk, j->sig);
		}
		if (j->remote)
			agent_send(a, PROTO_SIGNAL,
				   json_pack("{s:i, s:i, s:O}", "attempt",
					     a->attempt, "signal", j->sig,
					     "ranks", j->remote),
				   NULL, 0);
		return;
	}
	/* The checkpoint: an event to the targets (a custom range), here
	 * and through herd on their nodes. */
	PMIX_INFO_CREATE(info, 2);
	if (!info)
		return;
	PMIX_DATA_ARRAY_CREATE(d, n, PMIX_PROC);
	if (!d) {
		PMIX_INFO_FREE(info, 2);
		return;
	}
	procs = d->array;
	for (size_t i = 0; i < n; i++)
		PMIX_LOAD_PROCID(&procs[i], p->nspace,
				 j->all ? PMIX_RANK_WILDCARD : j->ranks[i]);
	PMIX_LOAD_KEY(info[0].key, PMIX_EVENT_CUSTOM_RANGE);
	info[0].value.type = PMIX_DATA_ARRAY;
	info[0].value.data.darray = d;
	PMIX_INFO_LOAD(&info[1], PMIX_JOB_CTRL_CHECKPOINT, j->ckpt_id,
		       PMIX_STRING);
	ranks = json_array();
	for (size_t i = 0; ranks && !j->all && i < j->n; i++)
		json_array_append_new(ranks, json_integer(j->ranks[i]));
	if (ranks)
		psrv_event_raise(p, PMIX_JCTRL_CHECKPOINT, r->proc.rank, ranks,
				 info, 2);
	else
		PMIX_INFO_FREE(info, 2);
	json_decref(ranks);
}

pmix_status_t psrv_up_job_control(const pmix_proc_t *requestor,
				  const pmix_proc_t targets[], size_t ntargets,
				  const pmix_info_t directives[], size_t ndirs,
				  pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	long stranger = psrv_guard_stranger();
	struct jctrl *j;
	struct req *r;
	pmix_status_t st;

	if (stranger >= 0) {
		psrv_guard_say(stranger, "a PMIx job control");
		return PMIX_ERR_NO_PERMISSIONS;
	}
	if (!cbfunc || !requestor || ntargets > PSRV_JOB_RANKS_MAX ||
	    (ntargets && !targets))
		return PMIX_ERR_BAD_PARAM;
	if (!(j = calloc(1, sizeof(*j) + ntargets * sizeof(j->ranks[0]))))
		return PMIX_ERR_NOMEM;
	st = jctrl_parse(directives, ndirs, j);
	if (st == PMIX_SUCCESS && j->op != JCTRL_NONE) {
		pthread_mutex_lock(&api_lock);
		st = jctrl_targets(requestor, targets, ntargets, j);
		pthread_mutex_unlock(&api_lock);
	}
	if (st != PMIX_SUCCESS || j->op == JCTRL_NONE) {
		jctrl_free(j);
		if (st != PMIX_SUCCESS)
			return st; /* at once: see the top */
		cbfunc(PMIX_SUCCESS, NULL, 0, cbdata, NULL, NULL);
		return PMIX_SUCCESS;
	}
	if (!(r = psrv_req_new(run_jctrl, requestor))) {
		jctrl_free(j);
		return PMIX_ERR_NOMEM;
	}
	r->arg = j;
	r->free_arg = jctrl_free;
	/* Answered before the signal: a rank that kills itself hears
	 * SUCCESS first. */
	cbfunc(PMIX_SUCCESS, NULL, 0, cbdata, NULL, NULL);
	psrv_enqueue(r);
	return PMIX_SUCCESS;
}

pmix_status_t psrv_up_monitor(const pmix_proc_t *requestor,
			      const pmix_info_t *monitor, pmix_status_t error,
			      const pmix_info_t directives[], size_t ndirs,
			      pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)requestor;
	(void)monitor;
	(void)error;
	(void)directives;
	(void)ndirs;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;	/* see the top */
}

pmix_status_t psrv_up_get_credential(const pmix_proc_t *proc,
				     const pmix_info_t directives[],
				     size_t ndirs,
				     pmix_credential_cbfunc_t cbfunc,
				     void *cbdata)
{
	(void)proc;
	(void)directives;
	(void)ndirs;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;	/* see the top */
}

pmix_status_t psrv_up_validate_credential(const pmix_proc_t *proc,
					  const pmix_byte_object_t *cred,
					  const pmix_info_t directives[],
					  size_t ndirs,
					  pmix_validation_cbfunc_t cbfunc,
					  void *cbdata)
{
	(void)proc;
	(void)cred;
	(void)directives;
	(void)ndirs;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;	/* see the top */
}

pmix_status_t psrv_up_iof_pull(const pmix_proc_t procs[], size_t nprocs,
			       const pmix_info_t directives[], size_t ndirs,
			       pmix_iof_channel_t channels,
			       pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)procs;
	(void)nprocs;
	(void)directives;
	(void)ndirs;
	(void)channels;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;	/* see the top */
}

pmix_status_t psrv_up_push_stdin(const pmix_proc_t *source,
				 const pmix_proc_t targets[], size_t ntargets,
				 const pmix_info_t directives[], size_t ndirs,
				 const pmix_byte_object_t *bo,
				 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)source;
	(void)targets;
	(void)ntargets;
	(void)directives;
	(void)ndirs;
	(void)bo;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;	/* see the top */
}

pmix_status_t psrv_up_group(pmix_group_operation_t op, char grp[],
			    const pmix_proc_t procs[], size_t nprocs,
			    const pmix_info_t directives[], size_t ndirs,
			    pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)op;
	(void)grp;
	(void)procs;
	(void)nprocs;
	(void)directives;
	(void)ndirs;
	return psrv_refuse_info(cbfunc, cbdata);
}

pmix_status_t psrv_up_fabric(const pmix_proc_t *requestor,
			     pmix_fabric_operation_t op,
			     const pmix_info_t directives[], size_t ndirs,
			     pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)requestor;
	(void)op;
	(void)directives;
	(void)ndirs;
	return psrv_refuse_info(cbfunc, cbdata);
}
