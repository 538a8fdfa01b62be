/* pmix_pubsub.c — PMIx_Publish, PMIx_Lookup, PMIx_Unpublish (issue 16).
 * Not served yet: refused. */
#include "pmix_int.h"

pmix_status_t pmix_up_publish(const pmix_proc_t *proc,
			      const pmix_info_t info[], size_t ninfo,
			      pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)proc;
	(void)info;
	(void)ninfo;
	return pmix_refuse(cbfunc, cbdata);
}

pmix_status_t pmix_up_lookup(const pmix_proc_t *proc, char **keys,
			     const pmix_info_t info[], size_t ninfo,
			     pmix_lookup_cbfunc_t cbfunc, void *cbdata)
{
	(void)proc;
	(void)keys;
	(void)info;
	(void)ninfo;
	return pmix_refuse_lookup(cbfunc, cbdata);
}

pmix_status_t pmix_up_unpublish(const pmix_proc_t *proc, char **keys,
				const pmix_info_t info[], size_t ninfo,
				pmix_op_cbfunc_t cbfunc, void *cbdata)
{
	(void)proc;
	(void)keys;
	(void)info;
	(void)ninfo;
	return pmix_refuse(cbfunc, cbdata);
}
