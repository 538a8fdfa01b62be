/* pmix_event.c — events between ranks and herd's failures as events
 * (issue 16).  Not served yet: refused. */
#include "pmix_int.h"

pmix_status_t pmix_up_register_events(pmix_status_t *codes, size_t ncodes,
				      const pmix_info_t info[], size_t ninfo,
				      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)codes;
	(void)ncodes;
	(void)info;
	(void)ninfo;
	return pmix_refuse(cbfunc, cbdata);
}

pmix_status_t pmix_up_deregister_events(pmix_status_t *codes, size_t ncodes,
					pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)codes;
	(void)ncodes;
	return pmix_refuse(cbfunc, cbdata);
}

pmix_status_t pmix_up_notify_event(pmix_status_t code,
				   const pmix_proc_t *source,
				   pmix_data_range_t range, pmix_info_t info[],
				   size_t ninfo, pmix_op_cbfunc_t cbfunc,
				   void *cbdata)
{
	(void)code;
	(void)source;
	(void)range;
	(void)info;
	(void)ninfo;
	(void)cbfunc;
	(void)cbdata;
	return PMIX_ERR_NOT_SUPPORTED;
}
