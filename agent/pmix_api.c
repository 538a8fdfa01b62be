/* pmix_api.c — the rest of the PMIx server upcalls: queries, logging,
 * tools, allocation, job control, monitoring, credentials, I/O
 * forwarding, groups, fabric (issue 16).  Not served yet: each is
 * refused through its callback. */
#include "pmix_int.h"

pmix_status_t pmix_up_query(pmix_proc_t *proct, pmix_query_t *queries,
			    size_t nqueries, pmix_info_cbfunc_t cbfunc,
			    void *cbdata)
{
	(void)proct;
	(void)queries;
	(void)nqueries;
	return pmix_refuse_info(cbfunc, cbdata);
}

/* A PMIx tool (an attach or debugger) is not taken. */
void pmix_up_tool_connected(pmix_info_t *info, size_t ninfo,
			    pmix_tool_connection_cbfunc_t cbfunc, void *cbdata)
{
	(void)info;
	(void)ninfo;
	pmix_refuse_tool(cbfunc, cbdata);
}

void pmix_up_log(const pmix_proc_t *client, const pmix_info_t data[],
		 size_t ndata, const pmix_info_t directives[], size_t ndirs,
		 pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)client;
	(void)data;
	(void)ndata;
	(void)directives;
	(void)ndirs;
	if (pmix_refuse(cbfunc, cbdata) != PMIX_SUCCESS && cbfunc)
		cbfunc(PMIX_ERR_NOMEM, cbdata);
}

pmix_status_t pmix_up_allocate(const pmix_proc_t *client,
			       pmix_alloc_directive_t directive,
			       const pmix_info_t data[], size_t ndata,
			       pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)client;
	(void)directive;
	(void)data;
	(void)ndata;
	return pmix_refuse_info(cbfunc, cbdata);
}

pmix_status_t pmix_up_job_control(const pmix_proc_t *requestor,
				  const pmix_proc_t targets[], size_t ntargets,
				  const pmix_info_t directives[], size_t ndirs,
				  pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)requestor;
	(void)targets;
	(void)ntargets;
	(void)directives;
	(void)ndirs;
	return pmix_refuse_info(cbfunc, cbdata);
}

pmix_status_t pmix_up_monitor(const pmix_proc_t *requestor,
			      const pmix_info_t *monitor, pmix_status_t error,
			      const pmix_info_t directives[], size_t ndirs,
			      pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)requestor;
	(void)monitor;
	(void)error;
	(void)directives;
	(void)ndirs;
	return pmix_refuse_info(cbfunc, cbdata);
}

pmix_status_t pmix_up_get_credential(const pmix_proc_t *proc,
				     const pmix_info_t directives[],
				     size_t ndirs,
				     pmix_credential_cbfunc_t cbfunc,
				     void *cbdata)
{
	(void)proc;
	(void)directives;
	(void)ndirs;
	return pmix_refuse_cred(cbfunc, cbdata);
}

pmix_status_t pmix_up_validate_credential(const pmix_proc_t *proc,
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
	return pmix_refuse_valid(cbfunc, cbdata);
}

pmix_status_t pmix_up_iof_pull(const pmix_proc_t procs[], size_t nprocs,
			       const pmix_info_t directives[], size_t ndirs,
			       pmix_iof_channel_t channels,
			       pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)procs;
	(void)nprocs;
	(void)directives;
	(void)ndirs;
	(void)channels;
	return pmix_refuse(cbfunc, cbdata);
}

pmix_status_t pmix_up_push_stdin(const pmix_proc_t *source,
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
	return pmix_refuse(cbfunc, cbdata);
}

pmix_status_t pmix_up_group(pmix_group_operation_t op, char grp[],
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
	return pmix_refuse_info(cbfunc, cbdata);
}

pmix_status_t pmix_up_fabric(const pmix_proc_t *requestor,
			     pmix_fabric_operation_t op,
			     const pmix_info_t directives[], size_t ndirs,
			     pmix_info_cbfunc_t cbfunc, void *cbdata)
{
	(void)requestor;
	(void)op;
	(void)directives;
	(void)ndirs;
	return pmix_refuse_info(cbfunc, cbdata);
}
