/* apicall.c — issue 16, "every server upcall answers": every rank calls
 * each PMIx client API once and prints, per call,
 *
 *   rank R CALL: STATUS
 *
 * STATUS being PMIx_Error_string's (SUCCESS, NOT-SUPPORTED, ...): herd
 * may serve a call or refuse it; it must answer.  Each call runs under a
 * watchdog (CALL_BOUND_S): one that does not return prints
 * "rank R CALL: HANG" and the rank exits 3.  Collectives (fences,
 * connect, group) are called by every rank in the same order; the subset
 * fence is two: ranks of the lower half over the lower half, the others
 * over theirs.  Keys and event codes are the test's own. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>
#include <time.h>
#include <pmix_tool.h>	/* PMIx_IOF_*: client calls too */

#define CALL_BOUND_S 90
#define API_EVENT (PMIX_EXTERNAL_ERR_BASE - 16)	/* the test's code */

static pmix_proc_t me;
static const char *volatile current = "Init";

static void on_alarm(int sig)
{
	char buf[160];
	int n;

	(void)sig;
	n = snprintf(buf, sizeof(buf), "rank %u %s: HANG\n", me.rank, current);
	if (n > 0 && write(1, buf, (size_t)n) < 0)
		_exit(4);
	_exit(3);
}

static struct timespec t0;

static void begin(const char *call)
{
	current = call;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	alarm(CALL_BOUND_S);
}

/* The status on stdout (the test reads it), how long on stderr. */
static void end(pmix_status_t rc)
{
	struct timespec t1;

	alarm(0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("rank %u %s: %s\n", me.rank, current, PMIx_Error_string(rc));
	fflush(stdout);
	fprintf(stderr, "rank %u %s: %ld ms\n", me.rank, current,
		(long)((t1.tv_sec - t0.tv_sec) * 1000 +
		       (t1.tv_nsec - t0.tv_nsec) / 1000000));
}

/* A status through a callback, waited for with the watchdog on. */
struct done {
	volatile int done;
	pmix_status_t status;
	size_t id;
};

static void op_cb(pmix_status_t status, void *cbdata)
{
	struct done *d = cbdata;

	d->status = status;
	d->done = 1;
}

static void evreg_cb(pmix_status_t status, size_t ref, void *cbdata)
{
	struct done *d = cbdata;

	d->status = status;
	d->id = ref;
	d->done = 1;
}

static pmix_status_t wait_done(struct done *d, pmix_status_t rc)
{
	if (rc != PMIX_SUCCESS)
		return rc;
	while (!d->done)
		usleep(1000);	/* the watchdog bounds it */
	return d->status;
}

static void on_event(size_t id, pmix_status_t status,
		     const pmix_proc_t *source, pmix_info_t info[],
		     size_t ninfo, pmix_info_t results[], size_t nresults,
		     pmix_event_notification_cbfunc_fn_t cbfunc, void *cbdata)
{
	(void)id;
	(void)status;
	(void)source;
	(void)info;
	(void)ninfo;
	(void)results;
	(void)nresults;
	if (cbfunc)
		cbfunc(PMIX_EVENT_ACTION_COMPLETE, NULL, 0, NULL, NULL,
		       cbdata);
}

static void iof_sink(size_t id, pmix_iof_channel_t channel,
		     pmix_proc_t *source, pmix_byte_object_t *payload,
		     pmix_info_t info[], size_t ninfo)
{
	(void)id;
	(void)channel;
	(void)source;
	(void)payload;
	(void)info;
	(void)ninfo;
}

static void info_free(pmix_info_t *info, size_t n)
{
	if (info)
		PMIX_INFO_FREE(info, n);
}

int main(void)
{
	pmix_proc_t all, half[8], self;
	pmix_info_t tmo[1], *res = NULL;
	pmix_value_t *val = NULL;
	pmix_status_t rc;
	char key[64], value[64];
	uint32_t size = 8;
	size_t nres = 0;
	int t = 20;

	signal(SIGALRM, on_alarm);
	alarm(CALL_BOUND_S);
	rc = PMIx_Init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS) {
		alarm(0);
		printf("rank ? Init: %s\n", PMIx_Error_string(rc));
		return 1;
	}
	end(rc);
	PMIX_PROC_LOAD(&all, me.nspace, PMIX_RANK_WILDCARD);
	PMIX_PROC_LOAD(&self, me.nspace, me.rank);
	PMIX_INFO_LOAD(&tmo[0], PMIX_TIMEOUT, &t, PMIX_INT);

	begin("Get-job-size");
	rc = PMIx_Get(&all, PMIX_JOB_SIZE, NULL, 0, &val);
	if (rc == PMIX_SUCCESS && val && val->type == PMIX_UINT32)
		size = val->data.uint32;
	if (val)
		PMIX_VALUE_RELEASE(val);
	val = NULL;
	end(rc);

	begin("Put");
	snprintf(key, sizeof(key), "apicall.%u", me.rank);
	snprintf(value, sizeof(value), "value of %u", me.rank);
	{
		pmix_value_t v;

		PMIX_VALUE_LOAD(&v, value, PMIX_STRING);
		rc = PMIx_Put(PMIX_GLOBAL, key, &v);
		PMIX_VALUE_DESTRUCT(&v);
	}
	end(rc);
	begin("Commit");
	end(PMIx_Commit());

	begin("Fence");
	{
		bool yes = true;
		pmix_info_t coll;

		PMIX_INFO_LOAD(&coll, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
		rc = PMIx_Fence(&all, 1, &coll, 1);
		PMIX_INFO_DESTRUCT(&coll);
	}
	end(rc);

	begin("Get-own");
	rc = PMIx_Get(&self, key, tmo, 1, &val);
	if (val)
		PMIX_VALUE_RELEASE(val);
	val = NULL;
	end(rc);

	begin("Get-remote");
	{
		pmix_proc_t peer;
		char pkey[64];

		PMIX_PROC_LOAD(&peer, me.nspace, (me.rank + 1) % size);
		snprintf(pkey, sizeof(pkey), "apicall.%u", peer.rank);
		rc = PMIx_Get(&peer, pkey, tmo, 1, &val);
		if (val)
			PMIX_VALUE_RELEASE(val);
		val = NULL;
	}
	end(rc);

	begin("Fence-subset");
	{
		uint32_t lo = me.rank < size / 2 ? 0 : size / 2;
		uint32_t n = me.rank < size / 2 ? size / 2 : size - size / 2;

		for (uint32_t i = 0; i < n && i < 8; i++)
			PMIX_PROC_LOAD(&half[i], me.nspace, lo + i);
		rc = PMIx_Fence(half, n < 8 ? n : 8, NULL, 0);
	}
	end(rc);

	begin("Publish");
	{
		pmix_info_t pub;

		snprintf(key, sizeof(key), "apicall.pub.%u", me.rank);
		PMIX_INFO_LOAD(&pub, key, value, PMIX_STRING);
		rc = PMIx_Publish(&pub, 1);
		PMIX_INFO_DESTRUCT(&pub);
	}
	end(rc);

	begin("Lookup");
	{
		pmix_pdata_t pd;
		pmix_info_t li[2];
		bool no = false;

		PMIX_PDATA_CONSTRUCT(&pd);
		PMIX_LOAD_KEY(pd.key, key);
		PMIX_INFO_LOAD(&li[0], PMIX_WAIT, &no, PMIX_BOOL);
		PMIX_INFO_LOAD(&li[1], PMIX_TIMEOUT, &t, PMIX_INT);
		rc = PMIx_Lookup(&pd, 1, li, 2);
		PMIX_PDATA_DESTRUCT(&pd);
		PMIX_INFO_DESTRUCT(&li[0]);
		PMIX_INFO_DESTRUCT(&li[1]);
	}
	end(rc);

	begin("Lookup-missing");
	{
		pmix_pdata_t pd;
		pmix_info_t li[2];
		bool no = false;

		PMIX_PDATA_CONSTRUCT(&pd);
		PMIX_LOAD_KEY(pd.key, "apicall.nobody.published.this");
		PMIX_INFO_LOAD(&li[0], PMIX_WAIT, &no, PMIX_BOOL);
		PMIX_INFO_LOAD(&li[1], PMIX_TIMEOUT, &t, PMIX_INT);
		rc = PMIx_Lookup(&pd, 1, li, 2);
		PMIX_PDATA_DESTRUCT(&pd);
		PMIX_INFO_DESTRUCT(&li[0]);
		PMIX_INFO_DESTRUCT(&li[1]);
	}
	end(rc);

	begin("Unpublish");
	{
		char *keys[] = {key, NULL};

		rc = PMIx_Unpublish(keys, NULL, 0);
	}
	end(rc);

	begin("Spawn");
	{
		pmix_app_t app;
		char nsp[PMIX_MAX_NSLEN + 1] = "";

		PMIX_APP_CONSTRUCT(&app);
		app.cmd = strdup("/bin/true");
		app.argv = calloc(2, sizeof(char *));
		app.argv[0] = strdup("/bin/true");
		app.maxprocs = 1;
		rc = PMIx_Spawn(NULL, 0, &app, 1, nsp);
		PMIX_APP_DESTRUCT(&app);
	}
	end(rc);

	begin("Connect");
	end(PMIx_Connect(&all, 1, NULL, 0));
	begin("Disconnect");
	end(PMIx_Disconnect(&all, 1, NULL, 0));

	begin("Register_event_handler");
	{
		struct done d = {0, PMIX_SUCCESS, 0};
		pmix_status_t code = API_EVENT;

		rc = wait_done(&d, PMIx_Register_event_handler(
					   &code, 1, NULL, 0, on_event,
					   evreg_cb, &d));
		end(rc);
		begin("Notify_event");
		{
			pmix_info_t ni;
			bool yes = true;

			/* Not to ourselves: one handler run less to wait. */
			PMIX_INFO_LOAD(&ni, PMIX_EVENT_NON_DEFAULT, &yes,
				       PMIX_BOOL);
			rc = PMIx_Notify_event(API_EVENT, &self,
					       PMIX_RANGE_NAMESPACE, &ni, 1,
					       NULL, NULL);
			PMIX_INFO_DESTRUCT(&ni);
		}
		end(rc);
		begin("Deregister_event_handler");
		if (d.status == PMIX_SUCCESS) {
			struct done dd = {0, PMIX_SUCCESS, 0};

			rc = wait_done(&dd, PMIx_Deregister_event_handler(
						    d.id, op_cb, &dd));
		} else {
			rc = d.status;
		}
		end(rc);
	}

	begin("Query_info");
	{
		pmix_query_t q;

		PMIX_QUERY_CONSTRUCT(&q);
		PMIX_ARGV_APPEND(rc, q.keys, PMIX_QUERY_NAMESPACES);
		rc = PMIx_Query_info(&q, 1, &res, &nres);
		info_free(res, nres);
		res = NULL;
		nres = 0;
		PMIX_QUERY_DESTRUCT(&q);
	}
	end(rc);

	begin("Log");
	{
		pmix_info_t li;

		PMIX_INFO_LOAD(&li, PMIX_LOG_MSG, "apicall log", PMIX_STRING);
		rc = PMIx_Log(&li, 1, NULL, 0);
		PMIX_INFO_DESTRUCT(&li);
	}
	end(rc);

	begin("Allocation_request");
	{
		pmix_info_t ai;
		uint64_t one = 1;

		PMIX_INFO_LOAD(&ai, PMIX_ALLOC_NUM_NODES, &one, PMIX_UINT64);
		rc = PMIx_Allocation_request(PMIX_ALLOC_NEW, &ai, 1, &res,
					     &nres);
		info_free(res, nres);
		res = NULL;
		nres = 0;
		PMIX_INFO_DESTRUCT(&ai);
	}
	end(rc);

	begin("Job_control");
	{
		pmix_info_t ji;
		int sig = SIGCONT;	/* harmless if served */

		PMIX_INFO_LOAD(&ji, PMIX_JOB_CTRL_SIGNAL, &sig, PMIX_INT);
		rc = PMIx_Job_control(&self, 1, &ji, 1, &res, &nres);
		info_free(res, nres);
		res = NULL;
		nres = 0;
		PMIX_INFO_DESTRUCT(&ji);
	}
	end(rc);

	begin("Process_monitor");
	{
		pmix_info_t mon, dir[2];
		bool yes = true;
		uint32_t secs = 60, drops = 5;

		PMIX_INFO_LOAD(&mon, PMIX_MONITOR_HEARTBEAT, &yes, PMIX_BOOL);
		PMIX_INFO_LOAD(&dir[0], PMIX_MONITOR_HEARTBEAT_TIME, &secs,
			       PMIX_UINT32);
		PMIX_INFO_LOAD(&dir[1], PMIX_MONITOR_HEARTBEAT_DROPS, &drops,
			       PMIX_UINT32);
		rc = PMIx_Process_monitor(&mon, PMIX_MONITOR_HEARTBEAT_ALERT,
					  dir, 2, &res, &nres);
		info_free(res, nres);
		res = NULL;
		nres = 0;
		PMIX_INFO_DESTRUCT(&mon);
		PMIX_INFO_DESTRUCT(&dir[0]);
		PMIX_INFO_DESTRUCT(&dir[1]);
	}
	end(rc);

	begin("Get_credential");
	{
		pmix_byte_object_t cred;

		PMIX_BYTE_OBJECT_CONSTRUCT(&cred);
		rc = PMIx_Get_credential(NULL, 0, &cred);
		end(rc);
		begin("Validate_credential");
		if (!cred.bytes) {
			cred.bytes = strdup("not a credential");
			cred.size = strlen(cred.bytes);
		}
		rc = PMIx_Validate_credential(&cred, NULL, 0, &res, &nres);
		info_free(res, nres);
		res = NULL;
		nres = 0;
		PMIX_BYTE_OBJECT_DESTRUCT(&cred);
		end(rc);
	}

	begin("IOF_pull");
	{
		struct done d = {0, PMIX_SUCCESS, 0};
		pmix_status_t ref;

		ref = PMIx_IOF_pull(&all, 1, NULL, 0, PMIX_FWD_STDOUT_CHANNEL,
				    iof_sink, evreg_cb, &d);
		rc = ref < 0 ? ref : wait_done(&d, PMIX_SUCCESS);
		end(rc);
		if (rc == PMIX_SUCCESS) {
			struct done dd = {0, PMIX_SUCCESS, 0};

			begin("IOF_deregister");
			end(wait_done(&dd, PMIx_IOF_deregister(d.id, NULL, 0,
							       op_cb, &dd)));
		}
	}

	begin("IOF_push");
	{
		pmix_byte_object_t bo;
		struct done d = {0, PMIX_SUCCESS, 0};

		bo.bytes = "x\n";
		bo.size = 2;
		rc = wait_done(&d, PMIx_IOF_push(&self, 1, &bo, NULL, 0, op_cb,
						 &d));
	}
	end(rc);

	begin("Group_construct");
	{
		pmix_proc_t *members = calloc(size, sizeof(*members));
		pmix_info_t gi;
		int gt = 30;

		for (uint32_t i = 0; members && i < size; i++)
			PMIX_PROC_LOAD(&members[i], me.nspace, i);
		PMIX_INFO_LOAD(&gi, PMIX_TIMEOUT, &gt, PMIX_INT);
		rc = members ? PMIx_Group_construct("apicall", members, size,
						    &gi, 1, &res, &nres)
			     : PMIX_ERR_NOMEM;
		info_free(res, nres);
		res = NULL;
		nres = 0;
		end(rc);
		begin("Group_destruct");
		end(rc == PMIX_SUCCESS ? PMIx_Group_destruct("apicall", &gi, 1)
				       : PMIx_Group_destruct("apicall", &gi, 1));
		PMIX_INFO_DESTRUCT(&gi);
		free(members);
	}

	begin("Fabric_register");
	{
		pmix_fabric_t fab;

		PMIX_FABRIC_CONSTRUCT(&fab);
		rc = PMIx_Fabric_register(&fab, NULL, 0);
		end(rc);
		if (rc == PMIX_SUCCESS) {
			begin("Fabric_deregister");
			end(PMIx_Fabric_deregister(&fab));
		}
	}

	begin("Finalize");
	rc = PMIx_Finalize(NULL, 0);
	end(rc);
	return rc == PMIX_SUCCESS ? 0 : 1;
}
