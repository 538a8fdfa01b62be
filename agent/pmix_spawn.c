/* pmix_spawn.c — PMIx_Spawn, PMIx_Connect, PMIx_Disconnect (issue 16).
 * Not served yet: refused -- through the callback, from the loop; left
 * unset, libpmix 4.2 wedged its progress thread on connect/disconnect
 * (t0905-pmix-connect). */
#include "pmix_int.h"

pmix_status_t pmix_up_spawn(const pmix_proc_t *proc,
			    const pmix_info_t job_info[], size_t ninfo,
			    const pmix_app_t apps[], size_t napps,
			    pmix_spawn_cbfunc_t cbfunc, void *cbdata)
{
	(void)proc;
	(void)job_info;
	(void)ninfo;
	(void)apps;
	(void)napps;
	return pmix_refuse_spawn(cbfunc, cbdata);
}

pmix_status_t pmix_up_connect(const pmix_proc_t procs[], size_t nprocs,
			      const pmix_info_t info[], size_t ninfo,
			      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)procs;
	(void)nprocs;
	(void)info;
	(void)ninfo;
	return pmix_refuse(cbfunc, cbdata);
}

pmix_status_t pmix_up_disconnect(const pmix_proc_t procs[], size_t nprocs,
				 const pmix_info_t info[], size_t ninfo,
				 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)procs;
	(void)nprocs;
	(void)info;
	(void)ninfo;
	return pmix_refuse(cbfunc, cbdata);
}
